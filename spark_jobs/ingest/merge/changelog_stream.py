"""``MergeStrategy::ChangelogStream`` (spec after v0.34.1): the input already is an ODF changelog.

Its rows carry their operation type in the ``op`` column (+A, -R, -C, +C) and are written as they are, ordered by
primary key then op (ties in input order), as the reference implementation does: no state, no diff, only the check
that every op is one of the four.
"""
from __future__ import annotations

from pyspark.sql import functions as F

from spark_jobs.columns import col
from spark_jobs.ingest.merge import MergeContext, MergeInput, check_ops, is_small, one_partition, staged_with_row_ids
from spark_jobs.ingest.read import ROW_ID
from spark_jobs.ingest.slices import SliceStats, combine_slice
from spark_jobs.parquet_files import write_parts


def merge(ctx: MergeContext, inp: MergeInput) -> SliceStats:
    inp = staged_with_row_ids(ctx, inp, "changelog-staged")
    op = ctx.vocab.op
    check_ops(inp.df, op)
    frame = (one_partition(inp.df, is_small(inp.size_bytes))
             .select(col(op).cast("int").alias(op), *[col(c) for c in ctx.cols], F.col(ROW_ID))
             .sort(*[col(k).asc_nulls_first() for k in ctx.pk], col(op), F.col(ROW_ID))
             .drop(ROW_ID))
    parts = write_parts(frame, ctx.work.path("changelog"))
    return combine_slice(parts, ctx.phase.output_path, vocab=ctx.vocab, offset_start=ctx.offset_start,
                         system_time_ms=ctx.system_time_ms, checkpoint=None, required=ctx.required)
