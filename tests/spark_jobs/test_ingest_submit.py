"""The ingest job as the coordinator runs it: a real ``spark-submit spark_jobs/ingest.py request.json``."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from spark_jobs import ingest

from .ingest_support import utc

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "spark_jobs" / "ingest.py"


def test_main_without_a_readable_request_exits_non_zero(tmp_path, capsys):
    assert ingest.main([]) == 2
    assert ingest.main([str(tmp_path / "missing.json")]) == 2
    (tmp_path / "req.json").write_text('{"phases": ["read"]}')  # no responsePath: nowhere to answer
    assert ingest.main([str(tmp_path / "req.json")]) == 2
    assert "responsePath" in capsys.readouterr().err


@pytest.mark.spark
@pytest.mark.slow
def test_spark_submit_end_to_end(tmp_path):
    venv_bin = Path(sys.executable).parent
    env = dict(os.environ, PATH=f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}",
               PYSPARK_PYTHON=sys.executable)
    spark_submit = shutil.which("spark-submit", path=env["PATH"])
    assert spark_submit, "spark-submit must be on PATH (the venv's bin directory)"

    src = tmp_path / "prepared" / "0.csv"
    src.parent.mkdir()
    src.write_text("id,name,event_time\n2,b,2024-01-02T00:00:00Z\n1,a,2024-01-01T00:00:00Z\n3,c,\n")
    request = {
        "phases": ["read", "merge"], "dataset": "e2e.dataset",
        "read": {"inputs": [{"path": str(src), "eventTime": "2024-01-03T00:00:00Z"}],
                 "readStep": {"kind": "Csv", "header": True,
                              "schema": ["id BIGINT", "name STRING", "event_time TIMESTAMP"]},
                 "preprocess": {"kind": "Sql", "engine": "spark",
                                "query": "SELECT id, upper(name) AS name, event_time FROM input"}},
        "merge": {"strategy": {"kind": "Ledger", "primaryKey": ["id"]}, "prevOffset": 9,
                  "systemTime": "2024-01-04T00:00:00Z", "outputPath": str(tmp_path / "slice.parquet"),
                  "newCheckpointPath": str(tmp_path / "checkpoint.parquet")},
        "responsePath": str(tmp_path / "response.json")}
    (tmp_path / "request.json").write_text(json.dumps(request))

    proc = subprocess.run(
        [spark_submit, "--master", "local[2]", "--conf", "spark.ui.enabled=false",
         "--conf", "spark.sql.shuffle.partitions=2", str(SCRIPT), str(tmp_path / "request.json")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]

    response = json.loads((tmp_path / "response.json").read_text())
    assert response == {"status": "Success",
                        "read": {"numRecords": 3, "schema": ["id BIGINT", "name STRING", "event_time TIMESTAMP"]},
                        "merge": {"numRecords": 3, "offsetInterval": {"start": 10, "end": 12},
                                  "maxEventTime": "2024-01-03T00:00:00Z", "checkpointWritten": True}}
    rows = pq.read_table(tmp_path / "slice.parquet").to_pylist()
    assert [(r["offset"], r["id"], r["name"], r["event_time"]) for r in rows] == [
        (10, 1, "A", utc(2024, 1, 1)), (11, 2, "B", utc(2024, 1, 2)), (12, 3, "C", utc(2024, 1, 3))]
    assert {r["system_time"] for r in rows} == {utc(2024, 1, 4)}
    assert [r["id"] for r in pq.read_table(tmp_path / "checkpoint.parquet").to_pylist()] == [1, 2, 3]
    # nothing but the outputs is left behind (the scratch directory is removed)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.parquet", "prepared", "request.json",
                                                         "response.json", "slice.parquet"]
