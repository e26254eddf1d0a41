"""The interface every incremental operator implements, so the planner, the state layout and the step loop consult
one registry (:mod:`.operators`) instead of switching on operator kinds.

An operator is a stateful node of the query's plan (an aggregation, a running window, a ranking's first rows, an
operator by key). Its family says which plan nodes it takes and what it makes of one (:meth:`analyze`: its *spec*),
which tables of the checkpoint hold its state, how that state is computed from the inputs' history (a rebuild), and
how one step turns the change of its child (signed rows: added and removed) and its old state into the change of its
output and its new state. Everything an operator needs from the step (the inputs' histories, the change of a
segment, local checkpoints) is in :mod:`.step`; the plan's types are in :mod:`.plan`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, MutableMapping, Protocol, Sequence

from spark_jobs.transform.incremental.frames import node_at
from spark_jobs.transform.incremental.plan import Op, Path, Segment, Unsupported

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from spark_jobs.transform.catalyst import Catalyst
    from spark_jobs.transform.incremental.delta import Delta
    from spark_jobs.transform.incremental.step import Step

#: A state table: (its name in a step's states, its name in the checkpoint, its key columns).
StateTable = tuple[str, str, list[str]]


@dataclass
class OperatorStep:
    """What one step of an operator gives: the change of its output, its new state tables (by their names in a step's
    states) and, for an aggregate whose groups are the query's output rows, each touched group's old and new row."""

    change: "Delta | None"  # None only beside ``pairs``: the output's change is then read from them
    tables: dict[str, "DataFrame"]
    pairs: "DataFrame | None" = None


class OperatorFamily(Protocol):
    """One kind of incremental operator."""

    #: the kind, part of the checkpoint's table names (``aggregate:root``): never renamed
    kind: str
    #: the Catalyst node classes this family may take (the planner asks the families of a node in registry order)
    nodes: frozenset[str]

    def analyze(self, cat: "Catalyst", node: Any, why: Unsupported | None) -> Any:
        """The spec of ``node`` as this operator; None when the node is not of this operator's shape (it stays a
        row-wise node); raises :class:`Unsupported` when it is but cannot be updated so (``why``: what the family
        asked before said)."""
        ...

    def row_wise_note(self, why: Unsupported) -> str:
        """What ``odf explain`` adds to a row-wise node this family refused (empty: nothing)."""
        ...

    def describe(self, cat: "Catalyst", node: Any, spec: Any) -> tuple[str, str]:
        """The operator's line in ``odf explain``: (operator, detail)."""
        ...

    def children(self, cat: "Catalyst", node: Any, spec: Any) -> list[tuple[Any, Path]]:
        """The nodes the operator's child segments start at, with their paths below ``node``."""
        ...

    def annotate(self, cat: "Catalyst", node: Any, spec: Any, children: Sequence[Segment]) -> Any:
        """The spec once the child segments are known (a window over a window that outputs rows again)."""
        ...

    def state_tables(self, op: Op) -> list[StateTable]:
        """The operator's state tables (none: it keeps no state)."""
        ...

    def initial_states(self, step: "Step", op: Op, below: Mapping[str, "DataFrame"]) -> dict[str, "DataFrame"]:
        """Its state tables from its child's whole history (``below``: the tables of the operators below it)."""
        ...

    def step(self, step: "Step", op: Op, old: Mapping[str, "DataFrame"], new: MutableMapping[str, "DataFrame"],
             changes: Mapping[str, "Delta"], top: bool) -> OperatorStep:
        """One step: ``old``, every state table before the step; ``new``, the new tables of the operators below
        (this one may replace what it reads of them by a local checkpoint); ``changes``, the changes of the
        operators below; ``top``, whether its rows are the query's output rows (an aggregate then pairs them)."""
        ...


class OperatorBase:
    """Defaults for the optional parts of :class:`OperatorFamily`."""

    kind: str
    nodes: frozenset[str]

    def row_wise_note(self, why: Unsupported) -> str:
        return ""

    def describe(self, cat: "Catalyst", node: Any, spec: Any) -> tuple[str, str]:
        return spec.operator, spec.detail

    def children(self, cat: "Catalyst", node: Any, spec: Any) -> list[tuple[Any, Path]]:
        """Each child of the node; or the one node at ``spec.below`` (an operator over two nodes: a window split
        for its ties)."""
        below = tuple(getattr(spec, "below", (0,)))
        if below != (0,):
            return [(node_at(cat, node, below), below)]
        return [(c, (i,)) for i, c in enumerate(cat.items(node.children()))]

    def annotate(self, cat: "Catalyst", node: Any, spec: Any, children: Sequence[Segment]) -> Any:
        return spec

    def state_tables(self, op: Op) -> list[StateTable]:
        return []

    def initial_states(self, step: "Step", op: Op, below: Mapping[str, "DataFrame"]) -> dict[str, "DataFrame"]:
        return {}
