"""``MergeStrategy::Ledger``: rows whose primary key was never seen (the first per key in event-time order).

The keys seen so far are the checkpoint's (or, without a usable checkpoint, every previous slice's). When they and the
new keys fit ``DRIVER_MERGE_BYTES`` one hash pass on the driver decides which rows survive; beyond that a Spark
window/anti-join over the ordered part files does.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Sequence

from pyspark.sql import Window
from pyspark.sql import functions as F

from spark_jobs.columns import col
from spark_jobs.errors import InputRejected
from spark_jobs.ingest.checkpoint import CheckpointPlan, usable_checkpoint
from spark_jobs.ingest.keys import key_json, ledger_keep_mask, pa_concat
import spark_jobs.ingest.merge as plans
from spark_jobs.ingest.merge import (
    MergeContext,
    MergeInput,
    collect_input,
    collect_plan_fits,
    input_duplicates,
    flat_types,
    in_event_time_order,
    is_small,
    null_safe_join_cond,
    one_partition,
    read_history,
    require_columns,
    write_in_event_time_order,
)
from spark_jobs.ingest.read import ROW_ID
from spark_jobs.ingest.slices import SliceStats, combine_slice, write_slice
from spark_jobs.parquet_files import (
    count_rows,
    file_bytes,
    load_parquet,
    spark_fields_of_schema,
    uncompressed_bytes,
    write_parts,
)


@dataclass
class SeenKeys:
    """Where the Ledger's keys seen so far are: our checkpoint, else every previous slice."""

    files: list[str]
    from_checkpoint: bool
    key_bytes: int  # in-memory size estimate of their key columns

    def read(self, pk: Sequence[str]) -> Any:
        """The key columns of every file, as one Arrow table (None when nothing was seen yet)."""
        import pyarrow.parquet as pq

        return pa_concat([pq.read_table(f, columns=list(pk)) for f in self.files]) if self.files else None


def seen_keys(ctx: MergeContext) -> SeenKeys:
    import pyarrow.parquet as pq

    ckpt_path = usable_checkpoint(ctx.phase)
    if ckpt_path:
        files, what = [ckpt_path], "checkpoint primary key"
    else:
        files, what = list(ctx.phase.prev_data_paths or ()), "primary key (previous data)"
        missing = [p for p in files if not os.path.exists(p)]
        if missing:
            raise InputRejected(f"a previous data slice is missing: {missing[0]}")
    for f in files:
        require_columns(ctx.pk, pq.read_schema(f).names, what)
    return SeenKeys(files, bool(ckpt_path), sum(uncompressed_bytes(f, ctx.pk) for f in files))


def _checkpoint(ctx: MergeContext, distinct_seen: Any) -> CheckpointPlan:
    """Ledger checkpoint written from memory: the seen keys (once each) first, then the keys of the new slice."""
    return CheckpointPlan(ctx.phase.new_checkpoint_path, ctx.phase.strategy,
                          prefix_tables=(distinct_seen,) if distinct_seen is not None else ())


def merge(ctx: MergeContext, inp: MergeInput) -> SliceStats:
    import pyarrow as pa
    import pyarrow.parquet as pq

    seen = seen_keys(ctx)
    if collect_plan_fits(inp, inp.df.schema, ctx.cols, seen.key_bytes):
        # Collect plan: rows in event-time order minus those whose key was seen (or seen earlier in the input).
        table = in_event_time_order(collect_input(inp, ctx.cols)[0], ctx.vocab)
        keep, distinct_seen = ledger_keep_mask(table.select(ctx.pk), seen.read(ctx.pk))
        _duplicates(ctx, inp, *_mask_duplicates(table.select(ctx.pk), keep, seen.files))
        if not keep.all():
            table = table.filter(pa.array(keep))
        return write_slice(ctx.phase.output_path, ctx.vocab, table, offset_start=ctx.offset_start,
                           system_time_ms=ctx.system_time_ms, spark_fields=spark_fields_of_schema(inp.df.schema),
                           checkpoint=_checkpoint(ctx, distinct_seen), required=ctx.required)
    # Spark plan: the rows written in event-time order first, as Append writes them; then which rows survive.
    parts = write_in_event_time_order(ctx, inp.df.select(*[col(c) for c in ctx.cols]), "ledger-input")
    inp.rows_read = count_rows(parts)
    key_bytes = seen.key_bytes + sum(uncompressed_bytes(p, ctx.pk) for p in parts)
    keep, checkpoint = None, None
    if flat_types(inp.df.schema, ctx.pk) and key_bytes <= plans.DRIVER_MERGE_BYTES:
        new_keys = pa_concat([pq.read_table(p, columns=ctx.pk) for p in parts])
        keep, distinct_seen = ledger_keep_mask(new_keys, seen.read(ctx.pk))
        _duplicates(ctx, inp, *_mask_duplicates(new_keys, keep, seen.files))
        checkpoint = _checkpoint(ctx, distinct_seen)
    else:
        parts, checkpoint = _spark_plan(ctx, inp, parts, seen)
    return combine_slice(parts, ctx.phase.output_path, vocab=ctx.vocab, offset_start=ctx.offset_start,
                         system_time_ms=ctx.system_time_ms, checkpoint=checkpoint, keep=keep, required=ctx.required)


def _mask_duplicates(new_keys: Any, keep: Any, seen_files: list[str]) -> tuple[int, str | None]:
    """Rows of the input repeating the key of an earlier row of it, and the first such key (JSON): from the Ledger's
    own mask when nothing was seen before, else one more hash pass over the new keys only."""
    import numpy as np

    if keep.all():
        return 0, None
    first = keep if not seen_files else ledger_keep_mask(new_keys, None)[0]
    repeated = np.flatnonzero(~np.asarray(first))
    if not len(repeated):
        return 0, None
    return len(repeated), key_json(new_keys, new_keys.column_names, int(repeated[0]))


def _duplicates(ctx: MergeContext, inp: MergeInput, n: int, key: str | None) -> None:
    """Report rows that repeat a key inside one input (conformance D1), or refuse the input when the source says
    ``duplicates: error``."""
    inp.duplicate_rows, inp.duplicate_key = n, key
    if n and ctx.phase.duplicates == "error":
        raise InputRejected(f"{n} row(s) repeat the primary key ({', '.join(ctx.pk)}) of an earlier row of the same "
                            f"input, e.g. {key}; refused because duplicates is 'error' ('first' keeps the first row "
                            "per key)")


def _spark_plan(ctx: MergeContext, inp: MergeInput, parts: list[str], seen: SeenKeys
                ) -> tuple[list[str], CheckpointPlan]:
    """Ledger over the ordered parts with Spark: a row's position in them is its order."""
    pk, spark = ctx.pk, ctx.spark
    staged = load_parquet(spark, os.path.dirname(parts[0]), parts[0])
    starts, total = [], 0
    for p in parts:
        starts += [F.lit(os.path.basename(p)), F.lit(total)]
        total += count_rows([p])
    df = staged.withColumn(ROW_ID, F.element_at(F.create_map(*starts), F.col("_metadata.file_name"))
                           + F.col("_metadata.row_index"))
    order = [F.col(ROW_ID)]
    first = Window.partitionBy(*[col(k) for k in pk]).orderBy(*order)
    prefix: tuple[str, ...] = ()
    seen_df = None
    if seen.from_checkpoint:
        seen_df, prefix = load_parquet(spark, seen.files[0]), (seen.files[0],)
    elif seen.files:
        history = read_history(ctx)
        prefix = tuple(write_parts(history.select(*[col(k) for k in pk]).distinct(), ctx.work.path("ledger-keys")))
        seen_df = load_parquet(spark, os.path.dirname(prefix[0]), prefix[0])
    small = is_small(file_bytes(parts) + file_bytes(prefix))
    df, seen_df = one_partition(df, small), one_partition(seen_df, small)
    repeats, sample = input_duplicates(df, pk)
    _duplicates(ctx, inp, repeats, sample)
    if repeats:
        new = df.withColumn("__rn", F.row_number().over(first)).filter(F.col("__rn") == 1).drop("__rn")
    else:
        new = df  # parallel plan, no key repeats in the input: the per-key window would keep every row
    if seen_df is not None:
        seen_df = seen_df.select(*[col(k).alias(f"__k{i}") for i, k in enumerate(pk)])
        cond = null_safe_join_cond([col(k) for k in pk], [F.col(f"__k{i}") for i in range(len(pk))])
        new = new.join(seen_df.hint("merge") if small else seen_df, cond, "left_anti")
    frame = (one_partition(new.select(F.lit(0).cast("int").alias(ctx.vocab.op), *[col(c) for c in ctx.cols],
                                      F.col(ROW_ID)), small)
             .sort(*order).drop(ROW_ID))
    out = write_parts(frame, ctx.work.path("ledger"))
    return out, CheckpointPlan(ctx.phase.new_checkpoint_path, ctx.phase.strategy, prefix)
