"""Blocks as other writers produce them, built byte by byte: what our encoder would not write, but must carry."""
from __future__ import annotations

import flatbuffers
from flatbuffers import number_types as N

from odf_core.identity import Multihash
from odf_core.identity.multihash import ODF_METADATA_BLOCK
from odf_core.metadata import Timestamp
from odf_core.metadata.flatbuffers_serde import wrap_manifest
from odf_core.metadata.schema import union
from odf_core.metadata.events import SetInfo


def set_info_with_unknown_field(system_time: Timestamp, prev: Multihash | None, sequence_number: int,
                                description: str, version: int = 3) -> bytes:
    """A SetInfo block whose event has a field (slot 5, a u64) a future spec added: our reader skips it, our encoder
    would drop it, so only the bytes as received hash to the block's name."""
    b = flatbuffers.Builder(256)
    text = b.CreateString(description)
    b.StartObject(6)
    b.PrependUOffsetTRelativeSlot(0, text, 0)
    b.PrependUint64Slot(5, 0xDEADBEEF, 0)
    event = b.EndObject()
    prev_off = b.CreateByteVector(prev.to_bytes()) if prev is not None else None
    year, ordinal, secs, nanos = system_time.parts()
    b.StartObject(5)
    b.Prep(4 if version >= 3 else 1, 16)
    b.Place(nanos, N.Uint32Flags)
    b.Place(secs, N.Uint32Flags)
    b.Pad(2)
    b.Place(ordinal, N.Uint16Flags)
    b.Place(year, N.Int32Flags)
    b.Slot(0)
    if prev_off is not None:
        b.PrependUOffsetTRelativeSlot(1, prev_off, 0)
    b.PrependUint64Slot(2, sequence_number, 0)
    b.PrependUint8Slot(3, union("MetadataEvent").variants.index(SetInfo) + 1, 0)
    b.PrependUOffsetTRelativeSlot(4, event, 0)
    b.Finish(b.EndObject())
    return wrap_manifest(ODF_METADATA_BLOCK, version, bytes(b.Output()))
