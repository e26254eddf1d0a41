"""``MergeStrategy::Snapshot``: change data capture of the new snapshot against the current state (conformance §7).

Keys only in the snapshot are appended (+A), keys only in the state retracted (-R), keys in both with a difference in
a compare column corrected (-C then +C). A filled-in event time (the source's, not the data's) is not a change. The
state is the checkpoint's, or rebuilt from the previous slices.
"""
from __future__ import annotations

import os
from typing import Any, Callable

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from odf_core.metadata import MergeStrategySnapshot
from spark_jobs.columns import col
from spark_jobs.errors import ENGINE_CHECK_PREFIX
from spark_jobs.ingest.checkpoint import CheckpointPlan, usable_checkpoint
from spark_jobs.ingest.keys import duplicate_snapshot_key, normalized_table, snapshot_changes
from spark_jobs.ingest.merge import (
    MergeContext,
    MergeInput,
    collect_input,
    collect_plan_fits,
    duplicate_key,
    is_small,
    null_safe_join_cond,
    one_partition,
    read_history,
    require_columns,
    row_changed,
)
from spark_jobs.ingest.read import ET_FILLED, ROW_ID
from spark_jobs.ingest.slices import DEST, SliceStats, combine_slice, write_slice
from spark_jobs.parquet_files import count_rows, file_bytes, load_parquet, spark_fields_of_schema, write_parts

_SEQ = "__odf_seq"


def _compare_columns(ctx: MergeContext) -> list[str]:
    strategy: MergeStrategySnapshot = ctx.phase.strategy  # type: ignore[assignment]
    if strategy.compare_columns:
        return list(strategy.compare_columns)
    return [c for c in ctx.cols if c not in ctx.pk]


def load_state(ctx: MergeContext) -> tuple[DataFrame | None, int, str | None]:
    """The state per key (event time + data columns), the parquet bytes it comes from, and the checkpoint path when
    it comes from our checkpoint (else it is rebuilt from the previous slices)."""
    ckpt_path = usable_checkpoint(ctx.phase)
    if ckpt_path:
        return load_parquet(ctx.spark, ckpt_path), file_bytes([ckpt_path]), ckpt_path
    if not ctx.phase.prev_data_paths:
        return None, 0, None
    history = read_history(ctx)
    vocab = ctx.vocab
    require_columns(ctx.pk + [vocab.offset, vocab.op], history.columns, "previous data")
    latest = Window.partitionBy(*[col(k) for k in ctx.pk]).orderBy(col(vocab.offset).desc())
    state = (history.withColumn("__rk", F.row_number().over(latest))
             .filter((F.col("__rk") == 1) & col(vocab.op).isin(0, 3))
             .drop("__rk", *vocab.system_columns))
    return state, file_bytes(ctx.phase.prev_data_paths or ()), None


def merge(ctx: MergeContext, inp: MergeInput) -> SliceStats:
    state, state_bytes, state_path = load_state(ctx)
    if collect_plan_fits(inp, inp.df.schema, ctx.cols, state_bytes):
        return _collect_plan(ctx, inp, state, state_path)
    parts = _spark_plan(ctx, inp, state, state_bytes)
    return combine_slice(parts, ctx.phase.output_path, vocab=ctx.vocab, offset_start=ctx.offset_start,
                         system_time_ms=ctx.system_time_ms, required=ctx.required,
                         checkpoint=CheckpointPlan(ctx.phase.new_checkpoint_path, ctx.phase.strategy))


def _collect_plan(ctx: MergeContext, inp: MergeInput, state_df: DataFrame | None, state_path: str | None
                  ) -> SliceStats:
    """The parsed snapshot as Arrow (no staging write), diffed against the state in pyarrow."""
    new, filled = collect_input(inp, ctx.cols, with_filled=True)
    fields = list(new.schema)
    if state_path is not None:
        import pyarrow.parquet as pq

        state = normalized_table(pq.read_table(state_path), fields)
    elif state_df is not None:
        state = normalized_table(state_df.toArrow(), fields)
    else:
        state = None
    changes = snapshot_changes(new, state, ctx.pk, _compare_columns(ctx), filled, ctx.vocab.op, ctx.vocab.event_time)
    return write_slice(ctx.phase.output_path, ctx.vocab, changes.out.select(ctx.cols), changes.out.column(ctx.vocab.op),
                       offset_start=ctx.offset_start, required=ctx.required, system_time_ms=ctx.system_time_ms,
                       spark_fields=spark_fields_of_schema(inp.df.schema),
                       checkpoint=CheckpointPlan(ctx.phase.new_checkpoint_path, ctx.phase.strategy),
                       state=changes.state)


def _spark_plan(ctx: MergeContext, inp: MergeInput, state: DataFrame | None, state_bytes: int) -> list[str]:
    """CDC with Spark: slice rows and next-state rows in one sort, as ordered part files."""
    pk, cols, vocab = ctx.pk, ctx.cols, ctx.vocab
    if inp.size_bytes is None:  # not staged yet: the plan below scans the input more than once
        staged = write_parts(inp.df.withColumn(ROW_ID, F.monotonically_increasing_id()),
                             ctx.work.path("read-staged"))
        inp.rows_read = count_rows(staged)
        inp = MergeInput(load_parquet(ctx.spark, os.path.dirname(staged[0]), staged[0]), file_bytes(staged), True)
    filled = F.col(ET_FILLED) if ET_FILLED in inp.df.columns else F.lit(False)
    new = inp.df.select(*[col(c) for c in cols], filled.alias(ET_FILLED))
    small = is_small(None if inp.size_bytes is None else inp.size_bytes + state_bytes)
    new, state = one_partition(new, small), one_partition(state, small)
    if small:  # one partition: the check rides along in the merge's own pass
        key_json = F.to_json(F.struct(*[col(k) for k in pk]))
        dup_count = F.count(F.lit(1)).over(Window.partitionBy(*[col(k) for k in pk]))
        message = F.concat(F.lit(ENGINE_CHECK_PREFIX + "duplicate primary key "), key_json,
                           F.lit(" in the new snapshot: a snapshot must hold each key at most once"))
        new = (new.withColumn("__cnt", dup_count)
               .filter(F.when(F.col("__cnt") > 1, F.raise_error(message)).otherwise(F.lit(True)))
               .drop("__cnt"))
    else:  # parallel plan: a hash aggregation over the keys instead of a window sorting every row by key
        dup = duplicate_key(new, pk)
        if dup is not None:
            raise duplicate_snapshot_key(dup)
    types = {f.name: f.dataType for f in new.schema.fields}

    def row(get: Callable[[int, str], Any], op: int | None, dest: int, seq: int) -> Any:
        return F.struct(F.lit(dest).cast("tinyint").alias(DEST), F.lit(seq).cast("int").alias(_SEQ),
                        F.lit(op).cast("int").alias(vocab.op),
                        *[get(i, c).cast(types[c]).alias(c) for i, c in enumerate(cols)])

    if state is None:
        n_col = lambda i, c: col(c)  # noqa: E731
        emitted = new.select(F.inline(F.array(row(n_col, 0, 0, 0), row(n_col, None, 1, 4))))
    else:
        old = state.select(*[(col(c) if c in state.columns else F.lit(None).cast(types[c])).alias(f"__o{i}")
                             for i, c in enumerate(cols)], F.lit(True).alias("__o_present"))
        nn = new.select(*[col(c).alias(f"__n{i}") for i, c in enumerate(cols)], F.lit(True).alias("__n_present"),
                        F.col(ET_FILLED).alias("__n_filled"))
        idx = {c: i for i, c in enumerate(cols)}
        cond = null_safe_join_cond([F.col(f"__o{idx[k]}") for k in pk], [F.col(f"__n{idx[k]}") for k in pk])
        j = old.join(nn, cond, "full_outer")
        changed = row_changed(_compare_columns(ctx), idx, vocab.event_time)
        o_col = lambda i, c: F.col(f"__o{i}")  # noqa: E731
        n_col = lambda i, c: F.col(f"__n{i}")  # noqa: E731
        emitted = j.select(F.inline(
            F.when(F.col("__o_present").isNull(), F.array(row(n_col, 0, 0, 0), row(n_col, None, 1, 4)))
            .when(F.col("__n_present").isNull(), F.array(row(o_col, 1, 0, 1)))
            .when(changed, F.array(row(o_col, 2, 0, 2), row(n_col, 3, 0, 3), row(n_col, None, 1, 4)))
            .otherwise(F.array(row(o_col, None, 1, 4)))))
    frame = one_partition(emitted, small).sort(*[col(k).asc_nulls_first() for k in pk], F.col(_SEQ)).drop(_SEQ)
    return write_parts(frame, ctx.work.path("snapshot"))
