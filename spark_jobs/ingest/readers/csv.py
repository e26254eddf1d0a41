"""``ReadStep::Csv`` with Spark's CSV reader in FAILFAST mode.

Spark itself refuses rows with too few or too many fields and unterminated quotes; two checks come first because
Spark would accept what they catch: the bytes must be valid in the declared encoding, and with ``header: true`` and a
declared schema the header must have as many fields as the schema has columns (a one-line HTML error page answered
with HTTP 200 would otherwise be a header and zero rows: a Snapshot merge would retract every row).
"""
from __future__ import annotations

import csv
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import IntegerType, LongType

from odf_core.engine.protocol import IngestInputFile
from odf_core.metadata import ReadStepCsv
from spark_jobs.columns import col
from spark_jobs.errors import InputRejected
from spark_jobs.ingest.readers import (
    SourceInfo,
    WorkDir,
    check_encoding,
    encoding_of,
    reader,
    schema_of,
    time_format_options,
)


@reader(ReadStepCsv)
def read_csv(spark: SparkSession, step: ReadStepCsv, inp: IngestInputFile, work: WorkDir
             ) -> tuple[DataFrame, SourceInfo]:
    encoding = encoding_of(step.encoding)  # validated here: Spark would only fail later, obscurely
    opts: dict[str, str] = {"mode": "FAILFAST", "header": str(bool(step.header)).lower()}
    if step.infer_schema:
        opts["inferSchema"] = "true"
    if step.separator == "":
        raise InputRejected("readStep.separator must not be empty")
    for value, spark_name in ((step.separator, "sep"), (step.encoding, "encoding"), (step.quote, "quote"),
                              (step.escape, "escape"), (step.null_value, "nullValue")):
        if value is not None:
            # An empty quote turns quoting off (Spark's convention); an empty escape means "no escape character".
            opts[spark_name] = "\u0000" if spark_name == "escape" and value == "" else value
    opts.update(time_format_options(step))
    schema = schema_of(step)
    check_encoding(inp, encoding)
    if step.header and schema is not None:
        check_header(inp, encoding, opts, len(schema.fields))
    read = spark.read.options(**opts)
    if schema is not None:
        read = read.schema(schema)
    df = read.csv(inp.path)
    info = SourceInfo(inp.display_name, inp.path, "csv", opts, df.schema, encoding)
    if schema is None and step.infer_schema:
        # Whole numbers inferred as 64-bit, as the reference implementation does: Spark picks INT when the values
        # seen fit it, and the next file's larger numbers would then change the column's type.
        df = df.select(*[col(f.name).cast(LongType()).alias(f.name) if isinstance(f.dataType, IntegerType)
                         else col(f.name) for f in df.schema.fields])
    return df, info


def check_header(inp: IngestInputFile, encoding: str, opts: dict[str, str], columns: int) -> None:
    """The header's field count against the declared schema's (an empty file has no header and is fine)."""
    kwargs: dict[str, Any] = {}
    sep = opts.get("sep", ",")
    if len(sep) != 1:
        return  # multi-character separators: csv cannot split them the way Spark does; Spark's own checks remain
    kwargs["delimiter"] = sep
    quote = opts.get("quote", '"')
    if quote in ("", "\u0000"):
        kwargs["quoting"] = csv.QUOTE_NONE
    else:
        kwargs["quotechar"] = quote
    escape = opts.get("escape", "\\")
    if escape and escape != "\u0000":
        kwargs["escapechar"] = escape
    with open(inp.path, encoding=encoding, newline="") as f:
        line = f.readline()
    if not line.strip():
        return
    try:
        fields = next(csv.reader([line.rstrip("\r\n")], **kwargs))
    except csv.Error:
        return  # a header Spark cannot read either fails there, with its line
    if len(fields) != columns:
        text = line.strip()
        text = text if len(text) <= 80 else text[:77] + "..."
        raise InputRejected(f"cannot read {inp.display_name}: line 1: the header has {len(fields)} field(s) but the "
                            f"read schema declares {columns} column(s): {text!r}", file=inp.display_name, line=1)
