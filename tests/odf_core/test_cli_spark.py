"""The Spark-backed ``odf`` commands end to end in one process (the CLI reuses the test's Spark session)."""
from __future__ import annotations

import pytest
import yaml

from odf_core.cli import main

pytestmark = pytest.mark.spark

ROOT = """
kind: DatasetSnapshot
version: 1
content:
  name: ratings
  kind: Root
  metadata:
    - kind: AddPushSource
      sourceName: app
      read: {kind: NdJson, schema: ["event_time TIMESTAMP", "city STRING", "rating INT"]}
      merge: {kind: Append}
"""
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
      merge: {kind: Snapshot, primaryKey: [city]}
"""
DERIVED = """
kind: DatasetSnapshot
version: 1
content:
  name: avg-rating
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs: [{datasetRef: ratings}, {datasetRef: cities}]
      transform:
        kind: Sql
        engine: spark
        query: |
          select max(r.event_time) as event_time, r.city, avg(r.rating) as avg_rating, max(c.population) as pop
          from ratings r join cities c on r.city = c.city
          group by r.city
"""


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_pull_recursive_ingest_tail_sql_verify_set_transform(tmp_path, capsys, spark):
    ws = str(tmp_path / ".odf")
    src = tmp_path / "src"
    src.mkdir()
    (src / "cities-1.csv").write_text("city,population\nOslo,700000\nRiga,600000\n")
    (tmp_path / "root.yaml").write_text(ROOT)
    (tmp_path / "polled.yaml").write_text(POLLED % src)
    (tmp_path / "derived.yaml").write_text(DERIVED)
    assert run(capsys, "-w", ws, "init")[0] == 0
    assert run(capsys, "-w", ws, "add", str(tmp_path))[0] == 0
    code, out, err = run(capsys, "-w", ws, "pull", "avg-rating")
    assert (code, out) == (0, "avg-rating: waiting: its input 'ratings' has no data yet (pull it first, or pull "
                              "with --recursive)\n"), err
    data = tmp_path / "r.ndjson"
    data.write_text('{"event_time": "2024-01-01T10:00:00Z", "city": "Oslo", "rating": 4}\n'
                    '{"event_time": "2024-01-01T11:00:00Z", "city": "Oslo", "rating": 2}\n'
                    '{"event_time": "2024-01-01T12:00:00Z", "city": "Riga", "rating": 5}\n')
    code, out, err = run(capsys, "-w", ws, "ingest", "ratings", str(data), "--master", "local[2]")
    assert code == 0 and "3 records" in out, err
    code, out, err = run(capsys, "-w", ws, "pull", "avg-rating")
    assert (code, out) == (0, "avg-rating: waiting: its input 'cities' has no data yet (pull it first, or pull "
                              "with --recursive)\n"), err
    code, out, err = run(capsys, "-w", ws, "pull", "avg-rating", "--recursive", "--master", "local[2]")
    assert code == 0, err
    assert out.index("cities:") < out.index("avg-rating:") and "2 records" in out
    code, out, _ = run(capsys, "-w", ws, "tail", "avg-rating", "-n", "5")
    header, *lines = out.splitlines()
    assert header.split() == ["offset", "op", "system_time", "event_time", "city", "avg_rating", "pop"]
    # one row per city: (ratings 4 and 2) -> 3.0 and (5) -> 5.0, with the population joined from cities
    assert len(lines) == 2 and sorted(line.split()[-3:] for line in lines) == [
        ["Oslo", "3.0", "700000"], ["Riga", "5.0", "600000"]]
    code, out, err = run(capsys, "-w", ws, "sql", "select city, count(*) as n from ratings group by city order by city")
    assert code == 0, err
    assert [line.split() for line in out.splitlines()] == [["city", "n"], ["Oslo", "2"], ["Riga", "1"]]
    code, _, err = run(capsys, "-w", ws, "sql", "drop table ratings")
    assert code == 1 and "not a query: it starts with 'DROP'" in err
    code, out, err = run(capsys, "-w", ws, "verify", "avg-rating")
    assert code == 0 and "reproduction ok" in out, err
    # how the query is evaluated: the join and the aggregate are both incremental, and the explanation says how
    code, out, err = run(capsys, "-w", ws, "explain", "avg-rating")
    assert code == 0, err
    head, *ops = out.splitlines()
    assert head.startswith("avg-rating: stateful (") and head.endswith("incremental path: each step costs its new "
                                                                       "rows plus the operators' state"), out
    assert any(line.strip().startswith("Join: incremental (") and "join on 1 key(s)" in line for line in ops), out
    assert any(line.strip().startswith("Aggregate: incremental (") for line in ops), out
    code, _, err = run(capsys, "-w", ws, "explain", "ratings")
    assert code == 1 and "ratings' has no transform" in err and err.count("\n") == 1
    # query evolution through the CLI: a new column at the end is fine, a dropped column is not
    evolved = yaml.safe_load(DERIVED)
    evolved["content"]["metadata"][0]["transform"]["query"] = DERIVED.split("query: |")[1].replace(
        "max(c.population) as pop", "max(c.population) as pop, count(*) as n")
    (tmp_path / "evolved.yaml").write_text(yaml.safe_dump(evolved))
    code, out, err = run(capsys, "-w", ws, "set-transform", "avg-rating", str(tmp_path / "evolved.yaml"))
    assert code == 0, err
    broken = yaml.safe_load(DERIVED)
    broken["content"]["metadata"][0]["transform"]["query"] = (
        "select max(event_time) as event_time, city from ratings group by city")
    (tmp_path / "broken.yaml").write_text(yaml.safe_dump(broken))
    code, _, err = run(capsys, "-w", ws, "set-transform", "avg-rating", str(tmp_path / "broken.yaml"))
    assert code == 1 and "avg_rating" in err and err.count("\n") == 1


@pytest.mark.slow
def test_a_killed_odf_ingest_rerun_with_its_txn_id_ingests_once(tmp_path, capsys, spark):
    """The issue's case: ``odf ingest`` killed right after its block went in, other pushes, then the re-run."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    from odf_core.storage import crash_env, was_killed
    from odf_core.workspace import Workspace

    ws = str(tmp_path / ".odf")
    (tmp_path / "root.yaml").write_text(ROOT)
    assert run(capsys, "-w", ws, "init")[0] == 0 and run(capsys, "-w", ws, "add", str(tmp_path / "root.yaml"))[0] == 0
    first, other = tmp_path / "first.ndjson", tmp_path / "other.ndjson"
    first.write_text('{"event_time": "2024-01-01T10:00:00Z", "city": "Oslo", "rating": 4}\n'
                     '{"event_time": "2024-01-01T11:00:00Z", "city": "Riga", "rating": 5}\n')
    other.write_text('{"event_time": "2024-01-02T10:00:00Z", "city": "Kyiv", "rating": 3}\n')
    odf = shutil.which("odf", path=str(Path(sys.executable).parent))
    # the 1st head update is the SetDataSchema block, the 2nd the AddData block: die right after the data is in
    killed = subprocess.run([odf, "-w", ws, "ingest", "ratings", str(first), "--txn-id", "upload-17",
                             "--master", "local[1]"], env=crash_env("chain.after_head_update", 2),
                            capture_output=True, text=True, timeout=300)
    assert was_killed(killed.returncode), killed.stderr[-2000:]
    committed = Workspace.open(ws).get("ratings").chain.head()

    code, out, err = run(capsys, "-w", ws, "ingest", "ratings", str(other), "--txn-id", "upload-18")
    assert code == 0 and "1 records" in out, err
    code, out, err = run(capsys, "-w", ws, "ingest", "ratings", str(first), "--txn-id", "upload-17")
    head = Workspace.open(ws).get("ratings").chain.head()
    assert code == 0, err
    assert out == f"ratings: already ingested in block {committed} (transaction upload-17), head {head}\n"
    code, out, _ = run(capsys, "-w", ws, "sql", "select city, count(*) as n from ratings group by city order by city")
    assert out.split() == ["city", "n", "Kyiv", "1", "Oslo", "1", "Riga", "1"], out
    code, _, err = run(capsys, "-w", ws, "ingest", "ratings", str(first), "--txn-id", "two\nlines")
    assert code == 1 and err.startswith("odf: error: idempotency key 'two\\nlines': expected") and err.count("\n") == 1
