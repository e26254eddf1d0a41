"""The provider in a real ``airflow standalone`` (scheduler, dag-processor, api-server, triggerer; LocalExecutor on
SQLite), driven only through the REST API, as a user would.

The ``odf`` connection names ``engine_url: auto``: every task on this host sends its Spark work to one engine that
the first of them starts (``odf engine serve`` on a private Unix socket) and the others reuse, as a LocalExecutor or
Celery worker host runs it; the standalone's environment points the engine's directory and logs into the test's
temporary directory. (One spark-submit per step, the default without ``engine_url``, runs in real task processes in
tests/airflow_provider_odf/test_dag_runs.py and tests/odf_core/engine/test_submit.py.)

A reduced example graph: ``e.cities`` (CSV over HTTP from a server this test starts, deferrable sensor) whose commit
wakes the derivative ``e.big-cities`` through its Asset event, and ``e.flaky``, whose server answers HTTP 500 once:
the fetch fails, Airflow retries it and the run commits exactly one block. Results are checked with ``odf_core``
directly on the workspace. One standalone for the module; it must stop without leaving a process behind.
"""
from __future__ import annotations

import json
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from airflow_provider_odf.assets import asset_uri
from dags_examples.demo_support import FileServer, StandaloneAirflow, processes_with_env
from odf_core.chain.integrity import verify_integrity
from odf_core.engine import LocalEngine
from odf_core.query import tail
from odf_core.transform import verify
from odf_core.workspace import Workspace

from ..airflow_provider_odf.small_graph import (
    CITIES_CSV,
    FLAKY_CSV,
    SmallGraph,
    big_cities,
    rows,
    write_dag_folder,
    write_served_files,
)
from ..cli_process import OdfCli

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.spark]

SIDECAR = """defaults:
  sync_schedule: null     # the test triggers every run itself
  schedule: null
  retries: 0
  sensor: none
datasets:
  e.cities:
    sensor: deferrable    # waits in the triggerer when nothing is new
    sensor_poke_interval: 2
    sensor_timeout: 8
  e.flaky:
    retries: 1            # the injected HTTP 500 is retried once, two seconds later
    retry_delay: 2
"""
# the auto engine's Spark: the cores of a 2-core machine, few partitions for tiny data
AUTO_ARGS = "--master local[2] --conf spark.sql.shuffle.partitions=2 --conf spark.default.parallelism=2"
RUN_TIMEOUT_S = 600  # Spark jobs on a busy 2-core machine; normally a run takes well under a minute


@dataclass
class E2E:
    airflow: StandaloneAirflow
    server: FileServer
    graph: SmallGraph
    workspace: str
    first_runs: dict[str, str]  # dataset -> run id of the run the fixture triggered
    engine_logs: Path  # ODF_LOG_DIR of every component: the auto engine's log is there
    odf: OdfCli  # ``odf`` commands with the standalone's engine directory and logs

    def ws(self) -> Workspace:
        return Workspace.open(self.workspace)

    def dag_id(self, name: str) -> str:
        return SmallGraph.dag_id(name)

    def failure_report(self) -> str:
        return self.airflow.failure_report()


@pytest.fixture(scope="module")
def e2e(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("e2e")
    server = FileServer(write_served_files(tmp / "served"), fail_first={"/flaky.csv": 1}).start()
    graph = write_dag_folder(tmp / "dags", server.url().rstrip("/"), SIDECAR, prefix="e")
    conn = {"conn_type": "odf", "extra": {"workspace": str(tmp / "ws"), "engine_url": "auto"}}
    # a short directory of its own: a Unix socket's path is limited to ~100 bytes, pytest's temporary paths are long
    engine_dir = tempfile.mkdtemp(prefix="odf-e2e-")
    env = {"AIRFLOW_CONN_ODF_DEFAULT": json.dumps(conn), "ODF_ENGINE_DIR": engine_dir,
           "ODF_LOG_DIR": str(tmp / "odf-logs"), "ODF_ENGINE_AUTO_ARGS": AUTO_ARGS}
    airflow = StandaloneAirflow(tmp / "home", tmp / "dags", env=env)
    odf = OdfCli(tmp, env)
    dag_ids = ["odf__sync", *(SmallGraph.dag_id(n) for n in (graph.cities, graph.big_cities, graph.flaky))]
    airflow.start()
    try:
        try:
            airflow.wait_until_ready()
            airflow.wait_for_dags(dag_ids)
            for dag_id in dag_ids:
                airflow.unpause(dag_id)
            sync = airflow.wait_for_run("odf__sync", airflow.trigger("odf__sync"), RUN_TIMEOUT_S)
            assert sync.state == "success", sync
            # both roots at once: their Spark jobs overlap with the other's task start-ups
            first = {n: airflow.trigger(SmallGraph.dag_id(n)) for n in (graph.cities, graph.flaky)}
        except Exception as e:
            raise AssertionError(f"setting up the standalone Airflow failed: {e}\n{airflow.failure_report()}") from e
        yield E2E(airflow, server, graph, str(tmp / "ws"), first, tmp / "odf-logs", odf)
    finally:
        odf.run("engine", "stop")  # the auto engine is detached from the standalone: stop it as a user
        airflow.stop()
        server.stop()
        shutil.rmtree(engine_dir, ignore_errors=True)


def test_root_run_wakes_the_derivative_through_its_asset_event(e2e, spark):
    af, g = e2e.airflow, e2e.graph
    run = af.wait_for_run(e2e.dag_id(g.cities), e2e.first_runs[g.cities], RUN_TIMEOUT_S)
    assert run.state == "success", run
    assert set(run.tasks.values()) == {"success"} and "wait_for_source" in run.tasks, run.tasks

    derived = af.wait_for_first_run(e2e.dag_id(g.big_cities), RUN_TIMEOUT_S,
                                    accept=lambda r: r["run_type"] == "asset_triggered")
    assert derived.state == "success" and derived.tasks == {"transform": "success", "verify": "success"}, derived
    [event] = af.upstream_asset_events(e2e.dag_id(g.big_cities), derived.run_id)
    assert (event["uri"], event["source_run_id"]) == (asset_uri("odf_default", g.cities), run.run_id)

    ws = e2e.ws()
    cities, big = ws.get(g.cities).state(), ws.get(g.big_cities).state()
    assert event["extra"]["block"] == event["extra"]["head"] == str(cities.head)
    assert (cities.data_blocks, cities.num_records) == (1, len(rows(CITIES_CSV)))
    assert sorted(r["city"] for r in tail(ws.get(g.big_cities), 100).to_pylist()) == sorted(big_cities())
    assert big.data_blocks == 1
    [produced] = af.asset_events(source_dag_id=e2e.dag_id(g.big_cities))
    assert produced["extra"]["head"] == str(big.head)
    for name in (g.cities, g.big_cities):
        assert verify_integrity(ws.get(name).store).ok, name
    report = verify(ws, g.big_cities, engine=LocalEngine.with_session(spark))
    assert report.ok and report.blocks_checked == 1, report.summary()
    for dag_id, run_id, task in ((e2e.dag_id(g.cities), run.run_id, "read"),
                                 (e2e.dag_id(g.big_cities), derived.run_id, "transform")):
        assert "engine auto: unix://" in af.task_log(dag_id, run_id, task), (dag_id, task)


def test_a_run_with_nothing_new_waits_in_the_triggerer_then_skips(e2e):
    af, g = e2e.airflow, e2e.graph
    head = str(e2e.ws().get(g.cities).chain.head())
    events = len(af.asset_events(source_dag_id=e2e.dag_id(g.cities)))
    run = af.wait_for_run(e2e.dag_id(g.cities), af.trigger(e2e.dag_id(g.cities)), RUN_TIMEOUT_S)
    assert run.state == "success" and set(run.tasks.values()) == {"skipped"}, run
    log = af.task_log(e2e.dag_id(g.cities), run.run_id, "wait_for_source")
    assert "source unchanged" in log and "Pausing task as DEFERRED" in log, log  # a poke, then the hand-over
    assert "nothing yet, next check in 2 s" in log, log  # the trigger's own probes, in the triggerer
    assert str(e2e.ws().get(g.cities).chain.head()) == head
    assert len(af.asset_events(source_dag_id=e2e.dag_id(g.cities))) == events


def test_failed_fetch_is_retried_and_commits_exactly_once(e2e):
    af, g = e2e.airflow, e2e.graph
    run = af.wait_for_run(e2e.dag_id(g.flaky), e2e.first_runs[g.flaky], RUN_TIMEOUT_S)
    assert run.state == "success" and set(run.tasks.values()) == {"success"}, run
    assert run.tries["fetch"] == 2 and run.tries["commit"] == 1, run.tries
    assert e2e.server.gets("/flaky.csv") == [500, 200]

    ws = e2e.ws()
    st = ws.get(g.flaky).state()
    expected = rows(FLAKY_CSV)
    assert (st.data_blocks, st.num_records) == (1, len(expected))
    records = tail(ws.get(g.flaky), 100).to_pylist()
    assert sorted((r["id"], r["reading"]) for r in records) == sorted((int(r["id"]), r["reading"]) for r in expected)
    assert verify_integrity(ws.get(g.flaky).store).ok
    [event] = af.asset_events(source_dag_id=e2e.dag_id(g.flaky))
    assert event["extra"]["head"] == str(st.head) and event["extra"]["records"] == len(expected)


def test_every_task_on_the_host_shares_one_auto_engine(e2e):
    """The tasks of three DAGs (two roots running at once, a derivative) sent their Spark work to one engine: the
    first request started it, every later one reused it; ``odf engine status`` and ``stop`` reach it as a user would,
    and nothing of it is left."""
    for name in (e2e.graph.cities, e2e.graph.flaky):  # their Spark steps are done before the engine is looked at
        e2e.airflow.wait_for_run(e2e.dag_id(name), e2e.first_runs[name], RUN_TIMEOUT_S)
    status = e2e.odf.run("engine", "status")
    assert status.returncode == 0, status.stderr
    pid = int(re.search(r"auto engine: pid (\d+)", status.stdout).group(1))
    [log] = e2e.engine_logs.glob("engine-auto-*.log")
    text = log.read_text()
    assert text.count(" starting: ") == 1, text[-3000:]
    answered = re.findall(r": answered (\S+) in", text)
    assert len(answered) >= 4, answered
    stopped = e2e.odf.run("engine", "stop")
    assert stopped.returncode == 0 and f"(pid {pid}," in stopped.stdout, (stopped.stdout, stopped.stderr)
    assert not Path(f"/proc/{pid}").exists()
    assert "no auto engine runs" in e2e.odf.run("engine", "status", "--engine", "auto").stderr


def test_standalone_stops_without_leaving_processes_behind(e2e):
    af = e2e.airflow
    assert af.running() and af.processes()
    stragglers = af.stop()
    assert stragglers == [], f"processes outlived their standalone's process group: {stragglers}"
    assert af.processes() == [] and not af.running()
    assert processes_with_env("AIRFLOW_HOME", str(af.home)) == []
