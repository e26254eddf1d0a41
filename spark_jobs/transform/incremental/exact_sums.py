"""Sums of floating-point values as their exact sum rounded once, wherever a stateful query is evaluated.

Spark adds a DOUBLE ``sum``'s values one by one, rounding after each addition, in the order it reads the rows in: the
value depends on how the inputs were cut into slices and files, so no state can be updated to it (``(a + b) - b``
need not be ``a``), and a group recomputed from the history can differ in its last bits from the row output before.
So before a stateful query is planned or evaluated (:mod:`.canonical`: its incremental plan, the full path's output, a
rebuild, every recomputation), every ``sum`` and ``avg`` of DOUBLE or FLOAT values in an aggregate becomes the exact
sum of the values, rounded once to the nearest double (ties to even): one value for any order and any batching, the
value ``math.fsum`` gives, and one that integer sums keep exactly.

The exact sum is an integer number of units of 2^-1074 (the smallest subnormal double) below 2^2098. A value ``x =
m * 2^u`` units (``m`` its 53-bit significand) adds ``m * 2^(u mod 32)`` at the 32-bit *position* ``u div 32``: three
pieces below 2^32, at that position and the next two. Per group the state is one long sum per position
(:data:`POSITIONS` of them), exact and invertible for up to 2^31 values a group (ANSI arithmetic fails a step beyond),
then counts of the NaNs, +Infinity, -Infinity and of all the values: :data:`WIDTH` integer sums, which the aggregate
outputs as one ``ARRAY<BIGINT>`` (a state of one column, :mod:`.aggregate`'s ``exact`` kind). The value: the
positions' sums as a ``BigInteger`` (its two's complement bytes), rounded to 64 bits with a sticky last bit (round to
odd), converted by the JDK (round to nearest) and scaled by a power of two (exact): the correctly rounded sum; NaN if a
NaN or both infinities were added, else an infinity if one was, NULL over no values, as Spark. An average is that sum
divided by the count.

The plan keeps Spark's shape: projections below the aggregate give each row's position and pieces, the aggregate's
functions are integer sums under one ``array(...)``, and projections above turn the array into the sum, then compute
the aggregate's own result expressions. The expressions are a template built once per driver and slot
(:func:`_template`), so a rewrite costs a few py4j calls. ``sum(DISTINCT x)`` of floating-point values keeps Spark's
function (the full path).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from pyspark.sql import functions as F
from pyspark.sql import types as T

from spark_jobs.transform.catalyst import Catalyst
from spark_jobs.transform.incremental.frames import spark_type

POSITIONS = 66  # 32-bit positions of units of 2^-1074: a value's pieces reach position 63 + 2
NAN, PINF, NINF, COUNT = POSITIONS, POSITIONS + 1, POSITIONS + 2, POSITIONS + 3  # the counts' places in the array
WIDTH = POSITIONS + 4
PREFIX = "__odf_exact"  # the names of the columns a rewrite adds: __odf_exact<slot>, __odf_exact<slot>_<part>
SUMS = "_sums"  # __odf_exact<slot>_sums: the aggregate's array of a slot's integer sums
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
    sums: Any  # Alias (``__odf_exact<slot>_sums``) of the state: named_struct(v: the number's bytes, n, nan, pinf, ninf)
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
    x = J(f"{_EXPRESSIONS}.AttributeReference")(name, double_t, True, cat.static(
        "org.apache.spark.sql.types.Metadata", "empty")(), cat.scala_object(f"{_EXPRESSIONS}.NamedExpression").newExprId(),
        cat.seq([]))
    leaf = J("org.apache.spark.sql.catalyst.plans.logical.LocalRelation")(cat.seq([x]), cat.seq([]), False,
                                                                            cat.none())
    long_t = cat.scala_object("org.apache.spark.sql.types.LongType")
    zero = J(f"{_EXPRESSIONS}.Literal")(0.0, double_t)
    raw = _static(cat, "java.lang.Double", long_t, "doubleToRawLongBits",
                  [J(f"{_EXPRESSIONS}.Coalesce")(cat.seq([x, zero]))])
    bits = cat.alias(raw, f"{name}_bits")
    with_bits = cat.dataframe(cat.project([x, bits], leaf))
    pieces = with_bits.selectExpr(name, *[f"{sql} AS {part[p]}" for p, sql in zip(_PARTS, _pieces_sql(
        f"`{name}`", f"`{name}_bits`"))])
    k, p0, p1, p2 = (f"`{part[p]}`" for p in ("k", "p0", "p1", "p2"))
    sums = [f"sum(CASE WHEN {k} = {q} THEN {p0} WHEN {k} = {q - 1} THEN {p1} WHEN {k} = {q - 2} THEN {p2} ELSE 0L END)"
            for q in range(POSITIONS)]
    sums += [f"sum(`{part[p]}`)" for p in ("nan", "pinf", "ninf")]
    sums.append(f"count(`{name}`)")
    aggregate = pieces.selectExpr(f"array({', '.join(sums)}) AS `{name}`")._jdf.queryExecution().analyzed()
    project = aggregate.child()
    functions = cat.items(cat.items(aggregate.aggregateExpressions())[0].child().children())
    state = _state(cat, _bytes(cat, functions[:POSITIONS]), *(functions[i] for i in (COUNT, NAN, PINF, NINF)))
    sums_alias = cat.alias(state, f"{name}{SUMS}")
    held = sums_alias.toAttribute()
    field = J(f"{_EXPRESSIONS}.GetStructField")
    magnitude = _magnitude(cat, _integer(cat, field(held, 0, cat.none())), name)
    over = cat.project([held, *magnitude], J("org.apache.spark.sql.catalyst.plans.logical.LocalRelation")(
        cat.seq([held]), cat.seq([]), False, cat.none()))
    decoded = cat.dataframe(over).selectExpr(f"{_value_sql(name)} AS `{name}_value`")._jdf.queryExecution().analyzed()
    value = cat.items(decoded.projectList())[0]
    return _Template(x, bits, [e for e in cat.items(project.projectList()) if cat.cls(e) == "Alias"], sums_alias,
                     magnitude, value, field(held, 1, cat.none()))


def _magnitude(cat: Catalyst, number: Any, name: str) -> list[Any]:
    """Aliases of a number's (a BigInteger's) top 63 bits (``<name>_top``: ``|number| >> shift``, a long), the
    ``shift`` (``max(bitLength - 63, 0)``), whether a bit below it is set (``<name>_sticky``) and its sign: a few
    BigInteger calls, computed once a row (see :func:`_invoke`), so the decoding (:func:`_value_sql`) is arithmetic
    on plain numbers."""
    J = cat.jclass
    E = _EXPRESSIONS
    int_t = cat.scala_object("org.apache.spark.sql.types.IntegerType")
    long_t = cat.scala_object("org.apache.spark.sql.types.LongType")
    lit = J(f"{E}.Literal")
    size = _invoke(cat, number, "abs", _big(cat))
    shift = J(f"{E}.Greatest")(cat.seq([J(f"{E}.Subtract")(_invoke(cat, size, "bitLength", int_t), lit(63, int_t)),
                                        lit(0, int_t)]))
    top = _invoke(cat, _invoke(cat, size, "shiftRight", _big(cat), [shift]), "longValue", long_t, once=True)
    sticky = J(f"{E}.And")(J(f"{E}.GreaterThan")(shift, lit(0, int_t)),
                           J(f"{E}.LessThan")(_invoke(cat, size, "getLowestSetBit", int_t, once=True), shift))
    # (the shift is an int of the top's expression: once as well, through its bitLength)
    shift_once = J(f"{E}.Greatest")(cat.seq([J(f"{E}.Subtract")(_invoke(cat, size, "bitLength", int_t, once=True),
                                                                lit(63, int_t)), lit(0, int_t)]))
    return [cat.alias(top, f"{name}_top"), cat.alias(shift_once, f"{name}_shift"),
            cat.alias(sticky, f"{name}_sticky"), cat.alias(_invoke(cat, number, "signum", int_t, once=True),
                                                           f"{name}_sign")]


def _value_sql(name: str) -> str:
    """The sum from a state (``<name>_sums``) and its number's parts (:func:`_magnitude`), in SQL: NULL over no
    values, NaN, an infinity, else the exact sum rounded once.

    The top 63 bits with the last one set when a bit below them is (round to odd: they hold at least 62
    significant bits whenever bits were dropped), converted to a double (correctly rounded) and scaled by
    ``2^(shift - 1074)`` (exact: the result is normal, or an exact subnormal when nothing was dropped), are the
    correctly rounded sum; an infinity past the largest double."""
    state, top, shift, sticky, sign = (f"`{name}_{p}`" for p in ("sums", "top", "shift", "sticky", "sign"))
    odd = f"CASE WHEN {sticky} AND {top} % 2 = 0 THEN {top} + 1 ELSE {top} END"
    finite = f"{sign} * CAST({odd} AS DOUBLE) * pow(2.0D, {shift} - 1074)"
    some = {f: f"coalesce({state}.{f}, 0L) > 0" for f in ("n", "nan", "pinf", "ninf")}
    return (f"CASE WHEN NOT {some['n']} THEN CAST(NULL AS DOUBLE) "
            f"WHEN {some['nan']} OR ({some['pinf']} AND {some['ninf']}) THEN double('NaN') "
            f"WHEN {some['pinf']} THEN double('inf') WHEN {some['ninf']} THEN double('-inf') ELSE {finite} END")


STATE_FIELDS = ("v", "n", "nan", "pinf", "ninf")  # an exact sum's state: the number's bytes, then its four counts


def _state(cat: Catalyst, number: Any, count: Any, nan: Any, pinf: Any, ninf: Any) -> Any:
    """``named_struct('v', number, 'n', count, 'nan', nan, 'pinf', pinf, 'ninf', ninf)``: an exact sum's state (every
    field nullable, as a state read back from parquet is)."""
    string = cat.scala_object("org.apache.spark.sql.types.StringType")
    lit = cat.jclass(f"{_EXPRESSIONS}.Literal")
    utf8 = cat.static("org.apache.spark.unsafe.types.UTF8String", "fromString")
    nullable = cat.jclass(f"{_EXPRESSIONS}.KnownNullable")
    parts = []
    for name, e in zip(STATE_FIELDS, (number, count, nan, pinf, ninf)):
        parts += [lit(utf8(name), string), nullable(e)]
    return cat.jclass(f"{_EXPRESSIONS}.CreateNamedStruct")(cat.seq(parts))


def _bytes(cat: Catalyst, positions: list[Any]) -> Any:
    """The bytes of :func:`_number` of ``positions``."""
    return _invoke(cat, _number(cat, positions), "toByteArray",
                   cat.scala_object("org.apache.spark.sql.types.BinaryType"))


_COLUMNS: dict[tuple[int, str, tuple[str, ...]], Any] = {}  # expressions over columns by name, per driver


def _column(cat: Catalyst, kind: str, columns: tuple[str, ...], build: Any) -> Any:
    """A pyspark Column of an expression over the columns named ``columns`` (unresolved: any DataFrame that has
    them), built once per driver."""
    from pyspark.sql import Column

    key = (id(cat.jvm._gateway_client), kind, columns)
    with _LOCK:
        found = _COLUMNS.get(key)
    if found is None:
        unresolved = cat.jclass("org.apache.spark.sql.catalyst.analysis.UnresolvedAttribute")
        found = build([unresolved(cat.seq([c])) for c in columns])
        with _LOCK:
            found = _COLUMNS.setdefault(key, found)
    return Column(cat.static("org.apache.spark.sql.classic.ExpressionUtils", "column")(found))


def number_of(cat: Catalyst, columns: list[str]) -> Any:
    """The bytes of the exact number whose position sums are the columns ``columns`` (a rebuild's states; NULL over
    no values)."""
    return _column(cat, "number", tuple(columns), lambda cols: _bytes(cat, cols))


def change_of(cat: Catalyst, column: str) -> Any:
    """The bytes of the exact number of ``column``, an ``ARRAY<STRUCT<k, s0, s1, s2>>`` of position sums (``s0``
    at position ``k``, ``s1`` at ``k + 1``, ``s2`` at ``k + 2``): a step's change of a group's number, from its
    changed rows summed per position. Folded by an interpreted higher-order function (a few BigInteger calls an
    element), so a step compiles no code for the positions."""
    J = cat.jclass
    E = _EXPRESSIONS
    big = _big(cat)
    int_t = cat.scala_object("org.apache.spark.sql.types.IntegerType")
    binary = cat.scala_object("org.apache.spark.sql.types.BinaryType")

    def build(cols: list[Any]) -> Any:
        var = cat.jclass(f"{E}.UnresolvedNamedLambdaVariable")
        acc, e = var(cat.seq(["acc"])), var(cat.seq(["e"]))
        lit = J(f"{E}.Literal")
        field = J("org.apache.spark.sql.catalyst.analysis.UnresolvedExtractValue")
        utf8 = cat.static("org.apache.spark.unsafe.types.UTF8String", "fromString")
        string = cat.scala_object("org.apache.spark.sql.types.StringType")
        k = J(f"{E}.Cast")(field(e, lit(utf8("k"), string)), int_t, cat.none())
        total = _integer(cat, acc)
        for i in range(3):  # + s_i * 2^(32 (k + i))
            at = J(f"{E}.Multiply")(J(f"{E}.Add")(k, lit(i, int_t)), lit(32, int_t))
            term = _invoke(cat, _static(cat, "java.math.BigInteger", big, "valueOf",
                                        [field(e, lit(utf8(f"s{i}"), string))]), "shiftLeft", big, [at])
            total = _invoke(cat, total, "add", big, [term])
        merge = J(f"{E}.LambdaFunction")(_invoke(cat, total, "toByteArray", binary), cat.seq([acc, e]), False)
        zero = lit(bytearray(b"\x00"), binary)  # BigInteger.ZERO's bytes
        return J(f"{E}.ArrayAggregate")(cols[0], zero, merge)

    return _column(cat, "change", (column,), build)


def plus(cat: Catalyst, a: str, b: str) -> Any:
    """The bytes of the sum of the numbers in columns ``a`` and ``b`` (a NULL is 0)."""
    J = cat.jclass
    E = _EXPRESSIONS
    binary = cat.scala_object("org.apache.spark.sql.types.BinaryType")

    def build(cols: list[Any]) -> Any:
        x, y = cols
        total = _invoke(cat, _invoke(cat, _integer(cat, x), "add", _big(cat), [_integer(cat, y)]), "toByteArray",
                        binary)
        branches = [J("scala.Tuple2")(J(f"{E}.IsNull")(x), y), J("scala.Tuple2")(J(f"{E}.IsNull")(y), x)]
        return J(f"{E}.CaseWhen")(cat.seq(branches), J("scala.Some")(total))

    return _column(cat, "plus", (a, b), build)


def _integer(cat: Catalyst, number: Any) -> Any:
    """``new BigInteger(number)``: a number's bytes as a BigInteger."""
    return cat.jclass(f"{_EXPRESSIONS}.objects.NewInstance")(
        cat.static("java.lang.Class", "forName")("java.math.BigInteger"), cat.seq([number]), cat.seq([]), True,
        _big(cat), cat.none())


def _static(cat: Catalyst, cls: str, data_type: Any, method: str, args: list[Any]) -> Any:
    jcls = cat.static("java.lang.Class", "forName")(cls)
    return cat.jclass(f"{_EXPRESSIONS}.objects.StaticInvoke")(jcls, data_type, method, cat.seq(args), cat.seq([]),
                                                               True, True, True, cat.none())


def _invoke(cat: Catalyst, target: Any, method: str, data_type: Any, args: list[Any] = (), once: bool = False
            ) -> Any:
    """``target.method(args)``; ``once``: marked non-deterministic (it is not), so that Spark's optimiser computes it
    in its own projection instead of copying it into every filter and projection above that reads it."""
    return cat.jclass(f"{_EXPRESSIONS}.objects.Invoke")(target, method, data_type, cat.seq(list(args)), cat.seq([]),
                                                         True, True, not once)


def _big(cat: Catalyst) -> Any:
    return cat.jclass("org.apache.spark.sql.types.ObjectType")(cat.static("java.lang.Class", "forName")(
        "java.math.BigInteger"))


def _number(cat: Catalyst, positions: list[Any]) -> Any:
    """The exact sum in units of 2^-1074, sum of position q's sum * 2^(32q), as a BigInteger (zero positions cost no
    allocation)."""
    big = _big(cat)
    int_t = cat.scala_object("org.apache.spark.sql.types.IntegerType")
    total = None
    for q, p in enumerate(positions):
        term = _static(cat, "java.math.BigInteger", big, "valueOf", [p])
        if q:
            term = _invoke(cat, term, "shiftLeft", big, [cat.jclass(f"{_EXPRESSIONS}.Literal")(32 * q, int_t)])
        total = term if total is None else _invoke(cat, total, "add", big, [term])
    return total


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
    """The slot of an aggregate's result that is an exact sum's array of integer sums (its state), else None."""
    if cat.cls(result) != "Alias":
        return None
    name = str(result.name())
    return slot_of(name) if name.startswith(PREFIX) and name.endswith(SUMS) else None


def sum_ids(cat: Catalyst, result: Any) -> list[int]:
    """The expression ids of the integer sums (the aggregate's functions) an exact sum's state result reads."""
    return [a.exprId().id() for a in cat.items(result.child().references().toSeq())]
