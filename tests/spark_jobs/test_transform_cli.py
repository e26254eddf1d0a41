"""Request parsing of spark_jobs/transform.py (no Spark) and one real `spark-submit` run end to end."""
from __future__ import annotations

import copy
import datetime as dt
import json
import os
import shutil
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spark_jobs import transform as tr

from .transform_support import Event, InputSpec, MiniCoordinator, minutes

SCRIPT = Path(tr.__file__)
KX = pa.schema([("k", pa.string()), ("x", pa.int64())])


def request_doc(tmp_path: Path) -> dict:
    a = InputSpec("a", KX, [Event(0, minutes(1), ("p", 1)), Event(0, minutes(2), ("q", 2)),
                            Event(0, minutes(3), ("p", 3)), Event(1, minutes(1), ("p", 1))])
    coord = MiniCoordinator(None, tmp_path, {"kind": "Sql", "engine": "spark", "query":
                            "SELECT k, sum(x) AS total, max(event_time) AS event_time FROM a GROUP BY k"}, [a])
    return coord.request({"a": 4})


def test_parse_request_reads_the_manifest(tmp_path):
    req = tr.parse_request(request_doc(tmp_path))
    assert req.next_offset == 0 and req.prev_checkpoint_path is None
    assert req.transform.queries == (tr.QueryStep(
        "SELECT k, sum(x) AS total, max(event_time) AS event_time FROM a GROUP BY k"),)
    (inp,) = req.query_inputs
    assert inp.query_alias == "a" and inp.offset_interval == tr.OffsetInterval(0, 3)
    assert inp.history_data_paths == tuple(inp.data_paths) and inp.vocab == tr.Vocab()
    assert req.system_time.tzinfo is not None


@pytest.mark.parametrize("mutate, error, needle", [
    (lambda d: d["content"].pop("newDataPath"), tr.RequestError, "content.newDataPath: required field is missing"),
    (lambda d: d["content"].update(nextOffset="7"), tr.RequestError, "content.nextOffset: expected int"),
    (lambda d: d["content"].update(systemTime="yesterday"), tr.RequestError, "content.systemTime"),
    (lambda d: d["content"]["queryInputs"][0].update(offsetInterval={"start": 5, "end": 2}), tr.RequestError,
     "content.queryInputs[0].offsetInterval: invalid interval [5, 2]"),
    (lambda d: d["content"]["queryInputs"].append(copy.deepcopy(d["content"]["queryInputs"][0])), tr.RequestError,
     "duplicate queryAlias 'a'"),
    (lambda d: d.update(kind="TransformResponse"), tr.RequestError, "expected 'TransformRequest'"),
    (lambda d: d["content"]["transform"].update(kind="Flink"), tr.InvalidQueryError, "unsupported transform kind"),
    (lambda d: d["content"]["transform"].update(queries=[{"query": "SELECT 1"}]), tr.InvalidQueryError,
     "either 'queries' or 'query'"),
])
def test_parse_request_names_the_bad_field(tmp_path, mutate, error, needle):
    doc = request_doc(tmp_path)
    mutate(doc)
    with pytest.raises(error) as exc:
        tr.parse_request(doc)
    assert needle in str(exc.value)


def test_timestamps_round_trip_in_utc():
    t = tr.parse_timestamp("2024-02-29T23:59:59.1234567+02:00")
    assert t == dt.datetime(2024, 2, 29, 21, 59, 59, 123456, tzinfo=dt.timezone.utc)
    assert tr.format_timestamp(t) == "2024-02-29T21:59:59.123456Z"
    assert tr.format_timestamp(tr.parse_timestamp("2024-01-01T00:00:00Z")) == "2024-01-01T00:00:00Z"


def test_main_without_arguments_prints_usage(capsys):
    assert tr.main([]) == 2
    assert "usage" in capsys.readouterr().err


@pytest.mark.spark
def test_spark_submit_end_to_end(tmp_path):
    spark_submit = shutil.which("spark-submit")
    assert spark_submit, "spark-submit must be on PATH (the venv's bin directory)"
    doc = request_doc(tmp_path)
    req, resp = tmp_path / "request.json", tmp_path / "response.json"
    req.write_text(json.dumps(doc))
    env = {**os.environ, "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", "python3")}
    proc = subprocess.run(
        [spark_submit, "--master", "local[2]", "--conf", "spark.ui.enabled=false",
         "--conf", "spark.sql.shuffle.partitions=2", str(SCRIPT), str(req), str(resp)],
        capture_output=True, text=True, timeout=300, env=env, start_new_session=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    answer = json.loads(resp.read_text())
    assert answer["kind"] == "TransformResponseRoot" and answer["version"] == 1
    assert answer["content"]["value"] == {"kind": "Success", "newOffsetInterval": {"start": 0, "end": 1}}
    assert answer["extensions"]["planClass"] == "stateful"
    rows = pq.read_table(doc["content"]["newDataPath"]).to_pylist()
    assert [(r["offset"], r["op"], r["k"], r["total"], r["event_time"]) for r in rows] == [
        (0, 0, "p", 3, minutes(3)), (1, 0, "q", 2, minutes(2))]
    ckpt = pq.read_table(doc["content"]["newCheckpointPath"])
    assert ckpt.num_rows == 2 and "__odf_count" in ckpt.column_names
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # no temp dirs left behind
