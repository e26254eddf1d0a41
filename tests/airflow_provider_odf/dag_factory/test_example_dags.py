"""The example DAG file (dags_examples/odf_dags.py + odf-dags.yaml) as Airflow's DagBag sees it."""
from __future__ import annotations

import pytest

from airflow_provider_odf.operators import OdfCommitOperator, OdfPushIngestOperator, OdfTransformOperator

from ..conftest import EXAMPLES
from .dagbag import asset_uris, edges, load

POLLING_CHAIN = ["wait_for_source", "fetch", "prepare", "read", "merge", "commit", "verify"]


@pytest.fixture(scope="module")
def bag():
    return load(EXAMPLES)  # the whole folder, as mounted into the compose setup


def test_no_import_errors_and_one_dag_per_dataset_plus_sync(bag):
    assert bag.import_errors == {}
    assert sorted(bag.dag_ids) == sorted([
        "odf__sync", "odf__com_example_cities", "odf__com_example_trips", "odf__com_example_ratings",
        "odf__com_example_trips_by_city", "odf__com_example_busy_cities",
    ])


@pytest.mark.parametrize("dag_id, cron", [("odf__com_example_cities", "0 * * * *"),
                                          ("odf__com_example_trips", "*/15 * * * *")])
def test_polling_roots_chain_and_schedule(bag, dag_id, cron):
    dag = bag.dags[dag_id]
    assert edges(dag) == set(zip(POLLING_CHAIN, POLLING_CHAIN[1:]))
    assert dag.timetable.expression == cron  # defaults.schedule, overridden per dataset for trips
    sensor = dag.task_dict["wait_for_source"]
    assert (sensor.deferrable, sensor.soft_fail, sensor.timeout, sensor.poke_interval) == (True, True, 300, 30)
    assert dag.max_active_runs == 1 and dag.catchup is False
    assert {"odf", "root", "example"} <= set(dag.tags)
    fetch = dag.task_dict["fetch"]
    assert (fetch.retries, fetch.retry_delay.total_seconds(), fetch.execution_timeout.total_seconds()) == (2, 30, 1800)
    # trips takes every new daily file in one run; cities has nothing to say about fetching
    assert fetch.fetch_options == ({"glob_batch": True} if dag_id == "odf__com_example_trips" else None)


def test_commit_emits_the_dataset_asset(bag):
    commit = bag.dags["odf__com_example_cities"].task_dict["commit"]
    assert isinstance(commit, OdfCommitOperator)
    assert [a.uri for a in commit.outlets] == ["odf://odf_default/com.example.cities"]
    assert commit.dataset == "com.example.cities" and commit.odf_conn_id == "odf_default"


def test_push_only_root_is_triggered_with_a_path(bag):
    dag = bag.dags["odf__com_example_ratings"]
    assert type(dag.timetable).__name__ == "NullTimetable"
    assert edges(dag) == {("push", "verify")}
    push = dag.task_dict["push"]
    assert isinstance(push, OdfPushIngestOperator)
    assert push.path == "{{ params.path }}" and dag.render_template_as_native_obj
    assert {"path", "source"} <= set(dag.params.keys())
    assert [a.uri for a in push.outlets] == ["odf://odf_default/com.example.ratings"]


def test_derivatives_are_scheduled_on_their_input_assets(bag):
    by_city = bag.dags["odf__com_example_trips_by_city"]
    condition = by_city.timetable.asset_condition
    assert type(condition).__name__ == "AssetAny"  # asset_trigger: any
    assert asset_uris(condition) == {"odf://odf_default/com.example.trips", "odf://odf_default/com.example.cities"}
    assert edges(by_city) == {("transform", "verify")}
    transform = by_city.task_dict["transform"]
    assert isinstance(transform, OdfTransformOperator)
    assert [a.uri for a in transform.outlets] == ["odf://odf_default/com.example.trips-by-city"]

    busy = bag.dags["odf__com_example_busy_cities"]
    assert asset_uris(busy.timetable.asset_condition) == {"odf://odf_default/com.example.trips-by-city"}
    assert busy.task_dict["verify"].mode == "full"  # per-dataset setting
    assert by_city.task_dict["verify"].mode == "integrity"  # default


def test_every_consumed_asset_has_a_producer(bag):
    produced = {a.uri for d in bag.dags.values() for t in d.tasks for a in t.outlets}
    consumed = {dag.dag_id: asset_uris(dag.timetable.asset_condition) for dag in bag.dags.values()
                if getattr(dag.timetable, "asset_condition", None) is not None}
    # the derivatives are the consumers (were the condition not found, nothing below would be checked)
    assert sorted(consumed) == ["odf__com_example_busy_cities", "odf__com_example_trips_by_city"], consumed
    for dag_id, uris in consumed.items():
        assert uris and uris <= produced, (dag_id, uris, produced)


def test_sync_dag_points_at_the_snapshot_folder(bag):
    sync = bag.dags["odf__sync"]
    assert sync.timetable.expression == "*/30 * * * *"
    (task,) = sync.tasks
    assert task.folder == str((EXAMPLES / "datasets").resolve())
