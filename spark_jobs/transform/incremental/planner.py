"""Planning a stateful query: which parts of it can be updated from the new rows only, and how.

The optimised, canonical plan (:mod:`.canonical`) is cut into segments of row-wise nodes whose frontiers are input
leaves, constant relations or operators; the operator families of :mod:`.operators` say which nodes they take (in
registry order, each taking what those before refused). Any node outside this fragment makes the whole query take
the full path, and :func:`analyze` says which node and why. The plan's types are in :mod:`.plan`.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Sequence

from odf_core.engine.protocol import OperatorPlan
from odf_core.metadata import DatasetVocabulary
from spark_jobs.transform.catalyst import Catalyst
from spark_jobs.transform.incremental import operators
from spark_jobs.transform.incremental.frames import spark_type
from spark_jobs.transform.incremental.operator import OperatorFamily
from spark_jobs.transform.incremental.plan import (
    CONSTANT_LEAVES,
    PATH_FULL,
    PATH_INCREMENTAL,
    PATH_ROW_WISE,
    ROW_WISE_INCREMENTAL,
    Frontier,
    IncrementalPlan,
    Op,
    Path,
    Segment,
    Unsupported,
    _fingerprint,
)
from spark_jobs.transform.inputs import orderable
from spark_jobs.transform.planning import ROW_WISE


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
        why: Unsupported | None = None  # what the last operator family asked refused
        if node.subqueries().size() > 0:
            raise Unsupported(name, "a subquery inside an expression is evaluated over whole inputs")
        index = cat.input_index(node)
        if index is not None:
            out.append(Frontier(path, node, "input", input=index))
            return
        if name in CONSTANT_LEAVES:
            out.append(Frontier(path, node, "constant"))
            return
        for family in operators.for_node(name):  # in registry order: each takes what those before refused
            try:
                spec = family.analyze(cat, node, why)
            except Unsupported as refused:
                why = refused
                continue
            if spec is not None:
                self._operator(family, node, spec, where, path, depth, out)
                return
            break  # not of this operator's shape: a row-wise node
        if why is not None:
            if name not in ROW_WISE_INCREMENTAL:
                raise why
            note = family.row_wise_note(why)
        if name not in ROW_WISE_INCREMENTAL:
            raise Unsupported(name, _why_not(name))
        if name not in ("SubqueryAlias", "View", "ResolvedHint"):
            self.lines.append(OperatorPlan(depth=depth, operator=name, path=PATH_ROW_WISE,
                                           detail="applied to the changed rows only" + note))
        for i, child in enumerate(cat.items(node.children())):
            self._walk(child, path + (i,), op_id, depth + 1, out)


    def _operator(self, family: OperatorFamily, node: Any, spec: Any, where: str, path: Path, depth: int,
                  out: list[Frontier]) -> None:
        """An operator over segments of its children (:meth:`OperatorFamily.children`); its line in the explanation
        comes before its children's."""
        line = len(self.lines)
        operator, detail = family.describe(self.cat, node, spec)
        self.lines.append(OperatorPlan(depth=depth, operator=operator, path=PATH_INCREMENTAL, detail=detail))
        kids = [self.segment(child, where + "".join(f".{i}" for i in below), depth + 1)
                for child, below in family.children(self.cat, node, spec)]
        annotated = family.annotate(self.cat, node, spec, kids)
        if annotated is not spec:
            spec = annotated
            self.lines[line] = replace(self.lines[line], detail=family.describe(self.cat, node, spec)[1])
        op = Op(where, family.kind, node, kids, spec)
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
