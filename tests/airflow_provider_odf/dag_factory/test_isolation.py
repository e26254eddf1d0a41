"""Problems in a snapshot folder surface as the DAG file's import error while every unrelated DAG still loads."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

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


def only_error(bag) -> str:
    assert list(bag.import_errors) == ["odf_dags.py"], bag.import_errors
    return bag.import_errors["odf_dags.py"]


def test_a_file_that_raises_loses_all_its_dags(tmp_path):
    """Why the factory never raises for a bad snapshot: Airflow discards every DAG of a file that raises."""
    (tmp_path / "raising.py").write_text(
        "from airflow.sdk import DAG\nwith DAG('would_be_lost', schedule=None):\n    pass\nraise ValueError('bad')\n")
    bag = load(tmp_path / "raising.py")
    assert bag.dag_ids == [] and "bad" in bag.import_errors["raising.py"]


def test_broken_snapshot_is_an_import_error_and_the_rest_loads(folder):
    cities = folder / "datasets" / "cities.yaml"
    cities.write_text(cities.read_text().replace("primaryKey:", "primaryKeyz:"))
    (folder / "datasets" / "garbage.yaml").write_text("kind: DatasetSnapshot\ncontent: [unclosed\n")
    bag = load(folder / "odf_dags.py")
    error = only_error(bag)
    assert f"{cities}: content.metadata[0].merge.primaryKeyz: unknown property" in error
    assert str(folder / "datasets" / "garbage.yaml") in error
    # trips-by-city reads cities: it cannot run without it, and neither can busy-cities after it.
    assert "input 'com.example.cities' has no valid DatasetSnapshot" in error
    assert "dataset 'com.example.busy-cities': not scheduled" in error
    assert sorted(bag.dag_ids) == ["odf__com_example_ratings", "odf__com_example_trips", "odf__sync"]


def test_cycles_are_named_and_unrelated_dags_load(folder):
    (folder / "datasets" / "loop.yaml").write_text(
        derived("loop.a", "loop.b") + "---\n" + derived("loop.b", "loop.c") + "---\n" + derived("loop.c", "loop.a"))
    (folder / "datasets" / "self.yaml").write_text(derived("self.ref", "self.ref"))
    (folder / "datasets" / "after-loop.yaml").write_text(derived("after.loop", "loop.c", "com.example.trips"))
    bag = load(folder / "odf_dags.py")
    error = only_error(bag)
    assert "dataset dependency cycle: loop.a -> loop.b -> loop.c -> loop.a" in error
    assert "dataset dependency cycle: self.ref -> self.ref" in error
    assert "dataset 'after.loop': not scheduled: its input 'loop.c' is not scheduled either" in error
    assert len(bag.dag_ids) == 6  # the 5 examples + sync
    assert not any("loop" in d or "self" in d for d in bag.dag_ids)


def test_missing_input_is_named(folder):
    (folder / "datasets" / "orphan.yaml").write_text(derived("com.example.orphan", "com.example.trips", "no.such"))
    bag = load(folder / "odf_dags.py")
    error = only_error(bag)
    assert (f"{folder / 'datasets' / 'orphan.yaml'}: dataset 'com.example.orphan': input 'no.such' has no valid "
            "DatasetSnapshot") in error
    assert "odf__com_example_orphan" not in bag.dag_ids and "odf__com_example_trips_by_city" in bag.dag_ids


def test_duplicate_names_and_dag_id_clashes(folder):
    (folder / "datasets" / "dup.yaml").write_text(ROOT.format(name="COM.example.Ratings"))
    (folder / "datasets" / "x1.yaml").write_text(ROOT.format(name="x.y-z"))
    (folder / "datasets" / "x2.yaml").write_text(ROOT.format(name="x-y.z"))
    (folder / "datasets" / "sync.yaml").write_text(ROOT.format(name="sync"))
    bag = load(folder / "odf_dags.py")
    error = only_error(bag)
    assert "com.example.ratings: defined by more than one snapshot" in error
    assert "dup.yaml" in error and "ratings.yaml" in error
    assert "odf__x_y_z: datasets whose names give the same DAG id" in error
    assert "DAG id 'odf__sync' is reserved" in error
    assert "odf__com_example_ratings" not in bag.dag_ids
    assert not any(d.startswith("odf__x_") for d in bag.dag_ids)
    assert {"odf__com_example_cities", "odf__sync"} <= set(bag.dag_ids)


def test_id_reference_inputs_are_refused_at_parse_time(folder):
    did = "did:odf:fed0136c76cdaf8552581e8cf738df7a9d8ba169db326b5af6e4b7cd2e2d6b87a2b1e"
    (folder / "datasets" / "by-id.yaml").write_text(derived("by.id", did))
    error = only_error(load(folder / "odf_dags.py"))
    assert "SetTransform.inputs[0].datasetRef" in error and "refer to the input by its dataset name" in error


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
    error = only_error(bag)
    sidecar = folder / "odf-dags.yaml"
    assert f"{sidecar}: datasets.com.example.trips.retries: expected a whole number >= 0 (got -1)" in error
    assert "cannot build DAG 'odf__com_example_cities': AirflowTimetableInvalid" in error
    assert f"{sidecar}: datasets.com.example.busy-cities.schedule: a derivative runs when its inputs change" in error
    assert f"{sidecar}: datasets.com.example.ratings.fetch: unknown setting (Airflow settings only" in error
    assert f"{sidecar}: datasets.com.example.nothing: no DatasetSnapshot of this name" in error
    # Derivatives only need their inputs' assets, not their inputs' DAGs.
    assert sorted(bag.dag_ids) == ["odf__com_example_trips_by_city", "odf__sync"]


def test_settings_that_cannot_apply_are_errors(folder):
    (folder / "odf-dags.yaml").write_text("datasets:\n  com.example.ratings:\n    sensor: poke\n"
                                          "  com.example.cities:\n    asset_trigger: all\n"
                                          "  com.example.busy-cities:\n    fetch_options: {timeout_s: 5}\n")
    error = only_error(load(folder / "odf_dags.py"))
    assert "datasets.com.example.ratings.sensor: a root without a polling source runs when triggered" in error
    assert "datasets.com.example.cities.asset_trigger: only derivatives are scheduled on assets" in error
    assert "datasets.com.example.busy-cities.fetch_options: only a polling source fetches" in error


def test_broken_defaults_fail_the_whole_file(folder):
    (folder / "odf-dags.yaml").write_text("defaults:\n  odf_conn_id: ''\n")
    bag = load(folder / "odf_dags.py")
    assert bag.dag_ids == []
    assert "odf-dags.yaml: defaults.odf_conn_id: expected a non-empty string" in only_error(bag)


def test_fixing_the_problem_clears_the_error(folder):
    bad = folder / "datasets" / "bad.yaml"
    bad.write_text(derived("bad.one", "missing.input"))
    assert "missing.input" in only_error(load(folder / "odf_dags.py"))
    bad.write_text(derived("bad.one", "com.example.trips"))
    bag = load(folder / "odf_dags.py")
    assert bag.import_errors == {} and "odf__bad_one" in bag.dag_ids


def test_a_worker_running_one_task_builds_only_its_dag(folder, monkeypatch):
    """Airflow sets the parsing context when a task runs: only that DAG is built, broken siblings do not matter."""
    (folder / "datasets" / "garbage.yaml").write_text("kind: [\n")
    monkeypatch.setenv("_AIRFLOW_PARSING_CONTEXT_DAG_ID", "odf__com_example_trips_by_city")
    bag = load(folder / "odf_dags.py")
    assert bag.dag_ids == ["odf__com_example_trips_by_city"] and bag.import_errors == {}
