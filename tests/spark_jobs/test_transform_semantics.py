"""Row-level behaviour of spark_jobs/transform.py: ops flowing through, corrections, canonical order, slice layout,
checkpoints, watermarks and re-runs, checked against hand-computed expectations."""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from odf_core.metadata import Timestamp

from .transform_support import (
    TS,
    Event,
    InputSpec,
    MiniCoordinator,
    checkpoint_tables,
    minutes,
    norm_row,
    reduce_output,
    run_split,
)

pytestmark = pytest.mark.spark

A, R, CF, CT = 0, 1, 2, 3
KX = pa.schema([("k", pa.string()), ("x", pa.int64())])


def sql(query: str) -> dict:
    return {"kind": "Sql", "engine": "spark", "query": query}


def shape(rows: list[dict], *cols: str) -> list[tuple]:
    """(offset, op, event minute, *cols) per row, for compact expectations."""
    return [(r["offset"], r["op"], int((r["event_time"] - minutes(0)).total_seconds() // 60),
             *[r[c] for c in cols]) for r in rows]


def test_stateless_ops_flow_through_and_corrections_stay_paired(spark, tmp_path):
    a = InputSpec("a", pa.schema([("k", pa.string()), ("x", pa.int64()), ("note", pa.string())]), [
        Event(A, minutes(1), ("p", 1, "n")),
        Event(A, minutes(2), ("q", 2, "n")),
        Event(R, minutes(1), ("p", 1, "n")),      # retraction -> retraction
        Event(CF, minutes(2), ("q", 2, "n")),     # correction of a projected column -> -C/+C
        Event(CT, minutes(3), ("q", 4, "n")),
        Event(CF, minutes(3), ("q", 4, "n")),     # correction of a dropped column only -> nothing
        Event(CT, minutes(3), ("q", 4, "m")),
        Event(A, minutes(4), ("r", 5, "n")),
        Event(CF, minutes(4), ("r", 5, "n")),     # new value filtered out -> -R
        Event(CT, minutes(4), ("r", 500, "n")),
        Event(A, minutes(5), ("s", 600, "n")),
        Event(CF, minutes(5), ("s", 600, "n")),   # old value filtered out -> +A
        Event(CT, minutes(5), ("s", 6, "n")),
    ])
    res = run_split(spark, tmp_path, sql("SELECT event_time, k, x * 10 AS x10 FROM a WHERE x < 100"), [a],
                    [{"a": 7}, {"a": 6}])
    assert [r.diagnostics["planClass"] for r in res.responses] == ["stateless", "stateless"]
    assert shape(res.rows(), "k", "x10") == [
        (0, A, 1, "p", 10), (1, A, 2, "q", 20), (2, R, 1, "p", 10), (3, CF, 2, "q", 20), (4, CT, 3, "q", 40),
        (5, A, 4, "r", 50), (6, R, 4, "r", 50), (7, A, 5, "s", 60)]
    table = res.slices[0]
    assert table.schema == pa.schema([pa.field("offset", pa.int64(), nullable=False), ("op", pa.int32()),
                                      pa.field("system_time", TS, nullable=False), ("event_time", TS),
                                      ("k", pa.string()), ("x10", pa.int64())])
    system_time = Timestamp.parse(res.requests[0]["content"]["systemTime"]).to_datetime()
    assert table.column("system_time").to_pylist() == [system_time] * 5
    assert reduce_output(res.rows())  # a valid changelog


def test_generator_rows_inherit_the_op_and_pair_by_rank(spark, tmp_path):
    a = InputSpec("a", KX, [Event(A, minutes(1), ("p", 1)), Event(CF, minutes(1), ("p", 1)),
                            Event(CT, minutes(2), ("p", 5)), Event(R, minutes(2), ("p", 5))])
    q = sql("SELECT event_time, k, explode(array(x, x + 1)) AS v FROM a ORDER BY v DESC")
    res = run_split(spark, tmp_path, q, [a], [{"a": 4}])
    assert res.responses[0].diagnostics["planClass"] == "stateless"  # ORDER BY alone does not need state
    assert shape(res.rows(), "v") == [
        (0, A, 1, 1), (1, A, 1, 2),
        (2, CF, 1, 1), (3, CT, 2, 5), (4, CF, 1, 2), (5, CT, 2, 6),
        (6, R, 2, 5), (7, R, 2, 6)]


def test_query_output_op_is_kept_and_date_event_time_allowed(spark, tmp_path):
    a = InputSpec("a", KX, [Event(A, minutes(1), ("p", 1)), Event(A, minutes(2000), ("q", 2)),
                            Event(R, minutes(1), ("p", 1))])
    res = run_split(spark, tmp_path, sql("SELECT x, op, k, CAST(event_time AS DATE) AS event_time FROM a"), [a],
                    [{"a": 3}])
    t = res.slices[0]
    assert t.column_names == ["offset", "op", "system_time", "event_time", "x", "k"]
    assert t.schema.field("event_time").type == pa.date32()
    assert [(r["op"], str(r["event_time"]), r["k"]) for r in t.to_pylist()] == [
        (A, "2024-01-01", "p"), (A, "2024-01-02", "q"), (R, "2024-01-01", "p")]


def test_stateful_aggregate_retracts_corrects_then_appends(spark, tmp_path):
    a = InputSpec("a", KX, [
        Event(A, minutes(1), ("p", 1)), Event(A, minutes(2), ("q", 2)), Event(A, minutes(3), ("r", 3)),
        Event(A, minutes(4), ("p", 5)), Event(R, minutes(3), ("r", 3)), Event(A, minutes(5), ("s", 7))])
    q = sql("SELECT k, count(*) AS n, sum(x) AS total, max(event_time) AS event_time FROM a GROUP BY k")
    coord = MiniCoordinator(spark, tmp_path, q, [a])
    coord.step({"a": 3})
    resp = coord.step({"a": 3})
    assert resp.diagnostics["correctionKey"] == ["k"]
    assert shape(coord.result.rows(), "k", "n", "total") == [
        (0, A, 1, "p", 1, 1), (1, A, 2, "q", 1, 2), (2, A, 3, "r", 1, 3),
        (3, R, 3, "r", 1, 3), (4, CF, 1, "p", 1, 1), (5, CT, 4, "p", 2, 6), (6, A, 5, "s", 1, 7)]
    meta, tables = checkpoint_tables(coord.checkpoint)
    assert meta["planClass"] == "stateful" and meta["path"] == "incremental" and meta["inputs"]["a"]["lastOffset"] == 5
    assert meta["version"] == 5 and "output" not in tables  # the output state is not kept: it follows the history
    assert meta["transform"] == {"engine": "spark", "queries": [{"query": q["query"]}]}
    (groups,) = [t for name, t in tables.items() if name.startswith("aggregate:")]
    assert sorted((r["k0"], r["__odf_rows"], r["s0_n"]) for r in groups.to_pylist()) == [("p", 2, 2), ("q", 1, 1),
                                                                                        ("s", 1, 1)]


def test_global_aggregate_is_corrected_in_place(spark, tmp_path):
    a = InputSpec("a", KX, [Event(A, minutes(1), ("p", 1)), Event(A, minutes(3), ("q", 2)),
                            Event(R, minutes(1), ("p", 1)), Event(A, minutes(2), ("r", 3)),
                            Event(A, minutes(5), ("s", 4))])
    res = run_split(spark, tmp_path, sql("SELECT count(*) AS n, max(event_time) AS event_time FROM a"), [a],
                    [{"a": 2}, {"a": 2}, {"a": 1}])
    # Transaction 2 changes nothing visible (count 2, max t3): no slice at all.
    assert [r.new_offset_interval for r in res.responses][1] is None
    assert shape(res.rows(), "n") == [(0, A, 3, 2), (1, CF, 3, 2), (2, CT, 5, 3)]


def test_rerunning_a_transaction_reproduces_rows_order_and_checkpoint(spark, tmp_path):
    a = InputSpec("a", KX, [Event(A, minutes(i), (k, i)) for i, k in enumerate("pqrspqrs")]
                  + [Event(CF, minutes(1), ("q", 1)), Event(CT, minutes(9), ("q", 10))])
    for name, query in [("stateless", "SELECT event_time, k, x FROM a WHERE x > 0"),
                        ("stateful", "SELECT event_time, k, x, sum(x) OVER (PARTITION BY k ORDER BY event_time) AS s "
                                     "FROM a")]:
        coord = MiniCoordinator(spark, tmp_path / name, sql(query), [a])
        coord.step({"a": 5})
        doc = coord.request({"a": 5})
        content = doc["content"]
        first = coord.execute(doc)
        rows1 = pq.read_table(content["newDataPath"])
        ckpt1 = Path(content["newCheckpointPath"]).read_bytes()
        second = coord.execute(doc)
        assert first.diagnostics["planClass"] == name
        assert second.new_offset_interval == first.new_offset_interval
        assert pq.read_table(content["newDataPath"]).equals(rows1)
        assert Path(content["newCheckpointPath"]).read_bytes() == ckpt1
        assert rows1.num_rows >= 4


def test_rerunning_a_first_transaction_reproduces_its_slice_and_checkpoint_bytes(spark, tmp_path):
    """A rebuild computes the operators' states beside the output slice (two threads): the bytes stay the same."""
    a = InputSpec("a", KX, [Event(A, minutes(i), (k, i)) for i, k in enumerate("pqrspqrs" * 20)])
    query = "SELECT event_time, k, x, sum(x) OVER (PARTITION BY k ORDER BY event_time) AS s FROM a"
    coord = MiniCoordinator(spark, tmp_path, sql(query), [a])
    doc = coord.request({"a": 100})
    content = doc["content"]
    written = []
    for _ in range(4):
        resp = coord.execute(doc)
        assert resp.diagnostics["path"] == "rebuild" and resp.diagnostics["slice"] == "all new"
        written.append((Path(content["newDataPath"]).read_bytes(), Path(content["newCheckpointPath"]).read_bytes()))
    assert all(w == written[0] for w in written)


def test_output_watermark_is_min_of_inputs_and_absent_until_all_have_one(spark, tmp_path):
    a = InputSpec("a", KX, [Event(A, minutes(10), ("p", 1)), Event(A, minutes(30), ("q", 2))])
    b = InputSpec("b", KX, [Event(A, minutes(20), ("r", 3))])
    q = sql("SELECT event_time, k, x FROM a UNION ALL SELECT event_time, k, x FROM b")
    res = run_split(spark, tmp_path, q, [a, b], [{"a": 1}, {"a": 1, "b": 1}], watermarks=True)
    assert [r.new_watermark for r in res.responses] == [None, minutes(20)]


def test_stateful_checks_its_checkpoint_continues_the_request(spark, tmp_path):
    a = InputSpec("a", KX, [Event(A, minutes(i), ("p", i)) for i in range(6)])
    q = sql("SELECT k, count(*) AS n, max(event_time) AS event_time FROM a GROUP BY k")
    coord = MiniCoordinator(spark, tmp_path, q, [a])
    coord.step({"a": 2})
    first_ckpt = coord.checkpoint
    coord.step({"a": 2})
    doc = coord.request({"a": 2})
    doc["content"]["prevCheckpointPath"] = first_ckpt  # stale: covers offsets up to 1, request starts at 4
    resp = coord.execute(doc)
    assert resp.kind == "InternalError" and "up to 1" in resp.message and "starts at 4" in resp.message
    del doc["content"]["prevCheckpointPath"]
    resp = coord.execute(doc)
    assert resp.kind == "InternalError" and "names no previous checkpoint" in resp.message
    # Nothing new: no slice, the checkpoint is carried over byte for byte.
    doc = coord.request({})
    resp = coord.execute(doc)
    assert resp.new_offset_interval is None and "carried over" in " ".join(resp.diagnostics["warnings"])
    assert Path(doc["content"]["newCheckpointPath"]).read_bytes() == Path(coord.checkpoint).read_bytes()


def test_stateful_needs_history_paths_after_the_first_slice(spark, tmp_path):
    a = InputSpec("a", KX, [Event(A, minutes(i), ("p", i)) for i in range(4)])
    q = sql("SELECT event_time, k, x, sum(x) OVER (PARTITION BY k ORDER BY event_time ROWS BETWEEN 1 PRECEDING AND "
            "UNBOUNDED FOLLOWING) AS rest FROM a")
    coord = MiniCoordinator(spark, tmp_path / "full", q, [a], use_history=False)
    coord.step({"a": 2})  # starts at offset 0: the new slice is the whole history
    resp = coord.execute(coord.request({"a": 2}))
    assert resp.kind == "InternalError" and "history" in resp.message
    # the incremental path reads history only to rebuild or recompute a group: appends to counts and maxima do not,
    # nor appends in event-time order to a running sum or a lag
    q = sql("SELECT k, count(*) AS n, max(event_time) AS event_time FROM a GROUP BY k")
    coord = MiniCoordinator(spark, tmp_path / "incremental", q, [a], use_history=False)
    coord.step({"a": 2})
    assert coord.step({"a": 2}).diagnostics["path"] == "incremental"
    assert reduce_output(coord.result.rows()) == {norm_row([minutes(3), "p", 4]): 1}
    q = sql("SELECT event_time, k, x, sum(x) OVER (PARTITION BY k ORDER BY event_time) AS s FROM a")
    coord = MiniCoordinator(spark, tmp_path / "running", q, [a], use_history=False)
    coord.step({"a": 2})
    assert coord.step({"a": 2}).diagnostics["path"] == "incremental"
    assert reduce_output(coord.result.rows()) == {norm_row([minutes(i), "p", i, sum(range(i + 1))]): 1
                                                  for i in range(4)}


def test_custom_vocabularies_and_dotted_alias(spark, tmp_path):
    trips = InputSpec("com.example.trips", KX, [Event(A, minutes(1), ("p", 1)), Event(A, minutes(2), ("q", 2)),
                                                Event(R, minutes(1), ("p", 1))],
                      vocab=("off", "operation", "sys_t", "ts"))
    out_vocab = ("o", "change", "st", "when")
    stateless = run_split(spark, tmp_path / "l", sql("SELECT ts AS `when`, k, x FROM `com.example.trips` "
                                                     "WHERE operation >= 0 OR off >= 0"),
                          [trips], [{"com.example.trips": 3}], out_vocab=out_vocab)
    t = stateless.slices[0]
    assert t.column_names == ["o", "change", "st", "when", "k", "x"]
    assert [(r["o"], r["change"], r["k"]) for r in t.to_pylist()] == [(0, A, "p"), (1, A, "q"), (2, A, "p")]
    stateful = run_split(spark, tmp_path / "f", sql("SELECT k, max(ts) AS `when` FROM `com.example.trips` GROUP BY k"),
                         [trips], [{"com.example.trips": 2}, {"com.example.trips": 1}], out_vocab=out_vocab)
    assert [(r["o"], r["change"], r["k"]) for r in stateful.rows()] == [(0, A, "p"), (1, A, "q"), (2, R, "p")]


def test_empty_result_writes_no_slice(spark, tmp_path):
    a = InputSpec("a", KX, [Event(A, minutes(1), ("p", 1))])
    res = run_split(spark, tmp_path, sql("SELECT event_time, k FROM a WHERE x > 5"), [a], [{"a": 1}])
    assert res.responses[0].new_offset_interval is None and res.slices == []
    assert res.responses[0].diagnostics["outputRows"] == 0
