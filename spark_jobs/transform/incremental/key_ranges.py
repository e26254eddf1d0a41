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
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from pyspark.sql import types as T

from spark_jobs.parquet_files import merged_stats
from spark_jobs.transform.catalyst import Catalyst
from spark_jobs.transform.incremental.frames import Path, spark_type
from spark_jobs.transform.inputs import KeyBound
from spark_jobs.transform.planning import ROW_WISE_PASS_THROUGH

if TYPE_CHECKING:
    from spark_jobs.transform.incremental import Step

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
