"""Writing a transform's output slice: offsets in canonical row order, the data slice's column layout, one file.

Canonical row order makes a re-run reproduce the same logical hash: stateless by input, input offset, rank among the
rows one input row produced, -C before +C, then all output columns; stateful -R rows, then -C/+C pairs, then +A rows,
each by key columns, pair rank, -C before +C, then all output columns (nulls first everywhere).
"""
from __future__ import annotations

import os
from decimal import Decimal
from typing import Sequence

from pyspark import SparkContext
from pyspark.sql import Column, DataFrame, Observation, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from odf_core.metadata import OffsetInterval, TransformRequest
from spark_jobs.columns import col
from spark_jobs.parquet_files import local_path, write_single_parquet
from spark_jobs.transform.inputs import orderable
from spark_jobs.transform.planning import OutputLayout


def normalized(name: str, dtype: T.DataType) -> Column:
    """Timestamps as ms UTC (what the slice stores), so states compare equal after a round trip."""
    return normalize(col(name), dtype)


def normalize(c: Column, dtype: T.DataType) -> Column:
    """:func:`normalized` of any column."""
    if isinstance(dtype, T.TimestampNTZType):
        c = c.cast(T.TimestampType())
    if isinstance(dtype, (T.TimestampType, T.TimestampNTZType)):
        c = F.date_trunc("millisecond", c)
    return c


def plain_alias(c: Column, name: str) -> Column:
    """Alias with explicitly empty metadata (drops our input marker from the written schema).

    pyspark's ``alias(metadata={})`` would inherit the child's metadata, hence the direct JVM call.
    """
    jvm = SparkContext._jvm
    assert jvm is not None, "no active SparkContext"
    return Column(getattr(c._jc, "as")(name, jvm.org.apache.spark.sql.types.Metadata.empty()))


def sort_columns(df: DataFrame, names: Sequence[str]) -> list[Column]:
    types = {f.name: f.dataType for f in df.schema.fields}
    return [col(n).asc_nulls_first() for n in names if orderable(types[n])]


def step_constant(value: int, row: Column) -> Column:
    """``value`` (a long) plus the integer column ``row``, computed per row from a literal passed by reference.

    Spark writes long and timestamp literals into the generated code of a stage. The next offset and the system time
    change at every transaction, so the slice-writing stage would compile a new class at every step and run its rows
    cold (interpreted) instead of reusing warm code. A DECIMAL literal is passed by reference, and adding a column
    keeps the optimiser from folding it back into a long literal (it folds ``x * 0``, not ``x - x``). Spark types the
    DECIMAL sum as nullable, though it is never NULL here (ANSI arithmetic fails instead): the coalesce keeps the
    column NOT NULL in the slice's schema, as a long literal's sum was."""
    exact = (F.lit(Decimal(value)).cast(T.DecimalType(20, 0)) + row).cast(T.LongType())
    return F.coalesce(exact, F.lit(0).cast(T.LongType()))


def finalize(df: DataFrame, op: Column, order: Sequence[Column], layout: OutputLayout,
             request: TransformRequest) -> DataFrame:
    """Assign offsets in ``order`` and lay the columns out as a data slice."""
    vocab = request.vocab
    types = {f.name: f.dataType for f in df.schema.fields}
    df = df.withColumn("__odf_slice_row", F.row_number().over(Window.orderBy(*order)))
    rank = F.col("__odf_slice_row")
    system_time = F.timestamp_micros(step_constant(request.system_time.epoch_ns // 1000, rank - rank))
    return df.select(
        plain_alias(step_constant(request.next_offset - 1, rank), vocab.offset),
        plain_alias(op.cast(T.IntegerType()), vocab.op),
        plain_alias(system_time, vocab.system_time),
        plain_alias(normalized(layout.event_time, types[layout.event_time]), vocab.event_time),
        *[plain_alias(normalized(n, types[n]), n) for n in layout.data],
    )


def write_output(final: DataFrame, request: TransformRequest) -> tuple[OffsetInterval | None, dict[str, int]]:
    """Write the slice of :func:`finalize` (no file when empty); row counts per op come from an observation of the
    write. Its rows are in offset order already (the one sorted partition its offsets were numbered in), so the write
    sorts nothing again; ``describe_slice`` checks the offsets before anything is committed."""
    op = col(request.vocab.op)
    obs = Observation()
    observed = final.observe(obs, F.count(F.lit(1)).alias("rows"),
                             *[F.sum(F.when(op == k, 1).otherwise(0)).alias(str(k)) for k in range(4)])
    write_single_parquet(observed, request.new_data_path)
    metrics = obs.get
    total = int(metrics["rows"])
    counts = {str(k): int(metrics[str(k)] or 0) for k in range(4) if metrics[str(k)]}
    if total == 0:
        os.remove(local_path(request.new_data_path))
        return None, counts
    return OffsetInterval(start=request.next_offset, end=request.next_offset + total - 1), counts
