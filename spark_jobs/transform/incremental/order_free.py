"""Which values do not depend on the order Spark reads rows in: the types whose equal values are the same value, and
the aggregate functions whose value is a function of the multiset of their rows.

A leaf of the incremental engine: the operators by key (:mod:`.keyed`) refuse what depends on the order, and the
tie-breakers (:mod:`.ties`) decide which windows need one order for their tied rows.
"""
from __future__ import annotations

from typing import Any, Sequence

from pyspark.sql import types as T

from spark_jobs.transform.catalyst import Catalyst
from spark_jobs.transform.incremental.frames import spark_type
from spark_jobs.transform.incremental.plan import Unsupported

# aggregate functions whose value is a function of the multiset of their rows, whatever order Spark reads them in;
# ``_EXACT_ONLY`` ones only over values that compare equal only when they are equal (no floating point: a sum's
# rounding depends on the order of its additions, and max(-0.0, 0.0) is the first of the two; no collation)
_ORDER_FREE = frozenset({"Count", "BitAndAgg", "BitOrAgg", "BitXorAgg", "BoolAnd", "BoolOr", "HyperLogLogPlusPlus"})
_EXACT_ONLY = frozenset({"Sum", "Average", "Min", "Max", "Percentile"})


def exact(t: T.DataType) -> bool:
    """Whether equal values of the type are the same value (no floating point, no collated string, inside too)."""
    if isinstance(t, (T.FloatType, T.DoubleType)):
        return False
    if isinstance(t, T.StringType):
        return t.collation == "UTF8_BINARY"
    if isinstance(t, T.StructType):
        return all(exact(f.dataType) for f in t.fields)
    if isinstance(t, T.ArrayType):
        return exact(t.elementType)
    if isinstance(t, T.MapType):
        return exact(t.keyType) and exact(t.valueType)
    return True


def order_dependent(cat: Catalyst, exprs: Sequence[Any]) -> str | None:
    """The first aggregate function in ``exprs`` whose value can depend on the order Spark reads its rows in (a
    DOUBLE sum, collect_list, first, stddev...), as SQL (with a hint, for a sum); None when there is none.

    An operator by key recomputes the touched keys' output *before* the change from the history, and retracts those
    rows: a value that depends on the read order can then differ from the row output before, and the retraction
    would remove a row that is not there. Such an operator takes the full path, which keeps its output."""
    pending = list(exprs)
    while pending:
        e = pending.pop()
        if cat.cls(e) == "AggregateExpression":
            fn = e.aggregateFunction()
            name = cat.cls(fn)
            if name in _ORDER_FREE:
                continue
            if name in _EXACT_ONLY and all(exact(spark_type(a)) for a in cat.items(fn.children())):
                continue
            hint = (" (exact: a sum or an average of DECIMALs, or one of floating-point values in a GROUP BY without "
                    "DISTINCT)" if name in ("Sum", "Average") else "")
            return str(e.sql()) + hint
        pending += cat.items(e.children())
    return None


def refuse_order_dependent(cat: Catalyst, name: str, exprs: Sequence[Any], what: str) -> None:
    """Refuses an operator by key whose output depends on the order of its rows (:func:`order_dependent`)."""
    found = order_dependent(cat, exprs)
    if found is not None:
        raise Unsupported(name, f"{found}: its value depends on the order Spark reads the rows in, so {what} "
                                "recomputed from the history could differ from the row output before it")
