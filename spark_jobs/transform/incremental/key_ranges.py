"""Which slices of an input's history can hold the rows of some keys: key ranges from parquet footers.

An operator by key (:mod:`.keyed`) reads, from the inputs' history, the rows of the keys a change touches: the other
side of a join for the changed rows, or a touched partition's or group's rows to recompute it; so do an aggregate
that recomputes a group (:mod:`.aggregate`: a removed minimum) and a running window that recomputes a partition
(:mod:`.running`: a late row). When a key is an input column as it is (through projections and filters; an
integer, date, timestamp or string), every row of a touched key lies within the range of that column in the new
slices (their footers' statistics), and so does every row of the other side it joins with. The slices whose own
range misses it hold none of those rows and are not read: the Kartothek spec's partition pruning by per-partition
statistics, with ODF's slices as the partitions. The slices that are read are filtered by the range too
(:func:`..inputs.bounded`), so Spark's parquet reader skips their row groups outside it. Keys that grow with time
(ids, event times, sequence numbers) thus cost the new slices and the few history slices (or row groups of a big
slice) they reach, not the whole history; keys spread over all of history (a category) read what they read before.

A join whose condition also bounds the difference of two input columns, one per side (an *interval join*:
``b.event_time BETWEEN a.event_time - INTERVAL 10 MINUTES AND a.event_time + INTERVAL 1 HOUR``, or integers, or
dates), bounds the other side's read the same way: a row can only meet the changed rows if its column lies within
their range widened by the interval (:class:`Interval`). The rows of a key spread over all of history (a customer,
a symbol) that a new row can meet are then the recent ones, and a step reads the slices of that time span only.
"""
from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from pyspark.sql import types as T

from spark_jobs.parquet_files import ColumnStats, merged_stats
from spark_jobs.transform.catalyst import Catalyst
from spark_jobs.transform.incremental.frames import Path, spark_type
from spark_jobs.transform.inputs import KeyBound
from spark_jobs.transform.planning import ROW_WISE_PASS_THROUGH

if TYPE_CHECKING:
    from spark_jobs.transform.incremental.step import Step

_INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
_RANGED = (*_INTEGRAL, T.DateType, T.TimestampType, T.TimestampNTZType)


@dataclass(frozen=True)
class KeySource:
    """A key that is the column ``column`` of input ``input``, read at the leaf ``path`` (from the operator's
    child) with nothing but projections and filters between."""

    path: Path
    input: int
    column: str


def _attribute(cat: Catalyst, e: Any) -> Any | None:
    """The attribute an expression is, possibly widened from a smaller integer type (order-preserving)."""
    name = cat.cls(e)
    if name == "AttributeReference":
        return e
    if name == "Cast" and cat.cls(e.child()) == "AttributeReference":
        inner, outer = _width(spark_type(e.child())), _width(spark_type(e))
        if inner is not None and outer is not None and inner <= outer:  # a narrowing cast can wrap around
            return e.child()
    return None


def _ranged(t: T.DataType) -> bool:
    """Types whose equality is the equality of the values parquet statistics order (a collated string is not)."""
    if isinstance(t, T.StringType):
        return t.collation == "UTF8_BINARY"
    return isinstance(t, _RANGED)


def _width(t: T.DataType) -> int | None:
    for i, kind in enumerate(_INTEGRAL):
        if isinstance(t, kind):
            return i
    return None


def trace(cat: Catalyst, child: Any, key: Any) -> KeySource | None:
    """Where a key expression over ``child``'s output comes from, or None (computed, or behind an operator, a
    union or an expand)."""
    attr = _attribute(cat, key)
    if attr is None or not _ranged(spark_type(attr)):
        return None
    wanted = attr.exprId().id()
    node, path = child, ()
    while True:
        idx = cat.input_index(node)
        if idx is not None:
            for a in cat.items(node.output()):
                if a.exprId().id() == wanted:
                    return KeySource(path, idx, a.name())
            return None
        name = cat.cls(node)
        if name == "Project":
            for e in cat.items(node.projectList()):
                if e.exprId().id() != wanted:
                    continue
                inner = _attribute(cat, e.child()) if cat.cls(e) == "Alias" else e
                if inner is None:
                    return None
                wanted = inner.exprId().id()
                break
            else:
                return None
        elif name not in ROW_WISE_PASS_THROUGH and name != "Generate":
            return None  # an operator, a union (rows from several leaves), an expand (values replaced)
        kids = cat.items(node.children())
        if len(kids) != 1 or not any(a.exprId().id() == wanted for a in cat.items(kids[0].output())):
            return None
        node, path = kids[0], path + (0,)


def sources(cat: Catalyst, node: Any, keys: Sequence[Sequence[Any]]) -> tuple[tuple[KeySource | None, ...], ...]:
    """For each child of an operator, where each of its key expressions comes from."""
    kids = cat.items(node.children())
    return tuple(tuple(trace(cat, kids[i], k) for k in child_keys) for i, child_keys in enumerate(keys))


def own(step: "Step", child: Any, keys: Sequence[Any]) -> dict[Path, list[KeyBound]]:
    """For a read of ``child``'s rows of the keys its own change touches (a group or partition to recompute)."""
    found = tuple(trace(step.cat, child, k) for k in keys)
    return bounds(step, found, found)


def new_values(step: "Step", source: KeySource) -> Any:
    """The range of a key's values in its input's new slices (None: no usable statistics, or no new slice)."""
    inp = step.inputs[source.input]
    if inp.request.offset_interval is None or not inp.request.data_paths:
        return None
    return merged_stats(inp.request.data_paths, source.column)


def bounds(step: "Step", changed: Sequence[KeySource | None], read: Sequence[KeySource | None]
           ) -> dict[Path, list[KeyBound]]:
    """For a read of one child's rows by the keys of another child's change (or its own): per leaf of the read
    child, the ranges its rows must be within. ``changed[k]``/``read[k]``: where key ``k`` comes from on the
    changed and the read side (equal keys: the values of one are the values of the other)."""
    found: dict[Path, list[KeyBound]] = {}
    for mine, theirs in zip(changed, read):
        if mine is None or theirs is None:
            continue
        values = new_values(step, mine)
        if values is None:
            continue
        found.setdefault(theirs.path, []).append(KeyBound(theirs.column, values))
    return found


_TIMES = (T.TimestampType, T.TimestampNTZType)
# comparison (Catalyst class) -> whether ``x op y`` bounds ``y - x`` from below (else from above)
_COMPARISONS = {"LessThan": True, "LessThanOrEqual": True, "GreaterThan": False, "GreaterThanOrEqual": False}


@dataclass(frozen=True)
class Interval:
    """A conjunct of a join's condition that bounds ``right - left`` within ``[low, high]``, two input columns (one
    per side) of one kind (integers; timestamps, in microseconds; dates, in days). A row of one side can only
    meet a row of the other within it; NULLs meet nothing."""

    left: KeySource
    right: KeySource
    low: int
    high: int
    types: tuple[T.DataType, T.DataType]  # of the left and the right column


def _offset(cat: Catalyst, e: Any) -> tuple[Any, int] | None:
    """An expression as an attribute plus a constant in the attribute's unit (``t + INTERVAL 1 HOUR``, ``n - 5``,
    ``date_add(d, 3)``), or None. Integer arithmetic only where it fails on overflow (ANSI), so it never wraps."""
    attr = _attribute(cat, e)
    if attr is not None:
        return attr, 0
    name = cat.cls(e)
    kids = cat.items(e.children())
    if name not in ("TimestampAddInterval", "Add", "Subtract", "DateAdd", "DateSub") or len(kids) != 2 \
            or cat.cls(kids[1]) != "Literal" or kids[1].value() is None:
        return None
    base = _attribute(cat, kids[0])
    if base is None:
        return None
    t, lit = spark_type(base), spark_type(kids[1])
    value = int(kids[1].value())
    if name == "TimestampAddInterval":
        ok = isinstance(t, _TIMES) and isinstance(lit, T.DayTimeIntervalType)
    elif name in ("DateAdd", "DateSub"):
        ok = isinstance(t, T.DateType) and isinstance(lit, _INTEGRAL)
    else:
        ok = isinstance(t, _INTEGRAL) and isinstance(lit, _INTEGRAL) and str(e.evalMode()) == "ANSI"
    if not ok:
        return None
    return base, -value if name in ("Subtract", "DateSub") else value


def _kind(t: T.DataType) -> str | None:
    """Which columns' values can be compared after an offset: integers with integers, times with times of the same
    type, dates with dates."""
    if isinstance(t, _INTEGRAL):
        return "integer"
    if isinstance(t, (*_TIMES, T.DateType)):
        return t.typeName()
    return None


def intervals(cat: Catalyst, node: Any, condition: Any | None) -> tuple[Interval, ...]:
    """The intervals a join's non-equality condition (its conjuncts ``x op y``) puts between input columns of its
    two children; a pair of columns bounded on one side only gives none."""
    if condition is None:
        return ()
    left, right = cat.items(node.children())
    sides = [{a.exprId().id() for a in cat.items(child.output())} for child in (left, right)]
    found: dict[tuple[int, int], tuple[Any, Any, int | None, int | None]] = {}
    pending = [condition]
    while pending:
        e = pending.pop()
        name = cat.cls(e)
        if name == "And":
            pending += cat.items(e.children())
            continue
        if name not in _COMPARISONS:
            continue
        x, y = (_offset(cat, k) for k in cat.items(e.children()))
        if x is None or y is None or _kind(spark_type(x[0])) is None \
                or _kind(spark_type(x[0])) != _kind(spark_type(y[0])):
            continue
        # x + cx op y + cy: y - x >= cx - cy (op is < or <=), or y - x <= cx - cy (> or >=)
        below, bound = _COMPARISONS[name], x[1] - y[1]
        xid, yid = x[0].exprId().id(), y[0].exprId().id()
        if xid in sides[0] and yid in sides[1]:
            pair, attrs = (xid, yid), (x[0], y[0])
        elif xid in sides[1] and yid in sides[0]:  # right - left = x - y: the bound turns around
            pair, attrs, below, bound = (yid, xid), (y[0], x[0]), not below, -bound
        else:
            continue
        _, _, low, high = found.get(pair, (None, None, None, None))
        if below:
            low = bound if low is None else max(low, bound)
        else:
            high = bound if high is None else min(high, bound)
        found[pair] = (*attrs, low, high)
    out = []
    for a, b, low, high in found.values():
        if low is None or high is None:
            continue
        mine, theirs = trace(cat, left, a), trace(cat, right, b)
        if mine is not None and theirs is not None:
            out.append(Interval(mine, theirs, low, high, (spark_type(a), spark_type(b))))
    return tuple(out)


def _shift(v: Any, by: int, t: T.DataType) -> Any:
    """A footer value moved by an interval's bound, kept within the values of the column's type (a literal beyond
    them would fail the read). Dates beyond Python's raise OverflowError."""
    if isinstance(v, datetime.date):
        return v + datetime.timedelta(days=by)
    width = _width(t)
    top = 2 ** (8 * 2 ** width - 1) if width is not None else 2 ** 63  # timestamps: microseconds in a long
    return min(max(v + by, -top), top - 1)


def interval_bounds(step: "Step", found: Sequence[Interval], changed: int, read: int) -> dict[Path, list[KeyBound]]:
    """For a read of a join child's rows by a child's change: per leaf of the read child, the range its interval
    columns must lie in. Another child's rows can meet a changed row only within the changed rows' range (in the
    new slices) widened by the interval. The changed child's own rows, read to recompute the keys it touches
    (:mod:`.keyed`: a side an outer join preserves), matter only where they can meet those rows of the other child:
    within its own range widened by the interval's width both ways, and its changed NULLs; the rows outside give
    the same output before and after the change."""
    out: dict[Path, list[KeyBound]] = {}
    if not {changed, read} <= {0, 1}:
        return out
    for iv in found:
        sides = (iv.left, iv.right)
        values = new_values(step, sides[changed])
        if values is None:
            continue
        width = max(iv.high - iv.low, 0)  # a contradictory interval meets nothing, but the changed rows are read
        # right in [left + low, left + high]; left in [right - high, right - low]
        low, high = ((-width, width) if changed == read else (iv.low, iv.high) if changed == 0
                     else (-iv.high, -iv.low))
        nulls = values.nulls and changed == read
        if values.low is None:  # only NULLs changed: they meet no row
            reach = ColumnStats(None, None, nulls)
        else:
            t = iv.types[read]
            try:
                reach = ColumnStats(_shift(values.low, low, t), _shift(values.high, high, t), nulls)
            except OverflowError:  # beyond the dates Python knows: no bound
                continue
        out.setdefault(sides[read].path, []).append(KeyBound(sides[read].column, reach))
    return out
