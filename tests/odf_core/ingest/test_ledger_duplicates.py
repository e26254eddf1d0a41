"""Ledger rows that repeat a primary key inside one input (conformance D1) are never lost silently: ``first`` (the
default) keeps the first per key and reports how many were dropped (summary line, WARNING with a key); ``error``
refuses the input with one line naming the dataset, the key columns and a key, and commits nothing. Both merge
plans (on the driver, and Spark's). Real CLI, real files, the test run's Spark session."""
from __future__ import annotations

import pytest

import spark_jobs.ingest.merge as plans
from odf_core.cli import main
from odf_core.engine.protocol import (
    IngestRequest,
    IngestResponseSuccess,
    IngestResult,
    MergeOutcome,
    MergePhase,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from odf_core.metadata import DatasetVocabulary, MergeStrategyLedger, OffsetInterval, Timestamp
from odf_core.workspace import Workspace

SNAPSHOT = """
kind: DatasetSnapshot
version: 1
content:
  name: people
  kind: Root
  metadata:
    - kind: AddPushSource
      sourceName: app
      read: {kind: NdJson, schema: ["id INT", "region STRING", "name STRING"]}
      merge: {kind: Ledger, primaryKey: [id, region]}
"""


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_the_count_travels_in_the_merge_outcome_and_old_outcomes_still_decode():
    new = IngestResult(value=IngestResponseSuccess(merge=MergeOutcome(
        num_records=2, offset_interval=OffsetInterval(start=0, end=1), duplicates_dropped=3,
        duplicate_key='{"id":1}')))
    assert decode_response(encode_response(new)) == new
    old = IngestResult(value=IngestResponseSuccess(merge=MergeOutcome(num_records=2)))  # written without the fields
    decoded = decode_response(encode_response(old)).value.merge
    assert (decoded.duplicates_dropped, decoded.duplicate_key) == (None, None)
    phase = MergePhase(strategy=MergeStrategyLedger(primary_key=("id",)), system_time=Timestamp.parse(
        "2024-01-01T00:00:00Z"), output_path="/o", new_checkpoint_path="/c", duplicates="error")
    request = IngestRequest(dataset="a", vocab=DatasetVocabulary.default(), work_dir="/w", merge=phase)
    assert decode_request(encode_request(request)).merge.duplicates == "error"
    assert decode_request(encode_request(request.replace(merge=phase.replace(duplicates=None)))).merge.duplicates \
        is None


@pytest.mark.spark
@pytest.mark.parametrize("plan", ["driver", "spark"])
def test_duplicate_keys_in_one_input_are_counted_or_refused(tmp_path, capsys, caplog, monkeypatch, spark, plan):
    if plan == "spark":
        monkeypatch.setattr(plans, "DRIVER_MERGE_BYTES", 0)
    ws = str(tmp_path / ".odf")
    (tmp_path / "s.yaml").write_text(SNAPSHOT)
    assert run(capsys, "-w", ws, "init")[0] == 0
    assert run(capsys, "-w", ws, "add", str(tmp_path / "s.yaml"))[0] == 0
    first = tmp_path / "1.ndjson"
    first.write_text('{"id": 1, "region": "eu", "name": "a"}\n{"id": 1, "region": "eu", "name": "b"}\n'
                     '{"id": 2, "region": "eu", "name": "c"}\n{"id": 1, "region": "us", "name": "d"}\n'
                     '{"id": 2, "region": "eu", "name": "e"}\n{"id": 1, "region": "eu", "name": "f"}\n')
    code, out, err = run(capsys, "-w", ws, "ingest", "people", str(first))
    assert code == 0, err
    assert out.startswith("people: 3 records at offsets (0, 2), head ")
    assert out.rstrip("\n").endswith(', 3 duplicate-key row(s) dropped (e.g. {"id":1,"region":"eu"})'), out
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and r.name == "odf.ingest"]
    assert warnings == ["dataset 'people': 3 row(s) of this input repeat the primary key (id, region) of an earlier "
                        'row of it and were dropped, the first per key kept, e.g. {"id":1,"region":"eu"}; '
                        "--duplicates error refuses such input"], caplog.text
    h = Workspace.open(ws).get("people")
    head, blocks = h.chain.head(), h.state().block_count

    second = tmp_path / "2.ndjson"  # a key seen before, one new key twice
    second.write_text('{"id": 1, "region": "eu", "name": "g"}\n{"id": 3, "region": "eu", "name": "h"}\n'
                      '{"id": 3, "region": "eu", "name": "i"}\n')
    code, out, err = run(capsys, "-w", ws, "ingest", "people", str(second), "--duplicates", "error")
    assert (code, out) == (1, "")
    assert err == ("odf: error: dataset 'people': 1 row(s) repeat the primary key (id, region) of an earlier row of "
                   'the same input, e.g. {"id":3,"region":"eu"}; refused because duplicates is \'error\' (\'first\' '
                   "keeps the first row per key)\n")
    h = Workspace.open(ws).get("people")
    assert (h.chain.head(), h.state().block_count) == (head, blocks)  # nothing committed

    code, out, err = run(capsys, "-w", ws, "ingest", "people", str(second))
    assert code == 0, err
    assert out.startswith("people: 1 records at offsets (3, 3), head ")
    assert out.rstrip("\n").endswith(', 1 duplicate-key row(s) dropped (e.g. {"id":3,"region":"eu"})'), out

    no_dups = tmp_path / "3.ndjson"
    no_dups.write_text('{"id": 4, "region": "eu", "name": "j"}\n')
    code, out, err = run(capsys, "-w", ws, "ingest", "people", str(no_dups), "--duplicates", "error")
    assert code == 0 and "duplicate" not in out + err, err
