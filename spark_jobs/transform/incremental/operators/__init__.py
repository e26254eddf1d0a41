"""The registry of incremental operators: the planner asks the families of a plan node in this order, the state
layout and the step loop look a family up by its kind. A new operator is one module here and one entry below
(ARCHITECTURE.md walks through an example)."""
from __future__ import annotations

from typing import Mapping

from pyspark.sql import DataFrame

from spark_jobs.transform.incremental.operator import OperatorFamily, StateTable
from spark_jobs.transform.incremental.operators.aggregate import AGGREGATE
from spark_jobs.transform.incremental.operators.by_key import BY_KEY
from spark_jobs.transform.incremental.operators.first_rows import FIRST_ROWS
from spark_jobs.transform.incremental.operators.running import RUNNING
from spark_jobs.transform.incremental.plan import Op
from spark_jobs.transform.incremental.step import Step

#: In the order the planner asks them: the operators by key last, as they take what the others refuse.
FAMILIES: tuple[OperatorFamily, ...] = (AGGREGATE, RUNNING, FIRST_ROWS, BY_KEY)

_BY_KIND = {f.kind: f for f in FAMILIES}
assert len(_BY_KIND) == len(FAMILIES), "two operator families share a kind"


def family(op: Op) -> OperatorFamily:
    """The family of a planned operator."""
    return _BY_KIND[op.kind]


def for_node(name: str) -> list[OperatorFamily]:
    """The families that may take a plan node of this Catalyst class, in the order to ask them."""
    return [f for f in FAMILIES if name in f.nodes]


def state_tables(op: Op) -> list[StateTable]:
    """An operator's state tables: (name in a step's states, name in the checkpoint, key columns)."""
    return family(op).state_tables(op)


def initial_states(step: Step, op: Op, below: Mapping[str, DataFrame]) -> dict[str, DataFrame]:
    """An operator's state tables (by their names in a step's states) from its child's whole history (``below``:
    the tables of the operators below it)."""
    return family(op).initial_states(step, op, below)
