"""Operators whose output rows for a key depend only on their input rows of that key: window functions (the
PARTITION BY key), equi-joins (the join key) and aggregations whose functions keep no state in :mod:`.aggregate`
but do not depend on the order of the rows either (bit_or, approx_count_distinct, percentiles of exact types...: the
GROUP BY key; :func:`.order_free.order_dependent`).

They keep no state of their own. A step changes one child at a time (the others held at their old or new rows, so
the parts add up to the whole change) and for each changed child either
- evaluates the operator over the changed rows only, when the operator is *linear* in that child (each of its rows
  contributes output rows independently of the child's other rows: both sides of an inner join, the preserved side
  of an outer join, the left side of a semi/anti join), or
- *recomputes the touched keys*: the child's rows of the keys its change touches, before and after, read from the
  inputs' history (once when the change only adds rows: then the rows after are the rows before plus the added
  ones); the output change is the difference of the operator over the two.
So a join of a growing input with a lookup table costs the new rows plus the lookup table, and a window or an
aggregate costs the history of the keys the new rows touch, not the whole history. Where a key is an input column,
that history is read only from the slices whose range of it meets the new slices' (:mod:`.key_ranges`): a join of
two inputs that grow with an id reads each side's newest slices, not their history. A window's rows tied in its ORDER
BY are ordered by their other columns wherever it is evaluated (:mod:`.ties`), so a recomputed partition has the
values it was output with.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from pyspark.sql import DataFrame
from pyspark.sql import types as T

from spark_jobs.transform.catalyst import Catalyst
from spark_jobs.transform.incremental import ties
from spark_jobs.transform.incremental.delta import Delta
from spark_jobs.transform.incremental.frames import empty, evaluate, expand
from spark_jobs.transform.incremental.key_ranges import Interval, KeySource, bounds, interval_bounds, intervals, sources
from spark_jobs.transform.incremental.order_free import refuse_order_dependent
from spark_jobs.transform.incremental.plan import Op, Unsupported
from spark_jobs.transform.incremental.step import (
    KEPT_ROWS,
    Step,
    restrict,
    segment_change,
    touched_keys,
    union_frames,
)

KIND = "keyed"

# join type (Catalyst object class) -> (linear in the left child, linear in the right child)
_JOIN_LINEARITY = {
    "Inner$": (True, True), "Cross$": (True, True),
    "LeftOuter$": (True, False), "RightOuter$": (False, True), "FullOuter$": (False, False),
    "LeftSemi$": (True, False), "LeftAnti$": (True, False), "ExistenceJoin": (True, False),
}


@dataclass(frozen=True)
class KeyedSpec:
    """``keys[i]``: the key expressions over child ``i``'s output (one list per child, of equal length);
    ``linear[i]``: whether the operator is linear in child ``i``; ``sources[i]``: which of child ``i``'s keys are
    input columns (:mod:`.key_ranges`: their ranges in the new slices bound the history slices to read);
    ``intervals``: a join's conditions that bound one side's column within an interval of the other's."""

    operator: str
    keys: tuple[tuple[Any, ...], ...]
    linear: tuple[bool, ...]
    detail: str
    sources: tuple[tuple[KeySource | None, ...], ...] = ()
    intervals: tuple[Interval, ...] = ()


def _unalias(cat: Catalyst, e: Any) -> Any:
    return e.child() if cat.cls(e) == "Alias" else e


def analyze_window(cat: Catalyst, node: Any, why: Unsupported | None = None) -> KeyedSpec:
    """``why``: why the window keeps no running state (:mod:`.running`), said in the detail."""
    name = cat.cls(node)
    keys = tuple(cat.items(node.partitionSpec()))
    if not keys:
        raise Unsupported(name, "a window without PARTITION BY: any new row can change every output row")
    broken = ""
    if name == "Window":
        if cat.items(node.orderSpec()):  # frames fold a partition's rows in its order: ties broken (.ties) or refused
            ties.refuse_ties(cat, node)
            broken = f" {ties.BROKEN}" if ties.broken(cat, node) else ""
        else:
            refuse_order_dependent(cat, name, cat.items(node.windowExpressions()), "a partition")
    what = "window functions" if name == "Window" else "a per-partition row limit"
    src = sources(cat, node, (keys,))
    return KeyedSpec(name, (keys,), (False,),
                     f"{what} over {len(keys)} partition key(s): the partitions the new rows touch are recomputed "
                     "from their history" + (f" (no running state: {why.reason})" if why is not None else "")
                     + _ranged(src) + broken, src)


def analyze_aggregate(cat: Catalyst, node: Any, why: Unsupported) -> KeyedSpec:
    keys = tuple(_unalias(cat, g) for g in cat.items(node.groupingExpressions()))
    if not keys:
        raise why  # a global aggregate: every change touches the one group, the full path is as good
    refuse_order_dependent(cat, "Aggregate", cat.items(node.aggregateExpressions()), "a group")
    src = sources(cat, node, (keys,))
    return KeyedSpec("Aggregate", (keys,), (False,),
                     f"{why.reason.rstrip('.')}: the groups ({len(keys)} key(s)) the new rows touch are recomputed "
                     "from their history" + _ranged(src), src)


def analyze_join(cat: Catalyst, node: Any) -> KeyedSpec:
    pattern = cat.scala_object("org.apache.spark.sql.catalyst.planning.ExtractEquiJoinKeys")
    found = pattern.unapply(node)
    jtype = cat.cls(node.joinType())
    linear = _JOIN_LINEARITY.get(jtype)
    if linear is None:
        raise Unsupported("Join", f"no incremental form for a {jtype.rstrip('$')} join")
    if found.isDefined():
        t = found.get()
        keys = (tuple(cat.items(t._2())), tuple(cat.items(t._3())))
    else:
        keys = ((), ())
    if not keys[0] and not all(linear):
        raise Unsupported("Join", f"a {jtype.rstrip('$')} join without equality keys: a new row on one side can "
                                  "change every output row")
    kind = jtype.rstrip("$")
    sides = {(True, True): "new rows of either side are joined with the other side's rows",
             (True, False): "new left rows are joined with the right side; right-side changes recompute the keys "
                            "they touch",
             (False, True): "new right rows are joined with the left side; left-side changes recompute the keys "
                            "they touch",
             (False, False): "changes on either side recompute the keys they touch"}[linear]
    src = sources(cat, node, keys)
    cond = node.condition()
    within = intervals(cat, node, cond.get() if cond.isDefined() else None)
    return KeyedSpec("Join", keys, linear, f"{kind} join on {len(keys[0])} key(s): {sides}" + _ranged(src, within),
                     src, within)


def _ranged(found: tuple[tuple[KeySource | None, ...], ...], within: Sequence[Interval] = ()) -> str:
    """The explain text's note on the keys whose ranges bound the history read (:mod:`.key_ranges`)."""
    if len(found) == 2:  # a join: a key bounds the other side when it is an input column on both sides
        named = [f"{a.column}/{b.column}" for a, b in zip(*found) if a is not None and b is not None]
    else:
        named = [s.column for s in found[0] if s is not None]
    named += [f"{iv.left.column}/{iv.right.column} (widened by the join's interval, {_span(iv.low, iv.types[0])} to "
              f"{_span(iv.high, iv.types[0])})" for iv in within]
    if not named:
        return ""
    return f"; history slices read by the range of {', '.join(named)} in the new slices"


_UNITS = (("d", 86_400_000_000), ("h", 3_600_000_000), ("min", 60_000_000), ("s", 1_000_000), ("ms", 1000))


def _span(v: int, t: T.DataType) -> str:
    """An interval's bound in words: ``-10 min``, ``1 h``, ``3 day(s)``, ``5``."""
    if v == 0:
        return "0"
    if isinstance(t, T.DateType):
        return f"{v} day(s)"
    if isinstance(t, (T.TimestampType, T.TimestampNTZType)):
        return next((f"{v // n} {unit}" for unit, n in _UNITS if v % n == 0), f"{v} µs")
    return str(v)


def step(step: Step, op: Op, changes: dict) -> Delta:
    """The change of the operator's output (uncancelled; the caller nets it where needed)."""
    spec: KeyedSpec = op.spec
    cat = step.cat
    deltas = [segment_change(step, seg, changes) for seg in op.children]
    attrs = [cat.items(seg.node.output()) for seg in op.children]
    pos: list[DataFrame] = []
    neg: list[DataFrame] = []
    for i, d in enumerate(deltas):
        if d.empty:
            continue

        def rows(j: int, old: bool, i: int = i) -> DataFrame:  # child j's rows that can meet child i's changed keys
            return step.replay(op.children[j].node, old=old, bounds=_bounds(step, spec, i, j))

        # children before i are at their new rows, after i at their old rows
        def other(j: int, i: int = i) -> DataFrame:
            return rows(j, old=j > i and not deltas[j].empty)

        if spec.linear[i]:
            others = {(j,): other(j) for j in range(len(deltas)) if j != i}
            pos.append(evaluate(cat, op.node, {**others, (i,): d.pos}))
            neg.append(evaluate(cat, op.node, {**others, (i,): d.neg}))
            continue
        wanted, seen = step.keep(touched_keys(cat, d, attrs[i], spec.keys[i]))
        wanted = step.broadcast(wanted, seen[KEPT_ROWS])
        others = {(j,): restrict(cat, other(j), attrs[j], spec.keys[j], wanted)
                  for j in range(len(deltas)) if j != i}
        before = restrict(cat, rows(i, old=True), attrs[i], spec.keys[i], wanted)
        if d.gains_only:  # the touched keys' new rows are their old rows plus the gained ones: one history read
            before = step.leaf(before)
            after = before.unionByName(expand(d.pos))
        else:
            after = restrict(cat, rows(i, old=False), attrs[i], spec.keys[i], wanted)
        pos.append(evaluate(cat, op.node, {**others, (i,): after}))
        neg.append(evaluate(cat, op.node, {**others, (i,): before}))
    if not pos:
        nothing = empty(step.session, cat.items(op.node.output()))
        return Delta(nothing, nothing, empty=True)
    return Delta(union_frames(pos), union_frames(neg))


def _bounds(step: Step, spec: KeyedSpec, changed: int, read: int) -> dict:
    """Per leaf of child ``read``, the key ranges of child ``changed``'s new rows its rows are needed within."""
    found = bounds(step, spec.sources[changed], spec.sources[read]) if spec.sources else {}
    for path, more in interval_bounds(step, spec.intervals, changed, read).items():
        found.setdefault(path, []).extend(more)
    return found
