"""whole_graph: one DAG, sync first, a TaskGroup per dataset wired along the inputs."""
from __future__ import annotations

import shutil

import pytest

from ..conftest import EXAMPLES
from .dagbag import edges, load, write_dag_file


@pytest.fixture(scope="module")
def bag(tmp_path_factory):
    folder = tmp_path_factory.mktemp("graph")
    shutil.copytree(EXAMPLES / "datasets", folder / "datasets")
    write_dag_file(folder)
    (folder / "odf-dags.yaml").write_text(
        "defaults:\n  whole_graph: true\n  schedule: '@daily'\n  odf_conn_id: lake\n  asset_namespace: Lake-1\n"
        "datasets:\n  com.example.busy-cities:\n    verify: none\n    retries: 5\n")
    return load(folder / "odf_dags.py")


def test_one_graph_dag_plus_push_roots(bag):
    assert bag.import_errors == {}
    assert sorted(bag.dag_ids) == ["odf__com_example_ratings", "odf__graph"]
    assert bag.dags["odf__graph"].timetable.expression == "0 0 * * *"


def test_groups_follow_the_inputs(bag):
    e = edges(bag.dags["odf__graph"])
    ingest = ["fetch", "prepare", "read", "merge", "commit", "verify"]
    for root in ("com_example_cities", "com_example_trips"):
        assert ("sync", f"{root}.fetch") in e
        assert {(f"{root}.{a}", f"{root}.{b}") for a, b in zip(ingest, ingest[1:])} <= e
        assert (f"{root}.verify", "com_example_trips_by_city.transform") in e
    assert ("com_example_trips_by_city.verify", "com_example_busy_cities.transform") in e
    assert not any(t.startswith("com_example_ratings") for edge in e for t in edge)  # push-only: own DAG
    assert not any("wait_for_source" in t for edge in e for t in edge)  # fetch skips when up to date


def test_group_tasks_carry_settings_and_find_their_transaction(bag):
    graph = bag.dags["odf__graph"]
    busy = graph.task_dict["com_example_busy_cities.transform"]
    assert busy.trigger_rule == "none_failed" and busy.retries == 5
    assert "com_example_busy_cities.verify" not in graph.task_dict  # verify: none
    assert [a.uri for a in busy.outlets] == ["odf://lake-1/com.example.busy-cities"]
    assert busy.odf_conn_id == "lake"
    prepare = graph.task_dict["com_example_cities.prepare"]
    assert prepare._fetch_task_id() == "com_example_cities.fetch"
    sync = graph.task_dict["sync"]
    assert sync.odf_conn_id == "lake"
