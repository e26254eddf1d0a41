"""``MergeStrategy::UpsertStream`` (spec after v0.34.1): insert-or-update and delete events by primary key, turned
into a changelog against the dataset's current state, with the reference implementation's semantics:

* the input's ``op`` column is optional: 1 (retract) deletes the key, any other value (or no column) upserts it;
* only the last event per key of the input counts (in input order);
* an upsert of a new key is appended (+A); of a known key whose values differ it is a correction (-C with the
  current values, +C with the new ones); of a known key with the same values nothing. An event time the data does
  not give (the source's time filled in) is no difference;
* a delete of a known key retracts it (-R with the current values); of an unknown key nothing.

The current state is the latest row per key of the previous slices unless that row is a retraction (no checkpoint is
written: the state is rebuilt from the slices, as the reference does). Rows are ordered by primary key then op.
"""
from __future__ import annotations

import functools
import operator
from typing import Any, Callable

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spark_jobs.columns import col
from spark_jobs.ingest.merge import (
    row_changed,
    MergeContext,
    MergeInput,
    check_ops,
    is_small,
    one_partition,
    read_history,
    require_columns,
    staged_with_row_ids,
)
from spark_jobs.ingest.read import ET_FILLED, ROW_ID
from spark_jobs.ingest.slices import SliceStats, combine_slice
from spark_jobs.parquet_files import write_parts

_RETRACT, _APPEND, _CORRECT_FROM, _CORRECT_TO = 1, 0, 2, 3


def current_state(ctx: MergeContext) -> DataFrame | None:
    """The latest row per key of the previous slices, unless it retracts the key (event time + data columns)."""
    if not ctx.phase.prev_data_paths:
        return None
    history = read_history(ctx)
    vocab = ctx.vocab
    require_columns(ctx.pk + [vocab.offset, vocab.op], history.columns, "previous data")
    latest = Window.partitionBy(*[col(k) for k in ctx.pk]).orderBy(col(vocab.offset).desc())
    return (history.withColumn("__rk", F.row_number().over(latest))
            .filter((F.col("__rk") == 1) & (col(vocab.op) != _RETRACT))
            .drop("__rk", *vocab.system_columns))


def merge(ctx: MergeContext, inp: MergeInput) -> SliceStats:
    inp = staged_with_row_ids(ctx, inp, "upsert-staged")
    pk, cols, vocab, op = ctx.pk, ctx.cols, ctx.vocab, ctx.vocab.op
    df = inp.df if op in inp.df.columns else inp.df.withColumn(op, F.lit(_APPEND))
    check_ops(df, op)
    small = is_small(inp.size_bytes)
    filled = F.col(ET_FILLED) if ET_FILLED in df.columns else F.lit(False)
    last_per_key = Window.partitionBy(*[col(k) for k in pk]).orderBy(F.col(ROW_ID).desc())
    new = (one_partition(df, small)
           .select(*[col(c).alias(f"__n{i}") for i, c in enumerate(cols)], col(op).cast("int").alias("__n_op"),
                   filled.alias("__n_filled"),
                   F.row_number().over(last_per_key).alias("__rk"))
           .where(F.col("__rk") == 1).drop("__rk"))
    types = {c: df.schema[c].dataType for c in cols}
    old = _old_side(ctx, types)
    idx = {c: i for i, c in enumerate(cols)}
    # An equi-join, as the reference's: a null key matches no current row.
    cond = functools.reduce(operator.and_, [F.col(f"__n{idx[k]}") == F.col(f"__o{idx[k]}") for k in pk])
    j = new.join(one_partition(old, small), cond, "left")
    retract = F.col("__n_op") == _RETRACT
    known = F.col("__o_present").isNotNull()
    changed = row_changed([c for c in cols if c not in pk], idx, vocab.event_time)

    def row(side: str, op_value: int) -> Any:
        return F.struct(F.lit(op_value).cast("int").alias(op),
                        *[F.col(f"__{side}{i}").cast(types[c]).alias(c) for i, c in enumerate(cols)])

    emitted = (j.where((retract & known) | (~retract & changed))
               .select(F.inline(F.when(retract, F.array(row("o", _RETRACT)))
                                .when(~known, F.array(row("n", _APPEND)))
                                .otherwise(F.array(row("o", _CORRECT_FROM), row("n", _CORRECT_TO))))))
    frame = one_partition(emitted, small).sort(*[col(k).asc_nulls_first() for k in pk], col(op))
    parts = write_parts(frame, ctx.work.path("upsert"))
    return combine_slice(parts, ctx.phase.output_path, vocab=vocab, offset_start=ctx.offset_start,
                         system_time_ms=ctx.system_time_ms, checkpoint=None, required=ctx.required)


def _old_side(ctx: MergeContext, types: dict[str, Any]) -> DataFrame:
    """The current state as the join's right side: ``__o{i}`` per column of the input, and ``__o_present``."""
    cols = ctx.cols
    state = current_state(ctx)
    if state is None:
        fields = [T.StructField(f"__o{i}", types[c], True) for i, c in enumerate(cols)]
        return ctx.spark.createDataFrame([], T.StructType(fields + [T.StructField("__o_present", T.BooleanType())]))
    pick: Callable[[str], Any] = lambda c: col(c) if c in state.columns else F.lit(None).cast(types[c])  # noqa: E731
    return state.select(*[pick(c).alias(f"__o{i}") for i, c in enumerate(cols)], F.lit(True).alias("__o_present"))
