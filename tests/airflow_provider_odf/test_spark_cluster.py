"""The operators on a Spark standalone cluster: a push root and its derivative run through ``dag.test()``, their
Spark jobs sent by ``spark-submit --master spark://…`` to the session's cluster (fixture ``spark_cluster``) through an
Airflow ``spark`` connection that the ``odf`` connection names — the way a deployment points Airflow at its cluster.
"""
from __future__ import annotations

import json
import shutil

import pytest

from odf_core.chain.integrity import verify_integrity
from odf_core.query import tail
from odf_core.snapshots import add_snapshots, load_snapshot_files
from odf_core.workspace import Workspace

from .conftest import conn_env
from .dag_factory.dagbag import load
from .small_graph import RATINGS_NDJSON, SmallGraph

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.cluster, pytest.mark.airflow]

SIDECAR = """defaults:
  odf_conn_id: odf_cluster
  sync_schedule: null
  schedule: null
  retries: 0
  spark_conn_id: spark_cluster
"""
RATINGS = """kind: DatasetSnapshot
version: 1
content:
  name: c.ratings
  kind: Root
  metadata:
    - kind: AddPushSource
      sourceName: app
      read:
        kind: NdJson
        schema: ["event_time TIMESTAMP", "city STRING", "rating INT"]
      merge:
        kind: Append
"""
GOOD_RATINGS = """kind: DatasetSnapshot
version: 1
content:
  name: c.good-ratings
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs:
        - datasetRef: c.ratings
      transform:
        kind: Sql
        engine: spark
        query: select event_time, city, rating from `c.ratings` where rating >= 4
"""
DAG_FILE = 'from airflow_provider_odf.dag_factory import dags_from_folder\n\ndags_from_folder("datasets", globals())\n'


@pytest.fixture(scope="module")
def cluster_dags(airflow_db, airflow_home, spark_cluster, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cluster-dags")
    folder = airflow_home / "dags" / "cluster"  # inside core.dags_folder, where dag.test() finds DAGs
    (folder / "datasets").mkdir(parents=True)
    (folder / "datasets" / "ratings.yaml").write_text(RATINGS)
    (folder / "datasets" / "good-ratings.yaml").write_text(GOOD_RATINGS)
    (folder / "odf-dags.yaml").write_text(SIDECAR)
    (folder / "odf_dags.py").write_text(DAG_FILE)
    ws = Workspace.init(str(tmp / "ws"))
    add_snapshots(ws, load_snapshot_files(sorted((folder / "datasets").glob("*.yaml"))))
    with pytest.MonkeyPatch.context() as mp:
        conn_env(mp, "spark_cluster", conn_type="spark", host=spark_cluster.host, port=spark_cluster.port)
        conn_env(mp, "odf_cluster", conn_type="odf", extra={"workspace": ws.url, "spark_conn_id": "spark_cluster"})
        mp.setenv("SPARK_LOCAL_IP", "127.0.0.1")
        bag = load(folder)
        assert bag.import_errors == {}
        yield bag.dags, ws, tmp
    shutil.rmtree(folder)


def _run(dags, name: str, **kwargs) -> tuple[str, dict[str, str]]:
    dr = dags[SmallGraph.dag_id(name)].test(**kwargs)
    return str(dr.state), {ti.task_id: str(ti.state) for ti in dr.get_task_instances()}


def test_push_and_transform_operators_run_their_jobs_on_the_cluster(cluster_dags, spark_cluster):
    dags, ws, tmp = cluster_dags
    pushed = tmp / "ratings.ndjson"
    pushed.write_text(RATINGS_NDJSON)
    before = spark_cluster.applications()

    state, tasks = _run(dags, "c.ratings", run_conf={"path": str(pushed)})
    assert (state, tasks) == ("success", {"push": "success", "verify": "success"})
    state, tasks = _run(dags, "c.good-ratings")
    assert (state, tasks) == ("success", {"transform": "success", "verify": "success"})

    # two spark-submit applications (the push, the transform) got executors on the worker and ran their tasks there
    apps = [a for a in spark_cluster.applications() if a not in before]
    assert len(apps) == 2, apps
    for app in apps:
        assert any("Finished task" in log for log in spark_cluster.executor_logs(app)), app
    spark_cluster.assert_jobs_ended(apps)

    ratings = [json.loads(line) for line in RATINGS_NDJSON.splitlines()]
    assert sorted((r["city"], r["rating"]) for r in tail(ws.get("c.ratings"), 100).to_pylist()) == sorted(
        (r["city"], r["rating"]) for r in ratings)
    assert sorted((r["city"], r["rating"]) for r in tail(ws.get("c.good-ratings"), 100).to_pylist()) == sorted(
        (r["city"], r["rating"]) for r in ratings if r["rating"] >= 4)
    for name in ("c.ratings", "c.good-ratings"):
        assert verify_integrity(ws.get(name).store).ok
