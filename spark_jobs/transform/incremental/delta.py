"""A change to the rows of one plan node: the rows it gains and the rows it loses.

Row-wise operators are linear, so a change passes through them as two ordinary evaluations (gained rows, lost rows);
stateful operators turn the change of their input into the change of their output with the help of their state.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_jobs.transform.incremental.frames import COUNT, WEIGHT


@dataclass(frozen=True)
class Delta:
    """``pos``/``neg``: frames of the node (plain or counted); ``empty``: known to be no change without asking Spark
    (an input with no new slice); ``gains_only``: known to lose no row (an append-only slice, by its footers), so
    the node's new rows are its old rows plus ``pos``."""

    pos: DataFrame
    neg: DataFrame
    empty: bool = False
    gains_only: bool = False


def weighted(pos: DataFrame, neg: DataFrame) -> DataFrame:
    """One frame with ``__odf_w``: +multiplicity for gained rows, -multiplicity for lost ones."""
    def signed(df: DataFrame, sign: int) -> DataFrame:
        w = (F.col(COUNT) * sign) if COUNT in df.columns else F.lit(sign)
        return df.select(*[c for c in df.columns if c != COUNT], w.cast("long").alias(WEIGHT))

    return signed(pos, 1).unionByName(signed(neg, -1))


def split(counts: DataFrame, column: str = WEIGHT) -> Delta:
    """Rows with a signed multiplicity in ``column`` as a counted Delta (zero rows dropped)."""
    data = [c for c in counts.columns if c != column]
    w = F.col(column)
    pos = counts.where(w > 0).select(*data, w.alias(COUNT))
    neg = counts.where(w < 0).select(*data, (-w).alias(COUNT))
    return Delta(pos, neg)


def cancel(delta: Delta, settle: Callable[[DataFrame], DataFrame] | None = None) -> Delta:
    """The net change: a row both gained and lost is no change (keeps later operators from seeing non-changes);
    ``settle`` (e.g. materialise) is applied to the netted rows once, before they are split into gains and losses."""
    if delta.empty:
        return delta
    both = weighted(delta.pos, delta.neg)
    data = [c for c in both.columns if c != WEIGHT]
    net = both.groupBy(*data).agg(F.sum(WEIGHT).alias(WEIGHT)).where(F.col(WEIGHT) != 0)
    return split(net if settle is None else settle(net))
