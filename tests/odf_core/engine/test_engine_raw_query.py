"""The spec's ``ExecuteRawQuery`` on the warm engine (spark_jobs/server.py ``_spec_raw_query``) over real gRPC on
loopback, called the way a client of the reference engine.proto calls it: a RawQueryRequest FlatBuffer in one
``bytes flatbuffer`` message, a stream of RawQueryResponse FlatBuffers back. The server is the one of
test_engine_server.py (this session's Spark, loopback, no token)."""
from __future__ import annotations

from pathlib import Path

import grpc
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from odf_core.engine import wire
from odf_core.metadata import RawQueryRequest, RawQueryResponseRoot
from odf_core.metadata.engine_ops import RawQueryResponseInvalidQuery, RawQueryResponseSuccess
from odf_core.metadata.flatbuffers_serde import decode_root, encode_root
from odf_core.metadata.fragments import TransformSql
from spark_jobs.server import EngineServer

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def server(spark):
    srv = EngineServer(spark, "127.0.0.1", 0, max_concurrency=1, drain_s=5)
    srv.start()
    yield srv
    srv.shutdown(0)


def _raw_query(srv: EngineServer, request: RawQueryRequest) -> list:
    with grpc.insecure_channel(f"127.0.0.1:{srv.port}") as channel:
        call = channel.unary_stream(wire.EXECUTE_RAW_QUERY, request_serializer=wire.serializer("RawQueryRequest"),
                                    response_deserializer=wire.deserializer("RawQueryResponse"))
        return [decode_root(m, RawQueryResponseRoot).value for m in call(encode_root(request), timeout=120)]


def _input(tmp_path: Path) -> str:
    path = tmp_path / "in.parquet"
    pq.write_table(pa.table({"k": ["a", "b", "c"], "x": pa.array([1, 2, 3], pa.int64())}), path)
    return str(path)


def _sql(query: str) -> TransformSql:
    return TransformSql(engine="spark", query=query)


def test_a_raw_query_writes_its_result_and_counts_it(server, tmp_path):
    out = tmp_path / "out.parquet"
    answer = _raw_query(server, RawQueryRequest(input_data_paths=(_input(tmp_path),),
                                                transform=_sql("SELECT k, x * 10 AS x10 FROM input WHERE x > 1"),
                                                output_data_path=str(out)))
    assert answer == [RawQueryResponseSuccess(num_records=2)]
    assert sorted(pq.read_table(out).to_pylist(), key=lambda r: r["k"]) == [{"k": "b", "x10": 20},
                                                                            {"k": "c", "x10": 30}]


def test_a_bad_raw_query_is_an_invalid_query_answer_and_writes_nothing(server, tmp_path):
    out = tmp_path / "out.parquet"
    (answer,) = _raw_query(server, RawQueryRequest(input_data_paths=(_input(tmp_path),),
                                                   transform=_sql("SELECT nope FROM input"),
                                                   output_data_path=str(out)))
    assert isinstance(answer, RawQueryResponseInvalidQuery) and "nope" in answer.message, answer
    assert "\n" not in answer.message.strip() and "Traceback" not in answer.message
    assert not out.exists()


def test_a_raw_query_naming_a_path_outside_the_allowed_roots_is_refused_before_it_runs(server, tmp_path):
    with pytest.raises(grpc.RpcError) as e:
        _raw_query(server, RawQueryRequest(input_data_paths=("/etc/passwd",), transform=_sql("SELECT * FROM input"),
                                           output_data_path=str(tmp_path / "out.parquet")))
    assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED and "/etc/passwd" in e.value.details()
    assert not (tmp_path / "out.parquet").exists()
