"""GROUP BY and DISTINCT, updated from the changed rows: one state row per group, written in the checkpoint.

Each aggregate function keeps what makes its value computable from a change of its input rows:
- ``count``: the count (added rows +1, removed rows -1);
- ``sum`` of integers: the sum as a long, the type of its result (ANSI arithmetic fails a step whose running total
  leaves a long's range, as it fails Spark's own sum), and the count of non-null values; the value is NULL when that
  count is 0;
- ``sum`` of decimals: the same with an exact DECIMAL(38, scale) sum; an ``avg`` of integers or DECIMALs arrives as
  such a sum and a count (:mod:`.averages`);
- a ``sum``/``avg`` of floating-point values arrives as an exact sum (:mod:`.exact_sums`, kind ``exact``): the exact
  number its values make (a BigInteger's bytes) and counts of its values, NaNs and infinities. A change adds to
  the number what its rows make, summed per position (:func:`exact_change`); a group's number from all its rows
  (a rebuild, a recomputation) is its position sums' (code Spark generates, fast over many rows);
- ``min`` / ``max``: the current extreme; a removed row at or beyond it makes the group *recomputed* from the inputs'
  history (only the groups it touches) unless a row added in the same change lies beyond every removed one, anything
  else combines old and new extremes;
- ``count``/``sum(DISTINCT ...)`` (an integer ``avg(DISTINCT ...)`` is their quotient): the number (and the sum)
  of the distinct values, and a second table with the row count of every (group, value): a change of a value's count
  from 0 or to 0 adds the value to the group's distinct values or takes it off, so a step reads the state, never
  the history (Spark plans DISTINCT aggregates over one column set as they are; over several, it rewrites them into
  two aggregates over an Expand: the inner one per group, value and column set, the outer one with FILTER clauses
  and a ``first()`` of the other functions' values, both kept here);
- ``first(x)`` / ``last(x)`` (Spark's pick of one row's value): the number of rows it picks from (non-NULL ones with
  IGNORE NULLS) and the value; while a change leaves that pick unambiguous (see :func:`_picked`) the state has it,
  otherwise the group is recomputed;
- ``max_by(v, o)`` / ``min_by(v, o)`` (the latest / earliest value by event time): the extreme ``o`` with the largest
  and the smallest ``v`` among the rows at it, and the value Spark picked. Rows at a new extreme replace the pair, a
  removed row at or beyond the extreme makes the group recomputed, as for min/max; so does a group whose rows at the
  extreme have different values (a *tie*: Spark's pick among them depends on the rows' order, so only its own
  function over the group's rows gives it).
Every group also keeps its row count, so a group whose rows were all removed disappears. A group keyed by an
event-time window (``window(event_time, ...)``, a ``struct<start, end>`` key) that ends at or before the inputs'
watermark is final and *leaves the state*, its value counts too; should a late row or a retraction touch it after
all, the group is recomputed from the inputs' history (before and after the change), so eviction never changes the
output. A global aggregate (no GROUP BY) has one group that always exists, as Spark gives one row over no rows.
DISTINCT is an aggregation with no functions. A FILTER clause turns a function's arguments into NULL where it does
not pass (which each of these functions skips; not a first/last that respects NULLs). Other functions (other
DISTINCT aggregates, collect_*, statistics), and max_by/min_by by a collated string or a 35-38-digit decimal
ordering take the by-key or the full path. The output of a group is computed by the query's own result expressions
over the group's key and values.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spark_jobs.transform.catalyst import Catalyst
from spark_jobs.transform.incremental import exact_numbers, exact_sums
from spark_jobs.transform.incremental.frames import WEIGHT, spark_type
from spark_jobs.transform.incremental.plan import Unsupported
from spark_jobs.transform.inputs import orderable

ROWS = "__odf_rows"  # rows of a group (the group exists while > 0)
PRESENT = "__odf_present"
_INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
# orderings of max_by/min_by whose order :func:`_reversed` turns around exactly (decimals: see :func:`reversible`)
_REVERSIBLE = (*_INTEGRAL, T.DecimalType, T.DateType, T.TimestampType, T.TimestampNTZType, T.FloatType,
               T.DoubleType, T.StringType)
_EXTREMES = ("min", "max", "max_by", "min_by")  # functions whose removed extreme recomputes a group
_BY = ("max_by", "min_by")
_PICKS = ("first", "last")  # Spark's pick of one row's value: known from the state while one row can have it


@dataclass(frozen=True)
class Adapter:
    """One aggregate function: which state it keeps (``kind``), its argument expressions, its result type."""

    kind: str  # "count" | "sum" | "min" | "max" | "max_by" | "min_by" | "first" | "last" | "exact"
    args: tuple[Any, ...]  # JVM expressions over the aggregate's child output (max_by/min_by: value, ordering)
    result_type: T.DataType
    sql: str
    distinct: bool = False  # count/sum(DISTINCT ...): over the distinct values (a value table keeps them)
    ignore_nulls: bool = True  # first/last: whether rows whose value is NULL are skipped (IGNORE NULLS)

    def state_type(self) -> T.DataType:
        """How a sum is kept: a long for integers (a DECIMAL(38) sum cost ~20% of a 10k-group step's update: every
        value read from a row is a new BigInteger), DECIMAL(38, scale) where the result is a decimal."""
        if self.kind == "sum":
            t = spark_type(self.args[0])
            return T.DecimalType(38, t.scale) if isinstance(t, T.DecimalType) else T.LongType()
        return self.result_type


@dataclass(frozen=True)
class AggregateSpec:
    grouping: tuple[Any, ...]  # grouping expressions over the child output (aliases removed)
    key_attrs: tuple[Any, ...]  # the grouping attributes the result expressions refer to
    adapters: tuple[Adapter, ...]
    result_attrs: tuple[Any, ...]  # each function's result attribute (an exact sum: its array's)
    results: tuple[Any, ...]  # the node's output expressions (aliases removed)
    child: Any
    window: int | None = None  # the grouping key that is an event-time window (struct<start, end: timestamp>)
    tables: tuple[int, ...] = ()  # per function, the DISTINCT function whose value table it reads (:func:`value_table`)

    @property
    def keys(self) -> list[str]:
        return [f"k{i}" for i in range(len(self.grouping))]

    @property
    def is_global(self) -> bool:
        return not self.grouping


def _unalias(cat: Catalyst, e: Any) -> Any:
    return e.child() if cat.cls(e) == "Alias" else e


def label(cat: Catalyst, node: Any) -> str:
    return "Aggregate"


def analyze(cat: Catalyst, node: Any) -> AggregateSpec:
    found = cat.physical_aggregation(node)
    if found is None:
        raise Unsupported("Aggregate", "not a plain aggregation")
    grouping, aggs, results, child = found
    keys = tuple(_unalias(cat, g) for g in grouping)
    windows = [i for i, g in enumerate(keys) if _is_window(spark_type(g))]
    adapters = []
    result_attrs = []
    summed: set[int] = set()
    arrays: set[int] = set()
    for r in results:  # an exact sum's integer sums: one function, one state column (its array)
        slot = exact_sums.state_of(cat, r)
        if slot is None:
            continue
        adapters.append(Adapter("exact", exact_sums.arguments(cat, child, slot), spark_type(r),
                                exact_sums.label(cat, child, slot)))
        result_attrs.append(r.toAttribute())
        arrays.add(r.exprId().id())
        summed.update(exact_sums.sum_ids(cat, r))
    for ae in aggs:
        if ae.resultId().id() in summed:
            continue
        result_attrs.append(ae.resultAttribute())
        fn = ae.aggregateFunction()
        name = cat.cls(fn)
        sql = str(ae.sql())
        args = tuple(cat.items(fn.children()))
        ignore_nulls = bool(fn.ignoreNulls()) if name in ("First", "Last") else True
        if ae.filter().isDefined():  # FILTER (WHERE p): the arguments of the rows p does not pass are NULL
            if not ignore_nulls:
                raise Unsupported("Aggregate", f"{sql}: a FILTER clause on a {name.lower()}() that respects NULLs")
            # every function kept here but a first()/last() that respects NULLs skips rows whose arguments
            # (max_by/min_by: whose ordering) are NULL, so IF(p, arg, NULL) is the clause
            args = tuple(cat.null_unless(ae.filter().get(), a) for a in args)
        result = spark_type(ae.resultAttribute())
        distinct = bool(ae.isDistinct())
        if distinct:
            if name not in ("Count", "Sum", "Average"):
                raise Unsupported("Aggregate", f"{sql}: no incremental form for a DISTINCT {name}")
        if name == "Count":
            kind = "count"
        elif name in ("Sum", "Average"):  # an avg of integers or DECIMALs is a sum and a count by now (.averages)
            arg = spark_type(args[0])
            kind = "sum" if name == "Sum" else "avg"
            if kind == "avg" or not isinstance(arg, (*_INTEGRAL, T.DecimalType)):
                why = ("floating-point addition is not invertible" if isinstance(arg, (T.FloatType, T.DoubleType))
                       else "no state is kept for it")
                raise Unsupported("Aggregate", f"{sql}: a {arg.simpleString()} {kind} cannot be updated exactly "
                                               f"({why})")
            args = args[:1]
        elif name in ("Min", "Max"):
            kind = name.lower()
        elif name in ("First", "Last"):
            kind = name.lower()
            if not orderable(spark_type(args[0])):
                raise Unsupported("Aggregate", f"{sql}: {spark_type(args[0]).simpleString()} values cannot be "
                                               "told apart in its state")
        elif name in ("MaxBy", "MinBy"):
            kind = name[:3].lower() + "_by"
            value, order = (spark_type(a) for a in args)
            if not reversible(order):
                raise Unsupported("Aggregate", f"{sql}: ties at the extreme of a {order.simpleString()} ordering "
                                               "cannot be told apart from its state")
            if not orderable(value):
                raise Unsupported("Aggregate", f"{sql}: ties between {value.simpleString()} values cannot be told "
                                               "apart from its state")
        else:
            raise Unsupported("Aggregate", f"{sql}: no incremental form for {name}")
        adapters.append(Adapter(kind, args, result, sql, distinct, ignore_nulls))
    # an exact sum's array is its state's value, read from the state rather than computed from its sums
    return AggregateSpec(keys, tuple(g.toAttribute() for g in grouping), tuple(adapters), tuple(result_attrs),
                         tuple(r.toAttribute() if r.exprId().id() in arrays else _unalias(cat, r) for r in results),
                         child, windows[0] if windows else None, _shared_tables(adapters))


def _shared_tables(adapters: Sequence[Adapter]) -> tuple[int, ...]:
    """Per function, the first DISTINCT function with the same arguments (itself when none is before it): the
    functions of an ``avg(DISTINCT x)`` (a sum and a count), or ``count(DISTINCT x)`` beside ``sum(DISTINCT x)``,
    count the same values, so they read one value table."""
    found: list[int] = []
    for j, a in enumerate(adapters):
        same = (i for i in range(j) if adapters[i].distinct and a.distinct and len(adapters[i].args) == len(a.args)
                and all(x.semanticEquals(y) for x, y in zip(adapters[i].args, a.args)))
        found.append(next(same, j))
    return tuple(found)


def _is_window(t: T.DataType) -> bool:
    """The type of ``window(...)``'s struct: start and end timestamps."""
    return (isinstance(t, T.StructType) and [f.name for f in t.fields] == ["start", "end"]
            and all(isinstance(f.dataType, T.TimestampType) for f in t.fields))


def closed(spec: AggregateSpec, through_us: int | None, count: str = ROWS) -> Column | None:
    """Which state rows are groups of event-time windows that end at or before ``through_us`` (a watermark in
    microseconds), None when nothing can be closed; ``count``: an integer column of the table (a value table's
    ``__odf_c``). The bound changes every step, so it reaches the generated code by reference
    (:func:`~spark_jobs.transform.output.step_constant`), not as a literal that would compile new code."""
    if spec.window is None or through_us is None:
        return None
    from spark_jobs.transform.output import step_constant

    end = F.col(spec.keys[spec.window]).getField("end")
    bound = F.timestamp_micros(step_constant(through_us, F.col(count) - F.col(count)))
    return end.isNotNull() & (end <= bound)


def describe(spec: AggregateSpec) -> str:
    what = ", ".join(a.sql for a in spec.adapters) or "DISTINCT"
    by = f"{len(spec.grouping)} key(s)" if spec.grouping else "no key (one group)"
    recompute = any(a.kind in _EXTREMES for a in spec.adapters)
    ties = any(a.kind in _BY for a in spec.adapters)
    picks = any(a.kind in _PICKS for a in spec.adapters)
    return (f"state per group ({by}): {what}"
            + ("; groups whose extreme is removed are recomputed" if recompute else "")
            + ("; so are groups whose rows at the extreme ordering have different values (a tie)" if ties else "")
            + ("; a first()/last() group is recomputed when a change leaves it more than one row to pick from"
               if picks else "")
            + ("; a count per group and distinct value" if distinct_adapters(spec) else "")
            + ("; windows closed by the watermark leave the state" if spec.window is not None else ""))


# -- states ---------------------------------------------------------------------------------------------------------

def arguments(spec: AggregateSpec) -> list[tuple[str, Any]]:
    """The columns a changed child row contributes: keys, then each function's arguments."""
    cols = [(k, g) for k, g in zip(spec.keys, spec.grouping)]
    for j, a in enumerate(spec.adapters):
        cols += [(f"a{j}_{m}", e) for m, e in enumerate(a.args)]
    return cols


def state_columns(spec: AggregateSpec) -> list[str]:
    cols = [ROWS]
    for j, a in enumerate(spec.adapters):
        cols += {"count": [f"s{j}_n"], "sum": [f"s{j}_s", f"s{j}_n"],
                 "min": [f"s{j}_m"], "max": [f"s{j}_m"],
                 "max_by": [f"s{j}_m", f"s{j}_l", f"s{j}_v"], "min_by": [f"s{j}_m", f"s{j}_l", f"s{j}_v"],
                 "first": [f"s{j}_n", f"s{j}_v"], "last": [f"s{j}_n", f"s{j}_v"],
                 "exact": [f"s{j}_v", *(f"s{j}_{c}" for c in _EXACT_COUNTS)]}[a.kind]
    return cols



def reversible(t: T.DataType) -> bool:
    """Whether :func:`_reversed` turns the order of a type's values around exactly. Spark negates a decimal in
    34-digit arithmetic (IEEE DECIMAL128), which rounds values of more digits: decimals up to 34 digits only. A
    collated string orders by its collation, not by its bytes: binary strings only."""
    if isinstance(t, T.StringType):
        return t.collation == "UTF8_BINARY"
    return isinstance(t, _REVERSIBLE) and not (isinstance(t, T.DecimalType) and t.precision > 34)


def _reversed(order: Column, t: T.DataType) -> Column:
    """An ordering value mapped so that the order of the values is turned around, exactly (no overflow)."""
    if isinstance(t, T.StringType):  # Spark orders strings by their bytes, unsigned: each byte turned around as two
        # hex digits, then a terminator above every digit, so that a prefix comes after the longer string
        return F.concat(F.translate(F.hex(order), "0123456789ABCDEF", "FEDCBA9876543210"), F.lit("G"))
    if isinstance(t, (T.FloatType, T.DoubleType)):  # Spark's order: NaN above every number, -0.0 equal to 0.0
        return F.struct(F.when(F.isnan(order), 0).otherwise(1).alias("n"),
                        F.when(F.isnan(order), F.lit(0.0).cast(t)).otherwise(-order).alias("x"))
    if isinstance(t, (T.TimestampType, T.TimestampNTZType)):  # the session is in UTC: wall-clock micros are exact
        order = F.unix_micros(order.cast(T.TimestampType()))
    elif isinstance(t, T.DateType):
        order = F.unix_date(order)
    elif isinstance(t, T.DecimalType):
        return -order
    return F.bitwise_not(order)  # ~x = -x - 1 turns the order of two's-complement integers around


def contributions(spec: AggregateSpec, positions: bool = False) -> dict[str, tuple[Column, Callable[[Column], Column]]]:
    """What one changed row (arguments + ``__odf_w`` = +1/-1) contributes to each state column, and how a group's
    contributions fold: ±1 to the counts and signed values to the sums (summed), the added value to a min/max
    (``s<j>_m``) and the removed one to ``x<j>`` (both folded by min/max), and the change of a group's number of
    distinct values (``d<j>``, :func:`distinct_changes`) to a count DISTINCT, and of their sum too (``e<j>``) to a
    sum DISTINCT (summed). A max_by/min_by contributes its added (ordering, value) pair to ``s<j>_m`` (folded by
    max/min: the extreme ordering, then the largest/smallest value at it), the pair with its ordering turned around to
    ``s<j>_l`` (folded the other way: the same extreme, the other end of the values at it) and its removed ordering
    to ``x<j>``; its value ``s<j>_v`` is not folded (see :func:`update` and :func:`changes`). An exact sum adds to its
    counts, and with ``positions`` (a group's rows, :func:`changes`) each row's pieces to its position sums
    (``e<j>_<q>``); in a step its number's change arrives summed (``d<j>_v``, :func:`exact_change`)."""
    w = F.col(WEIGHT)
    found: dict[str, tuple[Column, Callable[[Column], Column]]] = {ROWS: (w, F.sum)}
    for j, a in enumerate(spec.adapters):
        args = [F.col(f"a{j}_{m}") for m in range(len(a.args))]
        if a.distinct:
            found[f"s{j}_n"] = (F.coalesce(F.col(f"d{j}"), F.lit(0)).cast("long"), F.sum)
            if a.kind != "count":
                found[f"s{j}_s"] = (F.coalesce(F.col(f"e{j}"), F.lit(0)).cast(a.state_type()), F.sum)
        elif a.kind == "count":
            present = args[0].isNotNull()
            for x in args[1:]:
                present = present & x.isNotNull()
            found[f"s{j}_n"] = (F.when(present, w).otherwise(0), F.sum)
        elif a.kind == "sum":
            v = args[0].cast(a.state_type())
            found[f"s{j}_s"] = (F.when(w > 0, v).otherwise(-v).cast(a.state_type()), F.sum)
            found[f"s{j}_n"] = (F.when(args[0].isNotNull(), w).otherwise(0), F.sum)
        elif a.kind == "exact":
            found.update({name: (F.expr(e), F.sum) for name, e in _exact_counts(j).items()})
            if positions:
                found.update({name: (F.expr(e), F.sum) for name, e in _exact_positions(j).items()})
            else:
                found[f"d{j}_v"] = (F.col(f"d{j}_v"), F.max)  # one row per group carries it
        elif a.kind in _PICKS:
            value = args[0]
            counted = value.isNotNull() if a.ignore_nulls else F.lit(True)
            found[f"s{j}_n"] = (F.when(counted, w).otherwise(0), F.sum)
            found[f"p{j}"] = (F.when(counted & (w > 0), 1).otherwise(0), F.sum)
            found[f"q{j}"] = (F.when(counted & (w < 0), 1).otherwise(0), F.sum)
            found[f"y{j}"] = (F.when(counted & (w > 0), F.struct(value.alias("v"))), F.max)
            found[f"x{j}"] = (F.when(counted & (w < 0), F.struct(value.alias("v"))), F.max)
        elif a.kind in _BY:
            value, order = args
            pick, other = (F.max, F.min) if a.kind == "max_by" else (F.min, F.max)
            added = (w > 0) & order.isNotNull()  # Spark's max_by/min_by skip rows without an ordering
            back = _reversed(order, spark_type(a.args[1]))
            found[f"s{j}_m"] = (F.when(added, F.struct(order.alias("o"), value.alias("v"))), pick)
            found[f"s{j}_l"] = (F.when(added, F.struct(back.alias("o"), value.alias("v"))), other)
            found[f"x{j}"] = (F.when(w < 0, order), pick)
        else:
            pick = F.min if a.kind == "min" else F.max
            found[f"s{j}_m"] = (F.when(w > 0, args[0]), pick)
            found[f"x{j}"] = (F.when(w < 0, args[0]), pick)
    return found


_EXACT_COUNTS = ("n", "q", "i", "j")  # an exact sum's counts: values, NaNs, +Infinity, -Infinity


def _exact_counts(j: int) -> dict[str, str]:
    """What a changed row adds to exact sum ``j``'s counts, as SQL (its arguments: the value, its position, three
    pieces and its three flags, :func:`.exact_sums.arguments`)."""
    return {f"s{j}_n": f"CASE WHEN a{j}_0 IS NULL THEN 0L ELSE {WEIGHT} END", f"s{j}_q": f"a{j}_5 * {WEIGHT}",
            f"s{j}_i": f"a{j}_6 * {WEIGHT}", f"s{j}_j": f"a{j}_7 * {WEIGHT}"}


def _exact_positions(j: int) -> dict[str, str]:
    """What a row adds to each of exact sum ``j``'s position sums, as SQL (one py4j call a column)."""
    k, p0, p1, p2 = (f"a{j}_{m}" for m in range(1, 5))
    return {f"e{j}_{q}": f"CASE WHEN {k} = {q} THEN {p0} WHEN {k} = {q - 1} THEN {p1} WHEN {k} = {q - 2} THEN {p2} "
                         f"ELSE 0L END * {WEIGHT}" for q in range(exact_numbers.POSITIONS)}


def exact_change(spec: AggregateSpec, j: int, rows: DataFrame) -> DataFrame:
    """Per group in ``rows`` (changed rows: arguments and ``__odf_w``), the change of exact sum ``j``'s number
    (``d<j>_v``): the rows' pieces summed per (group, position), folded into one number (few elements a group);
    a row of :func:`update`'s changed rows with weight 0 and no arguments."""
    from spark_jobs.transform.catalyst import Catalyst

    keys = [F.col(c) for c in spec.keys]
    k = F.col(f"a{j}_1")
    summed = (rows.where(k >= 0).groupBy(*keys, k.cast("long").alias("k"))
              .agg(*[F.sum(F.col(f"a{j}_{m}") * F.col(WEIGHT)).alias(f"s{m - 2}") for m in (2, 3, 4)]))
    listed = summed.groupBy(*keys).agg(F.collect_list(F.struct("k", "s0", "s1", "s2")).alias("__odf_pieces"))
    return listed.select(*keys, exact_numbers.change_of(Catalyst(rows.sparkSession), "__odf_pieces").alias(f"d{j}_v"),
                         F.lit(0).cast("long").alias(WEIGHT))


def exact_adapters(spec: AggregateSpec) -> list[int]:
    return [j for j, a in enumerate(spec.adapters) if a.kind == "exact"]


def changes(spec: AggregateSpec, rows: DataFrame) -> DataFrame:
    """Per group, the change of every state column over ``rows`` (all added: a group's rows), plus for min/max the
    extreme of the removed values (``x<j>``); a DISTINCT aggregate counts (and sums) the distinct values, and a
    max_by/min_by's value is Spark's own function over the rows (its pick among tied rows). One row for a global
    aggregate even over no rows."""
    folded = {name: fold(expr) for name, (expr, fold) in contributions(spec, positions=True).items()}
    for j in distinct_adapters(spec):
        folded[f"s{j}_n"] = F.count_distinct(*[F.col(c) for c in value_columns(spec, j)])
        if spec.adapters[j].kind != "count":
            folded[f"s{j}_s"] = F.sum_distinct(F.col(f"a{j}_0").cast(spec.adapters[j].state_type()))
    for j, a in enumerate(spec.adapters):
        if a.kind in _BY:
            folded[f"s{j}_v"] = (F.max_by if a.kind == "max_by" else F.min_by)(F.col(f"a{j}_0"), F.col(f"a{j}_1"))
        elif a.kind in _PICKS:
            folded[f"s{j}_v"] = (F.first if a.kind == "first" else F.last)(F.col(f"a{j}_0"), a.ignore_nulls)
    return rows.groupBy(*[F.col(k) for k in spec.keys]).agg(*[v.alias(name) for name, v in folded.items()])


OLD = "__odf_old"  # 1 on the rows of the old states in :func:`update`'s union, 0 on the changed rows
TOUCHED, RECOMPUTE = "__odf_touched", "__odf_recompute"


def update(spec: AggregateSpec, old: DataFrame, rows: DataFrame,
           narrow: Callable[[DataFrame], DataFrame] = lambda df: df) -> DataFrame:
    """Old states (keys + state columns) updated by changed rows (arguments + ``__odf_w`` = +1/-1); ``narrow``: what
    the union goes through before its aggregation (:meth:`.step.Step.narrow`).

    One aggregation over the union of both, grouped by the keys (NULL keys group together, as GROUP BY groups them):
    no join, and Spark aggregates each side partially before its one shuffle. Every group gets ``__odf_present``
    (1 when it existed before), ``__odf_touched``, ``__odf_recompute`` (a removed value reached the old extreme), the
    new state columns, and the old ones prefixed ``o_`` (the group's output before the change is computed from
    them, without reading the old states again). A max_by/min_by's new value is the one at the folded extreme: a
    group where it could be another (a tie) is recomputed."""
    state = state_columns(spec)
    found = contributions(spec)
    change = {name: expr for name, (expr, _) in found.items()}
    # an old state's row carries its values and adds or removes nothing
    kept = {name: (F.col(name) if name in state else F.lit(None)) for name in found}
    parts = list(change)
    types = {f.name: f.dataType for f in old.schema.fields}
    types.update({f"x{j}": types[f"s{j}_m"] for j, a in enumerate(spec.adapters) if a.kind in ("min", "max")})
    types.update({f"x{j}": spark_type(a.args[1]) for j, a in enumerate(spec.adapters) if a.kind in _BY})
    for j, a in enumerate(spec.adapters):
        if a.kind in _PICKS:
            picked = T.StructType([T.StructField("v", spark_type(a.args[0]), True)])
            types.update({f"p{j}": T.LongType(), f"q{j}": T.LongType(), f"y{j}": picked, f"x{j}": picked})
    exact = exact_adapters(spec)
    types.update({f"d{j}_v": T.BinaryType() for j in exact})
    keys = [F.col(k) for k in spec.keys]
    new_rows = rows.select(*keys, F.lit(0).alias(OLD), *[change[c].cast(types[c]).alias(c) for c in parts],
                           *[F.lit(None).cast(types[c]).alias(f"o_{c}") for c in state])
    old_rows = old.select(*keys, F.lit(1).alias(OLD), *[kept[c].cast(types[c]).alias(c) for c in parts],
                          *[F.col(c).alias(f"o_{c}") for c in state])
    both = narrow(old_rows.unionByName(new_rows))
    aggs: list[Column] = [F.max(OLD).alias(PRESENT), F.min(OLD).alias("__odf_min_old"),
                          *[fold(F.col(name)).alias(name) for name, (_, fold) in found.items()]]
    aggs += [F.max(f"o_{c}").alias(f"o_{c}") for c in state]  # one old row per group: its values
    grouped = both.groupBy(*keys).agg(*aggs)
    touched = F.coalesce(F.col("__odf_min_old"), F.lit(1)) == 0
    recompute: Column = F.lit(False)
    values: dict[str, Column] = {c: F.col(c) for c in state}
    if exact:
        from spark_jobs.transform.catalyst import Catalyst

        cat = Catalyst(rows.sparkSession)  # the old number plus the change's
        values.update({f"s{j}_v": exact_numbers.plus(cat, f"o_s{j}_v", f"d{j}_v") for j in exact})
    for j, a in enumerate(spec.adapters):
        if a.kind in _EXTREMES:
            x, om = F.col(f"x{j}"), F.col(f"o_s{j}_m")
            if a.kind in _BY:
                om = om.getField("o")
                m, low = F.col(f"s{j}_m"), F.col(f"s{j}_l")
                # an untouched group keeps its value: Spark's pick, should its rows be tied
                values[f"s{j}_v"] = F.when(touched, m.getField("v")).otherwise(F.col(f"o_s{j}_v"))
                tie = m.isNotNull() & ~m.getField("v").eqNullSafe(low.getField("v"))
                recompute = recompute | (touched & tie)
            lower = a.kind in ("min", "min_by")
            reached = (x <= om) if lower else (x >= om)
            # unless an added row lies strictly beyond every removed one: it stays, and it is the new extreme
            m = F.col(f"s{j}_m").getField("o") if a.kind in _BY else F.col(f"s{j}_m")
            beyond = F.coalesce((m < x) if lower else (m > x), F.lit(False))
            recompute = recompute | (x.isNotNull() & (om.isNull() | reached) & ~beyond)
        elif a.kind in _PICKS:
            value, known = _picked(j)
            values[f"s{j}_v"] = value
            recompute = recompute | ~known
    return grouped.select(*keys, F.coalesce(F.col(PRESENT), F.lit(0)).alias(PRESENT),
                          touched.alias(TOUCHED), *[v.alias(c) for c, v in values.items()],
                          *[F.col(f"o_{c}") for c in state], recompute.alias(RECOMPUTE))


def _picked(j: int) -> tuple[Column, Column]:
    """A first()/last()'s value after a change, and whether the state knows it. It does while at most one row can
    have been picked: none is left (NULL), no row counted by it changed (the old value), the one counted row is new
    (its value), or one row came and one went from a group of one (the removed one was the old one: the new one's
    value; otherwise the old value). Else Spark's pick depends on the order of the group's rows: recomputed. (The
    rows Spark's rewrite of DISTINCT aggregates over several column sets passes to its first(): one per group.)"""
    n, before = F.col(f"s{j}_n"), F.coalesce(F.col(f"o_s{j}_n"), F.lit(0))
    came, went = F.coalesce(F.col(f"p{j}"), F.lit(0)), F.coalesce(F.col(f"q{j}"), F.lit(0))
    new, gone, old = F.col(f"y{j}").getField("v"), F.col(f"x{j}").getField("v"), F.col(f"o_s{j}_v")
    none = n == 0
    same = (came == 0) & (went == 0)
    first = (n == 1) & (before == 0) & (came == 1) & (went == 0)
    swap = (n == 1) & (before == 1) & (came == 1) & (went == 1)
    value = (F.when(none, F.lit(None)).when(same, old).when(first, new)
             .when(swap, F.when(gone.eqNullSafe(old), new).otherwise(old)))
    return value, none | same | first | swap


def old_states(spec: AggregateSpec, updated: DataFrame) -> DataFrame:
    """The states before the change, of the groups in ``updated`` that existed (see :func:`update`)."""
    return updated.where(F.col(PRESENT) == 1).select(*[F.col(k) for k in spec.keys],
                                                     *[F.col(f"o_{c}").alias(c) for c in state_columns(spec)])


def initial(spec: AggregateSpec, change: DataFrame) -> DataFrame:
    """States of groups computed from all their rows (a change with only added rows)."""
    cols = [F.col(k) for k in spec.keys] + [F.coalesce(F.col(ROWS), F.lit(0)).cast("long").alias(ROWS)]
    for j, a in enumerate(spec.adapters):
        if a.kind == "count":
            cols.append(F.coalesce(F.col(f"s{j}_n"), F.lit(0)).cast("long").alias(f"s{j}_n"))
        elif a.kind == "sum":
            cols += [F.coalesce(F.col(f"s{j}_s"), F.lit(0)).cast(a.state_type()).alias(f"s{j}_s"),
                     F.coalesce(F.col(f"s{j}_n"), F.lit(0)).cast("long").alias(f"s{j}_n")]
        elif a.kind in _BY:
            cols += [F.col(f"s{j}_m"), F.col(f"s{j}_l"), F.col(f"s{j}_v")]
        elif a.kind in _PICKS:
            cols += [F.coalesce(F.col(f"s{j}_n"), F.lit(0)).cast("long").alias(f"s{j}_n"), F.col(f"s{j}_v")]
        elif a.kind == "exact":
            from spark_jobs.transform.catalyst import Catalyst

            positions = [f"e{j}_{q}" for q in range(exact_numbers.POSITIONS)]
            cols.append(exact_numbers.number_of(Catalyst(change.sparkSession), positions).alias(f"s{j}_v"))
            cols += [F.coalesce(F.col(f"s{j}_{c}"), F.lit(0)).cast("long").alias(f"s{j}_{c}") for c in _EXACT_COUNTS]
        else:
            cols.append(F.col(f"s{j}_m"))
    return change.select(*cols)


def alive(spec: AggregateSpec, prefix: str = "") -> Column:
    """Which state rows are groups: all with rows, and the one group of a global aggregate (``prefix``: which state
    columns, ``o_`` for the old ones)."""
    return F.lit(True) if spec.is_global else F.col(prefix + ROWS) > 0


def final_values(spec: AggregateSpec, prefix: str = "") -> list[Column]:
    """Each function's value (``f<j>``) from the state columns (named with ``prefix``: ``o_`` reads the old ones)."""
    def s(name: str) -> Column:
        return F.col(prefix + name)

    cols = []
    for j, a in enumerate(spec.adapters):
        if a.kind == "count":
            v = s(f"s{j}_n")
        elif a.kind == "sum":
            v = F.when(s(f"s{j}_n") > 0, s(f"s{j}_s").cast(a.result_type))
        elif a.kind in (*_BY, *_PICKS):
            v = s(f"s{j}_v")
        elif a.kind == "exact":  # its state's fields, as the aggregate's result is (.exact_numbers.STATE_FIELDS)
            v = F.struct(*[s(f"s{j}_{c}").alias(f) for c, f in zip(("v", *_EXACT_COUNTS), exact_numbers.STATE_FIELDS)])
        else:
            v = s(f"s{j}_m")
        cols.append(v.cast(a.result_type).alias(f"f{j}"))
    return cols


def finals(spec: AggregateSpec, states: DataFrame) -> DataFrame:
    """Keys and each function's value, from the states (the columns the result expressions read)."""
    return states.select(*[F.col(k) for k in spec.keys], *final_values(spec))


def finals_attrs(spec: AggregateSpec) -> Sequence[Any]:
    return [*spec.key_attrs, *spec.result_attrs]



# -- DISTINCT aggregates: a count per group and value ---------------------------------------------------------

COUNT = "__odf_c"  # a value table's row count of one (group, value)


def distinct_adapters(spec: AggregateSpec) -> list[int]:
    """The positions of the DISTINCT functions: each reads a value table next to the group states."""
    return [j for j, a in enumerate(spec.adapters) if a.distinct]


def value_tables(spec: AggregateSpec) -> list[int]:
    """The DISTINCT functions that keep a value table (the others read one of these: :func:`value_table`)."""
    return [j for j in distinct_adapters(spec) if value_table(spec, j) == j]


def value_table(spec: AggregateSpec, j: int) -> int:
    """The function whose value table the DISTINCT function ``j`` reads (``j`` itself, or one before it with the
    same arguments)."""
    return spec.tables[j] if spec.tables else j


def value_columns(spec: AggregateSpec, j: int) -> list[str]:
    """A value table's columns besides the keys and the count: the function's arguments (as :func:`arguments`)."""
    return [f"a{j}_{m}" for m in range(len(spec.adapters[j].args))]


def value_counts(spec: AggregateSpec, j: int, rows: DataFrame) -> DataFrame:
    """``rows`` whose arguments of function ``j`` are all non-NULL (count DISTINCT skips the others), per (group,
    value), with the summed weight as ``__odf_c``: over a group's rows (weight 1), its value table."""
    values = value_columns(spec, j)
    present = F.lit(True)
    for v in values:
        present = present & F.col(v).isNotNull()
    return (rows.where(present).groupBy(*[F.col(c) for c in spec.keys + values])
            .agg(F.sum(F.col(WEIGHT)).cast("long").alias(COUNT)))


def value_changes(spec: AggregateSpec, j: int, old: DataFrame, rows: DataFrame) -> DataFrame:
    """A value table updated by changed rows, as one aggregation over the union of both (as :func:`update`): per
    (group, value) its new count ``__odf_c``, its old one ``o___odf_c`` and whether the change touched it. Feed it to
    :func:`values_after` and :func:`distinct_changes`."""
    cols = [F.col(c) for c in spec.keys + value_columns(spec, j)]
    new_rows = value_counts(spec, j, rows).select(*cols, F.col(COUNT), F.lit(None).cast("long").alias(f"o_{COUNT}"),
                                              F.lit(0).alias(OLD))
    old_rows = old.select(*cols, F.col(COUNT), F.col(COUNT).alias(f"o_{COUNT}"), F.lit(1).alias(OLD))
    return (old_rows.unionByName(new_rows).groupBy(*cols)
            .agg(F.sum(COUNT).alias(COUNT), F.max(f"o_{COUNT}").alias(f"o_{COUNT}"),
                 (F.min(OLD) == 0).alias(TOUCHED)))


def values_after(spec: AggregateSpec, j: int, changed: DataFrame) -> DataFrame:
    """The new value table: the (group, value) pairs that still have rows."""
    return changed.where(F.col(COUNT) > 0).select(*[F.col(c) for c in spec.keys + value_columns(spec, j)],
                                                  F.col(COUNT))


def distinct_changes(spec: AggregateSpec, j: int, changed: DataFrame) -> DataFrame:
    """Per group, the change of its number of distinct values (``d<j>``): +1 per value whose count left 0, -1 per
    value whose count fell to 0; for a sum DISTINCT also the change of their sum (``e<j>``: the value, signed
    the same way). A row of :func:`update`'s changed rows with weight 0 and no arguments. ``changed``: the
    :func:`value_changes` of the value table ``j`` reads (:func:`value_table`)."""
    a = spec.adapters[j]
    value = F.col(f"a{value_table(spec, j)}_0").cast(a.state_type())
    now = (F.col(COUNT) > 0).cast("long")
    was = (F.coalesce(F.col(f"o_{COUNT}"), F.lit(0)) > 0).cast("long")
    sums = [] if a.kind == "count" else [
        F.sum(F.when(now > was, value).otherwise(-value)).cast(a.state_type()).alias(f"e{j}")]
    return (changed.where(F.col(TOUCHED) & (now != was)).groupBy(*[F.col(k) for k in spec.keys])
            .agg(F.sum(now - was).alias(f"d{j}"), *sums).withColumn(WEIGHT, F.lit(0).cast("long")))
