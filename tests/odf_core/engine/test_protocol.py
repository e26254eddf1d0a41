"""The typed engine contract: every request and response has one FlatBuffers form (the gRPC and spark-submit wire)
that decodes to an equal object, and the JSON form follows the ODF YAML rules (RFC-013 kind names)."""
from __future__ import annotations

import pytest

from odf_core.engine.protocol import (
    EngineInternalError,
    HealthRequest,
    HealthResponse,
    IngestInputFile,
    IngestRequest,
    IngestResponseInvalidInput,
    IngestResponseSuccess,
    IngestResult,
    InputHistory,
    MergeOutcome,
    MergePhase,
    OdfTransformRequest,
    OdfTransformResponse,
    QueryResponseInvalidQuery,
    ReadOutcome,
    ReadPhase,
    SqlRequest,
    SqlResponseSuccess,
    SqlResult,
    SqlTable,
    TransformDiagnostics,
    ValidateInput,
    ValidateQueryRequest,
    ValidateQueryResponseSuccess,
    ValidateQueryResult,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from odf_core.errors import DecodeError, MetadataError
from odf_core.identity import DatasetID
from odf_core.metadata import (
    DatasetVocabulary,
    MergeStrategyLedger,
    MergeStrategySnapshot,
    OffsetInterval,
    RawQueryRequest,
    RawQueryResponseRoot,
    RawQueryResponseSuccess,
    ReadStepCsv,
    ReadStepNdJson,
    SqlQueryStep,
    Timestamp,
    TransformRequest,
    TransformRequestInput,
    TransformResponseInvalidQuery,
    TransformResponseSuccess,
    TransformSql,
    Watermark,
)
from odf_core.metadata.schema import W, Wire
from odf_core.metadata.yaml_serde import _value_from, from_data, to_data

T0 = Timestamp.parse("2024-01-01T00:00:00.123456789Z")
VOCAB = DatasetVocabulary.default()
DID = DatasetID.new_keypair()[0]
SQL = TransformSql(engine="spark", queries=(SqlQueryStep(alias="a", query="select 1"), SqlQueryStep(query="x")))
SPEC_REQUEST = TransformRequest(
    dataset_id=DID, dataset_alias="d", system_time=T0, vocab=VOCAB, transform=SQL,
    query_inputs=(TransformRequestInput(dataset_id=DID, dataset_alias="in", query_alias="in", vocab=VOCAB,
                                        offset_interval=OffsetInterval(start=0, end=9), data_paths=("/d/0",),
                                        schema_file="/s", explicit_watermarks=(Watermark(system_time=T0,
                                                                                         event_time=T0),)),),
    next_offset=3, prev_checkpoint_path=None, new_checkpoint_path="/c", new_data_path="/o")

REQUESTS = [
    IngestRequest(dataset="a.b", vocab=VOCAB, work_dir="/w", keep_read_as="did/txn",
                  read=ReadPhase(inputs=(IngestInputFile(path="/p", display_name="https://x/y.csv", event_time=T0),),
                                 read_step=ReadStepCsv(schema=("id BIGINT",), header=True), preprocess=SQL),
                  merge=MergePhase(strategy=MergeStrategySnapshot(primary_key=("id",), compare_columns=("v",)),
                                   system_time=T0, output_path="/o", new_checkpoint_path="/c", prev_offset=0,
                                   prev_schema=b"\x00\x01", prev_data_paths=("/d/1", "/d/2"))),
    IngestRequest(dataset="a", vocab=VOCAB, work_dir="/w",
                  merge=MergePhase(strategy=MergeStrategyLedger(primary_key=("k",)), system_time=T0,
                                   output_path="/o", new_checkpoint_path="/c", input_path="/r")),
    OdfTransformRequest(request=SPEC_REQUEST, histories=(InputHistory(query_alias="in", data_paths=("/d/0",)),)),
    ValidateQueryRequest(vocab=VOCAB, transform=SQL,
                         inputs=(ValidateInput(query_alias="in", vocab=VOCAB, schema_file="/s"),)),
    SqlRequest(query="select * from `a.b`", tables=(SqlTable(name="a.b", data_paths=("/d",)),), limit=10),
    RawQueryRequest(input_data_paths=("/a",), transform=SQL, output_data_path="/o"),
    HealthRequest(),
]
RESPONSES = [
    IngestResult(value=IngestResponseSuccess(
        read=ReadOutcome(num_records=None, columns=("id BIGINT",)),
        merge=MergeOutcome(num_records=2, offset_interval=OffsetInterval(start=5, end=6), max_event_time=T0,
                           checkpoint_written=True), read_reused=True)),
    IngestResult(value=IngestResponseInvalidInput(message="bad", file="f.csv", line=3)),
    IngestResult(value=EngineInternalError(message="boom", error_class="X_Y", backtrace="trace")),
    OdfTransformResponse(response=TransformResponseSuccess(new_offset_interval=None, new_watermark=T0),
                         diagnostics=TransformDiagnostics(plan_class="stateful", reason="Aggregate",
                                                          correction_key=("k",), output_rows=0,
                                                          slice="per group", history="a 1 of 4 slice(s)")),
    OdfTransformResponse(response=TransformResponseInvalidQuery(message="no")),
    ValidateQueryResult(value=ValidateQueryResponseSuccess(output_schema=b"s", plan_class="stateless")),
    ValidateQueryResult(value=QueryResponseInvalidQuery(message="bad query")),
    SqlResult(value=SqlResponseSuccess(arrow_ipc=b"\xff" * 10, truncated=True)),
    RawQueryResponseRoot(value=RawQueryResponseSuccess(num_records=7)),
    HealthResponse(engine_version="v", spark_version="4", master="local[2]", running=1, queued=0, max_concurrency=4,
                   uptime_s=3),
]


@pytest.mark.parametrize("request_", REQUESTS, ids=lambda r: type(r).__name__)
def test_every_request_round_trips_through_its_flatbuffers_form(request_):
    data = encode_request(request_)
    assert decode_request(data) == request_
    assert encode_request(decode_request(data)) == data


@pytest.mark.parametrize("response", RESPONSES, ids=lambda r: type(r).__name__)
def test_every_response_round_trips_through_its_flatbuffers_form(response):
    data = encode_response(response)
    assert decode_response(data) == response


def test_a_truncated_request_is_a_decode_error_not_a_crash():
    data = encode_request(REQUESTS[0])
    for cut in (0, 7, len(data) // 2):
        with pytest.raises(DecodeError):
            decode_request(data[:cut])


@pytest.mark.parametrize("spelling", ["NdJson", "ndJson", "ndjson"])
def test_read_steps_follow_rfc013_spellings(spelling):
    assert _value_from(Wire(W.UNION, "ReadStep"), {"kind": spelling}, "readStep") == ReadStepNdJson()


def test_json_form_names_the_bad_property():
    data = to_data(REQUESTS[1])
    data["merge"]["prevOffset"] = -1
    with pytest.raises(MetadataError, match=r"merge.prevOffset"):
        from_data(IngestRequest, data)
    data = to_data(REQUESTS[1])
    del data["merge"]["strategy"]["primaryKey"]
    with pytest.raises(MetadataError, match="primaryKey"):
        from_data(IngestRequest, data)
