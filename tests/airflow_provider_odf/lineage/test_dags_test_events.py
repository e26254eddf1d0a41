"""OpenLineage of real runs: ``airflow dags test`` of a generated root DAG and its derivative, each in its own
process with its own AIRFLOW_HOME (a copy of the session's migrated DB), the OpenLineage provider's file transport, a
CSV served over HTTP and Spark through one warm engine (an engine server on the test run's Spark session, named by
the odf connection's ``engine_url``: three requests, the root's read and merge, the transform; the spark-submit
path's smoke test is test_dag_runs.py's push root).

What must show: the root's COMPLETE event names the dataset as output with its new head; the derivative's event
lists its input with the exact block it read; verify tasks carry a data-quality assertion; the Asset events and the
extra link carry the same names and blocks.
"""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest

from dags_examples.demo_support import FileServer
from odf_core.snapshots import add_snapshots, load_snapshot_files
from odf_core.workspace import Workspace

from ..conftest import copy_migrated_db
from ..small_graph import SmallGraph, write_dag_folder, write_served_files

pytestmark = [pytest.mark.slow, pytest.mark.airflow, pytest.mark.spark]

SIDECAR = """defaults:
  sync_schedule: null
  schedule: null
  retries: 0
  sensor: none
  verify: integrity
"""


@dataclass
class Runs:
    graph: SmallGraph
    home: Path
    ws: Workspace
    events_file: Path
    outcomes: dict[str, subprocess.CompletedProcess]

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.events_file.read_text().splitlines() if line.strip()]

    def complete(self, dag_id: str, task_id: str) -> dict[str, Any]:
        found = [e for e in self.events() if e["eventType"] == "COMPLETE" and e["job"]["name"] == f"{dag_id}.{task_id}"]
        assert len(found) == 1, [(e["eventType"], e["job"]["name"]) for e in self.events()]
        return found[0]

    def db(self, sql: str) -> list[tuple]:
        with sqlite3.connect(self.home / "airflow.db") as c:
            return c.execute(sql).fetchall()


def _airflow(env: dict[str, str], *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    airflow = str(Path(sys.executable).parent / "airflow")
    return subprocess.run([airflow, *args], env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, migrated_airflow_db, spark) -> Iterator[Runs]:
    from spark_jobs.server import EngineServer

    tmp = tmp_path_factory.mktemp("ol-runs")
    home, served = tmp / "airflow", write_served_files(tmp / "served")
    events = tmp / "openlineage.jsonl"
    engine = EngineServer(spark, "127.0.0.1", 0, max_concurrency=2, drain_s=5)
    engine.start()
    try:
        with FileServer(served) as server:
            graph = write_dag_folder(home / "dags", server.url().rstrip("/"), SIDECAR, with_flaky=False)
            ws = Workspace.init(str(tmp / "ws"))  # what odf__sync does, without its Spark validation of the query
            add_snapshots(ws, load_snapshot_files(sorted((home / "dags" / "datasets").rglob("*.yaml"))))
            env = {
                **os.environ,
                "AIRFLOW_HOME": str(home),
                "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps({"type": "file", "log_file_path": str(events),
                                                               "append": True}),
                "AIRFLOW__OPENLINEAGE__NAMESPACE": "odf-tests",
                "AIRFLOW_CONN_ODF_DEFAULT": json.dumps({"conn_type": "odf", "extra": {"workspace": ws.url,
                                                                                      "engine_url": engine.url}}),
            }
            copy_migrated_db(migrated_airflow_db, home)  # the session's `airflow db migrate`, copied
            outcomes = {}
            for name in (graph.cities, graph.big_cities):
                outcomes[name] = _airflow(env, "dags", "test", SmallGraph.dag_id(name))
        yield Runs(graph, home, ws, events, outcomes)
    finally:
        engine.shutdown(0)


def _run_ok(runs: Runs, name: str) -> None:
    done = runs.outcomes[name]
    assert done.returncode == 0, (done.stdout[-4000:], done.stderr[-4000:])
    assert runs.db(f"select state from dag_run where dag_id = '{SmallGraph.dag_id(name)}'") == [("success",)]


def test_root_commit_event_names_the_dataset_and_its_new_head(runs):
    _run_ok(runs, runs.graph.cities)
    dag_id, head = SmallGraph.dag_id(runs.graph.cities), str(runs.ws.get(runs.graph.cities).chain.head())
    event = runs.complete(dag_id, "commit")
    (out,) = event["outputs"]
    assert (out["namespace"], out["name"]) == ("odf://odf_default", runs.graph.cities)
    assert out["facets"]["version"]["datasetVersion"] == head
    block = out["outputFacets"]["odfBlock"]
    assert (block["block"], block["event"], block["offsetInterval"]) == (head, "AddData", {"start": 0, "end": 5})
    assert block["sourceState"]["kind"] in ("odf/etag", "odf/last-modified")
    assert out["outputFacets"]["outputStatistics"]["rowCount"] == 6
    assert [f["name"] for f in out["facets"]["schema"]["fields"]][-3:] == ["city", "country", "population"]
    (src,) = event["inputs"]
    assert src["namespace"].startswith("http://127.0.0.1:") and src["name"] == "/cities.csv"
    # every ingest step names the same source and dataset; only the commit carries a block
    for task in ("fetch", "prepare", "read", "merge"):
        e = runs.complete(dag_id, task)
        assert [(i["namespace"], i["name"]) for i in e["inputs"]] == [(src["namespace"], src["name"])]
        assert [(o["name"], "odfBlock" in o.get("outputFacets", {})) for o in e["outputs"]] == [
            (runs.graph.cities, False)]


def test_derivative_event_lists_its_input_with_the_block_it_read(runs):
    _run_ok(runs, runs.graph.big_cities)
    g = runs.graph
    event = runs.complete(SmallGraph.dag_id(g.big_cities), "transform")
    (inp,) = event["inputs"]
    cities_head = str(runs.ws.get(g.cities).chain.head())
    assert (inp["namespace"], inp["name"]) == ("odf://odf_default", g.cities)
    assert inp["inputFacets"]["odfInputSlice"] == {**inp["inputFacets"]["odfInputSlice"], "block": cities_head,
                                                   "offsetInterval": {"start": 0, "end": 5}}
    (out,) = event["outputs"]
    assert out["name"] == g.big_cities
    assert out["facets"]["version"]["datasetVersion"] == str(runs.ws.get(g.big_cities).chain.head())
    assert "population >=" in event["job"]["facets"]["sql"]["query"]


def test_verify_events_carry_a_passing_data_quality_assertion(runs):
    for name in (runs.graph.cities, runs.graph.big_cities):
        _run_ok(runs, name)
        (inp,) = runs.complete(SmallGraph.dag_id(name), "verify")["inputs"]
        assert inp["name"] == name
        (check,) = inp["inputFacets"]["dataQualityAssertions"]["assertions"]
        assert (check["assertion"], check["success"]) == ("odf_integrity", True)


def test_asset_events_and_extra_links_carry_the_same_provenance(runs):
    g = runs.graph
    _run_ok(runs, g.big_cities)
    rows = runs.db("select a.uri, e.extra from asset_event e join asset a on a.id = e.asset_id order by e.id")
    extras = {uri: json.loads(extra) for uri, extra in rows}
    cities, big = extras[f"odf://odf_default/{g.cities}"], extras[f"odf://odf_default/{g.big_cities}"]
    assert cities["block"] == str(runs.ws.get(g.cities).chain.head()) and cities["source_state"]["source"]
    assert big["block"] == str(runs.ws.get(g.big_cities).chain.head())
    assert [(i["dataset"], i["block"]) for i in big["inputs"]] == [(g.cities, cities["block"])]
    links = dict(runs.db("select task_id, value from xcom where key = '_link_OdfDatasetLink' "
                         f"and dag_id = '{SmallGraph.dag_id(g.big_cities)}'"))
    assert json.loads(links["transform"]) == f"/odf/datasets/{g.big_cities}?conn=odf_default"
