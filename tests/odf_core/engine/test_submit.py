"""One spark-submit per request, as Airflow tasks run it by default: the request file in, the response file out."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from odf_core.engine import EngineError, SubmitEngine
from odf_core.engine.protocol import IngestResponseSuccess, IngestResult, OdfTransformResponse, encode_request
from odf_core.metadata import TransformResponseSuccess
from spark_jobs import submit

from ...spark_jobs.ingest_support import typed_request, utc
from ...spark_jobs.transform_support import Event, InputSpec, MiniCoordinator, minutes
from ...spark_jobs.transform_support import typed_request as transform_request

KX = pa.schema([("k", pa.string()), ("x", pa.int64())])


def test_main_without_a_readable_request_exits_non_zero(tmp_path, capsys):
    assert submit.main([]) == 2
    assert submit.main([str(tmp_path / "missing.fb"), str(tmp_path / "out.fb")]) == 2
    (tmp_path / "garbage.fb").write_bytes(b"\x01\x02\x03")
    assert submit.main([str(tmp_path / "garbage.fb"), str(tmp_path / "out.fb")]) == 2
    assert "cannot read the engine request" in capsys.readouterr().err


def test_a_missing_spark_submit_is_one_clear_error():
    engine = SubmitEngine(spark_submit="no-such-spark-submit")
    with pytest.raises(EngineError, match="'no-such-spark-submit' was not found"):
        engine.run_job(["x", "y"])


@pytest.mark.spark
@pytest.mark.slow
def test_ingest_and_transform_through_spark_submit(tmp_path):
    src = tmp_path / "prepared" / "0.csv"
    src.parent.mkdir()
    src.write_text("id,name,event_time\n2,b,2024-01-02T00:00:00Z\n1,a,2024-01-01T00:00:00Z\n3,c,\n")
    request = typed_request({
        "dataset": "e2e.dataset",
        "read": {"inputs": [{"path": str(src), "eventTime": "2024-01-03T00:00:00Z"}],
                 "readStep": {"kind": "Csv", "header": True,
                              "schema": ["id BIGINT", "name STRING", "event_time TIMESTAMP"]},
                 "preprocess": {"kind": "Sql", "engine": "spark",
                                "query": "SELECT id, upper(name) AS name, event_time FROM input"}},
        "merge": {"strategy": {"kind": "Ledger", "primaryKey": ["id"]}, "prevOffset": 9,
                  "systemTime": "2024-01-04T00:00:00Z", "outputPath": str(tmp_path / "slice.parquet"),
                  "newCheckpointPath": str(tmp_path / "checkpoint.parquet")}}, str(tmp_path))
    engine = SubmitEngine(master="local[2]", conf={"spark.sql.shuffle.partitions": "2"}, timeout_s=300)
    result = engine.execute(request, what="ingest")
    assert isinstance(result, IngestResult) and isinstance(result.value, IngestResponseSuccess), result
    merged = result.value.merge
    assert (merged.num_records, merged.offset_interval.start, merged.offset_interval.end) == (3, 10, 12)
    assert str(merged.max_event_time) == "2024-01-03T00:00:00Z" and merged.checkpoint_written
    assert result.value.read.columns == ("id BIGINT", "name STRING", "event_time TIMESTAMP")
    rows = pq.read_table(tmp_path / "slice.parquet").to_pylist()
    assert [(r["offset"], r["id"], r["name"], r["event_time"]) for r in rows] == [
        (10, 1, "A", utc(2024, 1, 1)), (11, 2, "B", utc(2024, 1, 2)), (12, 3, "C", utc(2024, 1, 3))]
    assert {r["system_time"] for r in rows} == {utc(2024, 1, 4)}
    assert [r["id"] for r in pq.read_table(tmp_path / "checkpoint.parquet").to_pylist()] == [1, 2, 3]
    # nothing but the outputs is left behind (the scratch directory is removed)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.parquet", "prepared", "slice.parquet"]

    a = InputSpec("a", KX, [Event(0, minutes(1), ("p", 1)), Event(0, minutes(2), ("q", 2)),
                            Event(0, minutes(3), ("p", 3)), Event(1, minutes(1), ("p", 1))])
    coord = MiniCoordinator(None, tmp_path / "t", {"kind": "Sql", "engine": "spark", "query":
                            "SELECT k, sum(x) AS total, max(event_time) AS event_time FROM a GROUP BY k"}, [a])
    doc = coord.request({"a": 4})
    answer = engine.execute(transform_request(doc), what="transform")
    assert isinstance(answer, OdfTransformResponse) and isinstance(answer.response, TransformResponseSuccess)
    assert (answer.response.new_offset_interval.start, answer.response.new_offset_interval.end) == (0, 1)
    assert answer.diagnostics.plan_class == "stateful"
    rows = pq.read_table(doc["content"]["newDataPath"]).to_pylist()
    assert [(r["offset"], r["op"], r["k"], r["total"], r["event_time"]) for r in rows] == [
        (0, 0, "p", 3, minutes(3)), (1, 0, "q", 2, minutes(2))]
    assert "__odf_table" in pq.read_table(doc["content"]["newCheckpointPath"]).column_names  # an incremental state
    assert not [p for p in (tmp_path / "t").iterdir() if p.name.endswith(".tmp")]  # no temp dirs left behind
    assert encode_request(request)  # the same bytes a long-lived engine receives
