"""The plan every evaluation of a stateful query runs: its incremental plan, the full path's output, a rebuild and
every recomputation from the history. Spark leaves some values to the order it reads rows in; here they get one:
averages of integers and DECIMALs become a sum and a count (:mod:`.averages`), sums and averages of floating-point
values the exact sum rounded once (:mod:`.exact_sums`), then windows that tell rows tied in their ORDER BY apart get
tie-breakers (:mod:`.ties`)."""
from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame

from spark_jobs.transform.catalyst import Catalyst
from spark_jobs.transform.incremental import averages, exact_sums, running, ties, top
from spark_jobs.transform.incremental.plan import Unsupported


def plan(cat: Catalyst, optimized: Any) -> Any:
    """The canonical form of an optimised plan (``optimized`` itself when nothing changes)."""
    return ties.ordered(cat, exact_sums.exact(cat, averages.exact(cat, optimized)), _shapes(cat))


def _shapes(cat: Catalyst) -> ties.StateShapes:
    def first_rows(node: Any) -> tuple[Any, tuple[int, ...]] | None:
        try:
            spec = top.analyze(cat, node)
        except Unsupported:
            return None
        return None if spec is None else (spec.child, tuple(spec.child_path))

    def runs(node: Any) -> bool:
        try:
            running.analyze(cat, node)
        except Unsupported:
            return False
        return True

    return ties.StateShapes(first_rows=first_rows, running=runs)


def frame(cat: Catalyst, df: DataFrame) -> DataFrame:
    """:func:`plan` of a DataFrame's optimised plan (the DataFrame itself when nothing changes)."""
    optimized = df._jdf.queryExecution().optimizedPlan()
    new = plan(cat, optimized)
    return df if new is optimized else cat.dataframe(new)
