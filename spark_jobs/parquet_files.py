"""Parquet files on the driver: Spark's part files, our single-file outputs, and reading them back cheaply.

ODF stores one parquet file per data slice and checkpoint. Spark writes directories of part files in parallel; the
driver turns them into one file with pyarrow (streaming, atomically: temp file + rename). Files we write carry
Spark's own schema in their metadata, so reading them back needs no schema-inference job.
"""
from __future__ import annotations

import glob
import json
import os
import shutil
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql.types import StructType

SPARK_SCHEMA_META_KEY = b"org.apache.spark.sql.parquet.row.metadata"
ROW_GROUP_ROWS = 1 << 20
BATCH_ROWS = 1 << 17


def local_path(path: str) -> str:
    """Engine outputs and inputs are paths the driver can open (local disk or a shared mount)."""
    for prefix in ("file://", "file:"):
        if path.startswith(prefix):
            return path[len(prefix):]
    return path


def write_parts(df: DataFrame, directory: str) -> list[str]:
    """Let Spark write in parallel; the part files, in name order, hold the rows in the DataFrame's order."""
    df.write.mode("overwrite").parquet(directory)
    return list_parts(directory)


def list_parts(directory: str) -> list[str]:
    return sorted(glob.glob(os.path.join(directory, "part-*.parquet")))


# Settings parquet-java reads through one values-writer factory shared by every writer in the JVM
# (ParquetProperties.DEFAULT_VALUES_WRITER_FACTORY, parquet 1.17): a writer builds each row group's column writers from
# the settings of whichever writer started last, so a write beside another one would get the other's. Every Spark
# parquet write here keeps these at their defaults; then what runs beside a write cannot change its bytes.
SHARED_WRITER_SETTINGS = ("parquet.enable.dictionary", "parquet.dictionary.page.size", "parquet.page.size",
                          "parquet.enable.bytestreamsplit", "parquet.writer.version")


def write_single_parquet(df: DataFrame, path: str, sort: Sequence[Column] = (),
                         options: dict[str, str] | None = None) -> None:
    """Write ``df`` as exactly one parquet file at ``path`` with Spark (one partition, the part file moved);
    ``options`` go to the parquet writer (e.g. ``parquet.block.size``), never one of ``SHARED_WRITER_SETTINGS``."""
    shared = sorted(k for k in options or {} if k.split("#", 1)[0] in SHARED_WRITER_SETTINGS)
    if shared:
        raise ValueError(f"parquet settings {shared} would reach writers running beside this one: "
                         "see SHARED_WRITER_SETTINGS")
    target = local_path(path)
    parent = os.path.dirname(os.path.abspath(target))
    os.makedirs(parent, exist_ok=True)
    tmp = os.path.join(parent, f".{os.path.basename(target)}.{uuid.uuid4().hex}.tmp")
    try:
        out = df.coalesce(1)
        if sort:
            out = out.sortWithinPartitions(*sort)
        out.write.mode("overwrite").options(**(options or {})).parquet(tmp)
        parts = list_parts(tmp)
        if len(parts) != 1:
            raise RuntimeError(f"expected one parquet part file in {tmp}, found {parts}")
        os.replace(parts[0], target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def spark_schema_json(file: str) -> dict[str, Any] | None:
    import pyarrow.parquet as pq

    try:
        meta = pq.read_schema(file).metadata or {}
        return json.loads(meta[SPARK_SCHEMA_META_KEY]) if SPARK_SCHEMA_META_KEY in meta else None
    except Exception:  # noqa: BLE001 - unreadable footer: no Spark schema
        return None


def footer_schema(spark: SparkSession, file: str) -> StructType:
    """The schema ``spark.read.parquet(file).schema`` infers, from the file's footer read on the driver.

    Spark's inference runs a job to read footers (~100 ms on a warm session), and the coordinator writes each input's
    schema file anew for every step: that job was a part of every transform's fixed cost. This calls the same
    functions the job's task calls (the footer's Spark schema if it records one, else Spark's conversion of the
    Parquet schema under the session's settings) and the checks a read makes, then makes every field nullable, as a
    file source does."""
    jvm = spark._jvm
    state = spark._jsparkSession.sessionState()
    parquet = jvm.org.apache.spark.sql.execution.datasources.parquet
    path = jvm.org.apache.hadoop.fs.Path(jvm.java.io.File(file).toURI())  # a local file, whatever fs.defaultFS is
    stream = jvm.org.apache.parquet.hadoop.util.HadoopInputFile.fromPath(path, state.newHadoopConf())
    meta = parquet.ParquetFooterReader.readFooter(
        stream, jvm.org.apache.parquet.format.converter.ParquetMetadataConverter.NO_FILTER)
    converter = parquet.ParquetToSparkSchemaConverter(state.conf())
    found = parquet.ParquetFileFormat.readSchemaFromFooter(jvm.org.apache.parquet.hadoop.Footer(path, meta), converter)
    # the checks a read makes of the schema (types the session does not enable, such as TIME, fail here as there)
    jvm.org.apache.spark.sql.catalyst.util.TypeUtils.failUnsupportedDataType(found, state.conf())
    datasources = jvm.org.apache.spark.sql.execution.datasources
    datasources.DataSourceUtils.verifySchema(parquet.ParquetFileFormat(), found, True)
    return StructType.fromJson(json.loads(found.asNullable().json()))


def load_parquet(spark: SparkSession, path: str, sample_file: str | None = None) -> DataFrame:
    """``spark.read.parquet`` minus the schema-inference job when the file records its Spark schema (ours do)."""
    schema = spark_schema_json(sample_file or path)
    reader = spark.read.schema(StructType.fromJson(schema)) if schema else spark.read
    return reader.parquet(path)


def spark_fields_of_file(part_file: str) -> dict[str, Any]:
    """Spark's JSON field descriptions by column name, from a Spark-written file ({} when it has none)."""
    schema = spark_schema_json(part_file)
    return {f["name"]: f for f in schema["fields"]} if schema else {}


def spark_fields_of_schema(schema: StructType) -> dict[str, Any]:
    return {f["name"]: f for f in json.loads(schema.json())["fields"]}


def spark_schema_meta(spark_fields: dict[str, Any], names: Sequence[str]) -> dict[bytes, bytes]:
    """Spark schema metadata for a file of the given columns, so Spark reads it back without an inference job."""
    if not all(n in spark_fields for n in names):
        return {}
    return {SPARK_SCHEMA_META_KEY: json.dumps({"type": "struct",
                                               "fields": [spark_fields[n] for n in names]}).encode()}


def iter_tables(files: Sequence[str], columns: Sequence[str] | None = None) -> Iterator[Any]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    for path in files:
        pf = pq.ParquetFile(path)
        for batch in pf.iter_batches(batch_size=BATCH_ROWS, columns=list(columns) if columns else None):
            yield pa.Table.from_batches([batch])


def cast(column: Any, arrow_type: Any) -> Any:
    return column if column.type == arrow_type else column.cast(arrow_type)


def ms_utc(t: Any) -> Any:
    """Arrow type with every timestamp as timestamp(ms, UTC): how slices store time."""
    import pyarrow as pa

    return pa.timestamp("ms", tz="UTC") if pa.types.is_timestamp(t) else t


def count_rows(files: Sequence[str]) -> int:
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(f).metadata.num_rows for f in files)


_FOOTER_FACTS: dict[tuple[str, int, int, str], Any] = {}


def _file_version(path: str) -> tuple[str, int, int]:
    """Which version of a file this is (raises OSError when the driver cannot see it)."""
    file = os.path.abspath(local_path(path))
    st = os.stat(file)
    return file, st.st_size, st.st_mtime_ns


def footer_fact(path: str, what: str, compute: Callable[[str], Any]) -> Any:
    """``compute(local file)`` once per version of the file (path, size, mtime) and kind of fact ``what``: slices and
    checkpoints never change once written, and facts from their footers or schemas are asked for at every step."""
    key = (*_file_version(path), what)
    if key not in _FOOTER_FACTS:
        if len(_FOOTER_FACTS) > 65536:
            _FOOTER_FACTS.clear()
        _FOOTER_FACTS[key] = compute(key[0])
    return _FOOTER_FACTS[key]


def remember_fact(path: str, what: str, value: Any) -> None:
    """Record a fact of a file just written (the next step asks for it)."""
    _FOOTER_FACTS[(*_file_version(path), what)] = value


def num_rows(path: str) -> int:
    """Rows of one parquet file, from its footer (once per file version)."""
    def compute(file: str) -> int:
        import pyarrow.parquet as pq

        return pq.ParquetFile(file).metadata.num_rows

    return int(footer_fact(path, "rows", compute))


def column_range(path: str, column: str) -> tuple[int, int] | None:
    """The smallest and largest value of an integer column in one parquet file ((0, -1) when it has no value), from
    its footer's row-group statistics; None when a row group has none or the driver cannot read the file."""
    found = column_stats(path, column)
    if found is None:
        return None
    return (0, -1) if found.low is None else (found.low, found.high)


@dataclass(frozen=True)
class ColumnStats:
    """A column's value range in a file, by its footer: ``low``/``high`` are None when it has no non-null value;
    ``nulls``: whether it has a NULL. Values are ints (integers; timestamps as microseconds), dates or strings
    (parquet orders strings by their UTF-8 bytes, which is the order of their code points, Python's order; a
    writer that truncates a string statistic keeps it a bound, as the format requires)."""

    low: Any
    high: Any
    nulls: bool

    def overlaps(self, other: "ColumnStats") -> bool:
        """Whether a row of this file can hold a value of ``other``'s range (NULL counts as a value)."""
        if self.nulls and other.nulls:
            return True
        if self.low is None or other.low is None:
            return False
        return bool(self.low <= other.high and other.low <= self.high)

    def inside(self, other: "ColumnStats") -> bool:
        """Whether every row of this file has a value of ``other``'s range (NULL counts as a value)."""
        if self.nulls and not other.nulls:
            return False
        if self.low is None:
            return True
        return other.low is not None and bool(other.low <= self.low and self.high <= other.high)


def _stat_value(v: Any) -> Any:
    import datetime

    if isinstance(v, datetime.datetime):  # pyarrow gives aware (UTC-adjusted) or naive (local-less) datetimes
        epoch = datetime.datetime(1970, 1, 1, tzinfo=v.tzinfo)
        return (v - epoch) // datetime.timedelta(microseconds=1)
    if isinstance(v, (int, datetime.date, str)) and not isinstance(v, bool):
        return v
    raise TypeError(f"no range for a value of type {type(v).__name__}")


def column_stats(path: str, column: str) -> ColumnStats | None:
    """The range of an integer, date, timestamp or string top-level column in one parquet file, from its footer's
    row-group statistics (once per file version); None when a row group has none or the driver cannot read the
    file."""
    def compute(file: str) -> ColumnStats | None:
        import pyarrow.parquet as pq

        meta = pq.ParquetFile(file).metadata
        idx = meta.schema.to_arrow_schema().get_field_index(column)
        if idx < 0:
            return None
        low = high = None
        nulls = False
        for rg in (meta.row_group(i) for i in range(meta.num_row_groups)):
            if rg.num_rows == 0:
                continue
            stats = rg.column(idx).statistics
            if stats is None or not stats.has_null_count:
                return None
            nulls = nulls or stats.null_count > 0
            if stats.null_count == rg.num_rows:
                continue  # only NULLs: no min/max to expect
            if not stats.has_min_max:
                return None
            lo, hi = _stat_value(stats.min), _stat_value(stats.max)
            low = lo if low is None else min(low, lo)
            high = hi if high is None else max(high, hi)
        return ColumnStats(low, high, nulls)

    try:
        return footer_fact(path, f"stats:{column}", compute)
    except Exception:  # noqa: BLE001 - not on the driver's disk, an unreadable footer, a type without a range
        return None


def merged_stats(paths: Iterable[str], column: str) -> ColumnStats | None:
    """The range of a column over several files (None: a file has no usable statistics)."""
    low = high = None
    nulls = False
    for p in paths:
        s = column_stats(p, column)
        if s is None:
            return None
        nulls = nulls or s.nulls
        if s.low is not None:
            low = s.low if low is None else min(low, s.low)
            high = s.high if high is None else max(high, s.high)
    return ColumnStats(low, high, nulls)


def column_max(path: str, column: str) -> int | None:
    """The largest value of an integer column in one parquet file (-1 when it has no rows); see :func:`column_range`."""
    found = column_range(path, column)
    return None if found is None else found[1]


def file_bytes(paths: Iterable[str]) -> int:
    return sum(os.path.getsize(p) for p in paths)


def uncompressed_bytes(path: str, names: Sequence[str]) -> int:
    """In-memory size estimate of some top-level columns of a parquet file, from its footer."""
    import pyarrow.parquet as pq

    md, wanted, total = pq.ParquetFile(path).metadata, set(names), 0
    for g in range(md.num_row_groups):
        group = md.row_group(g)
        for j in range(group.num_columns):
            c = group.column(j)
            if c.path_in_schema.split(".")[0] in wanted:
                total += c.total_uncompressed_size
    return total


class BufferedParquetWriter:
    """Collects small tables into ~1M-row row groups and writes them atomically (temp file + rename)."""

    def __init__(self, path: str, schema: Any, dictionary_columns: Sequence[str] = ()):
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.path, self.schema = path, schema
        self.tmp = f"{path}.tmp-{uuid.uuid4().hex}"
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        # Dictionary-encode text and the given low-cardinality columns only: trying it on high-cardinality numbers
        # costs CPU for nothing (the writer falls back to plain encoding).
        dictionary = [f.name for f in schema if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)
                      or pa.types.is_binary(f.type) or f.name in dictionary_columns]
        self._writer = pq.ParquetWriter(self.tmp, schema, use_dictionary=dictionary)
        self._buf: list[Any] = []
        self._buf_rows = 0
        self.rows = 0

    def write(self, table: Any) -> None:
        if table.num_rows == 0:
            return
        self._buf.append(table)
        self._buf_rows += table.num_rows
        self.rows += table.num_rows
        if self._buf_rows >= ROW_GROUP_ROWS:
            self._flush()

    def _flush(self) -> None:
        import pyarrow as pa

        if self._buf:
            self._writer.write_table(pa.concat_tables(self._buf), row_group_size=ROW_GROUP_ROWS)
            self._buf, self._buf_rows = [], 0

    def commit(self) -> None:
        self._flush()
        self._writer.close()
        os.replace(self.tmp, self.path)

    def abort(self) -> None:
        try:
            self._writer.close()
        finally:
            if os.path.exists(self.tmp):
                os.remove(self.tmp)


def tables_sorted_by(tables: Iterable[Any], column: str) -> bool:
    """Whether the concatenated tables are ordered by ``column`` ascending with nulls first."""
    import pyarrow.compute as pc

    seen_value, last = False, None
    for t in tables:
        arr = t.column(0).combine_chunks()
        if len(arr) == 0:
            continue
        nulls = arr.null_count
        if nulls:
            if seen_value:
                return False
            first_valid = pc.index(pc.is_valid(arr), True).as_py()
            if first_valid == -1:
                continue
            if first_valid != nulls:
                return False
            arr = arr.slice(nulls)
        if last is not None and pc.less(arr[0], last).as_py():
            return False
        if len(arr) > 1 and not pc.all(pc.greater_equal(arr.slice(1), arr.slice(0, len(arr) - 1))).as_py():
            return False
        last, seen_value = arr[len(arr) - 1], True
    return True


def parts_sorted_by(part_files: Sequence[str], column: str) -> bool:
    """Whether the concatenated parts are ordered by ``column`` (cheap: one column is read)."""
    return tables_sorted_by(iter_tables(part_files, [column]), column)
