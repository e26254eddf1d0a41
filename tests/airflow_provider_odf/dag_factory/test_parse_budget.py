"""Parsing is cheap: 200 snapshots become DAGs with no Spark, workspace access, process or network.

How fast is a benchmark figure (3 s for 200 snapshots, held by ``benchmarks/bench_airflow.py``); a timing assert in
the suite would flake on a busy machine. The suite keeps a generous guard instead: the parse must stay well inside
Airflow's own ``dagbag_import_timeout``, past which the dag-processor turns the whole file into an import error.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from odf_core.workspace import Workspace

from ..synthetic import write_snapshots
from .dagbag import write_dag_file



def test_200_snapshots_parse_inside_the_import_timeout_without_side_effects(tmp_path, airflow_home):
    from airflow.configuration import conf

    guard_s = conf.getfloat("core", "dagbag_import_timeout") / 2
    names = write_snapshots(tmp_path / "dags" / "datasets", 200)
    dag_file = write_dag_file(tmp_path / "dags")
    ws = Workspace.init(str(tmp_path / "ws" / ".odf"))  # a real workspace the parse must leave alone
    env = {**os.environ, "AIRFLOW_CONN_ODF_DEFAULT": json.dumps({"conn_type": "odf", "extra": {"workspace": ws.url}})}
    probe = Path(__file__).with_name("parse_probe.py")
    out = subprocess.run([sys.executable, str(probe), str(dag_file), str(tmp_path / "ws")], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["import_errors"] == {}
    assert report["dags"] == len(names) + 1  # one per dataset + odf__sync
    assert report["tasks"] > 3 * len(names)
    assert report["side_effects"] == []
    assert report["spark_modules"] == []
    assert report["lineage_modules"] == []
    assert report["seconds"] < guard_s, report
    assert sorted(p.name for p in (tmp_path / "ws" / ".odf").iterdir()) == ["workspace.version"]


def test_probe_does_see_workspace_access(tmp_path):
    """Guards the test above: the audit hook reports a parse that touches the workspace or starts a process."""
    dag_file = tmp_path / "touchy.py"
    ws = tmp_path / "ws"
    ws.mkdir()
    dag_file.write_text(
        "import os, subprocess, sys\nimport py4j\nimport airflow_provider_odf.lineage.facets\n"
        "from airflow.sdk import DAG\n"
        f"os.listdir({str(ws)!r})\nsubprocess.run([sys.executable, '-c', 'pass'])\n"
        "dag = DAG('touchy', schedule=None)\n")
    probe = Path(__file__).with_name("parse_probe.py")
    out = subprocess.run([sys.executable, str(probe), str(dag_file), str(ws)], capture_output=True, text=True,
                         timeout=120)
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["dags"] == 1
    assert any(e.startswith("os.listdir") for e in report["side_effects"])
    assert any(e.startswith("subprocess.Popen") for e in report["side_effects"])
    assert "py4j" in report["spark_modules"]
    assert report["lineage_modules"] == ["airflow_provider_odf.lineage.facets"]
