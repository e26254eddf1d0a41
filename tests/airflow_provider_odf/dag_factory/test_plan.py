"""Planning a snapshot folder: dependency order and cycles on graphs too deep for recursion."""
from __future__ import annotations

from airflow_provider_odf.dag_factory.plan import DatasetPlan, _cycles, _order, dag_id_of, plan_folder

from ..synthetic import write_snapshots


def node(name: str, *inputs: str) -> DatasetPlan:
    return DatasetPlan(name, f"{name}.yaml", "derivative" if inputs else "root", inputs=inputs)


def test_dag_ids_keep_spelling_and_replace_dots_and_dashes():
    assert dag_id_of("Com.Example.trips-by-city") == "odf__Com_Example_trips_by_city"


def test_long_chains_and_long_cycles_do_not_recurse():
    chain = {f"n{i}": node(f"n{i}", *([f"n{i - 1}"] if i else [])) for i in range(5000)}
    assert [d.name for d in _order(chain)] == [f"n{i}" for i in range(5000)]
    assert _cycles(chain) == []
    ring = {f"c{i:04d}": node(f"c{i:04d}", f"c{(i + 1) % 3000:04d}") for i in range(3000)}
    (cycle,) = _cycles(ring)
    assert cycle[0] == cycle[-1] == "c0000" and len(cycle) == 3001


def test_separate_cycles_are_reported_separately():
    graph = {"a": node("a", "b"), "b": node("b", "a"), "c": node("c", "c"), "d": node("d", "a"), "e": node("e")}
    assert sorted(_cycles(graph)) == [["a", "b", "a"], ["c", "c"]]


def test_synthetic_folder_plans_every_dataset_inputs_first(tmp_path):
    names = write_snapshots(tmp_path, 120)
    plan = plan_folder(tmp_path)
    assert plan.errors == [] and plan.files == 120 and len(plan.datasets) == 120
    position = {d.key: i for i, d in enumerate(plan.datasets)}
    assert set(position) == {n.lower() for n in names}
    for d in plan.datasets:
        assert all(position[i] < position[d.key] for i in d.input_keys)
    kinds = {(d.kind, d.source) for d in plan.datasets}
    assert kinds == {("root", "polling"), ("root", "push"), ("derivative", None)}


def test_hidden_folders_are_not_snapshots(tmp_path):
    write_snapshots(tmp_path, 3)
    hidden = tmp_path / ".odf" / "x.yaml"
    hidden.parent.mkdir()
    hidden.write_text("not: a snapshot\n")
    assert plan_folder(tmp_path).errors == []
