"""The typed contract between a coordinator and the Spark engine, beyond what the spec's engine protocol covers.

The spec's own types (``TransformRequest``/``Response``, ``RawQueryRequest``/``Response``) live in
:mod:`odf_core.metadata.engine_ops`. What the spec leaves to the coordinator — reading and merging ingest input,
validating a query against input schemas, ad-hoc SQL, our transform requests that carry each input's history, the
health of a long-lived engine — is modelled here with the same schema machinery, so every message has one
FlatBuffers form (the gRPC wire and the spark-submit request file) and one JSON form (logs and tests).

Every request travels as an :class:`EngineRequestRoot` and is answered by an :class:`EngineResponseRoot`; the
variant of the request decides the variant family of the answer.
"""
from __future__ import annotations

from odf_core.metadata.engine_ops import (
    RawQueryRequest,
    RawQueryResponseRoot,
    TransformRequest,
    TransformResponse,
)
from odf_core.metadata.fragments import (
    DataSlice,
    DatasetVocabulary,
    MergeStrategy,
    OffsetInterval,
    ReadStep,
    Transform,
)
from odf_core.metadata.schema import W, Model, item, lst, model, odf_type, odf_union, opt, req
from odf_core.metadata.timestamp import Timestamp

STR = item(W.STR)


@odf_type
@model
class SliceDescription(Model):
    """What a commit records of a slice the engine wrote: its ``DataSlice`` (hashes, offsets, size) and its schema as
    ``SetDataSchema`` records it (a bare Arrow Schema FlatBuffer). The engine computes both with the coordinator's own
    code (:mod:`odf_core.engine.slice_description`) while the file is warm, so a coordinator need not import pyarrow or
    decode the file; it trusts them only for the bytes it hashes itself (the physical hash)."""

    data_slice: DataSlice = req(W.TABLE, "DataSlice")
    schema: bytes = req(W.BYTES)


# -- ingest ---------------------------------------------------------------------------------------------------------


@odf_type
@model
class IngestInputFile(Model):
    """A prepared file to read. ``display_name`` is what the user knows it by (URL, glob match, pushed path)."""

    path: str = req(W.STR)
    display_name: str = req(W.STR)
    event_time: Timestamp | None = opt(W.TIMESTAMP)  # the source's own time: fills a missing event time


@odf_type
@model
class ReadPhase(Model):
    """Read the inputs with the source's read step and preprocess query.

    ``output_path`` set: the rows are written there as one parquet file (the spark-submit path, where the merge runs
    in another process). Unset: the rows go straight into the merge of the same request, or, with
    :attr:`IngestRequest.keep_read_as`, stay with a long-lived engine for a later merge request.

    ``dataset_schema`` (the dataset's ``SetDataSchema`` bytes, when it has one): a source that leaves its types to
    inference (no read schema, no preprocess) has its columns cast to the types the dataset already records.
    """

    inputs: tuple[IngestInputFile, ...] = lst(item(W.TABLE, "IngestInputFile"), required=True)
    read_step: ReadStep = req(W.UNION, "ReadStep")
    preprocess: Transform | None = opt(W.UNION, "Transform")
    output_path: str | None = opt(W.STR)
    dataset_schema: bytes | None = opt(W.BYTES)


@odf_type
@model
class MergePhase(Model):
    """Merge the read rows into the next data slice with the source's merge strategy.

    The previous data schema (``prev_schema``: the dataset's ``SetDataSchema`` bytes) is checked against the new
    rows with the one schema-evolution rule of :mod:`odf_core.metadata.schema_evolution`. The Ledger/Snapshot state
    comes from ``prev_checkpoint_path`` or, failing that, is rebuilt from ``prev_data_paths``. ``not_null``: the
    columns the source's read schema declares NOT NULL (a null among the new rows is an error).
    """

    strategy: MergeStrategy = req(W.UNION, "MergeStrategy")
    system_time: Timestamp = req(W.TIMESTAMP)
    output_path: str = req(W.STR)
    new_checkpoint_path: str = req(W.STR)
    prev_offset: int | None = opt(W.U64N)
    prev_schema: bytes | None = opt(W.BYTES)
    prev_checkpoint_path: str | None = opt(W.STR)
    prev_data_paths: tuple[str, ...] | None = lst(STR)
    input_path: str | None = opt(W.STR)  # merge-only request: the read phase's output_path
    not_null: tuple[str, ...] | None = lst(STR)
    # Ledger: rows repeating a key of an earlier row of the same input: "first" (None) keeps the first, "error" fails
    duplicates: str | None = opt(W.STR)


@odf_type
@model
class IngestRequest(Model):
    """One ingest transaction's Spark work: read, merge, or both.

    ``keep_read_as`` names the transaction on a long-lived engine: a read-only request keeps its rows there under
    that name; a read+merge request with the same name uses the kept rows when they are still there (skipping the
    read) and reads again when they are not (a restarted engine), so a retried merge always works.
    """

    dataset: str = req(W.STR)
    vocab: DatasetVocabulary = req(W.TABLE, "DatasetVocabulary")
    work_dir: str = req(W.STR)
    read: ReadPhase | None = opt(W.TABLE, "ReadPhase")
    merge: MergePhase | None = opt(W.TABLE, "MergePhase")
    keep_read_as: str | None = opt(W.STR)


@odf_type
@model
class ReadOutcome(Model):
    num_records: int | None = opt(W.U64N)  # unknown when the rows went straight into the merge's own pass
    columns: tuple[str, ...] = lst(STR, required=True)  # DDL, e.g. "id BIGINT"


@odf_type
@model
class MergeOutcome(Model):
    num_records: int = req(W.U64)
    offset_interval: OffsetInterval | None = opt(W.TABLE, "OffsetInterval")
    max_event_time: Timestamp | None = opt(W.TIMESTAMP)
    checkpoint_written: bool | None = opt(W.BOOLN)
    # Ledger: rows dropped because an earlier row of the same input had their primary key, and one such key (JSON)
    duplicates_dropped: int | None = opt(W.U64N)
    duplicate_key: str | None = opt(W.STR)
    slice: SliceDescription | None = opt(W.TABLE, "SliceDescription")  # the slice written (None: none, or not said)


@odf_type
@model
class IngestResponseSuccess(Model):
    KIND = "Success"
    read: ReadOutcome | None = opt(W.TABLE, "ReadOutcome")
    merge: MergeOutcome | None = opt(W.TABLE, "MergeOutcome")
    read_reused: bool | None = opt(W.BOOLN)  # the merge used rows kept by an earlier read request


@odf_type
@model
class IngestResponseInvalidInput(Model):
    """The data, the read step or the merge strategy is wrong for this input: the user's to fix."""

    KIND = "InvalidInput"
    message: str = req(W.STR)
    file: str | None = opt(W.STR)
    line: int | None = opt(W.U64N)
    record: int | None = opt(W.U64N)


@odf_type
@model
class EngineInternalError(Model):
    """The engine failed (a bug, a crash of Spark, a lost executor). ``error_class`` is Spark's condition when the
    failure came from Spark; ``backtrace`` holds the Python and Java traces for the log file, never the console."""

    KIND = "InternalError"
    message: str = req(W.STR)
    error_class: str | None = opt(W.STR)
    backtrace: str | None = opt(W.STR)


#: ``EngineInternalError.error_class`` of a full, over-quota or read-only disk (the errno's name): the machine's state,
#: not a bug; the message is the reason in words and the coordinator adds where it was writing.
DISK_ERROR_CLASSES = frozenset({"ENOSPC", "EDQUOT", "EROFS"})

IngestResponse = IngestResponseSuccess | IngestResponseInvalidInput | EngineInternalError
odf_union("IngestResponse", IngestResponseSuccess, IngestResponseInvalidInput, EngineInternalError)

# -- transform --------------------------------------------------------------------------------------------------------


@odf_type
@model
class InputHistory(Model):
    """Every slice of one input up to its new offset, oldest first: the stateful path re-reads its reduced state."""

    query_alias: str = req(W.STR)
    data_paths: tuple[str, ...] = lst(STR, required=True)


@odf_type
@model
class OdfTransformRequest(Model):
    """The spec's ``TransformRequest`` plus what our stateful path needs that the spec does not carry."""

    request: TransformRequest = req(W.TABLE, "TransformRequest")
    histories: tuple[InputHistory, ...] = lst(item(W.TABLE, "InputHistory"), required=True)


@odf_type
@model
class OperatorPlan(Model):
    """How one operator of a transform's plan is evaluated, for ``odf explain`` and the transform's log.

    ``path``: ``stateless`` (the whole query runs over the new rows), ``row-wise`` (applied to the changed rows),
    ``incremental`` (updated from the changed rows and its state), ``full`` (recomputed over the inputs' whole
    state); ``detail`` says how or why.
    """

    depth: int = req(W.U64)
    operator: str = req(W.STR)
    path: str = req(W.STR)
    detail: str | None = opt(W.STR)


@odf_type
@model
class TransformDiagnostics(Model):
    """How the engine ran a transform: logged by the coordinator and the Airflow task."""

    plan_class: str | None = opt(W.STR)  # "stateless" | "stateful"
    reason: str | None = opt(W.STR)  # why stateful: the first operator that is not row-wise
    correction_key: tuple[str, ...] | None = lst(STR)
    output_rows: int | None = opt(W.U64N)
    warnings: tuple[str, ...] | None = lst(STR)
    timings: str | None = opt(W.STR)  # "plan=12ms execute=300ms", for the log
    path: str | None = opt(W.STR)  # stateful plans: "incremental" | "rebuild" | "full"
    operators: tuple[OperatorPlan, ...] | None = lst(item(W.TABLE, "OperatorPlan"))
    state_rows: int | None = opt(W.U64N)  # rows in the new checkpoint's state tables
    sizing: str | None = opt(W.STR)  # incremental and small stateless steps: how their shuffles were planned
    slice: str | None = opt(W.STR)  # incremental steps: "per group" (a top aggregate's old and new row per group)
    #                                 or "netted" (the changed rows counted by value)
    history: str | None = opt(W.STR)  # incremental steps: what they read of the inputs' history ("b 2 of 40 slice(s)")


@odf_type
@model
class OdfTransformResponse(Model):
    response: TransformResponse = req(W.UNION, "TransformResponse")
    diagnostics: TransformDiagnostics | None = opt(W.TABLE, "TransformDiagnostics")
    slice: SliceDescription | None = opt(W.TABLE, "SliceDescription")  # the output slice written, if any


@odf_type
@model
class ValidateInput(Model):
    query_alias: str = req(W.STR)
    vocab: DatasetVocabulary = req(W.TABLE, "DatasetVocabulary")
    schema_file: str = req(W.STR)  # an empty parquet file carrying the input's schema


@odf_type
@model
class ValidateQueryRequest(Model):
    """Analyse a query against its inputs' schemas without data (query evolution, snapshot validation)."""

    vocab: DatasetVocabulary = req(W.TABLE, "DatasetVocabulary")
    transform: Transform = req(W.UNION, "Transform")
    inputs: tuple[ValidateInput, ...] = lst(item(W.TABLE, "ValidateInput"), required=True)


@odf_type
@model
class ValidateQueryResponseSuccess(Model):
    KIND = "Success"
    output_schema: bytes = req(W.BYTES)  # the output slice's Arrow schema (SetDataSchema form)
    plan_class: str = req(W.STR)
    reason: str | None = opt(W.STR)
    path: str | None = opt(W.STR)  # stateful plans: "incremental" | "full"
    operators: tuple[OperatorPlan, ...] | None = lst(item(W.TABLE, "OperatorPlan"))


@odf_type
@model
class QueryResponseInvalidQuery(Model):
    KIND = "InvalidQuery"
    message: str = req(W.STR)


ValidateQueryResponse = ValidateQueryResponseSuccess | QueryResponseInvalidQuery | EngineInternalError
odf_union("ValidateQueryResponse", ValidateQueryResponseSuccess, QueryResponseInvalidQuery, EngineInternalError)

# -- ad-hoc SQL -------------------------------------------------------------------------------------------------------


@odf_type
@model
class SqlTable(Model):
    name: str = req(W.STR)  # the dataset name, usable as written (dots, hyphens)
    data_paths: tuple[str, ...] = lst(STR, required=True)


@odf_type
@model
class SqlRequest(Model):
    """A read-only query over datasets by name; the result comes back as Arrow IPC (at most ``limit`` rows)."""

    query: str = req(W.STR)
    tables: tuple[SqlTable, ...] = lst(item(W.TABLE, "SqlTable"), required=True)
    limit: int = req(W.U64)


@odf_type
@model
class SqlResponseSuccess(Model):
    KIND = "Success"
    arrow_ipc: bytes = req(W.BYTES)
    truncated: bool | None = opt(W.BOOLN)


SqlResponse = SqlResponseSuccess | QueryResponseInvalidQuery | EngineInternalError
odf_union("SqlResponse", SqlResponseSuccess, QueryResponseInvalidQuery, EngineInternalError)

# -- health -----------------------------------------------------------------------------------------------------------


@odf_type
@model
class HealthRequest(Model):
    pass


@odf_type
@model
class HealthResponse(Model):
    KIND = "Health"
    engine_version: str = req(W.STR)
    spark_version: str = req(W.STR)
    master: str = req(W.STR)
    running: int = req(W.U64)
    queued: int = req(W.U64)
    max_concurrency: int = req(W.U64)
    uptime_s: int = req(W.U64)


# -- envelopes --------------------------------------------------------------------------------------------------------


@odf_type
@model
class IngestResult(Model):
    value: IngestResponse = req(W.UNION, "IngestResponse")


@odf_type
@model
class ValidateQueryResult(Model):
    value: ValidateQueryResponse = req(W.UNION, "ValidateQueryResponse")


@odf_type
@model
class SqlResult(Model):
    value: SqlResponse = req(W.UNION, "SqlResponse")


EngineRequest = (IngestRequest | OdfTransformRequest | ValidateQueryRequest | SqlRequest | RawQueryRequest
                 | HealthRequest)
odf_union("EngineRequest", IngestRequest, OdfTransformRequest, ValidateQueryRequest, SqlRequest, RawQueryRequest,
          HealthRequest)
EngineResponse = IngestResult | OdfTransformResponse | ValidateQueryResult | SqlResult | RawQueryResponseRoot \
    | HealthResponse
odf_union("EngineResponse", IngestResult, OdfTransformResponse, ValidateQueryResult, SqlResult, RawQueryResponseRoot,
          HealthResponse)


@odf_type
@model
class EngineRequestRoot(Model):
    value: EngineRequest = req(W.UNION, "EngineRequest")


@odf_type
@model
class EngineResponseRoot(Model):
    value: EngineResponse = req(W.UNION, "EngineResponse")


def encode_request(request: EngineRequest) -> bytes:
    """The request's FlatBuffers bytes: what the gRPC call carries and what spark-submit reads from its file."""
    from odf_core.metadata.flatbuffers_serde import encode_root

    return encode_root(EngineRequestRoot(value=request))


def decode_request(data: bytes) -> EngineRequest:
    from odf_core.metadata.flatbuffers_serde import decode_root

    return decode_root(data, EngineRequestRoot, "engine request").value


def encode_response(response: EngineResponse) -> bytes:
    from odf_core.metadata.flatbuffers_serde import encode_root

    return encode_root(EngineResponseRoot(value=response))


def decode_response(data: bytes) -> EngineResponse:
    from odf_core.metadata.flatbuffers_serde import decode_root

    return decode_root(data, EngineResponseRoot, "engine response").value
