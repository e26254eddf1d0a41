"""``--output json`` on ``odf list``, ``odf log`` and ``odf tail``: JSON Lines that ``json.loads`` reads back."""
from __future__ import annotations

import datetime as dt
import json

import pytest

from odf_core.cli import main

SNAPSHOT = """
kind: DatasetSnapshot
version: 1
content:
  name: my.readings
  kind: Root
  metadata:
    - kind: AddPushSource
      sourceName: app
      read: {kind: NdJson, schema: ["event_time TIMESTAMP", "v INT"]}
      merge: {kind: Append}
"""


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    assert code == 0, out.err
    return [json.loads(line) for line in out.out.splitlines()]


@pytest.fixture
def ws(tmp_path, capsys):
    w = str(tmp_path / ".odf")
    main(["-w", w, "init"])
    (tmp_path / "s.yaml").write_text(SNAPSHOT)
    main(["-w", w, "add", str(tmp_path / "s.yaml")])
    capsys.readouterr()
    return w


def test_list_and_log_as_json_lines(ws, capsys):
    [row] = run(capsys, "-w", ws, "list", "--output", "json")
    assert row["name"] == "my.readings" and row["kind"] == "Root" and row["blocks"] == 2 and row["records"] == 0
    assert row["id"].startswith("did:odf:") and row["watermark"] is None
    blocks = run(capsys, "-w", ws, "log", "my.readings", "-o", "json")
    assert [b["content"]["event"]["kind"] for b in blocks] == ["AddPushSource", "Seed"]
    assert blocks[0]["content"]["prevBlockHash"] == blocks[1]["block_hash"]
    dt.datetime.fromisoformat(blocks[0]["content"]["systemTime"])  # ISO 8601, not Python's str()
    assert len(run(capsys, "-w", ws, "log", "my.readings", "-o", "json", "-n", "1")) == 1


@pytest.mark.spark
def test_tail_as_json_lines(ws, tmp_path, capsys, spark):
    data = tmp_path / "d.ndjson"
    data.write_text('{"event_time": "2024-01-01T10:00:00Z", "v": 1}\n{"event_time": "2024-01-02T10:00:00Z", "v": 2}\n')
    assert main(["-w", ws, "ingest", "my.readings", str(data)]) == 0
    capsys.readouterr()
    rows = run(capsys, "-w", ws, "tail", "my.readings", "-n", "1", "--output", "json")
    assert len(rows) == 1 and rows[0]["v"] == 2 and rows[0]["offset"] == 1 and rows[0]["op"] == 0
    assert rows[0]["event_time"].startswith("2024-01-02T10:00:00")
