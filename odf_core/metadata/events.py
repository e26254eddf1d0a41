"""The 13 metadata events of ODF, in union tag order: v0.34.1's, with the fields added since (``AddData.extra``,
``SetDataSchema``'s ``DataSchema``)."""
from __future__ import annotations

from odf_core.identity import DatasetID, Multihash
from odf_core.metadata.data_schema import DataSchema, ExtraAttributes, rename_legacy_schema, write_legacy_schema
from odf_core.metadata.fragments import (
    Attachments,
    Checkpoint,
    DataSlice,
    DatasetKind,
    ExecuteTransformInput,
    FetchStep,
    MergeStrategy,
    PrepStep,
    ReadStep,
    SourceState,
    Transform,
    TransformInput,
)
from odf_core.metadata.schema import W, Model, item, lst, model, odf_type, odf_union, opt, req
from odf_core.metadata.timestamp import Timestamp


@odf_type
@model
class AddData(Model):
    prev_checkpoint: Multihash | None = opt(W.MULTIHASH)
    prev_offset: int | None = opt(W.U64N)
    new_data: DataSlice | None = opt(W.TABLE, "DataSlice")
    new_checkpoint: Checkpoint | None = opt(W.TABLE, "Checkpoint")
    new_watermark: Timestamp | None = opt(W.TIMESTAMP)
    new_source_state: SourceState | None = opt(W.TABLE, "SourceState")
    extra: ExtraAttributes | None = opt(W.TABLE, "ExtraAttributes")


@odf_type
@model
class ExecuteTransform(Model):
    query_inputs: tuple[ExecuteTransformInput, ...] = lst(item(W.TABLE, "ExecuteTransformInput"), required=True)
    prev_checkpoint: Multihash | None = opt(W.MULTIHASH)
    prev_offset: int | None = opt(W.U64N)
    new_data: DataSlice | None = opt(W.TABLE, "DataSlice")
    new_checkpoint: Checkpoint | None = opt(W.TABLE, "Checkpoint")
    new_watermark: Timestamp | None = opt(W.TIMESTAMP)


@odf_type
@model
class Seed(Model):
    dataset_id: DatasetID = req(W.DATASET_ID)
    dataset_kind: DatasetKind = req(W.ENUM, DatasetKind)


@odf_type
@model
class SetPollingSource(Model):
    fetch: FetchStep = req(W.UNION, "FetchStep")
    prepare: tuple[PrepStep, ...] | None = lst(item(W.UNION, "PrepStep"), wrapped=True)
    read: ReadStep = req(W.UNION, "ReadStep")
    preprocess: Transform | None = opt(W.UNION, "Transform")
    merge: MergeStrategy = req(W.UNION, "MergeStrategy")


@odf_type
@model
class SetTransform(Model):
    inputs: tuple[TransformInput, ...] = lst(item(W.TABLE, "TransformInput"), required=True)
    transform: Transform = req(W.UNION, "Transform")


@odf_type
@model
class SetVocab(Model):
    offset_column: str | None = opt(W.STR)
    operation_type_column: str | None = opt(W.STR)
    system_time_column: str | None = opt(W.STR)
    event_time_column: str | None = opt(W.STR)


@odf_type
@model
class SetAttachments(Model):
    attachments: Attachments = req(W.UNION, "Attachments")


@odf_type
@model
class SetInfo(Model):
    description: str | None = opt(W.STR)
    keywords: tuple[str, ...] | None = lst(item(W.STR))


@odf_type
@model
class SetLicense(Model):
    short_name: str = req(W.STR)
    name: str = req(W.STR)
    spdx_id: str | None = opt(W.STR)
    website_url: str = req(W.STR)


@odf_type
@model
class SetDataSchema(Model):
    """``schema`` is v0.34.1's Arrow ``Schema`` as a bare finished FlatBuffer, kept verbatim (``rawArrowSchema``,
    deprecated, in the current spec); ``data_schema`` is the ODF ``DataSchema`` added since (``schema`` in the
    current YAML). A block may carry either or both."""

    schema: bytes | None = opt(W.BYTES)
    data_schema: DataSchema | None = opt(W.TABLE, "DataSchema")

    @classmethod
    def yaml_in(cls, data: dict) -> dict:
        return rename_legacy_schema(data, "rawArrowSchema")

    def yaml_out(self, data: dict) -> dict:
        return write_legacy_schema(data, "rawArrowSchema")


@odf_type
@model
class AddPushSource(Model):
    source_name: str = req(W.STR)
    read: ReadStep = req(W.UNION, "ReadStep")
    preprocess: Transform | None = opt(W.UNION, "Transform")
    merge: MergeStrategy = req(W.UNION, "MergeStrategy")


@odf_type
@model
class DisablePushSource(Model):
    source_name: str = req(W.STR)


@odf_type
@model
class DisablePollingSource(Model):
    pass


MetadataEvent = (
    AddData
    | ExecuteTransform
    | Seed
    | SetPollingSource
    | SetTransform
    | SetVocab
    | SetAttachments
    | SetInfo
    | SetLicense
    | SetDataSchema
    | AddPushSource
    | DisablePushSource
    | DisablePollingSource
)
METADATA_EVENT = odf_union(
    "MetadataEvent",
    AddData,
    ExecuteTransform,
    Seed,
    SetPollingSource,
    SetTransform,
    SetVocab,
    SetAttachments,
    SetInfo,
    SetLicense,
    SetDataSchema,
    AddPushSource,
    DisablePushSource,
    DisablePollingSource,
)
