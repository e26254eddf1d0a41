"""Engine protocol types: what a coordinator sends to an engine and gets back."""
from __future__ import annotations

from odf_core.identity import DatasetID
from odf_core.metadata.fragments import DatasetVocabulary, OffsetInterval, Transform, Watermark
from odf_core.metadata.schema import W, Model, item, lst, model, odf_type, odf_union, opt, req
from odf_core.metadata.timestamp import Timestamp

STR = item(W.STR)


@odf_type
@model
class RawQueryRequest(Model):
    input_data_paths: tuple[str, ...] = lst(STR, required=True)
    transform: Transform = req(W.UNION, "Transform")
    output_data_path: str = req(W.STR)


@odf_type
@model
class RawQueryResponseProgress(Model):
    KIND = "Progress"


@odf_type
@model
class RawQueryResponseSuccess(Model):
    KIND = "Success"
    num_records: int = req(W.U64)


@odf_type
@model
class RawQueryResponseInvalidQuery(Model):
    KIND = "InvalidQuery"
    message: str = req(W.STR)


@odf_type
@model
class RawQueryResponseInternalError(Model):
    KIND = "InternalError"
    message: str = req(W.STR)
    backtrace: str | None = opt(W.STR)


RawQueryResponse = (
    RawQueryResponseProgress | RawQueryResponseSuccess | RawQueryResponseInvalidQuery | RawQueryResponseInternalError
)
odf_union(
    "RawQueryResponse",
    RawQueryResponseProgress,
    RawQueryResponseSuccess,
    RawQueryResponseInvalidQuery,
    RawQueryResponseInternalError,
)


@odf_type
@model
class TransformRequestInput(Model):
    dataset_id: DatasetID = req(W.DATASET_ID)
    dataset_alias: str = req(W.STR)
    query_alias: str = req(W.STR)
    vocab: DatasetVocabulary = req(W.TABLE, "DatasetVocabulary")
    offset_interval: OffsetInterval | None = opt(W.TABLE, "OffsetInterval")
    data_paths: tuple[str, ...] = lst(STR, required=True)
    schema_file: str = req(W.STR)
    explicit_watermarks: tuple[Watermark, ...] = lst(item(W.TABLE, "Watermark"), required=True)


@odf_type
@model
class TransformRequest(Model):
    dataset_id: DatasetID = req(W.DATASET_ID)
    dataset_alias: str = req(W.STR)
    system_time: Timestamp = req(W.TIMESTAMP)
    vocab: DatasetVocabulary = req(W.TABLE, "DatasetVocabulary")
    transform: Transform = req(W.UNION, "Transform")
    query_inputs: tuple[TransformRequestInput, ...] = lst(item(W.TABLE, "TransformRequestInput"), required=True)
    next_offset: int = req(W.U64)
    prev_checkpoint_path: str | None = opt(W.STR)
    new_checkpoint_path: str = req(W.STR)
    new_data_path: str = req(W.STR)


@odf_type
@model
class TransformResponseProgress(Model):
    KIND = "Progress"


@odf_type
@model
class TransformResponseSuccess(Model):
    KIND = "Success"
    new_offset_interval: OffsetInterval | None = opt(W.TABLE, "OffsetInterval")
    new_watermark: Timestamp | None = opt(W.TIMESTAMP)


@odf_type
@model
class TransformResponseInvalidQuery(Model):
    KIND = "InvalidQuery"
    message: str = req(W.STR)


@odf_type
@model
class TransformResponseInternalError(Model):
    KIND = "InternalError"
    message: str = req(W.STR)
    backtrace: str | None = opt(W.STR)


TransformResponse = (
    TransformResponseProgress
    | TransformResponseSuccess
    | TransformResponseInvalidQuery
    | TransformResponseInternalError
)
odf_union(
    "TransformResponse",
    TransformResponseProgress,
    TransformResponseSuccess,
    TransformResponseInvalidQuery,
    TransformResponseInternalError,
)


@odf_type
@model
class RawQueryResponseRoot(Model):
    value: RawQueryResponse = req(W.UNION, "RawQueryResponse")


@odf_type
@model
class TransformResponseRoot(Model):
    value: TransformResponse = req(W.UNION, "TransformResponse")
