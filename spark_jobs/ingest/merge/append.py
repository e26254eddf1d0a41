"""``MergeStrategy::Append``: every new row, in event-time order."""
from __future__ import annotations

from spark_jobs.columns import col
from spark_jobs.ingest.merge import (
    MergeContext,
    MergeInput,
    collect_input,
    collect_plan_fits,
    in_event_time_order,
    write_in_event_time_order,
)
from spark_jobs.ingest.slices import SliceStats, combine_slice, write_slice


def merge(ctx: MergeContext, inp: MergeInput) -> SliceStats:
    if collect_plan_fits(inp, inp.df.schema, ctx.cols):
        # Collect plan: the parsed rows as Arrow, written once as the slice (no part files).
        table, _ = collect_input(inp, ctx.cols)
        return write_slice(ctx.phase.output_path, ctx.vocab, in_event_time_order(table, ctx.vocab),
                           offset_start=ctx.offset_start, system_time_ms=ctx.system_time_ms, spark_fields={},
                           required=ctx.required)
    # Spark plan: ordered part files without an op column (the constant 0 is added when they are combined).
    parts = write_in_event_time_order(ctx, inp.df.select(*[col(c) for c in ctx.cols]), "append")
    return combine_slice(parts, ctx.phase.output_path, vocab=ctx.vocab, offset_start=ctx.offset_start,
                         system_time_ms=ctx.system_time_ms, checkpoint=None, required=ctx.required)
