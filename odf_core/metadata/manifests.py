"""Root-level resources: metadata blocks and dataset snapshots."""
from __future__ import annotations

from odf_core.identity import Multihash
from odf_core.metadata.events import MetadataEvent
from odf_core.metadata.fragments import DatasetKind
from odf_core.metadata.schema import W, Model, item, lst, model, odf_type, opt, req
from odf_core.metadata.timestamp import Timestamp

BLOCK_MANIFEST_VERSION = 2
SNAPSHOT_MANIFEST_VERSION = 1


@odf_type
@model
class MetadataBlock(Model):
    system_time: Timestamp = req(W.TIMESTAMP)
    prev_block_hash: Multihash | None = opt(W.MULTIHASH)
    sequence_number: int = req(W.U64)
    event: MetadataEvent = req(W.UNION, "MetadataEvent")


@odf_type
@model
class DatasetSnapshot(Model):
    name: str = req(W.STR, fmt="dataset-alias")
    kind: DatasetKind = req(W.ENUM, DatasetKind)
    metadata: tuple[MetadataEvent, ...] = lst(item(W.UNION, "MetadataEvent"), required=True)


MANIFEST_VERSIONS = {"MetadataBlock": BLOCK_MANIFEST_VERSION, "DatasetSnapshot": SNAPSHOT_MANIFEST_VERSION}
