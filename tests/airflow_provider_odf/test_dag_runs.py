"""The generated DAGs really run: ``dag.test()`` of the sync DAG, a polling root served over HTTP, a push root, a
derivative and a ``whole_graph`` DAG, against a real workspace, real Spark and Airflow's metadata DB (asset events).

Every Spark step is a call to one warm engine (the connection's ``engine_url``: an engine server on the test run's
Spark session), as deployments with ``odf engine serve`` run them; the push root's run is the smoke test of the
default path, one spark-submit per step (a job of its own, ~15 s each: seven of them cost this module ~2 min).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_provider_odf.assets import asset_uri
from dags_examples.demo_support import FileServer
from odf_core.query import tail
from odf_core.workspace import Workspace

from .conftest import conn_env
from .dag_factory.dagbag import load
from .small_graph import (
    BIG,
    CITIES_CSV,
    RATINGS_NDJSON,
    SmallGraph,
    big_cities,
    rows,
    write_dag_folder,
    write_served_files,
)

pytestmark = [pytest.mark.slow, pytest.mark.airflow, pytest.mark.spark]

# No schedules (dag.test() runs what it is told); a short poking sensor, so a run with nothing new skips quickly.
SIDECAR = """defaults:
  sync_schedule: null
  schedule: null
  retries: 0
  sensor: poke
  sensor_poke_interval: 1
  sensor_timeout: 3
datasets:
  t.big-cities:
    verify: full   # OdfVerifyOperator(mode="full"): re-runs every transform and compares logical hashes
"""
# The same kind of graph in one DAG (a sibling DAG file with its own snapshots, prefix "g").
GRAPH_SIDECAR = """defaults:
  whole_graph: true
  schedule: null
  retries: 0
"""
SPARK = {"conf": {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"}}


@dataclass
class Setup:
    graph: SmallGraph
    served: Path
    server: FileServer
    workspace: Path
    dags: dict[str, Any]
    engine_url: str

    def run(self, name: str, **kwargs: Any) -> tuple[str, dict[str, str]]:
        """``dag.test()`` of a dataset's DAG (or ``odf__sync``): the run's state and its tasks' states."""
        dag_id = name if name.startswith("odf__") else SmallGraph.dag_id(name)
        dr = self.dags[dag_id].test(**kwargs)
        return str(dr.state), {ti.task_id: str(ti.state) for ti in dr.get_task_instances()}

    def ws(self) -> Workspace:
        return Workspace.open(str(self.workspace))

    def head(self, name: str) -> str:
        return str(self.ws().get(name).chain.head())


def asset_events(dataset: str) -> list[dict[str, Any]]:
    """The extras of the dataset's asset events in the metadata DB, oldest first."""
    from sqlalchemy import select

    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session

    uri = asset_uri("odf_default", dataset)
    with create_session() as session:
        query = (select(AssetEvent.extra).join(AssetModel, AssetModel.id == AssetEvent.asset_id)
                 .where(AssetModel.uri == uri).order_by(AssetEvent.id))
        return [dict(e) for e in session.scalars(query)]


@pytest.fixture(scope="module")
def setup(airflow_db, airflow_home, tmp_path_factory, spark):
    from spark_jobs.server import EngineServer

    tmp = tmp_path_factory.mktemp("dag-runs")
    served = write_served_files(tmp / "served")
    folder = airflow_home / "dags"  # core.dags_folder: dag.test() syncs the DAGs of this folder to the DB
    engine = EngineServer(spark, "127.0.0.1", 0, max_concurrency=2, drain_s=5)
    engine.start()
    engine_url = f"grpc://127.0.0.1:{engine.port}"
    try:
        with FileServer(served) as server, pytest.MonkeyPatch.context() as mp:
            graph = write_dag_folder(folder, server.url().rstrip("/"), SIDECAR, with_flaky=False, with_push=True)
            write_dag_folder(folder / "graph", server.url().rstrip("/"), GRAPH_SIDECAR, prefix="g", with_flaky=False)
            conn_env(mp, "odf_default", conn_type="odf", extra={"workspace": str(tmp / "ws"), "engine_url": engine_url})
            bag = load(folder)
            assert bag.import_errors == {}
            yield Setup(graph, served, server, tmp / "ws", bag.dags, engine_url)
    finally:
        engine.shutdown(0)


def test_sync_creates_the_workspace_and_every_dataset_of_the_folder(setup):
    assert not setup.workspace.exists()
    state, tasks = setup.run("odf__sync")
    assert (state, tasks) == ("success", {"sync": "success"})
    g = setup.graph
    # big-cities lives in a subfolder of the snapshots: its DAG and its dataset both exist
    assert {str(h.name) for h in setup.ws().list()} == {g.cities, g.big_cities, g.ratings}
    assert SmallGraph.dag_id(g.big_cities) in setup.dags


def test_polling_root_ingests_and_its_commit_emits_the_asset_event(setup):
    g = setup.graph
    state, tasks = setup.run(g.cities)
    assert state == "success"
    assert tasks == dict.fromkeys(["wait_for_source", "fetch", "prepare", "read", "merge", "commit", "verify"],
                                  "success")
    st = setup.ws().get(g.cities).state()
    expected = rows(CITIES_CSV)
    assert (st.data_blocks, st.num_records) == (1, len(expected))
    data = tail(setup.ws().get(g.cities), 100).to_pylist()
    assert sorted((r["city"], r["population"]) for r in data) == sorted(
        (r["city"], int(r["population"])) for r in expected)
    events = asset_events(g.cities)
    assert len(events) == 1
    assert events[0]["block"] == events[0]["head"] == str(st.head)
    assert (events[0]["records"], events[0]["offsets"]) == (len(expected), [0, len(expected) - 1])
    assert setup.server.gets("/cities.csv") == [200]  # the sensor probed with HEAD; one download


def test_derivative_transforms_the_new_input_data(setup):
    g = setup.graph
    state, tasks = setup.run(g.big_cities)
    assert (state, tasks) == ("success", {"transform": "success", "verify": "success"})
    records = tail(setup.ws().get(g.big_cities), 100).to_pylist()
    assert sorted(r["city"] for r in records) == sorted(big_cities())
    events = asset_events(g.big_cities)
    assert [e["block"] for e in events] == [setup.head(g.big_cities)]


def test_full_verification_replays_the_transform_and_catches_a_changed_input(setup, capsys):
    """mode="full" through Airflow: passes on the real data, fails once an input's data file no longer produces the
    recorded output. Integrity checks of big-cities alone cannot see this: its own blocks and files are untouched."""
    g = setup.graph
    assert setup.dags[SmallGraph.dag_id(g.big_cities)].get_task("verify").mode == "full"
    state, tasks = setup.run(g.big_cities, mark_success_pattern="transform")
    assert (state, tasks) == ("success", {"transform": "success", "verify": "success"})

    cities = setup.ws().get(g.cities)
    (slice_key,) = [k for k in cities.store.list("data")]
    path = Path(cities.store.local_path(slice_key))
    original = path.read_bytes()
    table = pq.read_table(path)
    population = [p * 10 if c == "Lisbon" else p for c, p in zip(table.column("city").to_pylist(),
                                                                  table.column("population").to_pylist())]
    assert "Lisbon" not in big_cities() and max(population) >= BIG
    pq.write_table(table.set_column(table.schema.get_field_index("population"), "population",
                                    pa.array(population, table.schema.field("population").type)), path)
    try:
        capsys.readouterr()
        state, tasks = setup.run(g.big_cities, mark_success_pattern="transform")
        assert (state, tasks) == ("failed", {"transform": "success", "verify": "failed"})
        # the task's error (Airflow's task log, printed by dag.test()) says what differs
        assert re.search(rf"OdfTaskError: {re.escape(g.big_cities)}: verification failed: .*logical hash of the "
                         r"reproduced data is f\S+, the block records f\S+", capsys.readouterr().out)
    finally:
        path.write_bytes(original)  # the later tests run on the real data again


def test_push_root_ingests_the_path_given_when_triggered(setup, monkeypatch):
    """Through spark-submit (no ``engine_url``): the default path's smoke test."""
    conn_env(monkeypatch, "odf_default", conn_type="odf", extra={"workspace": str(setup.workspace),
                                                                  "engine_options": SPARK})
    g = setup.graph
    path = setup.served / "ratings.ndjson"
    state, tasks = setup.run(g.ratings, run_conf={"path": str(path)})
    assert (state, tasks) == ("success", {"push": "success", "verify": "success"})
    records = tail(setup.ws().get(g.ratings), 100).to_pylist()
    pushed = [json.loads(line) for line in RATINGS_NDJSON.splitlines()]
    assert sorted((r["city"], r["rating"]) for r in records) == sorted((p["city"], p["rating"]) for p in pushed)
    assert [e["records"] for e in asset_events(g.ratings)] == [len(records)]


def test_runs_with_nothing_new_skip_without_committing(setup):
    g = setup.graph
    heads = {n: setup.head(n) for n in (g.cities, g.big_cities)}
    events = {n: len(asset_events(n)) for n in heads}

    # the sensor sees an unchanged source, times out and soft-fails: the whole run is skipped
    state, tasks = setup.run(g.cities)
    assert state == "success" and set(tasks.values()) == {"skipped"}, tasks
    # without the sensor, fetch itself finds the source up to date (HTTP 304) and skips the rest
    state, tasks = setup.run(g.cities, mark_success_pattern="wait_for_source")
    assert state == "success" and tasks["fetch"] == tasks["commit"] == "skipped", tasks
    assert setup.server.gets("/cities.csv")[-1] == 304
    # the derivative finds no new input data
    state, tasks = setup.run(g.big_cities)
    assert state == "success" and tasks["transform"] == "skipped", tasks

    assert {n: setup.head(n) for n in heads} == heads
    assert {n: len(asset_events(n)) for n in heads} == events


def test_whole_graph_dag_syncs_ingests_and_transforms_in_dependency_order(setup):
    state, tasks = setup.run("odf__graph")
    assert state == "success"
    ingest = ["fetch", "prepare", "read", "merge", "commit", "verify"]
    assert tasks == {"sync": "success", **{f"g_cities.{t}": "success" for t in ingest},
                     "g_big_cities.transform": "success", "g_big_cities.verify": "success"}
    ws = setup.ws()
    assert ws.get("g.cities").state().num_records == len(rows(CITIES_CSV))
    assert sorted(r["city"] for r in tail(ws.get("g.big-cities"), 100).to_pylist()) == sorted(big_cities())
    assert [e["head"] for e in asset_events("g.cities")] == [setup.head("g.cities")]
    assert [e["head"] for e in asset_events("g.big-cities")] == [setup.head("g.big-cities")]

    # again with nothing new: the root's steps skip after fetch, the derivative still looks (none_failed) and skips
    heads = {n: setup.head(n) for n in ("g.cities", "g.big-cities")}
    state, tasks = setup.run("odf__graph")
    assert state == "success" and tasks["g_cities.fetch"] == tasks["g_cities.commit"] == "skipped", tasks
    assert tasks["g_big_cities.transform"] == "skipped", tasks
    assert {n: setup.head(n) for n in heads} == heads


def test_the_same_dags_through_a_long_lived_engine(setup, spark, monkeypatch):
    """With ``engine_url`` on the odf connection every Spark step is a call to one warm engine (here served from the
    test's Spark session): the root's Read task keeps its rows in the engine and its Merge task uses them."""
    import os

    from spark_jobs.server import EngineServer

    g = setup.graph
    engine = EngineServer(spark, "127.0.0.1", 0, max_concurrency=2, drain_s=5)
    engine.start()
    try:
        conn_env(monkeypatch, "odf_default", conn_type="odf",
                 extra={"workspace": str(setup.workspace), "engine_url": f"grpc://127.0.0.1:{engine.port}"})
        served = setup.served / "cities.csv"
        served.write_text(CITIES_CSV + "Porto,PT,231800\n")
        later = served.stat().st_mtime + 10
        os.utime(served, (later, later))
        state, tasks = setup.run(g.cities, mark_success_pattern="wait_for_source")
        assert state == "success" and tasks["merge"] == tasks["commit"] == "success", tasks
        assert engine.kept.reused == 1 and len(engine.kept) == 0  # read once, in the Read task
        assert "Porto" in {r["city"] for r in tail(setup.ws().get(g.cities), 100).to_pylist()}
        state, tasks = setup.run(g.big_cities)
        assert (state, tasks) == ("success", {"transform": "success", "verify": "success"})
        pushed = setup.served / "more-ratings.ndjson"
        pushed.write_text('{"event_time": "2024-01-02T10:00:00Z", "city": "Porto", "rating": 3}\n')
        before = setup.ws().get(g.ratings).state().num_records
        state, tasks = setup.run(g.ratings, run_conf={"path": str(pushed)})
        assert (state, tasks) == ("success", {"push": "success", "verify": "success"})
        assert setup.ws().get(g.ratings).state().num_records == before + 1
    finally:
        engine.shutdown(0)
