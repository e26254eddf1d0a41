"""The ``odf`` CLI on a Spark standalone cluster: ``odf pull --recursive --master spark://…`` ingests a root and runs
a derivative's transform with executors on the cluster's worker (session fixture ``spark_cluster``)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from odf_core.chain.integrity import verify_integrity
from odf_core.query import tail
from odf_core.workspace import Workspace

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.cluster]

CITIES = """kind: DatasetSnapshot
version: 1
content:
  name: cities
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch: {kind: FilesGlob, path: "%s/cities-*.csv"}
      read: {kind: Csv, header: true, schema: ["city STRING", "population BIGINT"]}
      merge: {kind: Snapshot, primaryKey: [city]}
"""
BIG_CITIES = """kind: DatasetSnapshot
version: 1
content:
  name: big-cities
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs: [{datasetRef: cities}]
      transform: {kind: Sql, engine: spark, query: "select event_time, city, population from cities
        where population >= 650000"}
"""


def test_pull_ingests_and_transforms_on_the_cluster(spark_cluster, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "cities-1.csv").write_text("city,population\nOslo,700000\nRiga,600000\nVienna,1980000\n")
    (tmp_path / "cities.yaml").write_text(CITIES % src)
    (tmp_path / "big-cities.yaml").write_text(BIG_CITIES)
    ws = str(tmp_path / ".odf")
    odf = shutil.which("odf", path=str(Path(sys.executable).parent))
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([odf, "-w", ws, *args], env=env, capture_output=True, text=True, timeout=600)

    assert cli("init").returncode == 0
    assert cli("add", str(tmp_path / "cities.yaml"), str(tmp_path / "big-cities.yaml")).returncode == 0
    before = spark_cluster.applications()
    run = cli("pull", "big-cities", "--recursive", "--master", spark_cluster.master_url)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    assert lines[0].startswith("cities: 3 records at offsets (0, 2), head f1620"), run.stdout
    assert lines[1].startswith("big-cities: 2 records, head f1620"), run.stdout

    # one application (one Spark session for both datasets) got executors on the worker, and they ran its tasks
    apps = [a for a in spark_cluster.applications() if a not in before]
    assert len(apps) == 1, apps
    assert any("Finished task" in log for log in spark_cluster.executor_logs(apps[0]))
    spark_cluster.assert_jobs_ended(apps)

    workspace = Workspace.open(ws)
    rows = tail(workspace.get("big-cities"), 10).to_pylist()
    assert sorted((r["city"], r["population"]) for r in rows) == [("Oslo", 700000), ("Vienna", 1980000)]
    for name in ("cities", "big-cities"):
        report = verify_integrity(workspace.get(name).store)
        assert report.ok, report.summary()


def test_the_warm_engine_runs_on_the_cluster(spark_cluster, tmp_path):
    """``odf engine serve --master spark://…``: one application on the cluster serves every later ``odf`` command."""
    import socket
    import time

    src = tmp_path / "src"
    src.mkdir()
    (src / "cities-1.csv").write_text("city,population\nOslo,700000\nRiga,600000\nVienna,1980000\n")
    (tmp_path / "cities.yaml").write_text(CITIES % src)
    (tmp_path / "big-cities.yaml").write_text(BIG_CITIES)
    ws = str(tmp_path / ".odf")
    odf = shutil.which("odf", path=str(Path(sys.executable).parent))
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    before = spark_cluster.applications()
    log = tmp_path / "engine.log"
    engine = subprocess.Popen([odf, "engine", "serve", "--port", str(port), "--master", spark_cluster.master_url],
                              env=env, stdout=subprocess.DEVNULL, stderr=log.open("w"))
    try:
        deadline = time.monotonic() + 240
        while "odf engine ready" not in log.read_text():
            assert engine.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
        url = f"grpc://127.0.0.1:{port}"

        def cli(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run([odf, "-w", ws, *args, *(["--engine", url] if args[0] == "pull" else [])],
                                  env=env, capture_output=True, text=True, timeout=600)

        assert cli("init").returncode == 0
        assert cli("add", str(tmp_path / "cities.yaml"), str(tmp_path / "big-cities.yaml")).returncode == 0
        run = cli("pull", "big-cities", "--recursive")
        assert run.returncode == 0, run.stderr[-3000:] + log.read_text()[-3000:]
        assert run.stdout.splitlines()[1].startswith("big-cities: 2 records"), run.stdout
        apps = [a for a in spark_cluster.applications() if a not in before]
        assert len(apps) == 1, apps  # the engine's one application; the commands started none
        assert any("Finished task" in entry for entry in spark_cluster.executor_logs(apps[0]))
    finally:
        engine.terminate()
        assert engine.wait(120) == 0, log.read_text()[-3000:]
    spark_cluster.assert_jobs_ended(apps)
    rows = tail(Workspace.open(ws).get("big-cities"), 10).to_pylist()
    assert sorted((r["city"], r["population"]) for r in rows) == [("Oslo", 700000), ("Vienna", 1980000)]
