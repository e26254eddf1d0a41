"""The first rows of each window partition: ``WHERE rn <= N`` over ``row_number()`` / ``rank()`` / ``dense_rank()``
(the usual "latest row per key": ``row_number() OVER (PARTITION BY k ORDER BY t DESC) = 1``), updated from a state of
each partition's first rows.

The operator is the Filter, the Window of ranking functions below it and Spark's WindowGroupLimit, if any. Its state
is, per partition, the rows whose ``rank()`` is at most N (``dense_rank()`` when that is what the filter limits): all
rows the filter can pass, and every row tied with them. Each kept row also holds the window's values it was output
with and whether it passed the whole filter, so the rows a step retracts are exactly the rows it output before (the
order of rows tied on the ORDER BY is arbitrary in Spark: a recomputation may number them differently).

New rows can only push kept rows out: a partition's new first rows are the first rows of its kept rows plus its new
rows, and the window runs over those alone. A removed row ranked after every kept row changes nothing; one among them
(or tied with one) recomputes its partition from the history, like a window by key (:mod:`.keyed`). So a step costs
the new rows and the kept rows of the partitions they touch, whatever the partitions' history.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from spark_jobs.transform.catalyst import Catalyst
from spark_jobs.transform.incremental import key_ranges
from spark_jobs.transform.incremental.delta import Delta, cancel
from spark_jobs.transform.incremental.frames import COUNT, empty, evaluate, expand, project
from spark_jobs.transform.incremental.plan import Op, Unsupported
from spark_jobs.transform.incremental.state import WindowColumns, by_keys
from spark_jobs.transform.incremental.step import KEPT_ROWS, Step, restrict, segment_change, union_frames

KIND = "top"
PASSED = "__odf_passed"  # a kept row that the filter passed (was output)
MAX_ROWS = 1000  # the largest N kept per partition (Spark's own per-partition limit stops at this threshold too)
_RANKS = {"RowNumber": "row_number", "Rank": "rank", "DenseRank": "dense_rank"}
# comparison (Catalyst class) -> N for ``rank <op> value``, and for ``value <op> rank``
_LIMITS = {"LessThanOrEqual": (lambda v: v, None), "LessThan": (lambda v: v - 1, None),
           "EqualTo": (lambda v: v, lambda v: v), "GreaterThanOrEqual": (None, lambda v: v),
           "GreaterThan": (None, lambda v: v - 1)}


@dataclass(frozen=True)
class TopSpec(WindowColumns):
    operator: str
    window: Any  # the Window node (the Filter's child)
    condition: Any  # the Filter's condition (over the Window's output)
    child: Any  # the rows ranked: the Window's child, or the WindowGroupLimit's
    child_path: tuple[int, ...]  # from the Filter to ``child``
    partition: tuple[Any, ...]  # PARTITION BY expressions over the child's output
    order: tuple[Any, ...]  # the ORDER BY SortOrders
    rows: int  # N: the filter passes no row ranked after it
    dense: bool  # the filter limits a dense_rank: the state keeps the first N distinct ORDER BY values
    detail: str


def _conjuncts(cat: Catalyst, e: Any) -> list[Any]:
    if cat.cls(e) == "And":
        return _conjuncts(cat, e.left()) + _conjuncts(cat, e.right())
    return [e]


def _limit(cat: Catalyst, cond: Any, ranks: dict[int, str]) -> tuple[int, str] | None:
    """(N, the ranking function) of a conjunct ``rank <= N`` (or ``<``, ``=``, mirrored) on one of ``ranks`` (the
    window's ranking outputs by expression id), else None."""
    bounds = _LIMITS.get(cat.cls(cond))
    if bounds is None:
        return None
    for (attr, value), bound in (((cond.left(), cond.right()), bounds[0]), ((cond.right(), cond.left()), bounds[1])):
        if bound is None or cat.cls(attr) != "AttributeReference" or attr.exprId().id() not in ranks:
            continue
        v = value.eval(None) if value.foldable() else None
        if isinstance(v, int) and not isinstance(v, bool):
            return bound(v), ranks[attr.exprId().id()]
    return None


def analyze(cat: Catalyst, node: Any) -> TopSpec | None:
    """The top-N operator of a Filter over a Window of ranking functions (None: the Filter is not one; then it is a
    row-wise filter over whatever the window is), or :class:`Unsupported` (the shape, but no state for it: the
    Window below is recomputed by key)."""
    window = cat.items(node.children())[0]
    if cat.cls(window) != "Window":
        return None
    ranks: dict[int, str] = {}
    for alias in cat.items(window.windowExpressions()):
        we = alias.child() if cat.cls(alias) == "Alias" else alias
        kind = _RANKS.get(cat.cls(we.windowFunction())) if cat.cls(we) == "WindowExpression" else None
        if kind is None:
            return None  # other functions see the whole partition
        ranks[alias.exprId().id()] = kind
    found = [f for f in (_limit(cat, c, ranks) for c in _conjuncts(cat, node.condition())) if f is not None]
    if not found:
        return None
    partition = tuple(cat.items(window.partitionSpec()))
    orders = tuple(cat.items(window.orderSpec()))
    if not partition or not orders:
        return None
    n, kind = min(found)
    if not 1 <= n <= MAX_ROWS:
        raise Unsupported("Window", f"the filter keeps rows ranked up to {n}: only 1 to {MAX_ROWS} are kept as state")
    child, path = window.child(), (0, 0)
    if cat.cls(child) == "WindowGroupLimit":
        child, path = child.child(), (0, 0, 0)
    dense = kind == "dense_rank"
    what = ", ".join(str(alias.child().sql()).split(" OVER ")[0] for alias in cat.items(window.windowExpressions()))
    kept = f"its first {n} ORDER BY value(s)" if dense else f"its first {n} row(s) (and rows tied with them)"
    detail = (f"first rows per partition ({len(partition)} key(s)): {what} limited to {n}; each partition keeps {kept} "
              "as state; new rows are ranked against them, removals among them recompute their partitions from "
              "their history")
    return TopSpec("Window", window, node.condition(), child, path, partition, orders, n, dense, detail)


# -- states ---------------------------------------------------------------------------------------------------------

def _columns(cat: Catalyst, spec: TopSpec, rows: DataFrame) -> DataFrame:
    """Of a frame of the child's rows: the rows (``c0..``), then their key and order columns."""
    attrs = cat.items(spec.child.output())
    rows = rows.drop(COUNT) if COUNT in rows.columns else rows
    return project(cat, rows, attrs, [(f"c{i}", a) for i, a in enumerate(attrs)]
                   + [(k, e) for k, e in zip(spec.keys, spec.partition)]
                   + [(o, s.child()) for o, s in zip(spec.order_columns, spec.order)])


def _sorted(cat: Catalyst, spec: TopSpec) -> list[Column]:
    """The window's ORDER BY over the order columns, directions and NULL placement as written."""
    found = []
    for o, s in zip(spec.order_columns, spec.order):
        asc = cat.cls(s.direction()) == "Ascending$"
        first = cat.cls(s.nullOrdering()) == "NullsFirst$"
        c = F.col(o)
        found.append((c.asc_nulls_first() if first else c.asc_nulls_last()) if asc
                     else (c.desc_nulls_first() if first else c.desc_nulls_last()))
    return found


def _first(cat: Catalyst, spec: TopSpec, cols: DataFrame) -> DataFrame:
    """Each partition's rows ranked at most N (dense: among its first N ORDER BY values), as child rows."""
    w = Window.partitionBy(*spec.keys).orderBy(*_sorted(cat, spec))
    ranked = cols.withColumn("__odf_rank", (F.dense_rank() if spec.dense else F.rank()).over(w))
    width = len(cat.items(spec.child.output()))
    return ranked.where(F.col("__odf_rank") <= spec.rows).select(*[f"c{i}" for i in range(width)])


def _kept(cat: Catalyst, spec: TopSpec, rows: DataFrame) -> DataFrame:
    """The state rows of some partitions from their first rows (child rows): the window over them, its values, the
    partition keys and whether the filter passes the row."""
    out = evaluate(cat, spec.window, {(0,): rows})
    attrs = cat.items(spec.window.output())
    cond = F.coalesce(F.col("__odf_cond"), F.lit(False))
    return project(cat, out, attrs, [(f"c{i}", a) for i, a in enumerate(attrs)]
                   + [(k, e) for k, e in zip(spec.keys, spec.partition)]
                   + [("__odf_cond", spec.condition)]).select(
        *spec.keys, *[f"c{i}" for i in range(len(attrs))], cond.alias(PASSED))


def initial(cat: Catalyst, spec: TopSpec, rows: DataFrame) -> DataFrame:
    """The state of the partitions of ``rows`` (the child's rows, by position), from all of their rows."""
    return _kept(cat, spec, _first(cat, spec, _columns(cat, spec, rows)))


def _output(spec: TopSpec, kept: DataFrame, width: int) -> DataFrame:
    """The operator's output rows among state rows: those the filter passed, as the Filter's frame."""
    return kept.where(F.col(PASSED)).select(*[f"c{i}" for i in range(width)])


# -- a step ---------------------------------------------------------------------------------------------------------

def step(step: Step, op: Op, old: DataFrame, changes: Mapping[str, Delta]) -> tuple[Delta, DataFrame]:
    """The change of the operator's output (the rows the filter passes; uncancelled) and the new state."""
    spec: TopSpec = op.spec
    cat = step.cat
    keys = spec.keys
    attrs = cat.items(spec.child.output())
    row_cols = [f"c{i}" for i in range(len(attrs))]
    width = len(cat.items(spec.window.output()))
    d = segment_change(step, op.children[0], changes)
    if d.empty:
        nothing = empty(step.session, cat.items(op.node.output()))
        return Delta(nothing, nothing, empty=True), old
    if not d.gains_only:  # a row added and removed in one step is no change; a removed row is then an old row
        d = cancel(d)
    gained, _ = step.keep(_columns(cat, spec, expand(d.pos)))
    lost = None if d.gains_only else _columns(cat, spec, expand(d.neg))
    touched = gained.select(*keys)
    touched = step.broadcast((touched if lost is None else touched.unionByName(lost.select(*keys))).distinct())
    mine, _ = step.keep(by_keys(old, touched, keys, "left_semi"))
    kept_rows = _columns(cat, spec, mine.select(*row_cols))
    late = None
    if lost is not None:  # a removed row ranked at or before a kept row: its partition is recomputed
        at_or_after = Window.partitionBy(*keys).orderBy(*_sorted(cat, spec)).rangeBetween(
            Window.currentRow, Window.unboundedFollowing)
        both = kept_rows.withColumn("__odf_kept", F.lit(1)).unionByName(lost.withColumn("__odf_kept", F.lit(0)))
        reached = both.withColumn("__odf_after", F.sum("__odf_kept").over(at_or_after))
        late, seen = step.keep(reached.where((F.col("__odf_kept") == 0) & (F.col("__odf_after") > 0))
                               .select(*keys).distinct())
        late = step.broadcast(late, seen[KEPT_ROWS]) if seen[KEPT_ROWS] else None
    candidates = kept_rows.unionByName(gained)
    if late is not None:
        candidates = by_keys(candidates, late, keys, "left_anti")
    parts = [_kept(cat, spec, _first(cat, spec, candidates))]
    if late is not None:  # those partitions' rows after the step, from the history
        node = op.children[0].node
        history = step.replay(node, bounds=key_ranges.own(step, node, spec.partition))
        parts.append(initial(cat, spec, restrict(cat, history, attrs, spec.partition, late)))
    new = by_keys(old, touched, keys, "left_anti")
    pos = []
    for p in parts:
        p, _ = step.keep(p)  # read for the state and for the output
        new = new.unionByName(p.select(*old.columns))
        pos.append(_output(spec, p, width))
    return Delta(union_frames(pos), _output(spec, mine, width)), new
