"""The operators by key: windows, equi-joins and order-free aggregations whose output for a key depends only on that
key's rows. They keep no state: a step recomputes the keys its change touches (:mod:`..keyed` holds the algebra)."""
from __future__ import annotations

from typing import Any, Mapping, MutableMapping

from pyspark.sql import DataFrame

from spark_jobs.transform.catalyst import Catalyst
from spark_jobs.transform.incremental import keyed
from spark_jobs.transform.incremental.delta import Delta
from spark_jobs.transform.incremental.operator import OperatorBase, OperatorStep
from spark_jobs.transform.incremental.plan import Op, Unsupported
from spark_jobs.transform.incremental.step import Step


class ByKeyOperator(OperatorBase):
    kind = keyed.KIND
    # asked after the aggregate and running-window operators: it takes what they refused (``why``)
    nodes = frozenset({"Aggregate", "Window", "WindowGroupLimit", "Join"})

    def analyze(self, cat: Catalyst, node: Any, why: Unsupported | None) -> keyed.KeyedSpec:
        name = cat.cls(node)
        if name == "Join":
            return keyed.analyze_join(cat, node)
        if name == "Aggregate":
            assert why is not None  # (the aggregate operator is asked first)
            return keyed.analyze_aggregate(cat, node, why)
        return keyed.analyze_window(cat, node, why)

    def step(self, step: Step, op: Op, old: Mapping[str, DataFrame], new: MutableMapping[str, DataFrame],
             changes: Mapping[str, Delta], top: bool) -> OperatorStep:
        return OperatorStep(keyed.step(step, op, changes), {})


BY_KEY = ByKeyOperator()
