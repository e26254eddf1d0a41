"""Sums of floating-point values as their exact sum rounded once, wherever a stateful query is evaluated.

Spark adds a DOUBLE ``sum``'s values one by one, rounding after each addition, in the order it reads the rows in: the
value depends on how the inputs were cut into slices and files, so no state can be updated to it (``(a + b) - b``
need not be ``a``), and a group recomputed from the history can differ in its last bits from the row output before.
So before a stateful query is planned or evaluated (:mod:`.canonical`: its incremental plan, the full path's output, a
rebuild, every recomputation), every ``sum`` and ``avg`` of DOUBLE or FLOAT values in an aggregate becomes the exact
sum of the values, rounded once to the nearest double (ties to even): one value for any order and any batching, the
value ``math.fsum`` gives. An average is that sum divided by the count.

The exact sum is an integer number of units of 2^-1074 (the smallest subnormal double). A value ``x = m * 2^u``
units (``m`` its 53-bit significand) adds ``m * 2^(u mod 32)`` at the 32-bit *position* ``u div 32``: three pieces
below 2^32, at that position and the next two (:func:`_pieces_sql`). Over a group's rows, Spark's own ``sum`` of each
position is exact for up to 2^31 values a group (ANSI arithmetic fails a step beyond), and their weighted total is
the exact sum, kept as a number with its counts (:mod:`.exact_numbers`: the state :mod:`.aggregate` keeps, its
``exact`` kind, and how it is changed by a step and decoded).

The plan keeps Spark's shape: projections below the aggregate give each row's position and pieces, the aggregate's
functions are integer sums under one struct, and projections above decode it, then compute the aggregate's own result
expressions. The expressions are a template built once per driver and slot (:func:`_template`), so a rewrite costs a
few py4j calls. ``sum(DISTINCT x)`` of floating-point values keeps Spark's function (the full path), and so do
windows.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from pyspark.sql import types as T

from spark_jobs.transform.catalyst import Catalyst
from spark_jobs.transform.incremental import exact_numbers as numbers
from spark_jobs.transform.incremental.frames import spark_type

# the places of the counts among the aggregate's functions, after the positions' sums
NAN, PINF, NINF, COUNT = (numbers.POSITIONS + i for i in range(4))
PREFIX = "__odf_exact"  # the names of the columns a rewrite adds: __odf_exact<slot>, __odf_exact<slot>_<part>
SUMS = "_sums"  # __odf_exact<slot>_sums: the aggregate's struct of a slot's exact number and counts
_EXPRESSIONS = "org.apache.spark.sql.catalyst.expressions"
_FLOATING = (T.FloatType, T.DoubleType)
_LOCK = threading.Lock()
_TEMPLATES: dict[tuple[int, bool, int], "_Template"] = {}


@dataclass(frozen=True)
class _Template:
    """The expressions of one slot (a rewritten function), over its input attribute ``x`` (a DOUBLE)."""

    x: Any  # the attribute the rewrite binds to the function's argument (its expression id)
    bits: Any  # Alias: the raw bits of x
    pieces: list[Any]  # Aliases over x and the bits: position, three pieces, NaN / +Inf / -Inf flags
    sums: Any  # Alias (``__odf_exact<slot>_sums``) of the state: named_struct(v: the number's bytes, n, nan, ...)
    magnitude: list[Any]  # Aliases over the state's attribute: the number's top bits, shift, sticky bit, sign
    value: Any  # Alias (``__odf_exact<slot>_value``): the exact sum (DOUBLE), over the state and the magnitude
    count: Any  # the number of values (non-NULL), over the state's attribute


def rewritten(cat: Catalyst, ae: Any) -> bool:
    """Whether an AggregateExpression is a ``sum`` or ``avg`` of floating-point values this module rewrites."""
    fn = ae.aggregateFunction()
    return (cat.cls(fn) in ("Sum", "Average") and not ae.isDistinct()
            and isinstance(spark_type(fn.child()), _FLOATING))


def _pieces_sql(x: str, bits: str) -> list[str]:
    """SQL of a value's position and pieces (see the module), from its raw bits (x NULL: bits of 0.0)."""
    e = f"(shiftright({bits}, 52) & 2047)"  # the biased exponent
    frac = f"({bits} & 4503599627370495)"
    m = f"(CASE WHEN {e} = 0 THEN {frac} ELSE {frac} | 4503599627370496 END)"  # the significand
    u = f"(CASE WHEN {e} = 0 THEN 0 ELSE {e} - 1 END)"  # x = m * 2^u units of 2^-1074
    s = f"({u} & 31)"
    sign = f"(CASE WHEN {bits} < 0 THEN -1L ELSE 1L END)"
    return [
        f"CASE WHEN {x} IS NULL OR {e} = 2047 THEN -3 ELSE shiftright({u}, 5) END",  # no position: nothing added
        f"{sign} * (shiftleft({m}, {s}) & 4294967295)",
        f"{sign} * (shiftright({m}, 32 - {s}) & 4294967295)",
        f"{sign} * shiftright(shiftright({m}, 32), 32 - {s})",
        f"CASE WHEN isnan({x}) THEN 1L ELSE 0L END",
        f"CASE WHEN {x} = double('inf') THEN 1L ELSE 0L END",
        f"CASE WHEN {x} = double('-inf') THEN 1L ELSE 0L END",
    ]


_PARTS = ("k", "p0", "p1", "p2", "nan", "pinf", "ninf")


def _template(cat: Catalyst, slot: int) -> _Template:
    ansi = str(cat.session.conf.get("spark.sql.ansi.enabled", "true")).lower() == "true"
    key = (id(cat.jvm._gateway_client), ansi, slot)
    with _LOCK:
        found = _TEMPLATES.get(key)
    if found is None:
        built = _build(cat, slot)
        with _LOCK:
            found = _TEMPLATES.setdefault(key, built)
    return found


def _build(cat: Catalyst, slot: int) -> _Template:
    """One slot's expressions: the SQL parts analysed by Spark over an empty relation of ``x`` (a few round trips),
    the BigInteger parts built through py4j."""
    J = cat.jclass
    name = f"{PREFIX}{slot}"
    part = {p: f"{name}_{p}" for p in _PARTS}
    double_t = cat.scala_object("org.apache.spark.sql.types.DoubleType")
    metadata = cat.static("org.apache.spark.sql.types.Metadata", "empty")()
    x = J(f"{_EXPRESSIONS}.AttributeReference")(name, double_t, True, metadata, cat.scala_object(
        f"{_EXPRESSIONS}.NamedExpression").newExprId(), cat.seq([]))
    leaf = J("org.apache.spark.sql.catalyst.plans.logical.LocalRelation")(cat.seq([x]), cat.seq([]), False,
                                                                            cat.none())
    long_t = cat.scala_object("org.apache.spark.sql.types.LongType")
    zero = J(f"{_EXPRESSIONS}.Literal")(0.0, double_t)
    raw = numbers.static(cat, "java.lang.Double", long_t, "doubleToRawLongBits",
                  [J(f"{_EXPRESSIONS}.Coalesce")(cat.seq([x, zero]))])
    bits = cat.alias(raw, f"{name}_bits")
    with_bits = cat.dataframe(cat.project([x, bits], leaf))
    pieces = with_bits.selectExpr(name, *[f"{sql} AS {part[p]}" for p, sql in zip(_PARTS, _pieces_sql(
        f"`{name}`", f"`{name}_bits`"))])
    k, p0, p1, p2 = (f"`{part[p]}`" for p in ("k", "p0", "p1", "p2"))
    sums = [f"sum(CASE WHEN {k} = {q} THEN {p0} WHEN {k} = {q - 1} THEN {p1} WHEN {k} = {q - 2} THEN {p2} ELSE 0L END)"
            for q in range(numbers.POSITIONS)]
    sums += [f"sum(`{part[p]}`)" for p in ("nan", "pinf", "ninf")]
    sums.append(f"count(`{name}`)")
    aggregate = pieces.selectExpr(f"array({', '.join(sums)}) AS `{name}`")._jdf.queryExecution().analyzed()
    project = aggregate.child()
    functions = cat.items(cat.items(aggregate.aggregateExpressions())[0].child().children())
    state = numbers.state(cat, numbers.number_bytes(cat, functions[:numbers.POSITIONS]),
                          *(functions[i] for i in (COUNT, NAN, PINF, NINF)))
    sums_alias = cat.alias(state, f"{name}{SUMS}")
    held = sums_alias.toAttribute()
    field = J(f"{_EXPRESSIONS}.GetStructField")
    magnitude = numbers.magnitude(cat, numbers.integer(cat, field(held, 0, cat.none())), name)
    over = cat.project([held, *magnitude], J("org.apache.spark.sql.catalyst.plans.logical.LocalRelation")(
        cat.seq([held]), cat.seq([]), False, cat.none()))
    decoded = cat.dataframe(over).selectExpr(f"{numbers.value_sql(name)} AS `{name}_value`")
    decoded = decoded._jdf.queryExecution().analyzed()
    value = cat.items(decoded.projectList())[0]
    return _Template(x, bits, [e for e in cat.items(project.projectList()) if cat.cls(e) == "Alias"], sums_alias,
                     magnitude, value, field(held, 1, cat.none()))


def _average(cat: Catalyst, t: _Template) -> Any:
    """``IF(count > 0, sum / CAST(count AS DOUBLE), NULL)``: Spark's average of the exact sum."""
    J = cat.jclass
    double_t = cat.scala_object("org.apache.spark.sql.types.DoubleType")
    ratio = J(f"{_EXPRESSIONS}.Divide")(t.value.toAttribute(), J(f"{_EXPRESSIONS}.Cast")(t.count, double_t,
                                                                                          cat.none()))
    zero = J(f"{_EXPRESSIONS}.Cast")(J(f"{_EXPRESSIONS}.Literal")(0, cat.scala_object(
        "org.apache.spark.sql.types.IntegerType")), cat.scala_object("org.apache.spark.sql.types.LongType"), cat.none())
    positive = J(f"{_EXPRESSIONS}.GreaterThan")(t.count, zero)
    return cat.null_unless(positive, ratio)


class _Slots:
    """Slot numbers of one plan's rewritten functions (each template is used once in a plan)."""

    def __init__(self) -> None:
        self.next = 0

    def take(self) -> int:
        self.next += 1
        return self.next - 1


def _aggregate(cat: Catalyst, node: Any, child: Any, slots: _Slots) -> Any:
    """An Aggregate over ``child`` whose floating-point sums and averages are exact (see the module), under a
    projection of the sums and one of the node's own results; the node over ``child`` when it has none."""
    found = cat.physical_aggregation(node)
    same = node if child is node.child() else cat.with_children(node, [child])
    if found is None:
        return same
    grouping, aggs, results, _ = found
    chosen = [ae for ae in aggs if rewritten(cat, ae)]
    if not chosen:
        return same
    double_t = cat.scala_object("org.apache.spark.sql.types.DoubleType")
    args: list[tuple[Any, _Template]] = []  # one slot per argument: sum(x) and avg(x) share it
    bound: list[Any] = []
    values: dict[int, Any] = {}
    for ae in chosen:
        arg = ae.aggregateFunction().child()
        if ae.filter().isDefined():  # FILTER (WHERE p): the rows p does not pass add nothing
            arg = cat.null_unless(ae.filter().get(), arg)
        if not isinstance(spark_type(arg), T.DoubleType):
            arg = cat.jclass(f"{_EXPRESSIONS}.Cast")(arg, double_t, cat.none())  # a FLOAT exactly
        t = next((t for a, t in args if a.semanticEquals(arg)), None)
        if t is None:
            t = _template(cat, slots.take())
            args.append((arg, t))
            bound.append(cat.alias(arg, t.x.name(), t.x.exprId()))
        values[ae.resultId().id()] = (t.value.toAttribute() if cat.cls(ae.aggregateFunction()) == "Sum"
                                      else _average(cat, t))
    templates = [t for _, t in args]
    inputs = cat.items(child.output())
    below = cat.project(inputs + bound, child)
    below = cat.project(inputs + [b.toAttribute() for b in bound] + [t.bits for t in templates], below)
    below = cat.project(inputs + [e for t in templates for e in (t.x, *t.pieces)], below)
    others = [cat.alias(ae, "agg", ae.resultId()) for ae in aggs if not rewritten(cat, ae)]
    new = node.copy(node.groupingExpressions(), cat.seq(grouping + others + [t.sums for t in templates]), below,
                    node.hint())
    from spark_jobs.transform.incremental.averages import substituted

    # each sum decoded once a row: its magnitude and sign (a few BigInteger calls), then SQL
    magnitudes = cat.project(cat.items(new.output()) + [m for t in templates for m in t.magnitude], new)
    decoded = cat.project(cat.items(magnitudes.output()) + [t.value for t in templates], magnitudes)
    return cat.project([substituted(cat, r, values) for r in results], decoded)


def exact(cat: Catalyst, plan: Any, slots: _Slots | None = None) -> Any:
    """``plan`` with every ``sum``/``avg`` of floating-point values in its aggregates exact (``plan`` itself when
    it has none)."""
    slots = slots or _Slots()
    if not plan.containsPattern(cat.static("org.apache.spark.sql.catalyst.trees.TreePattern",
                                           "AGGREGATE_EXPRESSION")()):
        return plan
    kids = cat.items(plan.children())
    new = [exact(cat, k, slots) for k in kids]
    if cat.cls(plan) == "Aggregate":
        return _aggregate(cat, plan, new[0], slots)
    if all(n is k for n, k in zip(new, kids)):
        return plan
    return cat.with_children(plan, new)


def slot_of(name: str) -> int | None:
    """The slot of a column a rewrite added (``__odf_exact3_P7`` -> 3), None for other names."""
    if not name.startswith(PREFIX):
        return None
    digits = name[len(PREFIX):].split("_", 1)[0]
    return int(digits) if digits.isdigit() else None


def label(cat: Catalyst, child: Any, slot: int) -> str:
    """What odf explain says of an exact sum: ``exact sum(<its argument>)`` (``child``: the aggregate's input)."""
    name = f"{PREFIX}{slot}"
    node = child
    for _ in range(4):  # the projections below the aggregate
        if cat.cls(node) != "Project":
            break
        for e in cat.items(node.projectList()):
            if cat.cls(e) == "Alias" and str(e.name()) == name:
                return f"exact sum({e.child().sql()})"
        node = node.child()
    return f"exact sum({name})"


def arguments(cat: Catalyst, child: Any, slot: int) -> tuple[Any, ...]:
    """An exact sum's value and pieces among the aggregate's input attributes: x, k, p0, p1, p2, nan, pinf, ninf."""
    names = {str(a.name()): a for a in cat.items(child.output())}
    name = f"{PREFIX}{slot}"
    return (names[name], *(names[f"{name}_{p}"] for p in _PARTS))


def state_of(cat: Catalyst, result: Any) -> int | None:
    """The slot of an aggregate's result that is an exact sum's state (its number and counts), else None."""
    if cat.cls(result) != "Alias":
        return None
    name = str(result.name())
    return slot_of(name) if name.startswith(PREFIX) and name.endswith(SUMS) else None


def sum_ids(cat: Catalyst, result: Any) -> list[int]:
    """The expression ids of the integer sums (the aggregate's functions) an exact sum's state result reads."""
    return [a.exprId().id() for a in cat.items(result.child().references().toSeq())]
