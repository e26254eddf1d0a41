"""The change of a stateful query's output in one step: each operator's change, children first, pushed through the
segments between them (:func:`output_change`), and that change as counted output rows (:func:`counted_change`)."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spark_jobs.columns import col
from spark_jobs.transform.catalyst import Catalyst
from spark_jobs.transform.incremental import operators
from spark_jobs.transform.incremental.delta import Delta, weighted
from spark_jobs.transform.incremental.frames import WEIGHT, node_at, splice
from spark_jobs.transform.incremental.operators.aggregate import AFTER, AGGREGATE, BEFORE
from spark_jobs.transform.incremental.plan import Op, Path, Segment
from spark_jobs.transform.incremental.step import Step, segment_change
from spark_jobs.transform.output import normalized


def output_change(step: Step, out_columns: Sequence[str], old_states: Mapping[str, DataFrame], paired: bool = False
                  ) -> tuple[Delta | None, dict[str, DataFrame], DataFrame | None]:
    """The change of the query's output (frames by position), every operator's new states and, with ``paired`` when
    the query's top node is an aggregate that updated every touched group from its state, :func:`group_pairs`
    (then instead of the change, which nothing reads)."""
    changes: dict[str, Delta] = {}
    states: dict[str, DataFrame] = {}
    pairs = None
    below_top = _under_projections(step.cat, step.plan.root)
    for op in step.plan.ops:  # children first
        # the plan's top node itself (an operator's id is its path), or the one operator under projections only
        top_node = op.id == "root" or (below_top is not None and op is below_top[0])
        result = operators.family(op).step(step, op, old_states, states, changes, paired and top_node)
        states.update(result.tables)
        pairs = result.pairs if top_node else pairs
        if result.change is None:  # only the top aggregate's, beside its pairs: nothing above reads it
            if result.pairs is None or not top_node:
                raise AssertionError(f"operator {op.id} gave no change")
            continue
        changes[op.id] = result.change if top_node else step.passed_up(result.change)
    if pairs is not None and below_top is not None:  # each group's two rows through the projections above it
        op, path = below_top
        pairs = _pairs_through(step.cat, step.plan.root.node, path, pairs, step.cat.items(op.node.output()))
    if pairs is not None:
        return None, states, pairs
    out = segment_change(step, step.plan.root, changes)
    if len(out.pos.columns) - (1 if "__odf_n" in out.pos.columns else 0) != len(out_columns):
        raise AssertionError("the incremental plan's output does not match the query's columns")
    return out, states, pairs


def _under_projections(cat: Catalyst, root: Segment) -> tuple[Op, Path] | None:
    """The aggregate whose rows the query's top projections map one to one to output rows (a top aggregate under the
    projection that computes its exact sums, :mod:`.exact_sums`), with its path: its change is the top node's (not
    netted and kept for an operator above) and its groups' old and new rows pair as a top aggregate's do. None when
    the top node is the operator itself or anything but projections lies above it."""
    if len(root.frontiers) != 1 or root.frontiers[0].kind != "op" or not root.frontiers[0].path:
        return None
    frontier = root.frontiers[0]
    if frontier.op is None or frontier.op.kind != AGGREGATE.kind:  # (only an aggregate pairs its groups' rows)
        return None
    node = root.node
    for i in frontier.path:
        if cat.cls(node) != "Project":
            return None
        node = node.children().apply(i)
    return frontier.op, frontier.path  # type: ignore[return-value]


def _pairs_through(cat: Catalyst, top_node: Any, path: Path, pairs: DataFrame, attrs: Sequence[Any]) -> DataFrame:
    """:func:`group_pairs` of the operator at ``path`` (its output ``attrs``) as the rows the projections above it
    make of them: each side evaluated by the projections, the other side passed through them."""
    width = len(attrs)
    chain = [node_at(cat, top_node, path[:i]) for i in range(len(path))]  # top .. the operator's parent
    flags = [BEFORE, AFTER]

    def side(df: DataFrame, mine: str, other: str, n_other: int) -> DataFrame:
        keep = [f"{other}{i}" for i in range(n_other)] + flags
        plan = splice(cat, df.select(*[F.col(f"{mine}{i}") for i in range(width)], *keep), attrs, keep)
        passed = cat.items(plan.output())[width:]
        for n in reversed(chain):
            plan = cat.project(cat.items(n.projectList()) + passed, plan)
        out = cat.dataframe(plan)
        n_out = len(out.columns) - len(keep)
        return out.toDF(*[f"{mine}{i}" for i in range(n_out)], *keep)

    after = side(pairs, "a", "b", width)
    n_out = len(after.columns) - width - len(flags)
    return side(after, "b", "a", n_out).select(*[F.col(f"b{i}") for i in range(n_out)],
                                               *[F.col(f"a{i}") for i in range(n_out)], *[F.col(c) for c in flags])


def counted_change(top: Delta, out_columns: Sequence[str], names: Sequence[str], types: Mapping[str, T.DataType]
                   ) -> DataFrame:
    """The output change as output columns (normalised as the state stores them) with a signed count."""
    w = weighted(top.pos, top.neg)
    named = w.toDF(*out_columns, WEIGHT)
    return (named.select(*[normalized(n, types[n]).alias(n) for n in names], F.col(WEIGHT))
            .groupBy(*[col(n) for n in names]).agg(F.sum(WEIGHT).alias(WEIGHT)))
