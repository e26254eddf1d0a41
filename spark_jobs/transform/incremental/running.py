"""Window functions over a growing prefix (``ROWS``/``RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW``: running
sums, counts, extremes, row numbers, ranks), updated from a *running state* per partition.

A partition's state is what its rows so far add up to: the last ORDER BY value, the row count, the number of distinct
ORDER BY values and, per function, the sum / count / extreme of its argument. A new row ordered after its
partition's last value (the usual case: the event time grows) sees every earlier row of the partition, so its value is
the function over the partition's new rows (the query's own window, evaluated over those rows only) combined with the
state; earlier rows stay as they were. A partition that gets a row at or before its last value, or loses a row
(-R/-C), is recomputed from its history like any window by key (:mod:`.keyed`), and its state is recomputed from the
rows it has after the step. So appending costs the new rows and the states of the partitions they touch.

Only functions whose value over a prefix is an exact fold of that state qualify: ``sum`` of integers or decimals,
``count``, ``min``/``max`` of non-floating types, ``row_number``, ``rank``, ``dense_rank``, ``first``/``last``
(also IGNORE NULLS: the partition's first value, and the forward fill ``last(x) IGNORE NULLS``; the state keeps the
first / last value by the ORDER BY, picked among tied rows by their other columns: :mod:`.ties`), ``lag(x) IGNORE
NULLS`` (the previous non-NULL value: Spark's own over the rows run over, else the state's last non-NULL value; other
lags IGNORE NULLS hold a tail, below), with ORDER BY columns all ascending with NULLs first (Spark's default);
anything else keeps the recomputation by key.

``lag(x, k)`` looks back a fixed number of rows, so its state is also the partition's *tail*: its last ``k`` rows
(the largest offset of the node's lags), kept in a table of their own (a row each, numbered from the last). The
node runs over the tail and the new rows, and only the new rows' output is kept: the tail gives their first ``k``
rows what precedes them. Beside a lag, the running functions read their fold over the tail and the new rows, from
which the tail's own fold is taken off again and the state's put on (a sum, a count); ``min``/``max`` need no
inverse: the tail's rows are among the state's, so the state's extreme taken with theirs again is the same, and
``first``/``last`` take the state's first value, or the new rows' last. ``lead(x, k)`` looks forward: a new row
changes the output of its partition's last ``k`` rows. The tail then also holds those rows (the lags' and leads'
largest offsets added up), each with every function's value as it was output (:attr:`RunningSpec.stored`) and
whether new rows can change it; the node runs over the tail and the new rows, the tail's rows that new rows can
change are retracted with their stored values and added with their new ones (those whose output did not change
cancel out), and a function that reads no row after the row keeps its stored value, since a running value never
changes once later rows come.

An IGNORE NULLS function that skips any number of NULLs (``lag(x, k) IGNORE NULLS`` beyond one row or with a default,
``lead(x, k) IGNORE NULLS``, the backward fill ``first(x) IGNORE NULLS`` over the rows from the current one, or ``m
FOLLOWING``, to ``UNBOUNDED FOLLOWING``) reads back or forward to the k-th non-NULL value: the tail holds the
partition's rows followed by fewer than k non-NULL values of its argument (:attr:`RunningFunction.known`, counted by
:func:`known_after`): the rows a new row's lag reads, and those whose lead or fill new rows can still change. How many
that is depends on the data (a partition of NULLs keeps all its rows); like every criterion of the tail, it keeps a
run of the partition's last rows.

Any aggregate over a frame of rows around the row (``ROWS BETWEEN 6 PRECEDING AND CURRENT ROW``: a moving average;
up to 100 rows before and after) reads a fixed number of rows like a lag (before) and a lead (after), so it takes
the tail the same way; its value is Spark's own over the same rows in the same order, so it need not be invertible
(a DOUBLE sum, an average, ``min``/``max``, ``collect_list``).

A frame of *values* (``RANGE BETWEEN INTERVAL 7 DAYS PRECEDING AND CURRENT ROW``: a rolling 7-day sum; offsets that
are numbers or intervals, months included) reads the rows whose ORDER BY value lies within its offsets of the row's.
A new row comes after its partition's last value, so it reads no row older than the last value minus the lower
offset, and it changes the output of no row older than the last value minus the upper offset (a frame reaching
FOLLOWING rows). Adding months is monotonic (for a TIMESTAMP, in a time zone without daylight saving), so these
bounds hold for months too.

Rows whose output new rows change (a lead's, a frame's reaching FOLLOWING rows, a lead's or a backward fill's
IGNORE NULLS) are output again, and retracted as they were output, with every function of the window: the tail
holds them and every row any function reads at them or at a new row (:func:`tail_kept`): the rows before the first
of them that a lag or a frame of rows reads and the rows down to its ORDER BY value plus a frame's lower offset (a
lag IGNORE NULLS keeps its values as output instead, see above). As many rows as the data has there: the state of
the open frames.

A running window over such a window reads its rows output again as a removal and a new row; it keeps the values it
gave the rows the window below can still output again, so that those are not removals (:mod:`.reissued`).

The two Window nodes :mod:`.ties` splits a window into (its functions over the ties, and those with tie-breakers)
keep one state, that of the tie-broken order (:func:`analyze_pair`): a step runs both nodes over the new rows.

Where a window's ORDER BY has tie-breakers (:mod:`.ties`: every other column of the row), the state keeps the last
row's values of the query's own ORDER BY only (:attr:`RunningSpec.peers`): a new row tied with them is late, as a
row before them is, and recomputes its partition. Keeping the tie-breakers would tell whether such a row comes after
the last one, at the cost of a copy of the partition's last row in every state row (twice the state's size and its
write for a running sum, bench_keyed), for the rare row that ties the last event time of its partition.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spark_jobs.transform.catalyst import Catalyst
from spark_jobs.transform.incremental import ties
from spark_jobs.transform.incremental.frames import spark_type
from spark_jobs.transform.incremental.plan import Unsupported
from spark_jobs.transform.incremental.state import WindowColumns
from spark_jobs.transform.incremental.ties import bound_sign

if TYPE_CHECKING:  # the step lives in the package, which imports this module
    pass

KIND = "running"
ROWS, DISTINCT, POSITION = "__odf_rows", "__odf_orders", "__odf_i"
CHANGED = "__odf_changed"  # a tail row whose output new rows can change (:meth:`RunningSpec.changed`)
MAX_OFFSET = 100  # the largest lag/lead offset kept as a tail (the state holds up to twice that many rows a partition)
_INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
_AGGREGATES = {"Sum": "sum", "Count": "count", "Min": "min", "Max": "max"}
_RANKS = {"RowNumber": "row_number", "Rank": "rank", "DenseRank": "dense_rank"}
_OFFSETS = {"Lag": "lag", "Lead": "lead"}
_OFFSET_TYPES = {"ByteType$", "ShortType$", "IntegerType$", "LongType$", "FloatType$", "DoubleType$", "DecimalType",
                 "DayTimeIntervalType", "YearMonthIntervalType"}  # a frame of values' offsets whose sign tells the side


@dataclass(frozen=True)
class RunningFunction:
    kind: str  # "sum" | "count" | "min" | "max" | "first" | "last" | "row_number" | "rank" | "dense_rank" | "lag" |
    # "lead" | "frame"
    arg: Any | None  # JVM expression over the window's child output (the running aggregate functions)
    result_type: T.DataType
    sql: str
    behind: int = 0  # how many rows before the row its value reads (a lag; a frame of rows)
    ahead: int = 0  # how many rows after it (a lead; a frame of rows)
    lower: str | None = None  # a frame of values reaching PRECEDING rows: SQL of the offset added to a row's ORDER BY
    # value to reach the oldest row its frame reads (``(INTERVAL '-7' DAY)``, ``(-3)``)
    upper: str | None = None  # ... reaching FOLLOWING rows: SQL of the offset (positive) to the newest; new rows
    # change the output of the rows within it of them
    ignore_nulls: bool = False  # first/last IGNORE NULLS
    skips: Any | None = None  # an IGNORE NULLS function the tail holds rows for: the argument whose non-NULL values
    # it counts (lag/lead(x, k) IGNORE NULLS, first(x) IGNORE NULLS to UNBOUNDED FOLLOWING)
    known: int = 0  # the tail holds each row followed by fewer than this many non-NULL ``skips`` values ...
    after: int = 1  # ... counted from this many rows after it on (at least 1)
    key: Any | None = None  # first/last: the ordering they pick by among rows tied in the ORDER BY (.ties.picked)

    @property
    def forward(self) -> bool:
        """Whether the value at a row reads rows after it: new rows change older rows' output."""
        return self.ahead > 0 or self.upper is not None or (self.known > 0 and self.kind != "lag")


@dataclass(frozen=True)
class RunningSpec(WindowColumns):
    operator: str
    partition: tuple[Any, ...]  # PARTITION BY expressions over the child output
    order: tuple[Any, ...]  # ORDER BY expressions (all ascending, NULLs first)
    functions: tuple[RunningFunction, ...]  # one per window expression, in the node's output order
    child: Any
    detail: str
    reads: tuple[int, ...] | None = None  # over a window that outputs rows again: the child's columns (by position)
    # this window reads; it keeps its values at the rows the window below can output again (:mod:`.reissued`)
    peers: int = 0  # a window with tie-breakers (:mod:`.ties`; also the pair :func:`analyze_pair` keeps): how many
    # of the ORDER BY columns rows tied in the query's own ORDER BY share (the others are the tie-breakers, which the
    # state does not keep); 0: all of them
    below: tuple[int, ...] = (0,)  # the path from the operator's node to its child (two Window nodes for a pair)

    @property
    def peer_count(self) -> int:
        """The ORDER BY columns whose values tell where a new row goes: a row at or before its partition's last
        such value is late."""
        return self.peers or len(self.order)

    @property
    def counts(self) -> list[str]:
        """The partition's row count, and its number of distinct ORDER BY values when a dense_rank needs it."""
        return [ROWS, DISTINCT] if any(f.kind == "dense_rank" for f in self.functions) else [ROWS]

    @property
    def behind(self) -> int:
        """The most rows a function reads before a row (a lag, a frame of rows)."""
        return max((f.behind for f in self.functions), default=0)

    @property
    def ahead(self) -> int:
        """The most rows a function reads after a row (a lead, a frame of rows): new rows change that many."""
        return max((f.ahead for f in self.functions), default=0)

    @property
    def lowers(self) -> list[str]:
        return list(dict.fromkeys(f.lower for f in self.functions if f.lower is not None))

    @property
    def uppers(self) -> list[str]:
        return list(dict.fromkeys(f.upper for f in self.functions if f.upper is not None))

    @property
    def values(self) -> bool:
        """Whether a frame of ORDER BY values reads rows by their value (one ORDER BY column, Spark's rule)."""
        return bool(self.lowers or self.uppers)

    @property
    def counted(self) -> dict[int, RunningFunction]:
        """The functions (by position) whose tail reaches back to a number of non-NULL values of their argument."""
        return {j: f for j, f in enumerate(self.functions) if f.known}

    @property
    def lagging(self) -> dict[int, RunningFunction]:
        """The functions of :attr:`counted` that read back (lags): the others read forward."""
        return {j: f for j, f in self.counted.items() if not f.forward}

    @property
    def has_tail(self) -> bool:
        """Whether the state keeps some of each partition's last rows (a table of its own)."""
        return bool(self.behind or self.ahead or self.values or self.counted)

    @property
    def looks_ahead(self) -> bool:
        """A lead (or a frame reaching FOLLOWING rows, an IGNORE NULLS lead): new rows change the output of rows
        before them, which are output again."""
        return any(f.forward for f in self.functions)

    @property
    def layout(self) -> str:
        """A name for the tail's layout where it differs from the first one: "tail-reads" where rows output again
        read rows that its tail did not hold before (a lag or a frame of rows beside a frame of values reaching
        FOLLOWING rows or an IGNORE NULLS lead; a frame's lower offset beside another function whose rows output
        again): an older tail may lack them; "outputs" where rows are output again (:attr:`stored`): an older tail
        kept the values of some functions only; "reissued" where it keeps the values of rows the window below outputs
        again (:mod:`.reissued`): an older state has no such table; "peers" where the state keeps the last row's values
        of the query's own ORDER BY only, not its tie-breakers (:attr:`peers`): an older state kept them all, and the
        two windows of a split one (:func:`analyze_pair`) were two operators'."""
        beyond = self.uppers or len(self.lagging) < len(self.counted)  # rows output again beyond the last ``ahead``
        lowered = any(f.lower is not None and any(g.forward for g in self.functions if g is not f)
                      for f in self.functions)
        names = ["tail-reads"] if (self.behind and beyond) or lowered else []
        return "+".join(names + (["outputs"] if self.looks_ahead else []) + (["reissued"] if self.reads else [])
                        + (["peers"] if self.peers else []))

    @property
    def stored(self) -> list[int]:
        """Beside a lead (or a frame reaching FOLLOWING rows) the tail's own rows are output again, so the tail
        table keeps every function's value at each of its rows as the row was output (``v<j>``): a row is retracted
        exactly as it was output, with no window run over the tails alone (and whatever order Spark gave rows tied on
        the ORDER BY then), and a function that reads no row after it keeps its value when the row is output again
        (a running value never changes once later rows come; the state cannot give a sum's, a rank's, an extreme's
        or an IGNORE NULLS value at a row before the partition's last: it folds the rows after it too)."""
        return list(range(len(self.functions))) if self.looks_ahead else []

    @property
    def stored_columns(self) -> list[str]:
        return [f"v{j}" for j in self.stored]

    @property
    def tail_columns(self) -> list[str]:
        """What the tail table keeps beside each row's columns: :attr:`stored_columns` and, where rows are output
        again, whether new rows can change the row's output (``__odf_changed``: the other rows are in the tail
        because rows output again read them, and a window over the tail does not hold every row their own value
        reads, so only their stored values are right)."""
        return [*self.stored_columns, CHANGED] if self.looks_ahead else []

    def changed(self, position: Column, order: Column | None, last: Column | None, known: dict[int, Column]
                ) -> Column:
        """Whether new rows (after the partition's last ORDER BY value ``last``) can change a row's output: one of
        its last :attr:`ahead` rows (``position`` 1 for the last), within a frame's upper offset of ``last``, or
        with fewer non-NULL values after it than a lead or backward fill needs (``known``, :func:`known_after`)."""
        change = position <= F.lit(self.ahead)
        for u in self.uppers:  # NULL order or last value: a frame of values reaches the rows of NULL value only
            change = change | F.coalesce(order >= last + F.expr(f"-{u}"), F.lit(False))
        for j, f in self.counted.items():
            if f.forward:
                change = change | (known[j] < F.lit(f.known))
        return change

    def read(self, position: Column, order: Column | None, known: dict[int, Column], first: Column,
             oldest: Column | None, nulls: Column | None) -> Column:
        """Whether a row is read by a new row or by a row whose output new rows change (the first of which, from the
        partition's last, is at ``first``, 0 if none, with the smallest ORDER BY value ``oldest``, the partition's
        last one if none, and ``nulls`` whether one has a NULL ORDER BY value): within :attr:`behind` rows of them
        or a frame's lower offset of their ORDER BY values, or back to a new row's lag's k-th non-NULL value. (A
        lag IGNORE NULLS is one of :attr:`stored` beside them: a row output again keeps its value.)"""
        keep = position <= first + F.lit(self.behind)
        for lo in self.lowers:  # a NULL ORDER BY value's frame is the partition's rows of NULL value
            keep = keep | F.coalesce(order >= oldest + F.expr(lo), order.isNull() & nulls, F.lit(False))
        for j, f in self.lagging.items():
            keep = keep | (known[j] < F.lit(f.known))
        return keep


def _values_frame(cat: Catalyst, lower: Any, upper: Any, order: Any, sql: str) -> tuple[str | None, str | None]:
    """A RANGE frame with value offsets (``x PRECEDING``, ``CURRENT ROW``, ``y FOLLOWING``) as the SQL of its offset
    to the oldest row it reads (PRECEDING, else None) and to the newest (FOLLOWING, else None). A row v reads
    [v + lower, v + upper]: a new row w >= last reads down to w + lower >= last + lower, and it changes the rows v
    with v + upper >= w, so v >= last - upper. Months too: adding them to a date (or a time in a zone without
    daylight saving) is monotonic, and v + m months >= last implies v >= last - m months (the day is clamped to the
    month's end)."""
    offsets: list[str | None] = [None, None]
    for i, (bound, is_lower) in enumerate(((lower, True), (upper, False))):
        name = cat.cls(bound)
        if name == "CurrentRow$":
            continue
        if name in ("UnboundedPreceding$", "UnboundedFollowing$") or not bound.foldable():
            raise Unsupported("Window", f"{sql}: a RANGE frame to UNBOUNDED can reach any number of rows (only "
                                        "UNBOUNDED PRECEDING to CURRENT ROW keeps a running state)")
        kind = cat.cls(bound.dataType())
        sign = bound_sign(bound.eval(None)) if kind in _OFFSET_TYPES else None
        if sign is None:
            raise Unsupported("Window", f"{sql}: a RANGE offset of {bound.sql()} is neither a number nor an interval")
        if kind == "YearMonthIntervalType" and cat.cls(order.dataType()) == "TimestampType$" \
                and not _fixed_offset(cat):
            raise Unsupported("Window", f"{sql}: months added to a TIMESTAMP in the session's time zone "
                                        f"{cat.session.conf.get('spark.sql.session.timeZone')} are not monotonic "
                                        "(daylight saving); UTC, a fixed offset or TIMESTAMP_NTZ keeps a tail")
        if (sign < 0) if is_lower else (sign > 0):
            offsets[i] = f"({bound.sql()})"
    return offsets[0], offsets[1]


def _fixed_offset(cat: Catalyst) -> bool:
    """Whether the session's time zone has one offset from UTC all year (no daylight saving)."""
    zone = cat.session.conf.get("spark.sql.session.timeZone")
    try:
        return bool(cat.jvm.java.time.ZoneId.of(zone, cat.jvm.java.time.ZoneId.SHORT_IDS).getRules().isFixedOffset())
    except Exception:  # noqa: BLE001 - a zone the JVM does not know: assume the worst
        return False


def _frame(cat: Catalyst, frame: Any, orders: Any, sql: str, result: T.DataType) -> RunningFunction | None:
    """A frame around the current row (of rows, or of ORDER BY values) as what the tail must hold for it; None for
    the running frame (UNBOUNDED PRECEDING to CURRENT ROW); :class:`Unsupported` for frames no tail holds."""
    if cat.cls(frame) != "SpecifiedWindowFrame":
        raise Unsupported("Window", f"{sql}: only frames from UNBOUNDED PRECEDING to CURRENT ROW keep a running state")
    lower, upper = frame.lower(), frame.upper()
    if cat.cls(lower) == "UnboundedPreceding$" and cat.cls(upper) == "CurrentRow$":
        return None
    if cat.cls(frame.frameType()) != "RowFrame$":
        back, ahead = _values_frame(cat, lower, upper, cat.items(orders)[0].child(), sql)
        return RunningFunction("frame", None, result, sql, lower=back, upper=ahead)
    bounds = []
    for b in (lower, upper):
        name = cat.cls(b)
        if name == "CurrentRow$":
            bounds.append(0)
            continue
        v = b.eval(None) if name not in ("UnboundedPreceding$", "UnboundedFollowing$") and b.foldable() else None
        if not isinstance(v, int) or abs(v) > MAX_OFFSET:
            raise Unsupported("Window", f"{sql}: only ROWS frames within {MAX_OFFSET} rows of the current row keep a "
                                        "partition's last rows")
        bounds.append(v)
    return RunningFunction("frame", None, result, sql, behind=max(0, -bounds[0]), ahead=max(0, bounds[1]))


def _fill_backward(cat: Catalyst, fn: Any, frame: Any, sql: str, result: T.DataType) -> RunningFunction | None:
    """``first(x)`` over the rows from the current one (or ``m FOLLOWING``) to ``UNBOUNDED FOLLOWING``: the value of
    the row ``m`` rows on, and with IGNORE NULLS the first non-NULL value from there (the backward fill). New rows
    change only the rows with no (non-NULL) value from there, the last ones: the tail holds them. None for other
    functions and frames."""
    agg = fn.aggregateFunction()
    if cat.cls(agg) != "First" or fn.isDistinct() or fn.filter().isDefined() \
            or cat.cls(frame) != "SpecifiedWindowFrame" or cat.cls(frame.frameType()) != "RowFrame$" \
            or cat.cls(frame.upper()) != "UnboundedFollowing$":
        return None
    lower = frame.lower()
    if cat.cls(lower) == "CurrentRow$":
        m = 0
    else:
        m = lower.eval(None) if cat.cls(lower) not in ("UnboundedPreceding$", "UnboundedFollowing$") \
            and lower.foldable() else None
        if not isinstance(m, int) or not 0 <= m <= MAX_OFFSET:
            raise Unsupported("Window", f"{sql}: first() to UNBOUNDED FOLLOWING keeps a tail only from the current "
                                        f"row or up to {MAX_OFFSET} rows FOLLOWING")
    if agg.ignoreNulls():  # counted from the next row on, the tail also keeps the last non-NULL value's row: a new
        # rows' tail left out of it has a non-NULL value after it, in the tail, as :func:`_extended_tail` needs
        return RunningFunction("frame", None, result, sql, ignore_nulls=True, skips=agg.child(), known=1,
                               after=max(m, 1))
    return RunningFunction("frame", None, result, sql, ahead=m)


def _function(cat: Catalyst, alias: Any) -> RunningFunction:
    we = alias.child() if cat.cls(alias) == "Alias" else alias
    sql = str(we.sql())
    if cat.cls(we) != "WindowExpression":
        raise Unsupported("Window", f"{sql}: not a window expression")
    fn = we.windowFunction()
    frame = we.windowSpec().frameSpecification()
    result = spark_type(we)
    name = cat.cls(fn)
    if name in _RANKS:
        return RunningFunction(_RANKS[name], None, result, sql)
    if name in _OFFSETS:
        kind = _OFFSETS[name]
        offset = fn.inputOffset() if kind == "lag" else fn.offset()  # a Lag's offset() is its negation
        k = offset.eval(None) if offset.foldable() else None
        if not isinstance(k, int) or not 1 <= k <= MAX_OFFSET:
            raise Unsupported("Window", f"{sql}: only {kind}s of 1 to {MAX_OFFSET} rows keep a partition's last rows")
        if fn.ignoreNulls():
            default = fn.default()
            if kind == "lag" and k == 1 and default.foldable() and default.eval(None) is None:
                # the previous non-NULL value: the partition's last one is its state (as for last())
                return RunningFunction(kind, fn.input(), result, sql, ignore_nulls=True)
            # the k-th non-NULL value before / after the row: the tail holds the rows from the partition's k-th
            # last non-NULL value on (a lead's rows still missing some change when new rows bring them)
            return RunningFunction(kind, None, result, sql, ignore_nulls=True, skips=fn.input(), known=k)
        return RunningFunction(kind, None, result, sql, **({"behind": k} if kind == "lag" else {"ahead": k}))
    if name != "AggregateExpression":
        raise Unsupported("Window", f"{sql}: {name} has no running state")
    backward = _fill_backward(cat, fn, frame, sql, result)
    if backward is not None:
        return backward
    around = _frame(cat, frame, we.windowSpec().orderSpec(), sql, result)
    if around is not None:  # any aggregate over the rows around the row: Spark's own, over the tail and new rows
        return around
    if fn.isDistinct() or fn.filter().isDefined():
        raise Unsupported("Window", f"{sql}: DISTINCT and FILTER have no running state")
    if cat.cls(frame) != "SpecifiedWindowFrame" or cat.cls(frame.lower()) != "UnboundedPreceding$" \
            or cat.cls(frame.upper()) != "CurrentRow$":
        raise Unsupported("Window", f"{sql}: only frames from UNBOUNDED PRECEDING to CURRENT ROW keep a running state")
    agg = fn.aggregateFunction()
    if cat.cls(agg) in ("First", "Last"):  # any type: the value is picked, not computed
        return RunningFunction(cat.cls(agg).lower(), agg.child(), result, sql, ignore_nulls=bool(agg.ignoreNulls()))
    picked = ties.picked(cat, fn)
    if picked is not None:  # first/last picking among tied rows by their other columns (:mod:`.ties`)
        kind, value, key, ignore_nulls = picked
        return RunningFunction(kind, value, result, f"{kind}({value.sql()})", ignore_nulls=ignore_nulls, key=key)
    kind = _AGGREGATES.get(cat.cls(agg))
    args = cat.items(agg.children())
    if kind is None or len(args) != 1:
        raise Unsupported("Window", f"{sql}: {cat.cls(agg)} has no running state")
    t = spark_type(args[0])
    if kind == "sum" and not isinstance(t, (*_INTEGRAL, T.DecimalType)):
        raise Unsupported("Window", f"{sql}: a {t.simpleString()} running sum is not exact in another order")
    if kind in ("min", "max") and isinstance(t, (T.FloatType, T.DoubleType)):
        raise Unsupported("Window", f"{sql}: a floating-point running {kind} is not kept as a state")
    return RunningFunction(kind, args[0], result, sql)


def _counted_words(f: RunningFunction) -> str:
    """What the tail holds for a function counting non-NULL values, in words for ``odf explain``."""
    where = "after" if f.after == 1 else f"from {f.after} rows after"
    return f"its rows with fewer than {f.known} non-NULL {f.skips.sql()} {where} them"


def _tail_words(spec: RunningSpec) -> list[str]:
    """What the tail holds (:func:`tail_kept`), in words for ``odf explain``."""
    lags = list(dict.fromkeys(_counted_words(f) for f in spec.lagging.values()))
    if not spec.looks_ahead:  # what new rows read
        return ([f"its last {spec.behind} row(s)"] if spec.behind else []) + \
            [f"its rows down to its last ORDER BY value + {lo}" for lo in spec.lowers] + lags
    if not (spec.uppers or spec.lowers or len(spec.lagging) < len(spec.counted)):  # a lead's rows, and before them
        return [f"its last {spec.ahead + spec.behind} row(s)"] + lags
    changed = ([f"its last {spec.ahead} row(s)"] if spec.ahead else []) + \
        [f"its rows from its last ORDER BY value - {u} on" for u in spec.uppers] + \
        list(dict.fromkeys(_counted_words(f) for f in spec.counted.values() if f.forward))
    read = ([f"{spec.behind} row(s) before them"] if spec.behind else []) + \
        [f"down to their ORDER BY values + {lo}" for lo in spec.lowers]
    return [f"the rows new rows can change ({', '.join(changed)})"
            + (f" with the rows these and new rows read ({', '.join(read)})" if read else "")] + lags


def _orders(cat: Catalyst, node: Any) -> tuple[tuple[Any, ...], list[Any]]:
    """A Window's PARTITION BY expressions and ORDER BY, or :class:`Unsupported` where no running state fits."""
    partition = tuple(cat.items(node.partitionSpec()))
    if not partition:
        raise Unsupported("Window", "a window without PARTITION BY: any new row can change every output row")
    orders = cat.items(node.orderSpec())
    if not orders:
        raise Unsupported("Window", "no ORDER BY: every row of a partition sees all of its rows")
    for o in orders:
        if cat.cls(o.direction()) != "Ascending$" or cat.cls(o.nullOrdering()) != "NullsFirst$":
            raise Unsupported("Window", f"ORDER BY {o.sql()}: only ascending orders with NULLs first keep a running "
                                        "state")
    return partition, orders


def analyze(cat: Catalyst, node: Any) -> RunningSpec:
    """The running state of a Window node, or :class:`Unsupported` (then the node is recomputed by key)."""
    partition, orders = _orders(cat, node)
    functions = tuple(_function(cat, e) for e in cat.items(node.windowExpressions()))
    peers = ties.peer_orders(cat, node)  # a row tied with its partition's last in the query's ORDER BY is late
    spec = RunningSpec("Window", partition, tuple(o.child() for o in orders), functions, node.child(), "",
                       peers=peers if peers < len(orders) else 0)
    return replace(spec, detail=_detail(spec, _ties(cat, node)))


def analyze_pair(cat: Catalyst, node: Any) -> RunningSpec | None:
    """One running state for ``node`` and the Window below it when they are the two :func:`.ties.split_pair` made
    of one window (the functions that need the ties as they are, and those with tie-breakers): a partition's state
    and tail are the same rows for both, so they are kept once, and a step joins, writes and reads them once. Its
    ORDER BY is the tie-broken one (the tail's rows, the first/last values); a row is late when it comes at or before
    its partition's last value of the other one's (:attr:`RunningSpec.peers`), where the functions over the ties
    would change older rows. None when ``node`` is no such pair; :class:`Unsupported` when a function has no
    running state (then each is planned on its own)."""
    lower = ties.split_pair(cat, node)
    if lower is None:
        return None
    partition, low = _orders(cat, lower)
    _, up = _orders(cat, node)
    broken, plain = (up, low) if len(up) > len(low) else (low, up)
    functions = tuple(_function(cat, e) for n in (lower, node) for e in cat.items(n.windowExpressions()))
    # the upper one's tie-breakers end with the lower one's values, equal among the rows they would tell apart
    child = {a.exprId().id() for a in cat.items(lower.child().output())}
    order = tuple(o.child() for o in broken
                  if all(a.exprId().id() in child for a in cat.items(o.references().toSeq())))
    spec = RunningSpec("Window", partition, order, functions, lower.child(), "", peers=len(plain), below=(0, 0))
    return replace(spec, detail=_detail(spec, f" {ties.BROKEN}; {ties.PAIRED}"))


def _detail(spec: RunningSpec, ties_words: str) -> str:
    """What ``odf explain`` says of a running window."""
    def named(f: RunningFunction) -> str:
        return f.sql.split(" OVER ")[0] + (" IGNORE NULLS" if f.ignore_nulls and "IGNORE NULLS" not in
                                           f.sql.upper() else "")

    what = ", ".join(named(f) for f in spec.functions)
    kept = _tail_words(spec)
    if spec.stored:
        kept[-1] += " (with each row's values as output)"
    tail = f" and {' and '.join(kept)}" if kept else ""
    return (f"running state per partition ({len(spec.partition)} key(s)){tail}: {what}; rows after a partition's "
            "last ORDER BY value extend it, rows at or before it and removals recompute the partitions they touch "
            "from their history" + ties_words)


def _ties(cat: Catalyst, node: Any) -> str:
    """What the detail says of rows tied in the window's ORDER BY (:mod:`.ties`)."""
    if ties.broken(cat, node):
        return f" {ties.BROKEN}"
    tied = ties.tie_sensitive(cat, cat.items(node.windowExpressions()))
    return "" if tied is None else (
        f"; {tied} tells rows tied in the ORDER BY apart and cannot take tie-breakers here (a RANGE frame or a rank "
        "needs the ties): a late row or a removal recomputes its partition, which can retract rows it did not "
        "output unless the ORDER BY is unique in each partition (docs/transforms.md)")


# -- states ---------------------------------------------------------------------------------------------------------
