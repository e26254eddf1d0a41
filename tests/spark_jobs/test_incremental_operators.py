"""The incremental engine's operator registry: one interface, the planner and the state layout consult it, and a new
operator is one module plus its registration (the worked example of ARCHITECTURE.md, here as a test)."""
from __future__ import annotations

from typing import Any, Mapping, MutableMapping

import pytest

from spark_jobs.transform.incremental import operators
from spark_jobs.transform.incremental.operator import OperatorBase, OperatorFamily, OperatorStep
from spark_jobs.transform.incremental.plan import Op, Unsupported


def test_kinds_are_the_checkpoint_table_names_and_never_change():
    """A kind is part of every state table's name in a checkpoint (``aggregate:root``): renaming one would make every
    stored state unreadable."""
    assert [f.kind for f in operators.FAMILIES] == ["aggregate", "running", "top", "keyed"]


def test_the_planner_asks_families_in_registry_order():
    """The operators by key take what the aggregate and the running window refuse: they are asked last."""
    assert [f.kind for f in operators.for_node("Aggregate")] == ["aggregate", "keyed"]
    assert [f.kind for f in operators.for_node("Window")] == ["running", "keyed"]
    assert [f.kind for f in operators.for_node("Filter")] == ["top"]
    assert [f.kind for f in operators.for_node("Join")] == ["keyed"]
    assert operators.for_node("Project") == []


def test_every_family_implements_the_interface():
    for family in operators.FAMILIES:
        assert isinstance(family, OperatorBase)
        for name in ("analyze", "row_wise_note", "describe", "children", "annotate", "state_tables",
                     "initial_states", "step"):
            assert callable(getattr(family, name)), (family.kind, name)


class _Passed:
    operator, detail = "Sort", "the order of rows is not part of a changelog: the child's change passes through"


class SortOperator(OperatorBase):
    """The worked example of ARCHITECTURE.md: the mechanics, on a node whose change is its child's (Spark's Sort;
    the planner already treats it as a row-wise node, so the real registry has no such family)."""

    kind = "sorted"
    nodes = frozenset({"Sort"})

    def analyze(self, cat: Any, node: Any, why: Unsupported | None) -> Any:
        return _Passed()

    def step(self, step: Any, op: Op, old: Mapping[str, Any], new: MutableMapping[str, Any],
             changes: Mapping[str, Any], top: bool) -> OperatorStep:
        from spark_jobs.transform.incremental.step import segment_change

        return OperatorStep(segment_change(step, op.children[0], changes), {})


@pytest.mark.spark
def test_a_new_operator_is_one_module_and_its_registration(spark, monkeypatch):
    from spark_jobs.transform.catalyst import Catalyst
    from spark_jobs.transform.incremental.planner import analyze

    cat = Catalyst(spark)
    plan = spark.sql("SELECT k, x FROM VALUES ('a', 1), ('b', 2) AS v(k, x) ORDER BY x")._jdf.queryExecution() \
        .optimizedPlan()
    before = analyze(cat, plan, [], frozenset(), [])  # a Sort is a row-wise node: no operator
    assert before.ops == [] and [p.path for p in before.operators] == ["row-wise"]

    family: OperatorFamily = SortOperator()
    monkeypatch.setattr(operators, "FAMILIES", (*operators.FAMILIES, family))  # the one line of its registration
    monkeypatch.setitem(operators._BY_KIND, family.kind, family)
    planned = analyze(cat, plan, [], frozenset(), [])
    assert [(op.kind, op.id) for op in planned.ops] == [("sorted", "root")]
    assert [(p.operator, p.path) for p in planned.operators] == [("Sort", "incremental")]
    assert operators.state_tables(planned.ops[0]) == []  # keeps no state: nothing in the checkpoint
