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
    data = tmp_path / "r.ndjson"
    data.write_text('{"event_time": "2024-01-01T10:00:00Z", "city": "Oslo", "rating": 4}\n'
                    '{"event_time": "2024-01-01T11:00:00Z", "city": "Oslo", "rating": 2}\n'
                    '{"event_time": "2024-01-01T12:00:00Z", "city": "Riga", "rating": 5}\n')
    code, out, err = run(capsys, "-w", ws, "ingest", "ratings", str(data), "--master", "local[2]")
    assert code == 0 and "3 records" in out, err
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
    assert code == 1 and "read-only" in err
    code, out, err = run(capsys, "-w", ws, "verify", "avg-rating")
    assert code == 0 and "reproduction ok" in out, err
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
