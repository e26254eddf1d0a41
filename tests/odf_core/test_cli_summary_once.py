"""Without a terminal, ``odf pull`` and ``odf ingest`` print each summary line once, also when the work's only
progress step comes at its end after more than the line interval (a transform: one ``advance`` when it is done).
``ODF_PROGRESS_INTERVAL=0`` makes every step "late", as a transform slower than 5 s is in production."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from odf_core.cli import main

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
PUSHED = """
kind: DatasetSnapshot
version: 1
content:
  name: a
  kind: Root
  metadata:
    - kind: AddPushSource
      sourceName: app
      read: {kind: NdJson, schema: ["k INT", "v INT"]}
      merge: {kind: Append}
"""
DERIVED = """
kind: DatasetSnapshot
version: 1
content:
  name: a.by-key
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs: [{datasetRef: a}]
      transform: {kind: Sql, engine: spark, query: "select event_time, k, v * 2 as v2 from a"}
"""


def test_summary_lines_are_printed_once_without_a_terminal(tmp_path, capsys, monkeypatch, spark):
    monkeypatch.delenv("ODF_PROGRESS", raising=False)
    monkeypatch.setenv("ODF_PROGRESS_INTERVAL", "0")
    ws = str(tmp_path / ".odf")
    (tmp_path / "a.yaml").write_text(PUSHED)
    (tmp_path / "d.yaml").write_text(DERIVED)
    data = tmp_path / "a.ndjson"
    data.write_text('{"k": 1, "v": 10}\n{"k": 2, "v": 20}\n')
    assert main(["-w", ws, "init"]) == 0
    assert main(["-w", ws, "add", str(tmp_path / "a.yaml"), str(tmp_path / "d.yaml")]) == 0
    capsys.readouterr()
    assert main(["-w", ws, "ingest", "a", str(data)]) == 0
    err = capsys.readouterr().err  # captured: not a terminal, plain lines
    assert [line for line in err.splitlines() if line.startswith("a: ingest: ")] == [err.splitlines()[0]], err

    # the real CLI in its own process, stdout and stderr to pipes, as in a log
    env = {k: v for k, v in os.environ.items() if k != "ODF_PROGRESS"}
    env.update({"PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
                "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
                "ODF_LOG_DIR": str(tmp_path / "logs"), "ODF_PROGRESS_INTERVAL": "0"})
    proc = subprocess.run([sys.executable, "-m", "odf_core.cli", "-w", ws, "pull", "a.by-key", "--master", "local[1]",
                           "--conf", "spark.ui.enabled=false"],
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    log = proc.stdout + proc.stderr
    summaries = [line for line in log.splitlines() if line.startswith("a.by-key: transform: ")]
    assert len(summaries) == 1 and summaries[0].startswith("a.by-key: transform: 2 rows, "), log
    assert proc.stdout.startswith("a.by-key: 2 records, head "), log
