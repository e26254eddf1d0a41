"""Merge phase of the ingest job: Append, Ledger and Snapshot slices, checkpoints, vocabulary, schema evolution."""
from __future__ import annotations

import os
import random
from datetime import date

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spark_jobs.ingest import merge as plans

from .ingest_support import SYSTEM_TIME, Dataset, ops, run_request, utc

pytestmark = pytest.mark.spark

KV = {"kind": "Csv", "schema": ["key STRING", "value BIGINT"]}
KV_ET = {"kind": "Csv", "schema": ["key STRING", "value BIGINT", "event_time TIMESTAMP"]}


def _offsets(rows):
    return [r["offset"] for r in rows]


# ---------------------------------------------------------------------------------------------------- Snapshot


def test_snapshot_conformance_example(spark, tmp_path):
    ds = Dataset(spark, tmp_path, {"kind": "Snapshot", "primaryKey": ["key"]}, KV)
    resp, rows = ds.ingest("C,30\nA,10\nB,20\n", event_time="2024-01-01T00:00:00Z")
    assert resp["merge"] == {"numRecords": 3, "offsetInterval": {"start": 0, "end": 2},
                             "maxEventTime": "2024-01-01T00:00:00Z", "checkpointWritten": True}
    assert ops(rows) == [(0, "A", 10), (0, "B", 20), (0, "C", 30)]

    resp, rows = ds.ingest("A,10\nC,35\nD,40\nE,50\n", event_time="2024-02-01T00:00:00Z",
                           system_time="2024-06-02T00:00:00Z")
    assert resp["status"] == "Success", resp
    assert ops(rows) == [(1, "B", 20), (2, "C", 30), (3, "C", 35), (0, "D", 40), (0, "E", 50)]
    assert _offsets(rows) == [3, 4, 5, 6, 7]
    assert resp["merge"]["offsetInterval"] == {"start": 3, "end": 7}
    # -R and -C carry the old row (with its old event time), +C and +A the new one
    assert [r["event_time"] for r in rows] == [utc(2024, 1, 1), utc(2024, 1, 1)] + [utc(2024, 2, 1)] * 3
    assert {r["system_time"] for r in rows} == {utc(2024, 6, 2)}
    assert resp["merge"]["maxEventTime"] == "2024-02-01T00:00:00Z"


def test_snapshot_three_rounds_event_time_changes_only_when_given(spark, tmp_path):
    """Default comparison (all non-key columns); event time from the data counts, a filled-in source time not."""
    ds = Dataset(spark, tmp_path, {"kind": "Snapshot", "primaryKey": ["key"]}, KV_ET)
    t1, t2, t3 = "2024-01-01T00:00:00Z", "2024-01-02T00:00:00Z", "2024-01-03T00:00:00Z"
    _, rows = ds.ingest(f"A,1,{t1}\nB,2,{t1}\nC,3,{t1}\n", event_time="2024-03-01T00:00:00Z")
    assert ops(rows) == [(0, "A", 1), (0, "B", 2), (0, "C", 3)]

    # A: no event time in the data -> unchanged; B: new event time -> change; C: value -> change; D: new
    _, rows = ds.ingest(f"A,1,\nB,2,{t2}\nC,30,\nD,4,{t2}\n", event_time="2024-03-02T00:00:00Z")
    assert [(r["op"], r["key"], r["value"], r["event_time"]) for r in rows] == [
        (2, "B", 2, utc(2024, 1, 1)), (3, "B", 2, utc(2024, 1, 2)),
        (2, "C", 3, utc(2024, 1, 1)), (3, "C", 30, utc(2024, 3, 2)),
        (0, "D", 4, utc(2024, 1, 2))]
    assert _offsets(rows) == [3, 4, 5, 6, 7]

    # A removed (old values and event time); B, C unchanged (null event time); D changed
    resp, rows = ds.ingest(f"B,2,\nC,30,\nD,5,{t3}\n", event_time="2024-03-03T00:00:00Z")
    assert [(r["op"], r["key"], r["value"], r["event_time"]) for r in rows] == [
        (1, "A", 1, utc(2024, 1, 1)), (2, "D", 4, utc(2024, 1, 2)), (3, "D", 5, utc(2024, 1, 3))]
    assert _offsets(rows) == [8, 9, 10]
    state = pq.read_table(ds.checkpoint).to_pylist()
    assert [(s["key"], s["value"], s["event_time"]) for s in state] == [
        ("B", 2, utc(2024, 1, 2)), ("C", 30, utc(2024, 3, 2)), ("D", 5, utc(2024, 1, 3))]

    # the same snapshot again changes nothing: no slice, no checkpoint
    resp, rows = ds.ingest("B,2,\nC,30,\nD,5,\n", event_time="2024-03-04T00:00:00Z")
    assert resp["merge"] == {"numRecords": 0, "offsetInterval": None, "maxEventTime": None,
                             "checkpointWritten": False}
    assert not (tmp_path / "slice-4.parquet").exists() and not (tmp_path / "checkpoint-4.parquet").exists()


def test_snapshot_compare_columns_and_state_keeps_unchanged_rows(spark, tmp_path):
    step = {"kind": "Csv", "schema": ["key STRING", "value BIGINT", "note STRING"]}
    ds = Dataset(spark, tmp_path, {"kind": "snapshot", "primaryKey": ["key"], "compareColumns": ["value"]}, step)
    ds.ingest("A,1,x\nB,2,y\n", event_time="2024-01-01T00:00:00Z")
    _, rows = ds.ingest("A,1,edited\nB,3,y\n", event_time="2024-01-02T00:00:00Z")
    assert [(r["op"], r["key"], r["value"], r["note"]) for r in rows] == [(2, "B", 2, "y"), (3, "B", 3, "y")]
    _, rows = ds.ingest("A,5,x2\nB,3,other\n", event_time="2024-01-03T00:00:00Z")
    # A's note change in round 2 did not count, so the -C row carries the note of round 1
    assert [(r["op"], r["key"], r["value"], r["note"]) for r in rows] == [(2, "A", 1, "x"), (3, "A", 5, "x2")]


def test_snapshot_without_checkpoint_rebuilds_state_from_previous_slices(spark, tmp_path):
    """A dataset written by someone else has no checkpoint of ours: the state comes from the slices."""
    ds = Dataset(spark, tmp_path, {"kind": "Snapshot", "primaryKey": ["key"]}, KV, use_checkpoint=False)
    expected = [[(0, "A", 1), (0, "B", 2), (0, "C", 3)],
                [(2, "B", 2), (3, "B", 20), (1, "C", 3), (0, "D", 4)],
                [(1, "A", 1), (0, "C", 5)]]  # C was retracted in round 2, so it is new again
    for i, (text, want) in enumerate(zip(["A,1\nB,2\nC,3\n", "A,1\nB,20\nD,4\n", "B,20\nC,5\nD,4\n"], expected)):
        resp, rows = ds.ingest(text, event_time=f"2024-01-0{i + 1}T00:00:00Z")
        assert ops(rows) == want
        assert resp["merge"]["checkpointWritten"] is True  # so that the next ingest can use it


def test_snapshot_with_checkpoint_never_reads_the_history(spark, tmp_path):
    ds = Dataset(spark, tmp_path, {"kind": "Snapshot", "primaryKey": ["key"]}, KV)
    ds.ingest("A,1\nB,2\n", event_time="2024-01-01T00:00:00Z")
    ds.ingest("A,1\nB,3\n", event_time="2024-01-02T00:00:00Z")
    for s in ds.slices:
        os.remove(s)  # the checkpoint must be enough
    resp, rows = ds.ingest("B,3\nC,4\n", event_time="2024-01-03T00:00:00Z")
    assert resp["status"] == "Success", resp
    assert ops(rows) == [(1, "A", 1), (0, "C", 4)]


def test_snapshot_composite_key_and_duplicate_key_error(spark, tmp_path):
    step = {"kind": "Csv", "schema": ["city STRING", "year INT", "value BIGINT"]}
    ds = Dataset(spark, tmp_path, {"kind": "Snapshot", "primaryKey": ["city", "year"]}, step)
    _, rows = ds.ingest("b,2020,1\na,2021,2\na,2020,3\n", event_time="2024-01-01T00:00:00Z")
    assert [(r["city"], r["year"]) for r in rows] == [("a", 2020), ("a", 2021), ("b", 2020)]
    resp, _ = ds.ingest("a,2020,3\nb,2020,1\na,2020,4\n", event_time="2024-01-02T00:00:00Z")
    assert resp["status"] == "InvalidInput"
    assert 'duplicate primary key {"city":"a","year":2020}' in resp["message"]


# ---------------------------------------------------------------------------------------------------- Ledger


def test_ledger_dedups_within_batch_and_across_rounds_with_checkpoint(spark, tmp_path):
    ds = Dataset(spark, tmp_path, {"kind": "Ledger", "primaryKey": ["key"]}, KV_ET)
    resp, rows = ds.ingest("b,1,2024-01-02T00:00:00Z\na,2,2024-01-03T00:00:00Z\nb,3,2024-01-01T00:00:00Z\n")
    # b appears twice: the one with the earliest event time is kept; output sorted by event time
    assert [(r["op"], r["key"], r["value"]) for r in rows] == [(0, "b", 3), (0, "a", 2)]
    assert resp["merge"]["checkpointWritten"] is True
    resp, rows = ds.ingest("a,9,2024-02-01T00:00:00Z\nc,4,2024-01-05T00:00:00Z\nd,5,2024-01-04T00:00:00Z\n")
    assert [(r["key"], r["value"]) for r in rows] == [("d", 5), ("c", 4)]
    assert _offsets(rows) == [2, 3]
    assert [r["key"] for r in pq.read_table(ds.checkpoint).to_pylist()] == ["b", "a", "d", "c"]
    for s in ds.slices:
        os.remove(s)  # seen keys come from the checkpoint, not from the history
    resp, rows = ds.ingest("c,1,2024-03-01T00:00:00Z\ne,6,2024-03-01T00:00:00Z\n")
    assert [(r["offset"], r["key"]) for r in rows] == [(4, "e")]


def test_ledger_falls_back_to_previous_slices_without_checkpoint(spark, tmp_path):
    ds = Dataset(spark, tmp_path, {"kind": "ledger", "primaryKey": ["key"]}, KV_ET, use_checkpoint=False)
    ds.ingest("a,1,2024-01-01T00:00:00Z\nb,2,2024-01-02T00:00:00Z\n")
    resp, rows = ds.ingest("b,2,2024-01-02T00:00:00Z\nc,3,2024-01-03T00:00:00Z\n")
    assert [(r["offset"], r["key"]) for r in rows] == [(2, "c")]
    # the rebuilt checkpoint holds every key seen so far
    assert sorted(r["key"] for r in pq.read_table(tmp_path / "checkpoint-2.parquet").to_pylist()) == ["a", "b", "c"]


def test_checkpoint_of_another_strategy_is_refused_without_history(spark, tmp_path):
    ds = Dataset(spark, tmp_path, {"kind": "Ledger", "primaryKey": ["key"]}, KV_ET)
    ds.ingest("a,1,2024-01-01T00:00:00Z\n")
    ds.strategy = {"kind": "Snapshot", "primaryKey": ["key"]}
    ds.slices = []
    resp, _ = ds.ingest("a,1,2024-01-01T00:00:00Z\n")
    assert resp["status"] == "InvalidInput"
    assert "written by Ledger(primaryKey=['key'])" in resp["message"] and "no previous data" in resp["message"]


# ---------------------------------------------------------------------------------------------------- Append


def test_append_sorts_by_event_time_nulls_first_stable_with_offsets_after_prev_offset(spark, tmp_path):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text("1,2024-01-03T00:00:00Z\n2,\n3,2024-01-01T00:00:00Z\n")
    b.write_text("4,2024-01-01T00:00:00Z\n5,2024-01-02T00:00:00Z\n6,\n")
    out = tmp_path / "slice.parquet"
    req = {"phases": ["read", "merge"],
           "read": {"inputs": [{"path": str(a)}, {"path": str(b)}],
                    "readStep": {"kind": "Csv", "schema": ["id INT", "event_time TIMESTAMP"]}},
           "merge": {"strategy": {"kind": "Append"}, "prevOffset": 41, "systemTime": SYSTEM_TIME,
                     "outputPath": str(out)}}
    resp = run_request(spark, req)
    assert resp["status"] == "Success", resp
    rows = pq.read_table(out).to_pylist()
    assert [r["id"] for r in rows] == [2, 6, 3, 4, 5, 1]  # ties keep the input order
    assert _offsets(rows) == list(range(42, 48))
    assert {r["op"] for r in rows} == {0}
    assert resp["read"]["numRecords"] == 6
    assert resp["merge"] == {"numRecords": 6, "offsetInterval": {"start": 42, "end": 47},
                             "maxEventTime": "2024-01-03T00:00:00Z", "checkpointWritten": False}


def test_append_keeps_input_order_when_already_sorted(spark, tmp_path):
    ds = Dataset(spark, tmp_path, {"kind": "Append"}, {"kind": "Csv", "schema": ["id INT"]})
    _, rows = ds.ingest("".join(f"{i}\n" for i in range(50)), event_time="2024-01-01T00:00:00Z")
    assert [r["id"] for r in rows] == list(range(50)) and _offsets(rows) == list(range(50))
    _, rows = ds.ingest("7\n", event_time="2024-01-02T00:00:00Z")
    assert _offsets(rows) == [50]


def test_output_slice_types_and_layout(spark, tmp_path):
    ds = Dataset(spark, tmp_path, {"kind": "Append"},
                 {"kind": "Csv", "schema": ["id INT", "at TIMESTAMP_NTZ", "amount DECIMAL(9,2)", "d DATE"]})
    resp, rows = ds.ingest("1,2024-01-01T12:00:00.5,1.25,2024-01-01\n", event_time="2024-01-01T00:00:00.007Z")
    assert resp["status"] == "Success", resp
    schema = pq.read_schema(ds.slices[0])
    assert schema.names == ["offset", "op", "system_time", "event_time", "id", "at", "amount", "d"]
    assert [schema.field(n).type for n in schema.names] == [
        pa.int64(), pa.int32(), pa.timestamp("ms", tz="UTC"), pa.timestamp("ms", tz="UTC"), pa.int32(),
        pa.timestamp("ms", tz="UTC"), pa.decimal128(9, 2), pa.date32()]
    assert [schema.field(n).nullable for n in ("offset", "op", "system_time")] == [False, False, False]
    assert rows[0]["at"] == utc(2024, 1, 1, 12, 0, 0, 500000)
    assert resp["merge"]["maxEventTime"] == "2024-01-01T00:00:00.007Z"
    assert pq.ParquetFile(ds.slices[0]).metadata.num_rows == 1


def test_date_event_time_is_kept_as_date(spark, tmp_path):
    ds = Dataset(spark, tmp_path, {"kind": "Append"}, {"kind": "Csv", "schema": ["event_time DATE", "v INT"]})
    resp, rows = ds.ingest("2024-01-02,1\n,2\n", event_time="2024-03-04T05:00:00Z")
    assert pq.read_schema(ds.slices[0]).field("event_time").type == pa.date32()
    assert [(r["v"], r["event_time"]) for r in rows] == [(1, date(2024, 1, 2)), (2, date(2024, 3, 4))]
    assert resp["merge"]["maxEventTime"] == "2024-03-04T00:00:00Z"


# ---------------------------------------------------------------------------------------------------- vocabulary


def test_set_vocab_renames_system_columns_everywhere(spark, tmp_path):
    vocab = {"offsetColumn": "o", "operationTypeColumn": "kind", "systemTimeColumn": "ingested_at",
             "eventTimeColumn": "observed"}
    step = {"kind": "Csv", "header": True, "schema": ["key STRING", "value BIGINT", "observed TIMESTAMP"]}
    ds = Dataset(spark, tmp_path, {"kind": "Snapshot", "primaryKey": ["key"]}, step, vocab=vocab)
    ds.ingest("key,value,observed\nA,1,2024-01-01T00:00:00Z\nB,2,2024-01-01T00:00:00Z\n")
    resp, rows = ds.ingest("key,value,observed\nA,1,2024-01-01T00:00:00Z\nB,3,2024-01-05T00:00:00Z\n")
    assert resp["status"] == "Success", resp
    assert pq.read_schema(ds.slices[1]).names == ["o", "kind", "ingested_at", "observed", "key", "value"]
    assert [(r["o"], r["kind"], r["key"], r["value"]) for r in rows] == [(2, 2, "B", 2), (3, 3, "B", 3)]
    assert resp["merge"]["maxEventTime"] == "2024-01-05T00:00:00Z"
    # without a source time and without the renamed event-time column the data cannot be ingested
    resp, _ = ds.ingest("key,value\nA,1\n", read_step={"kind": "Csv", "header": True})
    assert resp["status"] == "InvalidInput" and "'observed'" in resp["message"]


# ---------------------------------------------------------------------------------------------------- errors


def test_missing_primary_key_names_column_and_available_columns(spark, tmp_path):
    ds = Dataset(spark, tmp_path, {"kind": "Ledger", "primaryKey": ["id"]}, KV)
    resp, _ = ds.ingest("a,1\n", event_time="2024-01-01T00:00:00Z")
    assert resp["status"] == "InvalidInput"
    assert resp["message"] == ("primary key column 'id' is not in the data (available columns:"
                               " ['event_time', 'key', 'value'])")
    ds.strategy = {"kind": "Snapshot", "primaryKey": ["key"], "compareColumns": ["nope"]}
    resp, _ = ds.ingest("a,1\n", event_time="2024-01-01T00:00:00Z")
    assert resp["status"] == "InvalidInput" and "compare column 'nope'" in resp["message"]


def test_system_columns_in_the_data_are_refused(spark, tmp_path):
    ds = Dataset(spark, tmp_path, {"kind": "Append"}, {"kind": "Csv", "schema": ["offset BIGINT", "v INT"]})
    resp, _ = ds.ingest("1,2\n", event_time="2024-01-01T00:00:00Z")
    assert resp["status"] == "InvalidInput" and "system column(s) ['offset']" in resp["message"]


def test_empty_input_gives_no_slice(spark, tmp_path):
    for strategy in ({"kind": "Append"}, {"kind": "Ledger", "primaryKey": ["key"]},
                     {"kind": "Snapshot", "primaryKey": ["key"]}):
        ds = Dataset(spark, tmp_path, strategy, KV)
        resp, rows = ds.ingest("", event_time="2024-01-01T00:00:00Z")
        assert resp["status"] == "Success", resp
        assert resp["read"]["numRecords"] == 0 and rows == []
        assert resp["merge"] == {"numRecords": 0, "offsetInterval": None, "maxEventTime": None,
                                 "checkpointWritten": False}
        assert not (tmp_path / f"slice-{ds.round}.parquet").exists()


# ---------------------------------------------------------------------------------------------------- schema evolution


def schema_of_slice(path: str) -> bytes:
    """The dataset schema as the coordinator hands it to the engine: the SetDataSchema bytes of a slice."""
    from odf_core.metadata.arrow_schema import encode_arrow_schema, recorded_schema

    return encode_arrow_schema(recorded_schema(pq.read_schema(path)))


def test_schema_evolution_accepts_new_trailing_columns(spark, tmp_path):
    ds = Dataset(spark, tmp_path, {"kind": "Snapshot", "primaryKey": ["key"]}, KV)
    ds.ingest("A,1\nB,2\n", event_time="2024-01-01T00:00:00Z")
    wider = {"kind": "Csv", "schema": ["key STRING", "value BIGINT", "extra STRING"]}
    resp, rows = ds.ingest("A,1,\nB,2,new\n", event_time="2024-01-02T00:00:00Z", read_step=wider,
                           extra_merge={"prevSchema": schema_of_slice(ds.slices[-1])})
    assert resp["status"] == "Success", resp
    # the state from the checkpoint has no 'extra': null stays unchanged, a value is a change
    assert [(r["op"], r["key"], r["extra"]) for r in rows] == [(2, "B", None), (3, "B", "new")]
    assert pq.read_schema(ds.slices[-1]).names[-3:] == ["key", "value", "extra"]


@pytest.mark.parametrize("new_schema, problem", [
    (["key STRING"], "column 'value' removed or renamed (was int64)"),
    (["key STRING", "value INT"], "column 'value' type changed from int64 to int32"),
    (["key STRING", "amount BIGINT"], "column 'value' removed or renamed (was int64)"),
    (["value BIGINT", "key STRING"], "existing columns reordered"),
])
def test_schema_evolution_refuses_other_changes(spark, tmp_path, new_schema, problem):
    ds = Dataset(spark, tmp_path, {"kind": "Append"}, KV)
    ds.ingest("A,1\n", event_time="2024-01-01T00:00:00Z")
    resp, _ = ds.ingest("A,1\n", event_time="2024-01-02T00:00:00Z",
                        read_step={"kind": "Csv", "schema": new_schema},
                        extra_merge={"prevSchema": schema_of_slice(ds.slices[-1])})
    assert resp["status"] == "InvalidInput"
    assert problem in resp["message"] and "Only adding columns at the end is allowed" in resp["message"]


# ---------------------------------------------------------------------------------------------------- phases


def test_read_then_merge_in_separate_requests(spark, tmp_path):
    """The read output file carries the rows and the event-time provenance into a later merge-only request."""
    for rnd, (text, et) in enumerate([("A,1\nB,2\n", "2024-01-01T00:00:00Z"), ("A,1\nB,3\n", "2024-01-02T00:00:00Z")]):
        src = tmp_path / f"in{rnd}.csv"
        src.write_text(text)
        read = {"phases": ["read"], "read": {"inputs": [{"path": str(src), "eventTime": et}], "readStep": KV,
                                             "outputPath": str(tmp_path / f"read{rnd}.parquet")}}
        assert run_request(spark, read)["read"]["numRecords"] == 2
        merge = {"phases": ["merge"], "merge": {
            "inputPath": str(tmp_path / f"read{rnd}.parquet"), "strategy": {"kind": "Snapshot", "primaryKey": ["key"]},
            "prevOffset": None if rnd == 0 else 1, "systemTime": SYSTEM_TIME,
            "prevCheckpointPath": None if rnd == 0 else str(tmp_path / "ck0.parquet"),
            "outputPath": str(tmp_path / f"slice{rnd}.parquet"),
            "newCheckpointPath": str(tmp_path / f"ck{rnd}.parquet")}}
        resp = run_request(spark, merge)
        assert resp["status"] == "Success", resp
    assert ops(pq.read_table(tmp_path / "slice1.parquet").to_pylist()) == [(2, "B", 2), (3, "B", 3)]


# ---------------------------------------------------------------------------------------------------- plans, session


@pytest.mark.parametrize("strategy, step, rounds", [
    ({"kind": "Snapshot", "primaryKey": ["key"]}, KV_ET,
     ["A,1,2024-01-01T00:00:00Z\nB,2,\nC,3,\n", "A,1,\nB,20,\nD,4,\n", "B,20,\nC,5,2024-01-09T00:00:00Z\nD,4,\n"]),
    ({"kind": "Ledger", "primaryKey": ["key"]}, KV_ET,
     ["b,1,2024-01-02T00:00:00Z\na,2,\nb,3,2024-01-01T00:00:00Z\n", "a,9,\nc,4,2024-01-05T00:00:00Z\nd,5,\n"]),
    ({"kind": "Append"}, KV_ET,
     ["b,1,2024-01-02T00:00:00Z\na,2,\nb,3,2024-01-01T00:00:00Z\n", "a,9,\nc,4,2024-01-05T00:00:00Z\nd,5,\n"]),
])
def test_every_plan_gives_the_same_slices_and_state(spark, tmp_path, monkeypatch, strategy, step, rounds):
    """Driver plan (pyarrow), single-partition Spark plan and parallel Spark plan: the same slices and state."""
    results = {}
    for plan, driver_limit, small_limit in (("driver", plans.DRIVER_MERGE_BYTES, plans.SMALL_MERGE_BYTES),
                                            ("single", -1, plans.SMALL_MERGE_BYTES), ("parallel", -1, -1)):
        monkeypatch.setattr(plans, "DRIVER_MERGE_BYTES", driver_limit)
        monkeypatch.setattr(plans, "SMALL_MERGE_BYTES", small_limit)
        (tmp_path / plan).mkdir()
        ds = Dataset(spark, tmp_path / plan, strategy, step)
        results[plan] = [ds.ingest(text, event_time=f"2024-02-0{i + 1}T00:00:00Z")[1] for i, text in enumerate(rounds)]
        # the Snapshot state's row order is not part of the format (the driver plan keeps the snapshot's order)
        if ds.checkpoint:
            results[plan].append(sorted(pq.read_table(ds.checkpoint).to_pylist(), key=lambda r: str(r["key"])))
    assert results["driver"] == results["single"] == results["parallel"]
    assert all(results["driver"])


def _generated_rounds(kind: str, rows: int, seed: int) -> list[str]:
    """CSV rounds (key,value,event_time) big enough to be split: keys repeat inside and across rounds, event times
    come out of order with ties and blanks, and Snapshot rounds drop, change and add keys."""
    rng = random.Random(seed)

    def when() -> str:
        return "" if rng.random() < 0.2 else f"2024-01-{rng.randint(1, 28):02d}T{rng.randint(0, 3):02d}:00:00Z"

    if kind != "Snapshot":
        return ["".join(f"k{rng.randrange(rows // 2 * (r + 1)):05d},{rng.randint(-9, 9)},{when()}\n"
                        for _ in range(rows)) for r in range(2)]
    keys = [f"k{i:05d}" for i in range(rows)]
    first = {k: (rng.randint(0, 99), when()) for k in keys}
    second = {k: ((v + 1, t) if rng.random() < 0.3 else (v, "" if rng.random() < 0.5 else t))
              for k, (v, t) in first.items() if rng.random() < 0.9}
    second.update({f"n{i:05d}": (rng.randint(0, 99), when()) for i in range(rows // 10)})
    order = list(second)
    rng.shuffle(order)
    return ["".join(f"{k},{v},{t}\n" for k, (v, t) in first.items()),
            "".join(f"{k},{second[k][0]},{second[k][1]}\n" for k in order)]


def _max_tasks_per_stage(spark, group: str) -> int:
    tracker = spark.sparkContext.statusTracker()
    stages = [sid for job in tracker.getJobIdsForGroup(group) for sid in tracker.getJobInfo(job).stageIds]
    return max(tracker.getStageInfo(sid).numTasks for sid in stages if tracker.getStageInfo(sid))


@pytest.mark.parametrize("strategy", [{"kind": "Snapshot", "primaryKey": ["key"]},
                                      {"kind": "Ledger", "primaryKey": ["key"]}, {"kind": "Append"}],
                         ids=lambda s: s["kind"])
def test_every_plan_gives_the_same_slices_and_state_on_split_inputs(spark, tmp_path, monkeypatch, strategy):
    """The plans again, on inputs Spark really splits: many read tasks, many part files."""
    rounds = _generated_rounds(strategy["kind"], 1500, seed=len(strategy["kind"]))
    part_files: list[tuple[str, int]] = []
    from spark_jobs.ingest.merge import ledger as ledger_merge
    from spark_jobs.ingest.merge import snapshot as snapshot_merge
    from spark_jobs.parquet_files import write_parts as real_write_parts

    def counting_write_parts(df, directory):
        parts = real_write_parts(df, directory)
        part_files.append((os.path.basename(directory), len(parts)))
        return parts

    for module in (plans, ledger_merge, snapshot_merge):
        monkeypatch.setattr(module, "write_parts", counting_write_parts)
    # ~50 KB per round read in 8 KB splits; 4 shuffle partitions that adaptive execution may not merge back into one
    settings = {"spark.sql.files.maxPartitionBytes": str(8 << 10), "spark.sql.shuffle.partitions": "4",
                "spark.sql.adaptive.coalescePartitions.enabled": "false"}
    old = {k: spark.conf.get(k) for k in settings}
    for k, v in settings.items():
        spark.conf.set(k, v)
    results, tasks, parts = {}, {}, {}
    try:
        for plan, driver_limit, small_limit in (("driver", plans.DRIVER_MERGE_BYTES, plans.SMALL_MERGE_BYTES),
                                                ("single", -1, plans.SMALL_MERGE_BYTES), ("parallel", -1, -1)):
            monkeypatch.setattr(plans, "DRIVER_MERGE_BYTES", driver_limit)
            monkeypatch.setattr(plans, "SMALL_MERGE_BYTES", small_limit)
            (tmp_path / plan).mkdir()
            ds = Dataset(spark, tmp_path / plan, strategy, KV_ET)
            group = f"plans-{strategy['kind']}-{plan}"
            spark.sparkContext.setJobGroup(group, group)
            part_files.clear()
            results[plan] = [ds.ingest(text, event_time=f"2024-02-0{i + 1}T00:00:00Z")[1]
                             for i, text in enumerate(rounds)]
            tasks[plan], parts[plan] = _max_tasks_per_stage(spark, group), list(part_files)
            if ds.checkpoint:  # the Snapshot state's row order is not part of the format
                results[plan].append(sorted(pq.read_table(ds.checkpoint).to_pylist(), key=lambda r: str(r["key"])))
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
        for k, v in old.items():
            spark.conf.set(k, v)
    # every plan read its input in several tasks; the Spark plans staged it as several part files; the parallel plan
    # also merged in several partitions, the single-partition plan in one
    assert min(tasks.values()) >= 4, tasks
    assert parts["driver"] == [], parts
    for plan in ("single", "parallel"):
        staged = ("-read-staged", "-ledger-input", "-append")
        assert all(n >= 4 for name, n in parts[plan] if name.endswith(staged)), parts
    merged = {plan: [n for name, n in parts[plan] if name.endswith(("-snapshot", "-ledger", "-append-sorted"))]
              for plan in ("single", "parallel")}
    assert len(merged["parallel"]) == len(rounds) and min(merged["parallel"]) >= 2, parts
    if strategy["kind"] != "Append":  # Append has no single-partition variant
        assert merged["single"] == [1] * len(rounds), parts
    assert all(len(r) >= 100 for r in results["driver"][:2]), [len(r) for r in results["driver"]]
    assert results["driver"] == results["single"] == results["parallel"]


def test_session_settings_are_restored_after_a_request(spark, tmp_path):
    spark.conf.set("spark.sql.session.timeZone", "Europe/Berlin")
    try:
        ds = Dataset(spark, tmp_path, {"kind": "Append"}, {"kind": "Csv", "schema": ["t TIMESTAMP"]})
        _, rows = ds.ingest("2024-01-01 00:00:00\n", event_time="2024-01-01T00:00:00Z")
        assert rows[0]["t"] == utc(2024, 1, 1)  # parsed in UTC during the request
        assert spark.conf.get("spark.sql.session.timeZone") == "Europe/Berlin"
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")


def test_unexpected_failures_are_internal_errors_with_a_backtrace(spark, tmp_path):
    (tmp_path / "blocker").write_text("a file where a directory is needed")
    src = tmp_path / "in.csv"
    src.write_text("1\n")
    resp = run_request(spark, {
        "phases": ["read", "merge"],
        "read": {"inputs": [{"path": str(src), "eventTime": "2024-01-01T00:00:00Z"}],
                 "readStep": {"kind": "Csv", "schema": ["v INT"]}},
        "merge": {"strategy": {"kind": "Append"}, "systemTime": SYSTEM_TIME,
                  "outputPath": str(tmp_path / "blocker" / "slice.parquet")},
        "workDir": str(tmp_path / "scratch")})
    assert resp["status"] == "InternalError"
    assert "Error" in resp["message"] and "Traceback" in resp["backtrace"]
    assert os.listdir(tmp_path / "scratch") == []  # scratch space is cleaned up on failure too
