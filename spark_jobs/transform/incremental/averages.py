"""Averages as a sum and a count, wherever a stateful query is evaluated: integers' exactly, DECIMALs' as Spark does.

Spark's ``avg`` of an integer column adds the values as DOUBLEs: past 2^53 the additions round, so the value depends
on the order Spark reads the rows in (the average of 2^53, 1 and 1 is 3002399751580331.5 or 3002399751580330.5). The
incremental path keeps an exact DECIMAL sum and divides once (:mod:`.aggregate`), and an operator by key recomputes a
key's output from the history and retracts it (:mod:`.keyed`): an average the full path or a recomputation rounded
in another order than the state would be another row than the one output, and its retraction would remove a row that
is not there. So before a stateful query is planned or evaluated (:mod:`.canonical`), every ``avg`` of integers, in
an aggregate or a window, becomes

    IF(count(CAST(x AS DECIMAL(20, 0))) > 0,
       CAST(sum(CAST(x AS DECIMAL(20, 0))) AS DOUBLE) / CAST(count(...) AS DOUBLE), NULL)

the exact sum rounded once, divided by the count: one value whatever the order or the batching, and Spark's own
average wherever Spark's additions are exact (every partial sum within 2^53). (Spark's optimiser computes the
average of a DECIMAL of up to 11 digits as one of its unscaled longs: rewritten so too.)

A DECIMAL average is exact in Spark already (a DECIMAL sum), but no operator keeps a state for Spark's average
function; as ``sum(x)`` and ``count(x)`` under Spark's own final expression (``IF(count = 0, NULL, sum / count)`` at
Spark's DECIMAL precision) it is the same value, from two functions a state keeps. DISTINCT and FILTER carry over to
both functions (both over the one argument, so a DISTINCT stays one column set).
"""
from __future__ import annotations

from typing import Any

from pyspark.sql import types as T

from spark_jobs.transform.catalyst import Catalyst
from spark_jobs.transform.incremental.frames import spark_type

_EXPRESSIONS = "org.apache.spark.sql.catalyst.expressions"
_INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
SUM, COUNT = "__odf_avg_sum", "__odf_avg_count"  # a window's two columns for one average


def _pattern(cat: Catalyst, name: str) -> Any:
    return cat.static("org.apache.spark.sql.catalyst.trees.TreePattern", name)()


def rewritten(cat: Catalyst, ae: Any) -> bool:
    """Whether an AggregateExpression is Spark's ``avg`` of an integer or DECIMAL column (written as two functions)."""
    fn = ae.aggregateFunction()
    return cat.cls(fn) == "Average" and isinstance(spark_type(fn.child()), (*_INTEGRAL, T.DecimalType))


def _integral(cat: Catalyst, ae: Any) -> bool:
    return isinstance(spark_type(ae.aggregateFunction().child()), _INTEGRAL)


def _parts(cat: Catalyst, ae: Any) -> tuple[Any, Any]:
    """(the sum, the count) of an ``avg``'s AggregateExpression, with its mode, DISTINCT and FILTER: of its integers
    as DECIMAL(20, 0) (exact), or of its DECIMALs (the type of Spark's own sum buffer)."""
    arg = ae.aggregateFunction().child()
    if _integral(cat, ae):
        decimal = cat.jclass("org.apache.spark.sql.types.DecimalType")(20, 0)  # every long, exactly
        arg = cat.jclass(f"{_EXPRESSIONS}.Cast")(arg, decimal, cat.none())
    new_id = cat.scala_object(f"{_EXPRESSIONS}.NamedExpression").newExprId

    def aggregate(fn: Any) -> Any:
        return cat.jclass(f"{_EXPRESSIONS}.aggregate.AggregateExpression")(fn, ae.mode(), ae.isDistinct(),
                                                                           ae.filter(), new_id())

    return (aggregate(cat.jclass(f"{_EXPRESSIONS}.aggregate.Sum")(arg)),
            aggregate(cat.jclass(f"{_EXPRESSIONS}.aggregate.Count")(cat.seq([arg]))))


def _final(cat: Catalyst, ae: Any, total: Any, count: Any) -> Any:
    """The average from its sum and count: :func:`quotient` for integers, Spark's own final expression for DECIMALs
    (its buffer's sum and count replaced by ``total`` and ``count``)."""
    if _integral(cat, ae):
        return quotient(cat, total, count)
    fn = ae.aggregateFunction()
    buffer = cat.items(fn.aggBufferAttributes())
    names = [cat.cls(a) == "AttributeReference" and str(a.name()) for a in buffer]
    if names != ["sum", "count"]:  # (Spark's Average keeps these two; another layout is not one this knows)
        raise AssertionError(f"unexpected buffer of {fn.sql()}: {names}")
    spark = substituted(cat, fn.evaluateExpression(), {buffer[0].exprId().id(): total, buffer[1].exprId().id(): count})
    # NULL where the count is NULL too (a group's values before it had any, in a step's pairs): Spark's DECIMAL division
    # takes a NULL sum for an overflow and fails
    return cat.null_unless(_positive(cat, count), spark)


def _positive(cat: Catalyst, count: Any) -> Any:
    zero = cat.scala_object(f"{_EXPRESSIONS}.Literal").default(count.dataType())
    return cat.jclass(f"{_EXPRESSIONS}.GreaterThan")(count, zero)


def substituted(cat: Catalyst, e: Any, by_id: dict[int, Any]) -> Any:
    """``e`` with the attributes whose expression ids are keys of ``by_id`` replaced by their values."""
    if cat.cls(e) == "AttributeReference":
        return by_id.get(e.exprId().id(), e)
    kids = cat.items(e.children())
    new = [substituted(cat, k, by_id) for k in kids]
    return e if all(n is k for n, k in zip(new, kids)) else cat.with_children(e, new)


def quotient(cat: Catalyst, total: Any, count: Any) -> Any:
    """``IF(count > 0, CAST(total AS DOUBLE) / CAST(count AS DOUBLE), NULL)``, as the state's average is computed."""
    double = cat.scala_object("org.apache.spark.sql.types.DoubleType")
    cast = cat.jclass(f"{_EXPRESSIONS}.Cast")
    ratio = cat.jclass(f"{_EXPRESSIONS}.Divide")(cast(total, double, cat.none()), cast(count, double, cat.none()))
    return cat.null_unless(_positive(cat, count), ratio)


def _expression(cat: Catalyst, e: Any) -> Any:
    """``e`` with every integer or DECIMAL ``avg`` aggregate in it rewritten (``e`` itself when there is none)."""
    if not e.containsPattern(_pattern(cat, "AVERAGE")):
        return e
    if cat.cls(e) == "AggregateExpression" and rewritten(cat, e):
        return _final(cat, e, *_parts(cat, e))
    kids = cat.items(e.children())
    new = [_expression(cat, k) for k in kids]
    return e if all(n is k for n, k in zip(new, kids)) else cat.with_children(e, new)


def _window(cat: Catalyst, node: Any, child: Any) -> Any:
    """A Window whose integer and DECIMAL averages are two window functions each (sum and count over the same
    window), under a Project that divides them into the averages' own attributes; the Window over ``child`` when it
    has none."""
    exprs = cat.items(node.windowExpressions())
    kept, averages = [], {}
    for e in exprs:
        we = e.child() if cat.cls(e) == "Alias" else None
        fn = we.windowFunction() if we is not None and cat.cls(we) == "WindowExpression" else None
        if fn is None or cat.cls(fn) != "AggregateExpression" or not rewritten(cat, fn):
            kept.append(e)
            continue
        over = cat.jclass(f"{_EXPRESSIONS}.WindowExpression")
        total, count = (cat.alias(over(part, we.windowSpec()), name)
                        for part, name in zip(_parts(cat, fn), (SUM, COUNT)))
        kept += [total, count]
        averages[e.exprId().id()] = cat.alias(_final(cat, fn, total.toAttribute(), count.toAttribute()), e.name(),
                                              e.exprId())
    if not averages:
        return node if child is node.child() else cat.with_children(node, [child])
    window = node.copy(cat.seq(kept), node.partitionSpec(), node.orderSpec(), child, node.productElement(4))
    return cat.project([averages.get(a.exprId().id(), a) for a in cat.items(node.output())], window)


def exact(cat: Catalyst, plan: Any) -> Any:
    """``plan`` with every ``avg`` of integers or DECIMALs, in aggregates and windows, as a sum and a count (``plan``
    itself when it has none)."""
    if not plan.containsPattern(_pattern(cat, "AVERAGE")):
        return plan
    kids = cat.items(plan.children())
    new = [exact(cat, k) for k in kids]
    name = cat.cls(plan)
    if name == "Window":
        return _window(cat, plan, new[0])
    if name == "Aggregate":
        exprs = cat.items(plan.aggregateExpressions())
        divided = [_expression(cat, e) for e in exprs]
        if any(d is not e for d, e in zip(divided, exprs)):
            return plan.copy(plan.groupingExpressions(), cat.seq(divided), new[0], plan.hint())
    if all(n is k for n, k in zip(new, kids)):
        return plan
    return cat.with_children(plan, new)
