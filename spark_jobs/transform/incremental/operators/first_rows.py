"""The first-rows operator: a ranking's first rows per window partition (``WHERE rn <= N``), kept as its state
(:mod:`..top` holds its algebra)."""
from __future__ import annotations

from typing import Any, Mapping, MutableMapping

from pyspark.sql import DataFrame

from spark_jobs.transform.catalyst import Catalyst
from spark_jobs.transform.incremental import top
from spark_jobs.transform.incremental.delta import Delta
from spark_jobs.transform.incremental.operator import OperatorBase, OperatorStep, StateTable
from spark_jobs.transform.incremental.plan import Op, Path, Unsupported
from spark_jobs.transform.incremental.step import Step, op_table


class FirstRowsOperator(OperatorBase):
    kind = top.KIND
    nodes = frozenset({"Filter"})

    def analyze(self, cat: Catalyst, node: Any, why: Unsupported | None) -> top.TopSpec | None:
        return top.analyze(cat, node)

    def row_wise_note(self, why: Unsupported) -> str:
        return f" (no state of the first rows per partition: {why.reason})"

    def children(self, cat: Catalyst, node: Any, spec: top.TopSpec) -> list[tuple[Any, Path]]:
        return [(spec.child, tuple(spec.child_path))]  # the ranked rows, below the Window (and its group limit)

    def state_tables(self, op: Op) -> list[StateTable]:
        return [(op.id, op_table(op), op.spec.keys)]

    def initial_states(self, step: Step, op: Op, below: Mapping[str, DataFrame]) -> dict[str, DataFrame]:
        return {op.id: top.initial(step.cat, op.spec, step.replay(op.spec.child))}

    def step(self, step: Step, op: Op, old: Mapping[str, DataFrame], new: MutableMapping[str, DataFrame],
             changes: Mapping[str, Delta], top_: bool) -> OperatorStep:
        change, state = top.step(step, op, old[op.id], changes)
        return OperatorStep(change, {op.id: state})


FIRST_ROWS = FirstRowsOperator()
