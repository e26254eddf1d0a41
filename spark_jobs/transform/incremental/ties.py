"""One order for rows tied in a window's ORDER BY, wherever the window is evaluated.

Spark folds rows tied in a window's ORDER BY in the order it reads them. The incremental path recomputes a partition's
output *before* a change from the history and retracts it: a window by key (:mod:`.keyed`) for every change, a
running window (:mod:`.running`) for a late row or a removal. A function that tells tied rows apart (``row_number``,
``lag``, a ``ROWS`` frame) could then give other values than it output, and the retraction would remove a row that is
not there. So before a stateful query is planned or evaluated (its incremental plan, the full path's output, a
rebuild, every recomputation), such a window's ORDER BY gets the child's columns appended as tie-breakers: every
evaluation orders the rows of a partition the same way, up to rows equal in every column, which are interchangeable.

Appending only changes which of the tied rows comes first, which Spark leaves unspecified, for functions whose frame
is made of rows (``ROWS`` frames, ``row_number``, ``lag``/``lead``, ``ntile``; ``rank``-like functions compare their
own ORDER BY values) or covers the whole partition. A ``RANGE`` frame treats tied rows as one (its peers): appending
would split them. So:

- ``first``/``last`` over a RANGE frame (the forward fill ``last(x) IGNORE NULLS``) are written as
  ``min_by``/``max_by`` by the ORDER BY values and the tie-breakers (:func:`_picking`): the frame keeps its peers and
  picks among them by their other columns. :mod:`.running` keeps them as first/last (:func:`picked`).
- A window with functions that need the ties as they are (a RANGE frame; a rank, whose running state counts the
  ORDER BY values) beside ones that tell tied rows apart is split in two (:func:`_split`); a running state keeps one
  state for the two (:func:`split_pair`, :func:`.running.analyze_pair`).
- A function that tells tied rows apart over a RANGE frame (a DOUBLE sum, ``collect_list``): no order fits;
  :func:`refuse_ties` sends a window by key to the full path, which keeps its output.

The first rows per partition (:mod:`.top`) retract the values they stored, not recomputed ones.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from spark_jobs.transform.catalyst import Catalyst
from spark_jobs.transform.incremental.frames import replace, spark_type
from spark_jobs.transform.incremental.order_free import exact, order_dependent
from spark_jobs.transform.incremental.plan import Unsupported

_EXPRESSIONS = "org.apache.spark.sql.catalyst.expressions"
BROKEN = "(rows tied in its ORDER BY in the order of their other columns)"  # said in odf explain
PAIRED = ("its functions over the ties as they are and those with tie-breakers are two Window nodes (docs/"
          "transforms.md) with this one state")  # said in odf explain of a running window split_pair found
_TIE_FREE = frozenset({"Rank", "DenseRank", "PercentRank", "CumeDist"})  # tied rows get one value


@dataclass(frozen=True)
class StateShapes:
    """What the operators with a state make of a node, which the tie-breakers respect. Given by :mod:`.canonical`,
    which sits above both, so this module (a leaf the operators import) imports no operator."""

    #: a Filter that keeps a ranking's first rows per partition (:mod:`.top`): (the ranked child, its path), or None
    first_rows: Callable[[Any], tuple[Any, tuple[int, ...]] | None]
    #: whether a Window keeps a running state (:mod:`.running`)
    running: Callable[[Any], bool]


def bound_sign(v: Any) -> int | None:
    """The sign of a frame bound's value (a number, or an interval as its months or microseconds); None if unknown."""
    if isinstance(v, bool) or v is None:
        return None
    try:
        f = float(v) if isinstance(v, (int, float)) else float(str(v))  # a JVM Decimal prints as its digits
    except ValueError:
        return None
    return (f > 0) - (f < 0)


def _window_expression(cat: Catalyst, e: Any) -> Any | None:
    e = e.child() if cat.cls(e) == "Alias" else e
    return e if cat.cls(e) == "WindowExpression" else None


def _frame(cat: Catalyst, we: Any) -> tuple[bool, bool]:
    """(made of rows, the whole partition) of a window expression's frame."""
    frame = we.windowSpec().frameSpecification()
    if cat.cls(frame) != "SpecifiedWindowFrame":
        return False, False
    whole = cat.cls(frame.lower()) == "UnboundedPreceding$" and cat.cls(frame.upper()) == "UnboundedFollowing$"
    return cat.cls(frame.frameType()) == "RowFrame$", whole


def tie_sensitive(cat: Catalyst, exprs: list[Any]) -> str | None:
    """The first window function in ``exprs`` that can give rows tied in the window's ORDER BY different values
    (``row_number``, ``lag``, a ``ROWS`` frame, or a ``RANGE`` frame over a function of
    :func:`.order_free.order_dependent`), as SQL; None when there is none."""
    for e in exprs:
        we = _window_expression(cat, e)
        if we is None:
            continue
        fn = we.windowFunction()
        if cat.cls(fn) in _TIE_FREE:
            continue
        if cat.cls(fn) == "AggregateExpression":
            rows, whole = _frame(cat, we)
            if (whole or not rows) and (order_dependent(cat, [fn]) is None or picked(cat, fn) is not None):
                continue  # a RANGE frame (or the whole partition) adds tied rows together, or picks among them
        return str(we.sql())
    return None


def peers(cat: Catalyst, exprs: list[Any]) -> str | None:
    """The first window function in ``exprs`` whose frame treats rows tied in the ORDER BY as one (a ``RANGE``
    frame short of the whole partition, ``cume_dist``), as SQL: an ORDER BY with tie-breakers would change its
    value."""
    for e in exprs:
        we = _window_expression(cat, e)
        if we is None:
            continue
        rows, whole = _frame(cat, we)
        if not rows and not whole:
            return str(we.sql())
    return None


def _fixed(cat: Catalyst, node: Any, orders: list[Any] | None = None) -> set[int]:
    """The ids of the child's columns a Window's PARTITION BY or ORDER BY (or ``orders``, sort orders in its place)
    already fixes among tied rows: a column of a type whose equal values are the same value, or the text of any
    column (-0.0 and 0.0 compare equal, and so do strings under a collation: :func:`_breakers`)."""
    found = set()
    orders = cat.items(node.orderSpec()) if orders is None else orders
    for e in cat.items(node.partitionSpec()) + [o.child() for o in orders]:
        if cat.cls(e) == "AttributeReference" and exact(spark_type(e)):
            found.add(e.exprId().id())
        elif (cat.cls(e) == "Cast" and cat.cls(e.child()) == "AttributeReference" and not exact(spark_type(e.child()))
              and exact(spark_type(e))):  # the text of a floating-point or collated column
            found.add(e.child().exprId().id())
    return found


def _open(cat: Catalyst, node: Any, orders: list[Any] | None = None) -> list[Any]:
    """The child's columns that can differ among rows tied in a Window's ORDER BY (or in ``orders``)."""
    fixed = _fixed(cat, node, orders)
    return [a for a in cat.items(node.child().output()) if a.exprId().id() not in fixed]


def total(cat: Catalyst, node: Any) -> bool:
    """Whether a Window's ORDER BY orders every column of its child (tie-breakers appended: :func:`ordered`)."""
    return not _open(cat, node)


def refuse_ties(cat: Catalyst, node: Any) -> None:
    """Refuses a window by key that tells tied rows apart and has no tie-breakers (:func:`ordered` could not add
    them: a RANGE frame needs the ties as they are)."""
    exprs = cat.items(node.windowExpressions())
    tied = tie_sensitive(cat, exprs) if cat.items(node.orderSpec()) else None
    if tied is None or total(cat, node):
        return
    peer = peers(cat, exprs)
    how = (f"and {peer} over the same window treats them as one" if peer is not None and peer != tied
           else "over a RANGE frame, which treats them as one")
    raise Unsupported("Window", f"{tied} tells rows tied in the ORDER BY apart {how}: no tie-breaking order fits, so "
                                "a partition recomputed from the history could differ from the rows output before it")


def _breaker_values(cat: Catalyst, attrs: list[Any]) -> list[Any]:
    """The columns, each followed, where equal values of its type can differ (floating point, also nested; collated
    strings), by its text."""
    cast = cat.scala_object(f"{_EXPRESSIONS}.Cast")
    string = cat.scala_object("org.apache.spark.sql.types.StringType")
    found = []
    for a in attrs:
        found.append(a)
        if not exact(spark_type(a)):
            found.append(cast.apply(a, string, getattr(cast, "apply$default$3")(), getattr(cast, "apply$default$4")()))
    return found


def _breakers(cat: Catalyst, attrs: list[Any]) -> list[Any]:
    """Ascending orders over :func:`_breaker_values`."""
    asc = cat.scala_object(f"{_EXPRESSIONS}.Ascending")
    first = cat.scala_object(f"{_EXPRESSIONS}.NullsFirst")
    sort_order = cat.jclass(f"{_EXPRESSIONS}.SortOrder")
    return [sort_order(e, asc, first, cat.seq([])) for e in _breaker_values(cat, attrs)]


def _tie_broken(cat: Catalyst, node: Any, child: Any) -> Any:
    """A Window (over ``child``, its child rewritten) with tie-breakers appended to the ORDER BY it sorts a
    partition's rows by; a WindowGroupLimit of ``row_number`` right below it gets them too. Its functions keep their
    own windows: Spark resolves a rank's ORDER BY values from its function's window again."""
    orders = cat.seq(cat.items(node.orderSpec()) + _breakers(cat, _open(cat, node)))
    if cat.cls(child) == "WindowGroupLimit" and cat.cls(child.rankLikeFunction()) == "RowNumber":
        child = child.copy(child.partitionSpec(), orders, child.rankLikeFunction(), child.limit(), child.child())
    return node.copy(node.windowExpressions(), node.partitionSpec(), orders, child, node.productElement(4))


_PICKS = {"First": ("MinBy", "MaxBy"), "Last": ("MaxBy", "MinBy")}  # by an ascending / a descending ORDER BY
KEY = "__odf_tied"  # the first field of a picking key (:func:`_picking`), by which :func:`picked` knows it


def _ascending(cat: Catalyst, node: Any) -> bool | None:
    """True when a Window's ORDER BY is all ascending with NULLs first (a struct's own order), False when it is all
    descending with NULLs last (its reverse), None otherwise."""
    ways = {(cat.cls(o.direction()), cat.cls(o.nullOrdering())) for o in cat.items(node.orderSpec())}
    if ways == {("Ascending$", "NullsFirst$")}:
        return True
    return False if ways == {("Descending$", "NullsLast$")} else None


def _picks_peers(cat: Catalyst, e: Any) -> bool:
    """Whether a window expression is ``first``/``last`` over a RANGE frame short of the whole partition."""
    we = _window_expression(cat, e)
    if we is None or cat.cls(we.windowFunction()) != "AggregateExpression":
        return False
    rows, whole = _frame(cat, we)
    return not rows and not whole and cat.cls(we.windowFunction().aggregateFunction()) in _PICKS


def _picking(cat: Catalyst, node: Any) -> Any | None:
    """The Window with each ``first``/``last(x)`` over a RANGE frame (:func:`_picks_peers`: the
    forward fill ``last(x) IGNORE NULLS OVER (… ORDER BY t)``) written as ``min_by``/``max_by(x, key)``: ``key`` is a
    struct of the ORDER BY values and the tie-breakers (NULL where ``x`` is, with IGNORE NULLS). Its frame keeps its
    peers, and among them it picks by the tie-breakers, not by the order Spark reads rows in. None when no function
    is such or the ORDER BY mixes directions."""
    exprs = cat.items(node.windowExpressions())
    ascending = _ascending(cat, node) if any(_picks_peers(cat, e) for e in exprs) else None
    if ascending is None:
        return None
    lit = cat.scala_object(f"{_EXPRESSIONS}.Literal")
    values = [o.child() for o in cat.items(node.orderSpec())] + _breaker_values(cat, _open(cat, node))
    fields = [x for i, v in enumerate(values) for x in (lit.apply(f"{KEY}{i}"), v)]
    key = cat.jclass(f"{_EXPRESSIONS}.CreateNamedStruct")(cat.seq(fields))
    new = []
    for e in exprs:
        if not _picks_peers(cat, e):
            new.append(e)
            continue
        we = _window_expression(cat, e)
        fn = we.windowFunction()
        agg = fn.aggregateFunction()
        ordering = key
        if agg.ignoreNulls():  # max_by skips a row whose ordering is NULL
            null = lit.create(None, key.dataType())
            ordering = cat.jclass(f"{_EXPRESSIONS}.If")(cat.jclass(f"{_EXPRESSIONS}.IsNull")(agg.child()), null, key)
        by = cat.jclass(f"{_EXPRESSIONS}.aggregate.{_PICKS[cat.cls(agg)][0 if ascending else 1]}")(agg.child(),
                                                                                                    ordering)
        fn = fn.copy(by, fn.mode(), fn.isDistinct(), fn.filter(), fn.resultId())
        we = we.copy(fn, we.windowSpec())
        new.append(cat.with_children(e, [we]) if cat.cls(e) == "Alias" else we)
    return node.copy(cat.seq(new), node.partitionSpec(), node.orderSpec(), node.child(), node.productElement(4))


def picked(cat: Catalyst, fn: Any) -> tuple[str, Any, Any, bool] | None:
    """Of an aggregate that :func:`_picking` wrote (by an ascending ORDER BY): ``("first"|"last", x, key, IGNORE
    NULLS)``; None for any other function."""
    if cat.cls(fn) != "AggregateExpression" or cat.cls(fn.aggregateFunction()) not in ("MaxBy", "MinBy"):
        return None
    agg = fn.aggregateFunction()
    ordering = agg.orderingExpr()
    struct = ordering.falseValue() if cat.cls(ordering) == "If" else ordering
    if cat.cls(struct) != "CreateNamedStruct" or str(cat.items(struct.names())[0]) != f"{KEY}0":
        return None
    return ("last" if cat.cls(agg) == "MaxBy" else "first"), agg.valueExpr(), ordering, cat.cls(ordering) == "If"


def peer_orders(cat: Catalyst, node: Any) -> int:
    """How many of a Window's ORDER BY columns come before the tie-breakers :func:`_tie_broken` appended (all of them
    when it appended none): the values rows tied in the query's own ORDER BY share. Read back from the plan: the
    fewest leading columns after which come exactly the breakers of the columns they leave open. (An ORDER BY the
    query wrote total gives the same count when it ends the way breakers would: a running state then only treats
    more new rows as late, which is correct either way.)"""
    orders = cat.items(node.orderSpec())
    for n in range(1, len(orders)):
        rest = orders[n:]
        values = _breaker_values(cat, _open(cat, node, orders[:n]))
        if (len(values) == len(rest) and all(v.semanticEquals(o.child()) for v, o in zip(values, rest))
                and all(cat.cls(o.direction()) == "Ascending$" and cat.cls(o.nullOrdering()) == "NullsFirst$"
                        for o in rest)):
            return n
    return len(orders)


def broken(cat: Catalyst, node: Any) -> bool:
    """Whether a Window orders rows tied in its ORDER BY by their other columns (:func:`ordered`) wherever its
    functions tell them apart."""
    if total(cat, node):
        return True
    exprs = [_window_expression(cat, e) for e in cat.items(node.windowExpressions())]
    return any(we is not None and picked(cat, we.windowFunction()) is not None for we in exprs)


def _rewritten(cat: Catalyst, node: Any, pattern: Any, shapes: StateShapes) -> Any:
    if not node.containsPattern(pattern):
        return node
    name = cat.cls(node)
    if name == "Filter":
        first = shapes.first_rows(node)
        if first is not None:  # the first rows per partition: stored values; rows below may hold other windows
            child, child_path = first
            below = _rewritten(cat, child, pattern, shapes)
            return node if below is child else replace(cat, node, {child_path: below})
    kids = cat.items(node.children())
    new = [_rewritten(cat, c, pattern, shapes) for c in kids]
    if name == "Window":
        node = _picking(cat, node) or node
        fix = _fix(cat, node, shapes)
        if fix == "split" and cat.cls(new[0]) != "WindowGroupLimit":  # (a top-N's limit: left as it is)
            return _split(cat, node, new[0])
        if fix == "breakers":
            return _tie_broken(cat, node, new[0])
    if all(n is k for n, k in zip(new, kids)):
        return node
    return cat.with_children(node, new)


def _fix(cat: Catalyst, node: Any, shapes: StateShapes) -> str | None:
    """How a Window by key or with a running state gets one order for tied rows: "breakers" appended to its ORDER BY
    (:func:`_tie_broken`), a "split" into a Window of the functions that need the ties as they are (a RANGE frame; a
    rank counted by a running state) and one of those that tell tied rows apart, with the breakers (:func:`_split`),
    or None: no function tells them apart, the ORDER BY is already total, or no order fits (:func:`refuse_ties`)."""
    exprs = cat.items(node.windowExpressions())
    if not cat.items(node.partitionSpec()) or not cat.items(node.orderSpec()) or tie_sensitive(cat, exprs) is None:
        return None
    if total(cat, node) or any(tie_sensitive(cat, [e]) is not None and peers(cat, [e]) is not None for e in exprs):
        return None  # (a function telling tied rows apart over a RANGE frame: no order fits, refuse_ties)
    if peers(cat, exprs) is not None:
        return "split"
    if not shapes.running(node):
        return "breakers"  # by key: a rank compares its own ORDER BY values
    # a running state counts a rank's ORDER BY values with the window's: tie-breakers would rank rows apart
    functions = [we.windowFunction() for we in (_window_expression(cat, e) for e in exprs) if we is not None]
    return "split" if any(cat.cls(fn) in _TIE_FREE for fn in functions) else "breakers"


def _ahead(cat: Catalyst, e: Any) -> bool:
    """Whether a window expression reads rows after the row (a lead, a frame reaching FOLLOWING rows): new rows
    change older rows' output, which a running window outputs again."""
    we = _window_expression(cat, e)
    if cat.cls(we.windowFunction()) == "Lead":
        return True
    frame = we.windowSpec().frameSpecification()
    if cat.cls(frame) != "SpecifiedWindowFrame":
        return False
    upper = frame.upper()
    if cat.cls(upper) in ("CurrentRow$", "UnboundedPreceding$"):
        return False
    return cat.cls(upper) == "UnboundedFollowing$" or not upper.foldable() or bound_sign(upper.eval(None)) != -1


def _split(cat: Catalyst, node: Any, child: Any) -> Any:
    """The Window (over ``child``) as two, and the columns in their order again: its functions that tell no tied rows
    apart (RANGE frames, ranks) over its own ORDER BY, and the others over it with tie-breakers (:func:`_tie_broken`).
    The ones that read rows after the row (:func:`_ahead`) go above when only they do: a running window over one
    that outputs rows again keeps what it gave them, which not every function can (:mod:`.reissued`)."""
    exprs = cat.items(node.windowExpressions())
    sensitive = [e for e in exprs if tie_sensitive(cat, [e]) is not None]
    peered = [e for e in exprs if tie_sensitive(cat, [e]) is None]

    def window(functions: list[Any], below: Any) -> Any:
        return node.copy(cat.seq(functions), node.partitionSpec(), node.orderSpec(), below, node.productElement(4))

    if any(_ahead(cat, e) for e in peered) and not any(_ahead(cat, e) for e in sensitive):
        top = window(peered, _tie_broken(cat, window(sensitive, node.child()), child))
    else:  # the lower window's values are equal among tied rows: as tie-breakers they only make the order total
        lower = window(peered, child)
        top = _tie_broken(cat, window(sensitive, lower), lower)
    return cat.project(cat.items(node.output()), top)


def split_pair(cat: Catalyst, node: Any) -> Any | None:
    """The Window below ``node`` when the two are a window :func:`_split` made (or written so): the same PARTITION
    BY, one's ORDER BY the other's followed by tie-breakers that order every column (:func:`total`), the other's
    functions none that tell tied rows apart, and the upper one's functions over the lower one's child only (as
    siblings in one window are). None otherwise."""
    if cat.cls(node) != "Window" or cat.cls(node.child()) != "Window":
        return None
    lower = node.child()

    def same(a: list[Any], b: list[Any]) -> bool:
        return len(a) == len(b) and all(x.semanticEquals(y) for x, y in zip(a, b))

    if not same(cat.items(node.partitionSpec()), cat.items(lower.partitionSpec())):
        return None
    up, low = cat.items(node.orderSpec()), cat.items(lower.orderSpec())
    short, long, broken = (low, up, node) if len(up) > len(low) else (up, low, lower)
    if not short or len(long) == len(short) or not same(short, long[:len(short)]):
        return None
    plain = lower if broken is node else node
    if not total(cat, broken) or tie_sensitive(cat, cat.items(plain.windowExpressions())) is not None:
        return None
    child = {a.exprId().id() for a in cat.items(lower.child().output())}
    read = {a.exprId().id() for e in cat.items(node.windowExpressions()) for a in cat.items(e.references().toSeq())}
    return lower if read <= child else None


def ordered(cat: Catalyst, plan: Any, shapes: StateShapes) -> Any:
    """``plan`` with tie-breakers appended to the ORDER BY of each window by key that tells tied rows apart."""
    pattern = cat.static("org.apache.spark.sql.catalyst.trees.TreePattern", "WINDOW")()
    return _rewritten(cat, plan, pattern, shapes)
