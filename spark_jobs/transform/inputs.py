"""The inputs of a transform as DataFrames: their new slices (stateless path) or their reduced state (stateful path).

Each input's op column carries a marker (its index) in its field metadata, so the planner can tell which input a
plan leaf reads and whether the query reads an input's op column (then the input is its raw changelog).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Sequence

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from odf_core.metadata import DatasetVocabulary, Timestamp, TransformRequestInput
from spark_jobs.columns import col
from spark_jobs.errors import EngineFailure, QueryRejected, user_message
from spark_jobs.parquet_files import (ColumnStats, column_max, column_range, column_stats, footer_fact, footer_schema,
                                      local_path, remember_fact, spark_schema_json)
from spark_jobs.transform.catalyst import INPUT_MARKER

OP_APPEND, OP_RETRACT, OP_CORRECT_FROM, OP_CORRECT_TO = 0, 1, 2, 3


@dataclass(frozen=True)
class QueryInput:
    """One input of the request, with its history when the coordinator sent it (our stateful path needs it)."""

    request: TransformRequestInput
    history: tuple[str, ...] | None

    @property
    def alias(self) -> str:
        return self.request.query_alias

    @property
    def vocab(self) -> DatasetVocabulary:
        return self.request.vocab


def orderable(t: T.DataType) -> bool:
    if isinstance(t, T.MapType) or type(t).__name__ == "VariantType":
        return False
    if isinstance(t, T.ArrayType):
        return orderable(t.elementType)
    if isinstance(t, T.StructType):
        return all(orderable(f.dataType) for f in t.fields)
    return True


def marked_schema(schema: T.StructType, vocab: DatasetVocabulary, index: int, where: str) -> T.StructType:
    """Input schema with offset int64 / op int32 and our marker on the op column."""
    names = {f.name for f in schema.fields}
    for c in (vocab.offset, vocab.op, vocab.event_time):
        if c not in names:
            raise EngineFailure(f"{where}: input schema has no column {c!r} (columns: {sorted(names)})")
    fields = []
    for f in schema.fields:
        if f.name == vocab.op:
            f = T.StructField(f.name, T.IntegerType(), f.nullable, {INPUT_MARKER: index})
        elif f.name == vocab.offset:
            f = T.StructField(f.name, T.LongType(), f.nullable, f.metadata)
        fields.append(f)
    return T.StructType(fields)


def file_schema(session: SparkSession, path: str) -> T.StructType:
    """Schema of one parquet file (with field metadata), once per file version, with no Spark job."""
    def compute(file: str) -> T.StructType:
        found = spark_schema_json(file)  # files Spark wrote record their schema
        return T.StructType.fromJson(found) if found else footer_schema(session, file)

    return footer_fact(path, "schema", compute)


def remember_schema(path: str, schema: T.StructType) -> None:
    remember_fact(path, "schema", schema)


def input_schema(session: SparkSession, inp: QueryInput, index: int) -> T.StructType:
    where = f"queryInputs[{index}] ({inp.alias})"
    source = inp.request.schema_file
    if not source or not os.path.exists(local_path(source)):
        candidates = list(inp.request.data_paths) or list(inp.history or ())
        if not candidates:
            raise EngineFailure(f"{where}.schemaFile: file not found: {source!r}")
        source = candidates[0]
    try:
        schema = file_schema(session, source)
    except Exception as e:  # noqa: BLE001
        raise EngineFailure(f"{where}: cannot read the schema from {source!r}: {user_message(e)}") from None
    return marked_schema(schema, inp.vocab, index, where)


def read_rows(session: SparkSession, schema: T.StructType, paths: Sequence[str]) -> DataFrame:
    """Rows of the given slices; an empty input is a LogicalRDD so the optimiser cannot fold it away."""
    if not paths:
        return session.createDataFrame(session.sparkContext.emptyRDD(), schema)
    return session.read.schema(schema).parquet(*paths)


def slice_rows(session: SparkSession, inp: QueryInput, schema: T.StructType) -> DataFrame:
    """The new rows of one input: offsets inside its offsetInterval."""
    iv = inp.request.offset_interval
    if iv is None:
        return read_rows(session, schema, ())
    if not inp.request.data_paths:
        raise EngineFailure(f"input {inp.alias!r} has an offsetInterval but no dataPaths")
    rows = read_rows(session, schema, inp.request.data_paths)
    if within(inp.request.data_paths, inp.vocab.offset, iv.start, iv.end):
        return rows
    off = col(inp.vocab.offset)
    return rows.where((off >= F.lit(iv.start)) & (off <= F.lit(iv.end)))


def within(paths: Sequence[str], column: str, low: int, high: int) -> bool:
    """Whether every row of these files has ``low <= column <= high``, by their footers' statistics.

    A filter that keeps every row is left out rather than evaluated: besides its own cost, Spark writes a literal
    bound into the generated code of the scan, so a filter whose bounds move at every step compiles a new class
    per step, which then runs the new rows cold (interpreted) instead of reusing warm code."""
    for p in paths:
        found = column_range(p, column)
        if found is None:
            return False
        lo, hi = found
        if hi >= lo and (lo < low or hi > high):
            return False
    return True


def up_to(paths: Sequence[str], column: str, end: int) -> tuple[list[str], bool]:
    """The files that hold rows with ``column <= end``, and whether any of them also holds rows beyond ``end`` (so
    a filter is still needed; see :func:`within`), by their footers' statistics."""
    kept = []
    straddle = False
    for p in paths:
        found = column_range(p, column)
        if found is None:
            return list(paths), True
        lo, hi = found
        if hi < lo or lo > end:  # no rows, or none up to ``end``
            continue
        kept.append(p)
        straddle = straddle or hi > end
    return kept, straddle


@dataclass(frozen=True)
class KeyBound:
    """The rows a read needs have a value of ``column`` within ``values`` (or NULL, if ``values`` has NULLs)."""

    column: str
    values: ColumnStats


def overlapping(paths: Sequence[str], bounds: Sequence[KeyBound]) -> list[str]:
    """The files that can hold rows within every bound, by their footers' statistics (a file without usable
    statistics is kept). A retraction has the data columns of the row it removes, so a file left out holds neither
    the rows of the wanted keys nor their retractions: the reduced rows of those keys are the same."""
    kept = []
    for p in paths:
        for b in bounds:
            found = column_stats(p, b.column)
            if found is not None and not found.overlaps(b.values):
                break
        else:
            kept.append(p)
    return kept


def _stat_literal(v: object, t: T.DataType) -> Column:
    """A footer statistic (:class:`ColumnStats`: timestamps as microseconds) as a literal of the column's type."""
    if isinstance(t, (T.TimestampType, T.TimestampNTZType)):  # the session is in UTC: a wall clock's micros
        return F.timestamp_micros(F.lit(v)).cast(t)
    return F.lit(v).cast(t)


def bounded(bounds: Sequence[KeyBound], schema: T.StructType, paths: Sequence[str]) -> Column | None:
    """The rows of ``paths`` within every bound, as a filter Spark pushes into its parquet reader, which then skips
    the row groups (and pages, where the file has a page index) whose statistics lie outside: a slice that meets a
    bound only in part is read in part. A retraction has the data of the row it removes, so it is kept or dropped
    with that row and the reduced rows within the bounds are the same. A bound that every file lies inside (by its
    footer) is left out, as :func:`within` leaves out offset filters: its literals would compile new code per step."""
    types = {f.name: f.dataType for f in schema.fields}
    found: Column | None = None
    for b in bounds:
        if all((s := column_stats(p, b.column)) is not None and s.inside(b.values) for p in paths):
            continue
        c, t = col(b.column), types[b.column]
        inside = F.lit(False) if b.values.low is None else \
            c.between(_stat_literal(b.values.low, t), _stat_literal(b.values.high, t))
        cond = (inside | c.isNull()) if b.values.nulls else inside
        found = cond if found is None else (found & cond)
    return found


def history_paths(inp: QueryInput, end: int | None, bounds: Sequence[KeyBound] = ()) -> tuple[list[str], bool]:
    """The slices of an input's history up to offset ``end`` that can hold rows within ``bounds``, and whether one
    of them also holds rows beyond ``end`` (so the read filters by offset)."""
    paths = inp.history
    iv = inp.request.offset_interval
    if paths is None:
        if iv is not None and iv.start != 0:
            raise EngineFailure(f"input {inp.alias!r}: a stateful query needs the input's history (all slices up "
                                "to the new ones), which this request does not carry")
        paths = inp.request.data_paths if iv is not None else ()
    kept, straddle = (list(paths), True) if end is None else up_to(paths, inp.vocab.offset, end)
    return (overlapping(kept, bounds) if bounds else kept), straddle


def reduce_changelog(rows: DataFrame, vocab: DatasetVocabulary) -> DataFrame:
    """Current rows of a changelog: each -R/-C removes the oldest live row with equal data columns.

    Rows are equal when all columns but offset/op/system_time are equal (nulls equal). With a valid changelog
    the survivors of a group of equal rows are its last (appends - removals) appends in offset order.
    """
    data = [c for c in rows.columns if c not in vocab.system_columns]
    bad = [f.name for f in rows.schema.fields if f.name in data and not orderable(f.dataType)]
    if bad:
        raise QueryRejected(f"stateful queries cannot reduce inputs with map/variant columns: {bad}")
    op = col(vocab.op)
    is_add = F.when(op.isin(OP_APPEND, OP_CORRECT_TO), 1).otherwise(0)
    is_rem = F.when(op.isin(OP_RETRACT, OP_CORRECT_FROM), 1).otherwise(0)
    w = Window.partitionBy(*[col(c) for c in data]).orderBy(col(vocab.offset))
    removed = F.sum(is_rem).over(w.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing))
    adds_so_far = F.sum(is_add).over(w.rowsBetween(Window.unboundedPreceding, Window.currentRow))
    return (rows.withColumn("__odf_removed", removed)
            .withColumn("__odf_adds", adds_so_far)
            .where((is_add == 1) & (F.col("__odf_adds") > F.col("__odf_removed")))
            .drop("__odf_removed", "__odf_adds"))


def history_rows(session: SparkSession, inp: QueryInput, schema: T.StructType, end: int | None,
                 changelog: bool) -> DataFrame:
    """An input's rows up to offset ``end``: its raw changelog, or its reduced state."""
    paths, straddle = history_paths(inp, end)
    return rows_of(session, inp, schema, paths, end if straddle else None, changelog)


def rows_of(session: SparkSession, inp: QueryInput, schema: T.StructType, paths: Sequence[str], end: int | None,
            changelog: bool, bounds: Sequence[KeyBound] = ()) -> DataFrame:
    """The rows of some of an input's history slices up to offset ``end`` (None: all of them): its raw changelog,
    or its reduced state; with ``bounds`` only its rows within them (:func:`bounded`)."""
    rows = read_rows(session, schema, paths)
    if end is not None:
        rows = rows.where(col(inp.vocab.offset) <= F.lit(end))
    cond = bounded(bounds, schema, paths) if paths else None
    if cond is not None:
        rows = rows.where(cond)
    if changelog or append_only(paths, inp.vocab):
        return rows  # with no -R/-C row the reduced state is the rows themselves: no shuffle over the history
    return reduce_changelog(rows, inp.vocab)


def append_only(paths: Sequence[str], vocab: DatasetVocabulary) -> bool:
    """Whether every row of these slices is an append (+A), by the op column's statistics in their footers."""
    for p in paths:
        top = column_max(p, vocab.op)
        if top is None or top > OP_APPEND:
            return False
    return True


def output_watermark(inputs: Sequence[QueryInput]) -> Timestamp | None:
    """Minimum over inputs of their latest explicit watermark; absent if any input has none."""
    if not inputs:
        return None
    latest = []
    for inp in inputs:
        marks = inp.request.explicit_watermarks
        if not marks:
            return None
        latest.append(max(w.event_time for w in marks))
    return min(latest)
