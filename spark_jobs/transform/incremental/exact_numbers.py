"""An exact sum of floating-point values as a number in Catalyst expressions: built, changed and decoded.

The exact sum of DOUBLEs is an integer number of units of 2^-1074 (the smallest subnormal) below 2^2098
(:mod:`.exact_sums` says how a value becomes pieces at 32-bit positions). Here it is a ``java.math.BigInteger``: built
from the :data:`POSITIONS` position sums of a group (:func:`number_of`), changed by a step's few rows
(:func:`change_of`, :func:`plus`), kept as its two's complement bytes in a struct with its counts (:func:`state`,
:data:`STATE_FIELDS`) and decoded to the correctly rounded double (:func:`magnitude`, then :func:`value_sql`).

Spark has no function for these: the expressions are JVM calls (``StaticInvoke``/``Invoke``) built through py4j, once
per driver; the decoding's arithmetic is SQL.
"""
from __future__ import annotations

import threading
from typing import Any

from spark_jobs.transform.catalyst import Catalyst

POSITIONS = 66  # 32-bit positions of units of 2^-1074: a value's pieces reach position 63 + 2
_EXPRESSIONS = "org.apache.spark.sql.catalyst.expressions"
_LOCK = threading.Lock()
STATE_FIELDS = ("v", "n", "nan", "pinf", "ninf")  # an exact sum's state: the number's bytes, then its four counts


_COLUMNS: dict[tuple[int, str, tuple[str, ...]], Any] = {}  # expressions over columns by name, per driver


def magnitude(cat: Catalyst, number: Any, name: str) -> list[Any]:
    """Aliases of a number's (a BigInteger's) top 63 bits (``<name>_top``: ``|number| >> shift``, a long), the
    ``shift`` (``max(bitLength - 63, 0)``), whether a bit below it is set (``<name>_sticky``) and its sign: a few
    BigInteger calls, computed once a row (see :func:`invoke`), so the decoding (:func:`value_sql`) is arithmetic
    on plain numbers."""
    J = cat.jclass
    E = _EXPRESSIONS
    int_t = cat.scala_object("org.apache.spark.sql.types.IntegerType")
    long_t = cat.scala_object("org.apache.spark.sql.types.LongType")
    lit = J(f"{E}.Literal")
    size = invoke(cat, number, "abs", biginteger(cat))
    shift = J(f"{E}.Greatest")(cat.seq([J(f"{E}.Subtract")(invoke(cat, size, "bitLength", int_t), lit(63, int_t)),
                                        lit(0, int_t)]))
    top = invoke(cat, invoke(cat, size, "shiftRight", biginteger(cat), [shift]), "longValue", long_t, once=True)
    sticky = J(f"{E}.And")(J(f"{E}.GreaterThan")(shift, lit(0, int_t)),
                           J(f"{E}.LessThan")(invoke(cat, size, "getLowestSetBit", int_t, once=True), shift))
    # (the shift is an int of the top's expression: once as well, through its bitLength)
    shift_once = J(f"{E}.Greatest")(cat.seq([J(f"{E}.Subtract")(invoke(cat, size, "bitLength", int_t, once=True),
                                                                lit(63, int_t)), lit(0, int_t)]))
    return [cat.alias(top, f"{name}_top"), cat.alias(shift_once, f"{name}_shift"),
            cat.alias(sticky, f"{name}_sticky"), cat.alias(invoke(cat, number, "signum", int_t, once=True),
                                                           f"{name}_sign")]


def value_sql(name: str) -> str:
    """The sum from a state (``<name>_sums``) and its number's parts (:func:`magnitude`), in SQL: NULL over no
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


def state(cat: Catalyst, number: Any, count: Any, nan: Any, pinf: Any, ninf: Any) -> Any:
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


def number_bytes(cat: Catalyst, positions: list[Any]) -> Any:
    """The bytes of :func:`_number` of ``positions``."""
    return invoke(cat, _number(cat, positions), "toByteArray",
                   cat.scala_object("org.apache.spark.sql.types.BinaryType"))


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
    return _column(cat, "number", tuple(columns), lambda cols: number_bytes(cat, cols))


def change_of(cat: Catalyst, column: str) -> Any:
    """The bytes of the exact number of ``column``, an ``ARRAY<STRUCT<k, s0, s1, s2>>`` of position sums (``s0``
    at position ``k``, ``s1`` at ``k + 1``, ``s2`` at ``k + 2``): a step's change of a group's number, from its
    changed rows summed per position. Folded by an interpreted higher-order function (a few BigInteger calls an
    element), so a step compiles no code for the positions."""
    J = cat.jclass
    E = _EXPRESSIONS
    big = biginteger(cat)
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
        total = integer(cat, acc)
        for i in range(3):  # + s_i * 2^(32 (k + i))
            at = J(f"{E}.Multiply")(J(f"{E}.Add")(k, lit(i, int_t)), lit(32, int_t))
            term = invoke(cat, static(cat, "java.math.BigInteger", big, "valueOf",
                                        [field(e, lit(utf8(f"s{i}"), string))]), "shiftLeft", big, [at])
            total = invoke(cat, total, "add", big, [term])
        merge = J(f"{E}.LambdaFunction")(invoke(cat, total, "toByteArray", binary), cat.seq([acc, e]), False)
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
        total = invoke(cat, invoke(cat, integer(cat, x), "add", biginteger(cat), [integer(cat, y)]), "toByteArray",
                        binary)
        branches = [J("scala.Tuple2")(J(f"{E}.IsNull")(x), y), J("scala.Tuple2")(J(f"{E}.IsNull")(y), x)]
        return J(f"{E}.CaseWhen")(cat.seq(branches), J("scala.Some")(total))

    return _column(cat, "plus", (a, b), build)


def integer(cat: Catalyst, number: Any) -> Any:
    """``new BigInteger(number)``: a number's bytes as a BigInteger."""
    return cat.jclass(f"{_EXPRESSIONS}.objects.NewInstance")(
        cat.static("java.lang.Class", "forName")("java.math.BigInteger"), cat.seq([number]), cat.seq([]), True,
        biginteger(cat), cat.none())


def static(cat: Catalyst, cls: str, data_type: Any, method: str, args: list[Any]) -> Any:
    jcls = cat.static("java.lang.Class", "forName")(cls)
    return cat.jclass(f"{_EXPRESSIONS}.objects.StaticInvoke")(jcls, data_type, method, cat.seq(args), cat.seq([]),
                                                               True, True, True, cat.none())


def invoke(cat: Catalyst, target: Any, method: str, data_type: Any, args: list[Any] = (), once: bool = False
            ) -> Any:
    """``target.method(args)``; ``once``: marked non-deterministic (it is not), so that Spark's optimiser computes it
    in its own projection instead of copying it into every filter and projection above that reads it."""
    return cat.jclass(f"{_EXPRESSIONS}.objects.Invoke")(target, method, data_type, cat.seq(list(args)), cat.seq([]),
                                                         True, True, not once)


def biginteger(cat: Catalyst) -> Any:
    return cat.jclass("org.apache.spark.sql.types.ObjectType")(cat.static("java.lang.Class", "forName")(
        "java.math.BigInteger"))


def _number(cat: Catalyst, positions: list[Any]) -> Any:
    """The exact sum in units of 2^-1074, sum of position q's sum * 2^(32q), as a BigInteger (zero positions cost no
    allocation)."""
    big = biginteger(cat)
    int_t = cat.scala_object("org.apache.spark.sql.types.IntegerType")
    total = None
    for q, p in enumerate(positions):
        term = static(cat, "java.math.BigInteger", big, "valueOf", [p])
        if q:
            term = invoke(cat, term, "shiftLeft", big, [cat.jclass(f"{_EXPRESSIONS}.Literal")(32 * q, int_t)])
        total = term if total is None else invoke(cat, total, "add", big, [term])
    return total
