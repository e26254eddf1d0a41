"""Progress of ``odf pull``, ``odf ingest`` and ``odf verify``: the rich bar's text with ODF_PROGRESS=always, plain
lines with counts and bytes when piped (real CLI runs on real files, the test run's Spark session)."""
from __future__ import annotations

import pytest

from odf_core.cli import main

pytestmark = pytest.mark.spark

POLLED = """
kind: DatasetSnapshot
version: 1
content:
  name: cities
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch: {kind: FilesGlob, path: "%s/cities-*.csv"}
      read: {kind: Csv, header: true, schema: ["city STRING", "population BIGINT"]}
      merge: {kind: Ledger, primaryKey: [city]}
"""
PUSHED = """
kind: DatasetSnapshot
version: 1
content:
  name: pushed
  kind: Root
  metadata:
    - kind: AddPushSource
      sourceName: app
      read: {kind: NdJson, schema: ["v INT"]}
      merge: {kind: Append}
"""
DERIVED = """
kind: DatasetSnapshot
version: 1
content:
  name: big-cities
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs: [{datasetRef: cities}]
      transform:
        kind: Sql
        engine: spark
        query: "select system_time as event_time, city, population from cities where population > 650000"
"""


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_pull_ingest_verify_report_progress(tmp_path, capsys, monkeypatch, spark):
    src = tmp_path / "src"
    src.mkdir()
    (src / "cities-1.csv").write_text("city,population\nOslo,700000\nRiga,600000\n")
    (src / "cities-2.csv").write_text("city,population\nKyiv,2900000\n")
    for name, text in (("p.yaml", POLLED % src), ("q.yaml", PUSHED), ("d.yaml", DERIVED)):
        (tmp_path / name).write_text(text)
    ws = str(tmp_path / ".odf")
    assert run(capsys, "-w", ws, "init")[0] == 0
    assert run(capsys, "-w", ws, "add", str(tmp_path / "p.yaml"), str(tmp_path / "q.yaml"),
               str(tmp_path / "d.yaml"))[0] == 0

    monkeypatch.setenv("ODF_PROGRESS", "auto")  # captured stderr is not a terminal: what a pipe gets
    code, out, err = run(capsys, "-w", ws, "pull", "cities")
    assert code == 0 and "cities: 2 records" in out and "cities: 1 records" in out, err
    lines = err.splitlines()
    assert not any("started" in line for line in lines)  # no noise: a line every 5 s at most, then the summary
    size = sum(p.stat().st_size for p in src.iterdir())
    assert lines[-1].startswith(f"cities: fetch: 2 files, {size} B (")  # both files, their bytes and the rate

    monkeypatch.setenv("ODF_PROGRESS", "always")  # the rich bar, as on a terminal
    data = tmp_path / "v.ndjson"
    data.write_text('{"v": 1}\n{"v": 2}\n')
    code, out, err = run(capsys, "-w", ws, "ingest", "pushed", str(data))
    assert code == 0 and "2 records" in out, err
    assert "pushed: ingest" in err and "1/1" in err and "━" in err  # rich's bar characters and M/N column
    assert f"pushed: ingest: 1/1 files, {data.stat().st_size} B (" in err.rstrip().splitlines()[-1]

    code, out, err = run(capsys, "-w", ws, "pull", "big-cities")
    assert code == 0, err
    code, out, err = run(capsys, "-w", ws, "verify", "big-cities")
    assert code == 0 and "reproduction ok" in out, err
    assert "big-cities: replay" in err and "1/1" in err and "transforms" in err
