"""Which parts of a stateful query can be updated from the new rows only, and how: the incremental plan.

The optimised Catalyst plan (inputs as plain leaves) is cut into *segments* of row-wise nodes (projections, filters,
unions, generators, expands) whose *frontiers* are input leaves, constant relations or stateful *operators*
(aggregations and DISTINCT with a state per group; running window functions with a state per partition, see
:mod:`.running`; a filter on a ranking function's first rows, with those rows per partition, see :mod:`.top`; other
window functions, joins and the other aggregations by key, see :mod:`.keyed`); each operator's children are segments
again. A change flows bottom-up: input slices -> segment -> operator -> segment -> ... -> the output. Any node outside
this fragment (LIMIT, subqueries, a window without PARTITION BY...) makes the whole query take the full path, and
:func:`analyze` says which node and why. The :class:`OperatorPlan` lines say the path of every operator, for
``odf explain`` and the transform's log.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from odf_core.engine.protocol import OperatorPlan
from spark_jobs.transform.incremental.frames import Path
from spark_jobs.transform.planning import ROW_WISE

PLAN_VERSION = "incremental-1"  # part of the fingerprint: a new state layout rebuilds old states once
ROW_WISE_INCREMENTAL = ROW_WISE | {"Expand"}
CONSTANT_LEAVES = frozenset({"LocalRelation", "OneRowRelation", "Range"})
PATH_ROW_WISE, PATH_INCREMENTAL, PATH_FULL = "row-wise", "incremental", "full"


class Unsupported(Exception):
    """The query leaves the incremental fragment at this node."""

    def __init__(self, node: str, reason: str) -> None:
        super().__init__(f"{node}: {reason}")
        self.node = node
        self.reason = reason


@dataclass
class Frontier:
    """A node where a segment's rows come from: an input leaf, a constant relation or a stateful operator."""

    path: Path  # from the segment's top node
    node: Any
    kind: str  # "input" | "constant" | "op"
    input: int | None = None
    op: "Op | None" = None


@dataclass
class Segment:
    node: Any
    frontiers: list[Frontier]


@dataclass
class Op:
    id: str  # the node's position in the plan ("root", "root.0.1")
    kind: str  # "aggregate" (state per group) | "running" (state per window partition) | "keyed" (no state)
    node: Any
    children: list[Segment]
    spec: Any  # the operator module's analysis (its state columns, keys...)

    @property
    def layout(self) -> str:
        """A name for the layout of this operator's state where it differs from the one :data:`PLAN_VERSION` names
        (a state from before is rebuilt once); empty otherwise."""
        return f"{self.id}: {self.spec.layout}" if getattr(self.spec, "layout", "") else ""


@dataclass
class IncrementalPlan:
    root: Segment
    ops: list[Op]  # children before parents
    fingerprint: str
    operators: list[OperatorPlan] = field(default_factory=list)


def _fingerprint(plan: Any, schemas: Sequence[Any], layouts: Sequence[str] = ()) -> str:
    """The plan, its inputs' schemas and the state layouts its operators name (:attr:`Op.layout`: only operators
    whose layout changed since :data:`PLAN_VERSION` name one, so other plans keep their fingerprint)."""
    text = re.sub(r"#\d+L?", "#", plan.toString())
    named = [x for x in layouts if x]
    return hashlib.sha256((PLAN_VERSION + "\n" + text + "\n" + "\n".join(s.json() for s in schemas)
                           + ("\n" + "\n".join(named) if named else "")).encode()).hexdigest()
