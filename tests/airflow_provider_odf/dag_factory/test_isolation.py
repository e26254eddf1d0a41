"""Problems in a snapshot folder become DAGs that fail with them, while every unrelated DAG still loads — and the
file has no import error (which would make all its DAGs stale; see test_stale.py for the real dag-processor path)."""
from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_odf.dag_factory.problems import TAG, OdfDefinitionErrorOperator

from ..conftest import EXAMPLES
from .dagbag import load, write_dag_file

ROOT = """kind: DatasetSnapshot
version: 1
content:
  name: {name}
  kind: Root
  metadata:
    - kind: AddPushSource
      sourceName: app
      read: {{kind: NdJson, schema: ["v INT"]}}
      merge: {{kind: Append}}
"""
DERIVED = """kind: DatasetSnapshot
version: 1
content:
  name: {name}
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs: [{inputs}]
      transform: {{kind: Sql, engine: spark, query: "select * from x"}}
"""


def derived(name: str, *inputs: str) -> str:
    return DERIVED.format(name=name, inputs=", ".join(f"{{datasetRef: {i}}}" for i in inputs))


@pytest.fixture
def folder(tmp_path) -> Path:
    """A copy of the example folder (snapshots + DAG file, no sidecar) to break things in."""
    shutil.copytree(EXAMPLES / "datasets", tmp_path / "datasets")
    write_dag_file(tmp_path)
    return tmp_path


def problem_dags(bag) -> dict[str, list[str]]:
    """The DAGs standing for definition problems, with their problems; and no import error at all."""
    assert bag.import_errors == {}, bag.import_errors
    out = {}
    for dag_id, dag in bag.dags.items():
        if TAG in dag.tags:
            (task,) = dag.tasks
            assert isinstance(task, OdfDefinitionErrorOperator) and task.task_id == "definition_error"
            out[dag_id] = task.problems
    return out


def all_problems(bag) -> str:
    return "\n".join(p for ps in problem_dags(bag).values() for p in ps)


def working_dags(bag) -> list[str]:
    return sorted(d for d in bag.dag_ids if TAG not in bag.dags[d].tags)


def fails_with(dag) -> str:
    """What the problem DAG's only task fails with (no retries: a YAML file does not fix itself)."""
    (task,) = dag.tasks
    assert task.retries == 0
    with pytest.raises(AirflowFailException) as ei:
        task.execute(context={})
    return str(ei.value)


def test_a_file_that_raises_loses_all_its_dags(tmp_path):
    """Why the factory never raises for a bad snapshot: Airflow discards every DAG of a file that raises."""
    (tmp_path / "raising.py").write_text(
        "from airflow.sdk import DAG\nwith DAG('would_be_lost', schedule=None):\n    pass\nraise ValueError('bad')\n")
    bag = load(tmp_path / "raising.py")
    assert bag.dag_ids == [] and "bad" in bag.import_errors["raising.py"]


def test_broken_snapshot_becomes_its_own_failing_dag_and_the_rest_loads(folder, caplog):
    cities = folder / "datasets" / "cities.yaml"
    cities.write_text(cities.read_text().replace("primaryKey:", "primaryKeyz:"))
    line = next(i for i, text in enumerate(cities.read_text().splitlines(), 1) if "primaryKeyz" in text)
    garbage = folder / "datasets" / "garbage.yaml"
    garbage.write_text("kind: DatasetSnapshot\ncontent: [unclosed\n")
    with caplog.at_level(logging.ERROR, logger="airflow_provider_odf.dag_factory"):
        bag = load(folder / "odf_dags.py")
    problems = problem_dags(bag)
    # the dataset whose name is readable keeps its DAG id, now a DAG that fails with the one-line problem
    (cities_problem,) = problems["odf__com_example_cities"]
    assert cities_problem.startswith(f"{cities}:{line}: content.metadata[0].merge.primaryKeyz: unknown property")
    assert fails_with(bag.dags["odf__com_example_cities"]) == cities_problem
    assert "primaryKeyz" in bag.dags["odf__com_example_cities"].description
    # a file without a readable name: the folder's problem DAG
    (garbage_problem,) = problems["odf__definition_errors"]
    assert garbage_problem.startswith(f"{garbage}:2: invalid YAML (at the end of the file)")
    # trips-by-city reads cities: it cannot run without it, and neither can busy-cities after it.
    assert problems["odf__com_example_trips_by_city"] == [
        f"{folder / 'datasets' / 'trips-by-city.yaml'}: dataset 'com.example.trips-by-city': not scheduled: its "
        "input 'com.example.cities' is not scheduled either (see its problem)"]
    assert "dataset 'com.example.busy-cities': not scheduled" in problems["odf__com_example_busy_cities"][0]
    assert working_dags(bag) == ["odf__com_example_ratings", "odf__com_example_trips", "odf__sync"]
    # and each problem is an ERROR line of the parse log
    logged = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert f"ODF DAG definition problem: {cities_problem}" in logged
    assert f"ODF DAG definition problem: {garbage_problem}" in logged


def test_problem_dags_run_on_the_sync_schedule(folder):
    (folder / "odf-dags.yaml").write_text("defaults:\n  sync_schedule: '*/10 * * * *'\n  owner: data-team\n")
    (folder / "datasets" / "bad.yaml").write_text(derived("bad.one", "missing.input"))
    dag = load(folder / "odf_dags.py").dags["odf__bad_one"]
    assert dag.timetable.expression == "*/10 * * * *"
    assert dag.tasks[0].owner == "data-team" and dag.max_active_runs == 1 and dag.catchup is False


def test_empty_file_and_invalid_ddl_are_problems_with_lines(folder):
    (folder / "datasets" / "empty.yaml").write_text("# nothing here yet\n")
    typo = folder / "datasets" / "typo.yaml"
    typo.write_text(ROOT.format(name="typo.one").replace('["v INT"]', '["v INT", "w STRANG"]'))
    problems = problem_dags(load(folder / "odf_dags.py"))
    assert problems["odf__definition_errors"] == [
        f"{folder / 'datasets' / 'empty.yaml'}: no DatasetSnapshot document in this file (it is empty)"]
    (p,) = problems["odf__typo_one"]
    assert p.startswith(f"{typo}:9: content.metadata[0].read.schema[1]: invalid DDL column: unknown type 'STRANG' "
                        "(did you mean STRING?)")
    assert p.endswith("(got 'w STRANG')")


def test_cycles_are_named_and_unrelated_dags_load(folder):
    (folder / "datasets" / "loop.yaml").write_text(
        derived("loop.a", "loop.b") + "---\n" + derived("loop.b", "loop.c") + "---\n" + derived("loop.c", "loop.a"))
    (folder / "datasets" / "self.yaml").write_text(derived("self.ref", "self.ref"))
    (folder / "datasets" / "after-loop.yaml").write_text(derived("after.loop", "loop.c", "com.example.trips"))
    bag = load(folder / "odf_dags.py")
    problems = problem_dags(bag)
    for member in ("odf__loop_a", "odf__loop_b", "odf__loop_c"):
        assert problems[member][0].startswith("dataset dependency cycle: loop.a -> loop.b -> loop.c -> loop.a")
    assert problems["odf__self_ref"][0].startswith("dataset dependency cycle: self.ref -> self.ref")
    assert "dataset 'after.loop': not scheduled: its input 'loop.c' is not scheduled either" in \
        problems["odf__after_loop"][0]
    assert len(working_dags(bag)) == 6  # the 5 examples + sync


def test_missing_input_is_named(folder):
    (folder / "datasets" / "orphan.yaml").write_text(derived("com.example.orphan", "com.example.trips", "no.such"))
    bag = load(folder / "odf_dags.py")
    assert problem_dags(bag) == {"odf__com_example_orphan": [
        f"{folder / 'datasets' / 'orphan.yaml'}: dataset 'com.example.orphan': input 'no.such' has no valid "
        f"DatasetSnapshot in {folder / 'datasets'}"]}
    assert "odf__com_example_trips_by_city" in working_dags(bag)


def test_duplicate_names_and_dag_id_clashes(folder):
    (folder / "datasets" / "dup.yaml").write_text(ROOT.format(name="COM.example.Ratings"))
    (folder / "datasets" / "x1.yaml").write_text(ROOT.format(name="x.y-z"))
    (folder / "datasets" / "x2.yaml").write_text(ROOT.format(name="x-y.z"))
    (folder / "datasets" / "sync.yaml").write_text(ROOT.format(name="sync"))
    bag = load(folder / "odf_dags.py")
    problems = problem_dags(bag)
    # both spellings of the duplicate show the problem; neither definition is scheduled
    for dag_id in ("odf__com_example_ratings", "odf__COM_example_Ratings"):
        (p,) = problems[dag_id]
        assert p.startswith("com.example.ratings: defined by more than one snapshot")
        assert "dup.yaml" in p and "ratings.yaml" in p
    assert problems["odf__x_y_z"][0].startswith("odf__x_y_z: datasets whose names give the same DAG id")
    # the reserved id stays the factory's: the problem goes to the folder's problem DAG
    assert "DAG id 'odf__sync' is reserved" in problems["odf__definition_errors"][0]
    assert bag.dags["odf__sync"].tasks[0].task_id == "sync"
    assert {"odf__com_example_cities", "odf__sync"} <= set(working_dags(bag))
    assert not any(d.startswith(("odf__x_", "odf__com_example_ratings")) for d in working_dags(bag))


def test_a_broken_copy_of_a_dataset_stops_the_good_one_too(folder):
    """Which of two definitions is meant cannot be known: neither is scheduled, also when one of them is broken."""
    (folder / "datasets" / "copy.yaml").write_text(ROOT.format(name="com.example.ratings").replace("Append", "Apend"))
    problems = problem_dags(load(folder / "odf_dags.py"))
    messages = problems["odf__com_example_ratings"]
    assert any("content.metadata[0].merge.kind: unknown MergeStrategy kind" in m for m in messages)
    assert any("defined by more than one snapshot" in m and "copy.yaml" in m and "(which has a problem)" in m
               for m in messages)


def test_id_reference_inputs_are_refused_at_parse_time(folder):
    did = "did:odf:fed0136c76cdaf8552581e8cf738df7a9d8ba169db326b5af6e4b7cd2e2d6b87a2b1e"
    (folder / "datasets" / "by-id.yaml").write_text(derived("by.id", did))
    (p,) = problem_dags(load(folder / "odf_dags.py"))["odf__by_id"]
    assert p.startswith(f"{folder / 'datasets' / 'by-id.yaml'}:8: content.metadata[0].inputs[0].datasetRef: ")
    assert "refer to the input by its dataset name" in p


def test_bad_per_dataset_settings_only_drop_that_dag(folder):
    (folder / "odf-dags.yaml").write_text(
        "defaults:\n  retries: 1\n"
        "datasets:\n"
        "  com.example.trips:\n    retries: -1\n"
        "  com.example.cities:\n    schedule: not a cron\n"
        "  com.example.busy-cities:\n    schedule: '@daily'\n"
        "  com.example.ratings:\n    fetch: {kind: Url}\n"
        "  com.example.nothing:\n    retries: 3\n")
    bag = load(folder / "odf_dags.py")
    problems = problem_dags(bag)
    sidecar = folder / "odf-dags.yaml"
    assert problems["odf__com_example_trips"] == [
        f"{sidecar}: datasets.com.example.trips.retries: expected a whole number >= 0 (got -1)"]
    assert "cannot build DAG 'odf__com_example_cities': AirflowTimetableInvalid" in \
        problems["odf__com_example_cities"][0]
    assert f"{sidecar}: datasets.com.example.busy-cities.schedule: a derivative runs when its inputs change" in \
        problems["odf__com_example_busy_cities"][0]
    assert f"{sidecar}: datasets.com.example.ratings.fetch: unknown setting (Airflow settings only" in \
        problems["odf__com_example_ratings"][0]
    assert problems["odf__definition_errors"] == [
        f"{sidecar}: datasets.com.example.nothing: no DatasetSnapshot of this name in {folder / 'datasets'}"]
    # Derivatives only need their inputs' assets, not their inputs' DAGs.
    assert working_dags(bag) == ["odf__com_example_trips_by_city", "odf__sync"]


def test_settings_that_cannot_apply_are_errors(folder):
    (folder / "odf-dags.yaml").write_text("datasets:\n  com.example.ratings:\n    sensor: poke\n"
                                          "  com.example.cities:\n    asset_trigger: all\n"
                                          "  com.example.busy-cities:\n    fetch_options: {timeout_s: 5}\n")
    error = all_problems(load(folder / "odf_dags.py"))
    assert "datasets.com.example.ratings.sensor: a root without a polling source runs when triggered" in error
    assert "datasets.com.example.cities.asset_trigger: only derivatives are scheduled on assets" in error
    assert "datasets.com.example.busy-cities.fetch_options: only a polling source fetches" in error


def test_broken_defaults_fail_the_whole_file(folder):
    """The one import error: without trustworthy defaults (workspace, schedule) no DAG of the folder is built."""
    (folder / "odf-dags.yaml").write_text("defaults:\n  odf_conn_id: ''\n")
    bag = load(folder / "odf_dags.py")
    assert bag.dag_ids == []
    assert "odf-dags.yaml: defaults.odf_conn_id: expected a non-empty string" in bag.import_errors["odf_dags.py"]


def test_fixing_the_problem_turns_the_problem_dag_back_into_the_dataset_dag(folder):
    bad = folder / "datasets" / "bad.yaml"
    bad.write_text(derived("bad.one", "missing.input"))
    assert "missing.input" in problem_dags(load(folder / "odf_dags.py"))["odf__bad_one"][0]
    bad.write_text(derived("bad.one", "com.example.trips"))
    bag = load(folder / "odf_dags.py")
    assert problem_dags(bag) == {} and "odf__bad_one" in working_dags(bag)


def test_a_worker_running_one_task_builds_only_its_dag(folder, monkeypatch):
    """Airflow sets the parsing context when a task runs: only that DAG is built, broken siblings do not matter."""
    (folder / "datasets" / "garbage.yaml").write_text("kind: [\n")
    monkeypatch.setenv("_AIRFLOW_PARSING_CONTEXT_DAG_ID", "odf__com_example_trips_by_city")
    bag = load(folder / "odf_dags.py")
    assert bag.dag_ids == ["odf__com_example_trips_by_city"] and bag.import_errors == {}


def test_a_worker_running_a_problem_task_builds_that_problem_dag(folder, monkeypatch):
    (folder / "datasets" / "garbage.yaml").write_text("kind: [\n")
    (folder / "datasets" / "bad.yaml").write_text(derived("bad.one", "missing.input"))
    monkeypatch.setenv("_AIRFLOW_PARSING_CONTEXT_DAG_ID", "odf__bad_one")
    bag = load(folder / "odf_dags.py")
    assert bag.dag_ids == ["odf__bad_one"] and bag.import_errors == {}
    assert "input 'missing.input' has no valid DatasetSnapshot" in fails_with(bag.dags["odf__bad_one"])
