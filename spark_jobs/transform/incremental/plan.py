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
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

from odf_core.engine.protocol import OperatorPlan
from odf_core.metadata import DatasetVocabulary
from spark_jobs.transform.catalyst import Catalyst
from spark_jobs.transform.inputs import orderable
from spark_jobs.transform.incremental.frames import Path, node_at, spark_type
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


class _Analyzer:
    def __init__(self, cat: Catalyst) -> None:
        self.cat = cat
        self.ops: list[Op] = []
        self.lines: list[OperatorPlan] = []

    def segment(self, node: Any, op_id: str, depth: int) -> Segment:
        frontiers: list[Frontier] = []
        self._walk(node, (), op_id, depth, frontiers)
        return Segment(node, frontiers)

    def _walk(self, node: Any, path: Path, op_id: str, depth: int, out: list[Frontier]) -> None:
        cat = self.cat
        name = cat.cls(node)
        where = op_id + "".join(f".{i}" for i in path)
        note = ""  # why a row-wise node is not part of an operator, where that is worth saying
        if node.subqueries().size() > 0:
            raise Unsupported(name, "a subquery inside an expression is evaluated over whole inputs")
        index = cat.input_index(node)
        if index is not None:
            out.append(Frontier(path, node, "input", input=index))
            return
        if name in CONSTANT_LEAVES:
            out.append(Frontier(path, node, "constant"))
            return
        if name == "Aggregate":
            from spark_jobs.transform.incremental import aggregate, keyed

            try:
                spec = aggregate.analyze(cat, node)
            except Unsupported as why:  # no state for its functions: recompute the groups the new rows touch
                self._keyed(node, keyed.analyze_aggregate(cat, node, why), where, path, depth, out)
                return
            self.lines.append(OperatorPlan(depth=depth, operator=aggregate.label(cat, node), path=PATH_INCREMENTAL,
                                           detail=aggregate.describe(spec)))
            op = Op(where, "aggregate", node, [self.segment(spec.child, f"{where}.0", depth + 1)], spec)
            self.ops.append(op)
            out.append(Frontier(path, node, "op", op=op))
            return
        if name == "Window":
            from spark_jobs.transform.incremental import keyed, running

            try:
                pair = running.analyze_pair(cat, node)
            except Unsupported:  # each of the two on its own
                pair = None
            if pair is not None:  # a window split for its ties: one state
                self._operator(node, running.KIND, pair, where, path, depth, out)
                return
            try:
                spec = running.analyze(cat, node)
            except Unsupported as why:  # no running state: recompute the partitions the new rows touch
                self._keyed(node, keyed.analyze_window(cat, node, why), where, path, depth, out)
                return
            self._operator(node, running.KIND, spec, where, path, depth, out)
            return
        if name == "Filter":
            from spark_jobs.transform.incremental import top

            try:
                spec = top.analyze(cat, node)
            except Unsupported as why:  # too many rows a partition: a row-wise filter over a window by key
                spec, note = None, f" (no state of the first rows per partition: {why.reason})"
            if spec is not None:
                self.lines.append(OperatorPlan(depth=depth, operator=spec.operator, path=PATH_INCREMENTAL,
                                               detail=spec.detail))
                below = where + "".join(f".{i}" for i in spec.child_path)  # the ranked rows' position
                op = Op(where, top.KIND, node, [self.segment(spec.child, below, depth + 1)], spec)
                self.ops.append(op)
                out.append(Frontier(path, node, "op", op=op))
                return
        if name in ("WindowGroupLimit", "Join"):
            from spark_jobs.transform.incremental import keyed

            spec = keyed.analyze_join(cat, node) if name == "Join" else keyed.analyze_window(cat, node)
            self._keyed(node, spec, where, path, depth, out)
            return
        if name not in ROW_WISE_INCREMENTAL:
            raise Unsupported(name, _why_not(name))
        if name not in ("SubqueryAlias", "View", "ResolvedHint"):
            self.lines.append(OperatorPlan(depth=depth, operator=name, path=PATH_ROW_WISE,
                                           detail="applied to the changed rows only" + note))
        for i, child in enumerate(cat.items(node.children())):
            self._walk(child, path + (i,), op_id, depth + 1, out)


    def _keyed(self, node: Any, spec: Any, where: str, path: Path, depth: int, out: list[Frontier]) -> None:
        self._operator(node, "keyed", spec, where, path, depth, out)

    def _operator(self, node: Any, kind: str, spec: Any, where: str, path: Path, depth: int, out: list[Frontier]
                  ) -> None:
        """An operator whose spec names itself (``operator``, ``detail``), over segments of each of its children."""
        line = len(self.lines)  # the operator's line comes before its children's
        self.lines.append(OperatorPlan(depth=depth, operator=spec.operator, path=PATH_INCREMENTAL, detail=spec.detail))
        below = getattr(spec, "below", (0,))
        if below != (0,):  # the child of two nodes
            kids = [self.segment(node_at(self.cat, node, below), where + "".join(f".{i}" for i in below), depth + 1)]
        else:
            kids = [self.segment(c, f"{where}.{i}", depth + 1) for i, c in enumerate(self.cat.items(node.children()))]
        if kind == "running":  # over a window that outputs rows again
            from spark_jobs.transform.incremental import reissued

            spec = reissued.annotate(self.cat, node, spec, kids[0])
            self.lines[line] = replace(self.lines[line], detail=spec.detail)
        op = Op(where, kind, node, kids, spec)
        self.ops.append(op)
        out.append(Frontier(path, node, "op", op=op))


def _why_not(name: str) -> str:
    return {
        "GlobalLimit": "LIMIT keeps rows by position over the whole input",
        "LocalLimit": "LIMIT keeps rows by position over the whole input",
        "Offset": "OFFSET skips rows by position over the whole input",
        "Tail": "TAIL keeps rows by position over the whole input",
        "Sample": "sampling",
        "WindowGroupLimit": "a per-partition row limit",
    }.get(name, "no incremental form for this operator")


def _check_inputs(cat: Catalyst, plan: Any, vocabs: Sequence[DatasetVocabulary], changelog: frozenset[int]) -> None:
    """A reduced input's retraction removes an EARLIER row (another offset and system time): queries that read
    those columns of a reduced input need the full path."""
    hidden: dict[int, tuple[int, str]] = {}
    for node in cat.walk(plan):
        idx = cat.input_index(node)
        if idx is None or idx in changelog:
            continue
        v = vocabs[idx]
        for a in cat.items(node.output()):
            if a.name() in (v.offset, v.system_time):
                hidden[a.exprId().id()] = (idx, a.name())
    if not hidden:
        return
    for node in cat.walk(plan):
        if cat.input_index(node) is not None:
            continue
        for a in cat.items(node.references().toSeq()):
            found = hidden.get(a.exprId().id())
            if found:
                raise Unsupported(cat.cls(node), f"the query reads the {found[1]!r} column of a reduced input "
                                                 "(a retraction removes an earlier row with another value)")


def _check_types(cat: Catalyst, plan: Any) -> None:
    for node in cat.walk(plan):
        for a in cat.items(node.output()):
            if not orderable(spark_type(a)):
                raise Unsupported(cat.cls(node), f"column {a.name()!r} is a map or variant, which cannot be "
                                                 "compared to tell changed rows")


def analyze(cat: Catalyst, plan: Any, vocabs: Sequence[DatasetVocabulary], changelog: frozenset[int],
            schemas: Sequence[Any]) -> IncrementalPlan:
    """The incremental plan of an optimised plan, or :class:`Unsupported`."""
    _check_inputs(cat, plan, vocabs, changelog)
    _check_types(cat, plan)
    a = _Analyzer(cat)
    root = a.segment(plan, "root", 0)
    return IncrementalPlan(root, a.ops, _fingerprint(plan, schemas, [op.layout for op in a.ops]), a.lines)


def explain_full(cat: Catalyst, plan: Any, reason: Unsupported) -> list[OperatorPlan]:
    """Every stateful node, when the query takes the full path: the node that decided it says why."""
    lines = []
    stack: list[tuple[Any, int]] = [(plan, 0)]
    while stack:
        node, depth = stack.pop()
        name = cat.cls(node)
        deciding = name == reason.node
        if deciding or (name not in ROW_WISE and cat.input_index(node) is None and name not in CONSTANT_LEAVES):
            why = reason.reason if reason.node == "-" else str(reason)
            detail = reason.reason if deciding else f"recomputed over the whole inputs ({why})"
            lines.append(OperatorPlan(depth=depth, operator=name, path=PATH_FULL, detail=detail))
        stack.extend((c, depth + 1) for c in reversed(cat.items(node.children())))
    return lines


@dataclass
class Planned:
    """The incremental plan of a stateful query, or why it takes the full path; the per-operator explanation."""

    plan: IncrementalPlan | None
    operators: list[OperatorPlan]
    reason: str | None
    out_schema: Any  # the query output's Spark schema


def plan_query(session: Any, transform: Any, schemas: Sequence[Any], vocabs: Sequence[DatasetVocabulary],
               aliases: Sequence[str], vocab: DatasetVocabulary, enabled: bool) -> Planned:
    """Plan the query over empty stand-ins of its inputs (the plan must not depend on a step's data)."""
    from spark_jobs.transform.inputs import read_rows
    from spark_jobs.transform.planning import prepare

    cat = Catalyst(session)
    views = {a: read_rows(session, s, ()) for a, s in zip(aliases, schemas)}
    out, info = prepare(session, transform, views, vocab)
    optimized = out._jdf.queryExecution().optimizedPlan()
    if not enabled:
        off = Unsupported("-", "spark.odf.incremental.enabled is false")
        return Planned(None, explain_full(cat, optimized, off), str(off.reason), out.schema)
    from spark_jobs.transform.incremental import canonical

    try:  # the plan every path evaluates: the full path's output too (stateful.output_rows)
        plan = analyze(cat, canonical.plan(cat, optimized), vocabs, info.op_read, schemas)
    except Unsupported as u:
        return Planned(None, explain_full(cat, optimized, u), str(u), out.schema)
    return Planned(plan, plan.operators, None, out.schema)
