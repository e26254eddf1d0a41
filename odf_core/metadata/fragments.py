"""Fragments of ODF: the building blocks of events (field order = schema order).

The v0.34.1 fragments, plus what the spec added since and datasets written by the current reference contain (new
fetch steps, merge strategies, a ``DataSchema`` in read steps)."""
from __future__ import annotations

from odf_core.identity import DatasetID, Multihash
from odf_core.metadata.data_schema import DataSchema, rename_legacy_schema, write_legacy_schema
from odf_core.metadata.schema import (
    W,
    Model,
    OdfEnum,
    item,
    lst,
    model,
    odf_type,
    odf_union,
    opt,
    req,
)
from odf_core.metadata.timestamp import Timestamp

STR = item(W.STR)


class DatasetKind(OdfEnum):
    ROOT = "Root"
    DERIVATIVE = "Derivative"


class SourceOrdering(OdfEnum):
    BY_EVENT_TIME = "ByEventTime"
    BY_NAME = "ByName"


class CompressionFormat(OdfEnum):
    GZIP = "Gzip"
    ZIP = "Zip"


@odf_type
@model
class OffsetInterval(Model):
    """Closed interval of record offsets ``[start, end]``."""

    start: int = req(W.U64)
    end: int = req(W.U64)


@odf_type
@model
class DataSlice(Model):
    logical_hash: Multihash = req(W.MULTIHASH)
    physical_hash: Multihash = req(W.MULTIHASH)
    offset_interval: OffsetInterval = req(W.TABLE, "OffsetInterval")
    size: int = req(W.U64)


@odf_type
@model
class Checkpoint(Model):
    physical_hash: Multihash = req(W.MULTIHASH)
    size: int = req(W.U64)


@odf_type
@model
class SourceState(Model):
    source_name: str = req(W.STR)
    kind: str = req(W.STR)
    value: str = req(W.STR)


@odf_type
@model
class Watermark(Model):
    system_time: Timestamp = req(W.TIMESTAMP)
    event_time: Timestamp = req(W.TIMESTAMP)


@odf_type
@model
class DatasetVocabulary(Model):
    offset_column: str = req(W.STR)
    operation_type_column: str = req(W.STR)
    system_time_column: str = req(W.STR)
    event_time_column: str = req(W.STR)

    @classmethod
    def default(cls) -> "DatasetVocabulary":
        return cls(
            offset_column="offset",
            operation_type_column="op",
            system_time_column="system_time",
            event_time_column="event_time",
        )

    # Short names for engine code, which uses these columns everywhere.
    @property
    def offset(self) -> str:
        return self.offset_column

    @property
    def op(self) -> str:
        return self.operation_type_column

    @property
    def system_time(self) -> str:
        return self.system_time_column

    @property
    def event_time(self) -> str:
        return self.event_time_column

    @property
    def system_columns(self) -> tuple[str, str, str]:
        """The columns the engine adds to every slice (the event time comes from the data)."""
        return (self.offset_column, self.operation_type_column, self.system_time_column)


@odf_type
@model
class RequestHeader(Model):
    name: str = req(W.STR)
    value: str = req(W.STR)


@odf_type
@model
class EnvVar(Model):
    name: str = req(W.STR)
    value: str | None = opt(W.STR)


# --- EventTimeSource -------------------------------------------------------------------------------------------


@odf_type
@model
class EventTimeSourceFromMetadata(Model):
    KIND = "FromMetadata"


@odf_type
@model
class EventTimeSourceFromPath(Model):
    KIND = "FromPath"
    pattern: str = req(W.STR)
    timestamp_format: str | None = opt(W.STR)


@odf_type
@model
class EventTimeSourceFromSystemTime(Model):
    KIND = "FromSystemTime"


EventTimeSource = EventTimeSourceFromMetadata | EventTimeSourceFromPath | EventTimeSourceFromSystemTime
odf_union("EventTimeSource", EventTimeSourceFromMetadata, EventTimeSourceFromPath, EventTimeSourceFromSystemTime)


@odf_type
@model
class SourceCachingForever(Model):
    KIND = "Forever"


SourceCaching = SourceCachingForever
odf_union("SourceCaching", SourceCachingForever)


# --- FetchStep -------------------------------------------------------------------------------------------------


@odf_type
@model
class FetchStepUrl(Model):
    KIND = "Url"
    url: str = req(W.STR)
    event_time: EventTimeSource | None = opt(W.UNION, "EventTimeSource")
    cache: SourceCaching | None = opt(W.UNION, "SourceCaching")
    headers: tuple[RequestHeader, ...] | None = lst(item(W.TABLE, "RequestHeader"))


@odf_type
@model
class FetchStepFilesGlob(Model):
    KIND = "FilesGlob"
    path: str = req(W.STR)
    event_time: EventTimeSource | None = opt(W.UNION, "EventTimeSource")
    cache: SourceCaching | None = opt(W.UNION, "SourceCaching")
    order: SourceOrdering | None = opt(W.ENUMN, SourceOrdering)


@odf_type
@model
class FetchStepContainer(Model):
    KIND = "Container"
    image: str = req(W.STR)
    command: tuple[str, ...] | None = lst(STR)
    args: tuple[str, ...] | None = lst(STR)
    env: tuple[EnvVar, ...] | None = lst(item(W.TABLE, "EnvVar"))


class MqttQos(OdfEnum):
    AT_MOST_ONCE = "AtMostOnce"
    AT_LEAST_ONCE = "AtLeastOnce"
    EXACTLY_ONCE = "ExactlyOnce"


@odf_type
@model
class MqttTopicSubscription(Model):
    path: str = req(W.STR)
    qos: MqttQos | None = opt(W.ENUMN, MqttQos)


@odf_type
@model
class FetchStepMqtt(Model):
    KIND = "Mqtt"
    host: str = req(W.STR)
    port: int = req(W.I32)
    username: str | None = opt(W.STR)
    password: str | None = opt(W.STR)
    topics: tuple[MqttTopicSubscription, ...] = lst(item(W.TABLE, "MqttTopicSubscription"), required=True)


@odf_type
@model
class FetchStepEthereumLogs(Model):
    KIND = "EthereumLogs"
    chain_id: int | None = opt(W.U64N)
    node_url: str | None = opt(W.STR)
    filter: str | None = opt(W.STR)
    signature: str | None = opt(W.STR)


FetchStep = FetchStepUrl | FetchStepFilesGlob | FetchStepContainer | FetchStepMqtt | FetchStepEthereumLogs
odf_union("FetchStep", FetchStepUrl, FetchStepFilesGlob, FetchStepContainer, FetchStepMqtt, FetchStepEthereumLogs)


# --- PrepStep --------------------------------------------------------------------------------------------------


@odf_type
@model
class PrepStepDecompress(Model):
    KIND = "Decompress"
    format: CompressionFormat = req(W.ENUM, CompressionFormat)
    sub_path: str | None = opt(W.STR)


@odf_type
@model
class PrepStepPipe(Model):
    KIND = "Pipe"
    command: tuple[str, ...] = lst(STR, required=True)


PrepStep = PrepStepDecompress | PrepStepPipe
odf_union("PrepStep", PrepStepDecompress, PrepStepPipe)


# --- ReadStep --------------------------------------------------------------------------------------------------


class _ReadStepSchemas:
    """``schema`` is v0.34.1's DDL list (``ddlSchema`` in the current YAML), ``data_schema`` the ODF ``DataSchema``
    added since (``schema`` in the current YAML): both YAML forms are read (see :mod:`.data_schema`)."""

    @classmethod
    def yaml_in(cls, data: dict) -> dict:
        return rename_legacy_schema(data, "ddlSchema")

    def yaml_out(self, data: dict) -> dict:
        return write_legacy_schema(data, "ddlSchema")


@odf_type
@model
class ReadStepCsv(_ReadStepSchemas, Model):
    KIND = "Csv"
    schema: tuple[str, ...] | None = lst(STR)
    separator: str | None = opt(W.STR)
    encoding: str | None = opt(W.STR)
    quote: str | None = opt(W.STR)
    escape: str | None = opt(W.STR)
    header: bool | None = opt(W.BOOLN)
    infer_schema: bool | None = opt(W.BOOLN)
    null_value: str | None = opt(W.STR)
    date_format: str | None = opt(W.STR)
    timestamp_format: str | None = opt(W.STR)
    data_schema: DataSchema | None = opt(W.TABLE, "DataSchema")


@odf_type
@model
class ReadStepGeoJson(_ReadStepSchemas, Model):
    KIND = "GeoJson"
    schema: tuple[str, ...] | None = lst(STR)
    data_schema: DataSchema | None = opt(W.TABLE, "DataSchema")


@odf_type
@model
class ReadStepEsriShapefile(_ReadStepSchemas, Model):
    KIND = "EsriShapefile"
    schema: tuple[str, ...] | None = lst(STR)
    sub_path: str | None = opt(W.STR)
    data_schema: DataSchema | None = opt(W.TABLE, "DataSchema")


@odf_type
@model
class ReadStepParquet(_ReadStepSchemas, Model):
    KIND = "Parquet"
    schema: tuple[str, ...] | None = lst(STR)
    data_schema: DataSchema | None = opt(W.TABLE, "DataSchema")


@odf_type
@model
class ReadStepJson(_ReadStepSchemas, Model):
    KIND = "Json"
    sub_path: str | None = opt(W.STR)
    schema: tuple[str, ...] | None = lst(STR)
    date_format: str | None = opt(W.STR)
    encoding: str | None = opt(W.STR)
    timestamp_format: str | None = opt(W.STR)
    data_schema: DataSchema | None = opt(W.TABLE, "DataSchema")


@odf_type
@model
class ReadStepNdJson(_ReadStepSchemas, Model):
    KIND = "NdJson"
    schema: tuple[str, ...] | None = lst(STR)
    date_format: str | None = opt(W.STR)
    encoding: str | None = opt(W.STR)
    timestamp_format: str | None = opt(W.STR)
    data_schema: DataSchema | None = opt(W.TABLE, "DataSchema")


@odf_type
@model
class ReadStepNdGeoJson(_ReadStepSchemas, Model):
    KIND = "NdGeoJson"
    schema: tuple[str, ...] | None = lst(STR)
    data_schema: DataSchema | None = opt(W.TABLE, "DataSchema")


ReadStep = (
    ReadStepCsv
    | ReadStepGeoJson
    | ReadStepEsriShapefile
    | ReadStepParquet
    | ReadStepJson
    | ReadStepNdJson
    | ReadStepNdGeoJson
)
odf_union(
    "ReadStep",
    ReadStepCsv,
    ReadStepGeoJson,
    ReadStepEsriShapefile,
    ReadStepParquet,
    ReadStepJson,
    ReadStepNdJson,
    ReadStepNdGeoJson,
)


# --- Transform -------------------------------------------------------------------------------------------------


@odf_type
@model
class SqlQueryStep(Model):
    alias: str | None = opt(W.STR)
    query: str = req(W.STR)


@odf_type
@model
class TemporalTable(Model):
    name: str = req(W.STR)
    primary_key: tuple[str, ...] = lst(STR, required=True)


@odf_type
@model
class TransformSql(Model):
    KIND = "Sql"
    engine: str = req(W.STR)
    version: str | None = opt(W.STR)
    query: str | None = opt(W.STR)
    queries: tuple[SqlQueryStep, ...] | None = lst(item(W.TABLE, "SqlQueryStep"))
    temporal_tables: tuple[TemporalTable, ...] | None = lst(item(W.TABLE, "TemporalTable"))

    def normalized(self) -> "TransformSql":
        """The form written into new blocks: ``query`` becomes ``queries: [{query}]`` (conformance §2)."""
        if self.query is None:
            return self
        if self.queries:
            return self
        return self.replace(query=None, queries=(SqlQueryStep(query=self.query),))

    def steps(self) -> tuple[SqlQueryStep, ...]:
        if self.queries:
            return self.queries
        return (SqlQueryStep(query=self.query),) if self.query is not None else ()


Transform = TransformSql
odf_union("Transform", TransformSql)


# --- MergeStrategy ---------------------------------------------------------------------------------------------


@odf_type
@model
class MergeStrategyAppend(Model):
    KIND = "Append"


@odf_type
@model
class MergeStrategyLedger(Model):
    KIND = "Ledger"
    primary_key: tuple[str, ...] = lst(STR, required=True)


@odf_type
@model
class MergeStrategySnapshot(Model):
    KIND = "Snapshot"
    primary_key: tuple[str, ...] = lst(STR, required=True)
    compare_columns: tuple[str, ...] | None = lst(STR)


@odf_type
@model
class MergeStrategyChangelogStream(Model):
    """Input already is an ODF changelog (an ``op`` column with appends, retractions, corrections)."""

    KIND = "ChangelogStream"
    primary_key: tuple[str, ...] = lst(STR, required=True)


@odf_type
@model
class MergeStrategyUpsertStream(Model):
    """Input is insert-or-update / delete events by primary key, re-classified against the dataset's state."""

    KIND = "UpsertStream"
    primary_key: tuple[str, ...] = lst(STR, required=True)


MergeStrategy = (
    MergeStrategyAppend
    | MergeStrategyLedger
    | MergeStrategySnapshot
    | MergeStrategyChangelogStream
    | MergeStrategyUpsertStream
)
odf_union(
    "MergeStrategy",
    MergeStrategyAppend,
    MergeStrategyLedger,
    MergeStrategySnapshot,
    MergeStrategyChangelogStream,
    MergeStrategyUpsertStream,
)


# --- Attachments -----------------------------------------------------------------------------------------------


@odf_type
@model
class AttachmentEmbedded(Model):
    path: str = req(W.STR)
    content: str = req(W.STR)


@odf_type
@model
class AttachmentsEmbedded(Model):
    KIND = "Embedded"
    items: tuple[AttachmentEmbedded, ...] = lst(item(W.TABLE, "AttachmentEmbedded"), required=True)


Attachments = AttachmentsEmbedded
odf_union("Attachments", AttachmentsEmbedded)


# --- Transform inputs ------------------------------------------------------------------------------------------


@odf_type
@model
class TransformInput(Model):
    dataset_ref: str = req(W.STR, fmt="dataset-ref")
    alias: str | None = opt(W.STR)


@odf_type
@model
class ExecuteTransformInput(Model):
    dataset_id: DatasetID = req(W.DATASET_ID)
    prev_block_hash: Multihash | None = opt(W.MULTIHASH)
    new_block_hash: Multihash | None = opt(W.MULTIHASH)
    prev_offset: int | None = opt(W.U64N)
    new_offset: int | None = opt(W.U64N)
