"""The merge phase: the read rows merged into the next data slice by the source's ``MergeStrategy``.

One module per strategy (:mod:`.append`, :mod:`.ledger`, :mod:`.snapshot`, :mod:`.changelog_stream`,
:mod:`.upsert_stream`); the first three each have two plans:

* the **collect plan**, while the parsed input (plus the seen keys or the state) fits ``DRIVER_MERGE_BYTES`` (env
  ``ODF_INGEST_DRIVER_MERGE_BYTES``, default 512 MiB) and has no nested types: Spark parses in parallel and ships the
  rows to the driver as Arrow; pyarrow sorts them by event time only if needed, decides what Ledger keeps or what
  Snapshot emits, and writes the slice and checkpoint once;
* the **Spark plan** beyond that: Spark writes part files in parallel (and does the Ledger and Snapshot work itself:
  in one partition up to ``SMALL_MERGE_BYTES``, no shuffles; else in parallel) and the driver concatenates them in
  one streaming pass.

Offsets are consecutive from ``prev_offset + 1``: Append and Ledger rows in event-time order (nulls first, ties in
input order), Snapshot, ChangelogStream and UpsertStream rows by primary key then op (ties in input order). The two
stream strategies (spec after v0.34.1) take an ``op`` column in the input and run as Spark plans.
"""
from __future__ import annotations

import functools
import operator
import os
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    ByteType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from odf_core.engine.protocol import MergeOutcome, MergePhase
from odf_core.metadata import DatasetVocabulary, Timestamp
from spark_jobs.columns import col, is_timestamp, normalize_timestamps, type_ddl
from spark_jobs.errors import InputRejected
from spark_jobs.ingest.checkpoint import primary_key, strategy_kind
from spark_jobs.ingest.read import ET_FILLED, HIDDEN
from spark_jobs.ingest.readers import WorkDir
from spark_jobs.ingest.slices import SliceStats, check_evolution, slice_schema
from spark_jobs.parquet_files import local_path, load_parquet, ms_utc, parts_sorted_by, tables_sorted_by, write_parts

# Up to this many bytes (uncompressed keys for Ledger; input + state files for Snapshot) the merge decision runs on
# the driver: one hash pass in pyarrow instead of Spark shuffles; 0 always uses the Spark plans.
DRIVER_MERGE_BYTES = int(os.environ.get("ODF_INGEST_DRIVER_MERGE_BYTES", str(512 << 20)))
# Up to this much parquet input (new rows + state) the Spark plan runs in one partition: no shuffles, no sampling.
SMALL_MERGE_BYTES = 32 << 20
_FLAT_SPARK_TYPES = (BooleanType, ByteType, ShortType, IntegerType, LongType, FloatType, DoubleType, DecimalType,
                     StringType, BinaryType, DateType, TimestampType, TimestampNTZType)


@dataclass
class MergeInput:
    df: DataFrame  # event time + data columns, optionally __odf_row_id (input order) and __odf_event_time_...
    size_bytes: int | None = None  # parquet bytes behind df, when it is staged parquet (small merges: 1 partition)
    normalized: bool = False  # timestamps already TIMESTAMP(ms): the read phase did it
    source_bytes: int | None = None  # bytes of the files df is read from (decides the collect plan)
    rows_read: int | None = None  # set by the merge when it learns how many rows the input has
    arrow: Any = None  # the rows already on the driver (a long-lived engine kept them from the read request)
    duplicate_rows: int | None = None  # Ledger: rows dropped for repeating a key of an earlier row of this input
    duplicate_key: str | None = None  # Ledger: one such key, JSON


@dataclass
class MergeContext:
    """Everything a strategy needs: the session, the request, the scratch directory and the data columns."""

    spark: SparkSession
    phase: MergePhase
    vocab: DatasetVocabulary
    work: WorkDir
    cols: list[str]  # event time first, then the data columns
    required: frozenset[str] = frozenset()  # columns the slice declares not null

    @property
    def pk(self) -> list[str]:
        return list(primary_key(self.phase.strategy))

    @property
    def offset_start(self) -> int:
        return self.phase.prev_offset + 1 if self.phase.prev_offset is not None else 0

    @property
    def system_time_ms(self) -> int:
        return self.phase.system_time.millis


def require_columns(names: Sequence[str], available: Sequence[str], what: str) -> None:
    for name in names:
        if name not in available:
            raise InputRejected(f"{what} column '{name}' is not in the data (available columns:"
                                f" {[c for c in available if c not in HIDDEN]})")


def null_safe_join_cond(left: Sequence[Any], right: Sequence[Any]) -> Any:
    return functools.reduce(operator.and_, [a.eqNullSafe(b) for a, b in zip(left, right)])


def row_changed(columns: Iterable[str], idx: dict[str, int], event_time: str) -> Any:
    """Whether the new row (``__n<i>``) differs from the old one (``__o<i>``) in any of ``columns``, NULL-safe; an
    event time the merge filled in (``__n_filled``), not given by the data itself, never counts as a change."""
    diffs = []
    for c in columns:
        o, n = F.col(f"__o{idx[c]}"), F.col(f"__n{idx[c]}")
        if c == event_time:
            n = F.when(F.col("__n_filled"), F.lit(None)).otherwise(n)
            diffs.append(n.isNotNull() & ~o.eqNullSafe(n))
        else:
            diffs.append(~o.eqNullSafe(n))
    return functools.reduce(operator.or_, diffs) if diffs else F.lit(False)


def duplicate_key(df: DataFrame, pk: Sequence[str]) -> str | None:
    """JSON of one primary key that occurs more than once in ``df`` (nulls equal), or None.

    One hash aggregation over the key columns only: on a large input much cheaper than a window over every row.
    """
    keys = [col(k) for k in pk]
    found = (df.groupBy(*keys).agg(F.count(F.lit(1)).alias("__odf_n")).where(F.col("__odf_n") > 1)
             .select(F.to_json(F.struct(*keys)).alias("key")).limit(1).collect())
    return found[0]["key"] if found else None


def input_duplicates(df: DataFrame, pk: Sequence[str]) -> tuple[int, str | None]:
    """How many rows of ``df`` repeat the primary key of another row (each key's rows beyond its first; nulls equal),
    and the smallest such key as JSON: one hash aggregation over the key columns."""
    keys = [col(k) for k in pk]
    row = (df.groupBy(*keys).agg(F.count(F.lit(1)).alias("__odf_n")).where(F.col("__odf_n") > 1)
           .agg(F.sum(F.col("__odf_n") - 1).alias("n"), F.min(F.to_json(F.struct(*keys))).alias("key"))
           .collect()[0])
    return int(row["n"] or 0), row["key"]


DUPLICATES = ("first", "error")
"""What a Ledger merge does with rows repeating a key of an earlier row of the same input (``MergePhase.duplicates``,
a project option outside the chain: see docs/conformance.md D1)."""


def is_small(size_bytes: int | None) -> bool:
    """Small merges run in one partition: it satisfies every distribution Spark needs, so no exchange is planned."""
    return size_bytes is not None and size_bytes <= SMALL_MERGE_BYTES


def one_partition(df: DataFrame | None, small: bool) -> DataFrame | None:
    return df.coalesce(1) if small and df is not None else df


def flat_types(schema: StructType, names: Iterable[str]) -> bool:
    """Whether the columns have types pyarrow compares and sorts exactly as Spark does (no nested types)."""
    return all(isinstance(schema[n].dataType, _FLAT_SPARK_TYPES) for n in names)


def collect_plan_fits(inp: MergeInput, schema: StructType, cols: Sequence[str], extra_bytes: int = 0) -> bool:
    """Whether the merge can hold the parsed input (and ``extra_bytes`` of keys or state) on the driver."""
    if inp.arrow is not None:
        return flat_types(schema, cols)
    size = inp.source_bytes if inp.source_bytes is not None else inp.size_bytes
    return size is not None and size + extra_bytes <= DRIVER_MERGE_BYTES and flat_types(schema, cols)


def collect_input(inp: MergeInput, cols: list[str], with_filled: bool = False) -> tuple[Any, Any]:
    """The parsed input on the driver as Arrow, timestamps as timestamp(ms, UTC); and the filled-event-time flags."""
    import pyarrow as pa

    from spark_jobs.ingest.keys import normalized_table

    if inp.arrow is not None:
        raw = inp.arrow
        if with_filled and ET_FILLED not in raw.column_names:
            raw = raw.append_column(ET_FILLED, pa.repeat(pa.scalar(False), raw.num_rows))
        raw = raw.select(cols + ([ET_FILLED] if with_filled else []))
    else:
        extra = []
        if with_filled:
            extra = [(F.col(ET_FILLED) if ET_FILLED in inp.df.columns else F.lit(False)).alias(ET_FILLED)]
        raw = inp.df.select(*[col(c) for c in cols], *extra).toArrow()
    inp.rows_read = raw.num_rows
    fields = [pa.field(f.name, ms_utc(f.type)) for f in raw.schema if f.name != ET_FILLED]
    filled = raw.column(ET_FILLED).combine_chunks() if with_filled else None
    return normalized_table(raw, fields), filled


def in_event_time_order(table: Any, vocab: DatasetVocabulary) -> Any:
    """``table`` sorted by event time, nulls first, ties in input order (Arrow's sort is stable); as is if sorted."""
    import pyarrow.compute as pc

    if tables_sorted_by([table.select([vocab.event_time])], vocab.event_time):
        return table
    return table.take(pc.sort_indices(table, sort_keys=[(vocab.event_time, "ascending", "at_start")]))


def write_in_event_time_order(ctx: MergeContext, frame: DataFrame, name: str) -> list[str]:
    """Part files holding ``frame``'s rows sorted by event time (nulls first, ties in input order).

    Written as they come and re-sorted only when they are not already in order (checked on one column with pyarrow):
    data usually arrives in event-time order, and a global sort costs as much as the whole write.
    """
    parts = write_parts(frame, ctx.work.path(name))
    if parts_sorted_by(parts, ctx.vocab.event_time):
        return parts
    # Stable re-sort: ties keep the order of the part files and of the rows inside them.
    staged = load_parquet(ctx.spark, os.path.dirname(parts[0]), parts[0])
    resorted = (staged.select("*", F.col("_metadata.file_name").alias("__f"),
                              F.col("_metadata.row_index").alias("__i"))
                .sort(col(ctx.vocab.event_time).asc_nulls_first(), F.col("__f"), F.col("__i"))
                .drop("__f", "__i"))
    return write_parts(resorted, ctx.work.path(f"{name}-sorted"))


def read_history(ctx: MergeContext) -> DataFrame:
    paths = list(ctx.phase.prev_data_paths or ())
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        raise InputRejected(f"a previous data slice is missing: {missing[0]}")
    return ctx.spark.read.option("mergeSchema", "true").parquet(*paths)


OP_INPUT = {"ChangelogStream": True, "UpsertStream": False}
"""Strategies whose input carries the operation type column (the vocabulary's ``op``): required or optional."""


def prepare_merge_input(df: DataFrame, vocab: DatasetVocabulary, phase: MergePhase,
                        normalized: bool = False) -> tuple[DataFrame, list[str]]:
    """Validate system/key columns; returns df with columns [event_time, data...(, op)(, hidden)] and the data names
    (event time + data: never ``op``, which only the stream strategies take, as an input column)."""
    kind = strategy_kind(phase.strategy)
    takes_op = kind in OP_INPUT
    cols = [c for c in df.columns if c not in HIDDEN and not (takes_op and c == vocab.op)]
    if takes_op and OP_INPUT[kind] and vocab.op not in df.columns:
        raise InputRejected(f"{kind} needs the operation type column '{vocab.op}' in the data (0 append, 1 retract, "
                            f"2 correct-from, 3 correct-to; columns: {cols})")
    clash = [c for c in vocab.system_columns if c in cols]
    if clash:
        raise InputRejected(f"the data must not contain the system column(s) {clash}; they are added by the ingest")
    if vocab.event_time not in cols:
        raise InputRejected(f"the data has no event-time column '{vocab.event_time}' (columns: {cols})")
    et_type = df.schema[vocab.event_time].dataType
    if not (is_timestamp(et_type) or isinstance(et_type, DateType)):
        raise InputRejected(f"event-time column '{vocab.event_time}' has type {type_ddl(et_type)}; it must be"
                            f" TIMESTAMP or DATE")
    require_columns(primary_key(phase.strategy), cols, "primary key")
    require_columns(getattr(phase.strategy, "compare_columns", None) or (), cols, "compare")
    data = [vocab.event_time] + [c for c in cols if c != vocab.event_time]
    extra = ([vocab.op] if takes_op and vocab.op in df.columns else []) + [c for c in HIDDEN if c in df.columns]
    df = df.select(*[col(c) for c in data + extra])
    return (df if normalized else normalize_timestamps(df)), data


def required_columns(phase: MergePhase, vocab: DatasetVocabulary, cols: Sequence[str],
                     event_time_nulls: int) -> frozenset[str]:
    """The data columns the slice declares not null, as the reference implementation does: the first slice its event
    time (unless the data left some unset: a source without a time of its own) and the read schema's NOT NULL
    columns; later ones follow the dataset's schema, plus new NOT NULL columns.

    A dataset's schema keeps the nullability it was first given (nullability changes make no new SetDataSchema)."""
    declared = set(phase.not_null or ())
    if phase.prev_schema:
        from odf_core.metadata.arrow_schema import decode_arrow_schema

        prev = decode_arrow_schema(phase.prev_schema)
        known = {f.name for f in prev}
        required = {f.name for f in prev if not f.nullable} | {c for c in declared if c not in known}
    else:
        required = declared | ({vocab.event_time} if event_time_nulls == 0 else set())
    return frozenset(c for c in cols if c in required)


def null_counts(inp: MergeInput, columns: Sequence[str]) -> dict[str, int]:
    """Nulls per column: one aggregation over those columns only, or Arrow's counts when the rows are on the driver."""
    names = [c for c in dict.fromkeys(columns)
             if c in (inp.arrow.column_names if inp.arrow is not None else inp.df.columns)]
    if not names:
        return {}
    if inp.arrow is not None:
        return {c: inp.arrow.column(c).null_count for c in names}
    row = inp.df.agg(*[F.count(F.when(col(c).isNull(), 1)).alias(f"__n{i}") for i, c in enumerate(names)]).collect()[0]
    return {c: row[f"__n{i}"] for i, c in enumerate(names)}


def check_not_null(counts: dict[str, int], columns: Sequence[str]) -> None:
    """Refuse the input when a column declared NOT NULL holds nulls, naming each such column and its null count."""
    bad = [f"column '{c}' has {counts[c]} null value(s)" for c in dict.fromkeys(columns) if counts.get(c)]
    if bad:
        raise InputRejected(f"{'; '.join(bad)}, but the source's read schema or the dataset's schema declares it NOT "
                            "NULL")


OPS = (0, 1, 2, 3)
"""Operation types of a changelog (RFC-015): +A append, -R retract, -C correct-from, +C correct-to."""


def staged_with_row_ids(ctx: MergeContext, inp: MergeInput, name: str) -> MergeInput:
    """The input as staged parquet read back with its input order in ``ROW_ID``: written once unless it is staged
    already (the plans below scan it more than once). Sets ``inp.rows_read``."""
    from spark_jobs.ingest.read import ROW_ID
    from spark_jobs.parquet_files import count_rows, file_bytes, load_parquet, write_parts

    if inp.size_bytes is not None and ROW_ID in inp.df.columns:
        return inp
    df = inp.df if ROW_ID in inp.df.columns else inp.df.withColumn(ROW_ID, F.monotonically_increasing_id())
    staged = write_parts(df, ctx.work.path(name))
    inp.rows_read = count_rows(staged)
    return MergeInput(load_parquet(ctx.spark, os.path.dirname(staged[0]), staged[0]), file_bytes(staged), True,
                      rows_read=inp.rows_read)


def check_ops(df: DataFrame, op: str) -> None:
    """Refuse an input whose operation type column holds a null or a value other than 0..3, naming one."""
    bad = df.where(col(op).isNull() | ~col(op).isin(*OPS)).select(col(op)).limit(1).collect()
    if bad:
        raise InputRejected(f"column '{op}' (the operation type) holds {bad[0][0]!r}: expected 0 (append), 1 (retract),"
                            " 2 (correct-from) or 3 (correct-to)")


def run_merge(spark: SparkSession, inp: MergeInput, phase: MergePhase, vocab: DatasetVocabulary,
              work: WorkDir) -> MergeOutcome:
    """Merge the new rows into a slice file (and checkpoint) with the phase's strategy."""
    from spark_jobs.ingest.merge import append, changelog_stream, ledger, snapshot, upsert_stream

    if phase.duplicates is not None and phase.duplicates not in DUPLICATES:
        raise InputRejected(f"duplicates: expected one of {', '.join(DUPLICATES)}, got {phase.duplicates!r}")
    df, cols = prepare_merge_input(inp.df, vocab, phase, inp.normalized)
    inp.df, inp.normalized = df, True
    not_null = list(phase.not_null or ())
    # The first slice declares its event time not null when it has no nulls: counted in the same pass.
    counted = not_null + ([vocab.event_time] if not phase.prev_schema and vocab.event_time not in not_null else [])
    counts = null_counts(inp, counted) if counted else {}
    check_not_null(counts, not_null)
    # Before any data is read: the new columns against the dataset's schema, by the chain's own rule.
    check_evolution(phase.prev_schema, slice_schema(vocab, list(to_arrow_schema(
        StructType([df.schema[c] for c in cols]), timezone="UTC"))))
    ctx = MergeContext(spark, phase, vocab, work, cols,
                       required_columns(phase, vocab, cols, counts.get(vocab.event_time, 0)))
    kind = strategy_kind(phase.strategy)
    strategy = {"Append": append.merge, "Ledger": ledger.merge, "Snapshot": snapshot.merge,
                "ChangelogStream": changelog_stream.merge, "UpsertStream": upsert_stream.merge}[kind]
    stats: SliceStats = strategy(ctx, inp)
    start = ctx.offset_start
    described = None
    output = local_path(phase.output_path)
    if stats.num_records and os.path.exists(output):
        from odf_core.engine.slice_description import describe

        described = describe(output, vocab.offset_column, start)
    return MergeOutcome(
        num_records=stats.num_records,
        offset_interval=_interval(start, stats.num_records),
        max_event_time=_event_time(stats.max_event_time),
        checkpoint_written=stats.checkpoint_written,
        duplicates_dropped=inp.duplicate_rows, duplicate_key=inp.duplicate_key, slice=described)


def _interval(start: int, n: int) -> Any:
    from odf_core.metadata import OffsetInterval

    return OffsetInterval(start=start, end=start + n - 1) if n else None


def _event_time(value: Any) -> Timestamp | None:
    from datetime import date, datetime, timezone

    if value is None:
        return None
    if isinstance(value, datetime):
        return Timestamp.from_datetime(value if value.tzinfo else value.replace(tzinfo=timezone.utc))
    if isinstance(value, date):
        return Timestamp.from_datetime(datetime(value.year, value.month, value.day, tzinfo=timezone.utc))
    raise TypeError(f"unexpected event time {value!r}")
