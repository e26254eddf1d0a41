"""``ReadStep::NdJson`` (Spark's JSON lines reader) and ``ReadStep::Json`` (one document holding an array of records,
optionally under ``subPath``, converted to JSON lines first)."""
from __future__ import annotations

import json
from typing import Any, Iterable, Iterator, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (
    ByteType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
)

from odf_core.engine.protocol import IngestInputFile
from odf_core.metadata import ReadStepJson, ReadStepNdJson
from spark_jobs.columns import col
from spark_jobs.errors import InputRejected
from spark_jobs.ingest.coerce import checked_cast
from spark_jobs.ingest.readers import (
    SourceInfo,
    WorkDir,
    check_encoding,
    encoding_of,
    reader,
    schema_of,
    time_format_options,
)


_NUMERIC = (ByteType, ShortType, IntegerType, LongType, FloatType, DoubleType, DecimalType)


def read_ndjson_file(spark: SparkSession, path: str, schema: StructType | None, opts: dict[str, str],
                     key_order: Sequence[str] = (), display: str | None = None) -> DataFrame:
    """Spark's JSON reader in FAILFAST mode; an inferred schema keeps the keys in order of first appearance.

    With a schema, top-level numeric columns are read as text and then cast (as the reference implementation does):
    a quoted number (``"7"``) fits a BIGINT column; a value that is no number fails naming the column and value."""
    read = spark.read.options(mode="FAILFAST", **opts)
    if schema is not None:
        numeric = [f.name for f in schema.fields if isinstance(f.dataType, _NUMERIC)]
        if not numeric:
            return read.schema(schema).json(path)
        relaxed = StructType([StructField(f.name, StringType(), f.nullable, f.metadata) if f.name in numeric else f
                              for f in schema.fields])
        df = read.schema(relaxed).json(path)
        return df.select(*[checked_cast(col(f.name), f.name, f.dataType, display or path).alias(f.name)
                           if f.name in numeric else col(f.name) for f in schema.fields])
    df = read.json(path)
    # Spark sorts inferred JSON fields by name; restore the order in which keys first appear in the data.
    ordered = [k for k in key_order if k in df.columns]
    ordered += [c for c in df.columns if c not in ordered]
    return df.select(*[col(c) for c in ordered]) if ordered != df.columns else df


def sample_key_order(path: str, encoding: str, max_lines: int = 1000) -> list[str]:
    order: dict[str, None] = {}
    try:
        with open(path, encoding=encoding, errors="replace") as f:
            for i, line in enumerate(f):
                if i >= max_lines:
                    break
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if isinstance(rec, dict):
                    order.update(dict.fromkeys(rec))
    except OSError:
        pass
    return list(order)


def dump(value: Any, sort_keys: bool = False) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str, sort_keys=sort_keys)


def write_ndjson(path: str, lines: Iterable[str]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for line in lines:
            f.write(line)
            f.write("\n")


def records_to_ndjson(records: Iterable[dict[str, Any]], out_path: str, trailing: Sequence[str] = ()) -> list[str]:
    """Write records as JSON lines; returns the key order of first appearance (``trailing`` keys moved last)."""
    order: dict[str, None] = {}

    def lines() -> Iterator[str]:
        for rec in records:
            order.update(dict.fromkeys(rec))
            yield dump(rec)

    write_ndjson(out_path, lines())
    keys = [k for k in order if k not in trailing]
    return keys + [k for k in trailing if k in order]


def load_json_document(inp: IngestInputFile, encoding: str) -> Any:
    try:
        with open(inp.path, encoding=encoding) as f:
            return json.load(f)
    except json.JSONDecodeError as e:
        raise InputRejected(f"cannot read {inp.display_name}: line {e.lineno} column {e.colno}: invalid JSON: "
                            f"{e.msg}", file=inp.display_name, line=e.lineno) from None
    except UnicodeDecodeError as e:
        raise InputRejected(f"cannot read {inp.display_name}: not valid {encoding} text: {e}",
                            file=inp.display_name) from None


@reader(ReadStepNdJson)
def read_ndjson(spark: SparkSession, step: ReadStepNdJson, inp: IngestInputFile, work: WorkDir
                ) -> tuple[DataFrame, SourceInfo]:
    enc = encoding_of(step.encoding)
    check_encoding(inp, enc)
    opts = dict(time_format_options(step))
    if enc != "utf-8":
        opts.update(encoding=enc, lineSep="\n")
    schema = schema_of(step)
    df = read_ndjson_file(spark, inp.path, schema, opts, () if schema is not None else sample_key_order(inp.path, enc),
                          inp.display_name)
    return df, SourceInfo(inp.display_name, inp.path, "json", opts, df.schema, enc)


@reader(ReadStepJson)
def read_json(spark: SparkSession, step: ReadStepJson, inp: IngestInputFile, work: WorkDir
              ) -> tuple[DataFrame, SourceInfo]:
    doc = load_json_document(inp, encoding_of(step.encoding))
    node = doc
    if step.sub_path:
        for part in step.sub_path.split("."):
            if not isinstance(node, dict) or part not in node:
                raise InputRejected(f"cannot read {inp.display_name}: subPath {step.sub_path!r} not found (no key "
                                    f"{part!r})", file=inp.display_name)
            node = node[part]
    if not isinstance(node, list):
        where = f"subPath {step.sub_path!r}" if step.sub_path else "the root element"
        raise InputRejected(f"cannot read {inp.display_name}: {where} is not an array of records",
                            file=inp.display_name)

    def records() -> Iterator[dict[str, Any]]:
        for i, rec in enumerate(node, 1):
            if not isinstance(rec, dict):
                raise InputRejected(f"cannot read {inp.display_name}: record {i} is not a JSON object",
                                    file=inp.display_name, record=i)
            yield rec

    tmp = work.path("records.ndjson")
    order = records_to_ndjson(records(), tmp)
    opts = time_format_options(step)
    df = read_ndjson_file(spark, tmp, schema_of(step), opts, order, inp.display_name)
    return df, SourceInfo(inp.display_name, tmp, "json", opts, df.schema, "utf-8", "record")
