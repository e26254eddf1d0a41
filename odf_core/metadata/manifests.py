"""Root-level resources: metadata blocks and dataset snapshots."""
from __future__ import annotations

import os
from dataclasses import field

from odf_core.errors import OdfError
from odf_core.identity import Multihash
from odf_core.metadata.events import MetadataEvent
from odf_core.metadata.fragments import DatasetKind
from odf_core.metadata.schema import W, Model, item, lst, model, odf_type, opt, req
from odf_core.metadata.timestamp import Timestamp

BLOCK_MANIFEST_VERSION = 2
"""The version new blocks are written in unless asked otherwise: v0.34.1 readers (and kamu-cli before 0.265.0) read
only this one."""
BLOCK_VERSION_ALIGNED = 3
"""Since kamu-cli 0.265.0: the ``Timestamp`` struct is aligned (same content, different bytes and hash)."""
BLOCK_MANIFEST_VERSIONS = (2, 3)
"""The versions read (and writable on request)."""
BLOCK_VERSION_ENV = "ODF_BLOCK_VERSION"
"""Opt-in to writing new blocks as the current reference does (``3``); unset or ``2``: v0.34.1's version."""


class BlockVersionSettingError(OdfError):
    pass


def new_block_version() -> int:
    """The manifest version new blocks are written in: ``ODF_BLOCK_VERSION`` (2 or 3), default 2."""
    text = os.environ.get(BLOCK_VERSION_ENV, "").strip()
    if not text:
        return BLOCK_MANIFEST_VERSION
    if text not in {str(v) for v in BLOCK_MANIFEST_VERSIONS}:
        raise BlockVersionSettingError(f"{BLOCK_VERSION_ENV}={text!r}: expected one of "
                                       f"{', '.join(map(str, BLOCK_MANIFEST_VERSIONS))}")
    return int(text)
SNAPSHOT_MANIFEST_VERSION = 1


@odf_type
@model
class MetadataBlock(Model):
    system_time: Timestamp = req(W.TIMESTAMP)
    prev_block_hash: Multihash | None = opt(W.MULTIHASH)
    sequence_number: int = req(W.U64)
    event: MetadataEvent = req(W.UNION, "MetadataEvent")
    manifest_version: int = field(default_factory=new_block_version, compare=False)
    """Not a field of the block: the manifest version it was read in or is to be written in (its binary layout);
    new blocks take :func:`new_block_version`."""


@odf_type
@model
class DatasetSnapshot(Model):
    name: str = req(W.STR, fmt="dataset-alias")
    kind: DatasetKind = req(W.ENUM, DatasetKind)
    metadata: tuple[MetadataEvent, ...] = lst(item(W.UNION, "MetadataEvent"), required=True)


MANIFEST_VERSIONS = {"MetadataBlock": BLOCK_MANIFEST_VERSION, "DatasetSnapshot": SNAPSHOT_MANIFEST_VERSION}
