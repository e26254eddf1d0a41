"""``SetDataSchema`` with the ODF ``DataSchema`` (spec after v0.34.1): its Arrow form for the engine and the chain,
the chain reading a block the current reference writes, and new datasets written as version 3 on request."""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from odf_core.chain.integrity import verify_integrity
from odf_core.errors import MetadataError, OdfError
from odf_core.metadata import MetadataBlock, decode_block, encode_block
from odf_core.metadata import data_schema as ds
from odf_core.metadata.arrow_schema import decode_arrow_schema
from odf_core.metadata.data_schema import DataField, DataSchema, ExtraAttributes, TimeUnit
from odf_core.metadata.data_schema_arrow import (
    arrow_schema_bytes,
    arrow_to_data_schema,
    data_schema_to_arrow,
    with_data_schema,
)
from odf_core.metadata.events import AddData, SetDataSchema
from odf_core.metadata.manifests import BLOCK_VERSION_ENV
from odf_core.storage import DatasetLayout

from ..repository.datasets import grow, workspace_with_root
from .test_reference_current import REFERENCE_DATA_SCHEMA

UTC_MS = pa.timestamp("ms", tz="UTC")


def test_the_reference_schema_in_arrow():
    assert data_schema_to_arrow(REFERENCE_DATA_SCHEMA) == pa.schema([
        pa.field("city", pa.string(), False),  # a view encoding reads as the contiguous type (Spark has no views)
        pa.field("population", pa.uint64(), False),
        pa.field("census", pa.string(), True),  # Option
        pa.field("links", pa.list_(pa.field("item", pa.string(), False)), False),
    ])


@pytest.mark.parametrize("odf,arrow", [
    (ds.DataTypeTimestamp(), UTC_MS),  # the reference's defaults: milliseconds, UTC
    (ds.DataTypeTimestamp(unit=TimeUnit.MICROSECOND, timezone="+07:30"), pa.timestamp("us", tz="+07:30")),
    (ds.DataTypeTime(), pa.time32("ms")),
    (ds.DataTypeTime(unit=TimeUnit.NANOSECOND), pa.time64("ns")),
    (ds.DataTypeDuration(), pa.duration("ms")),
    (ds.DataTypeDate(), pa.date32()),
    (ds.DataTypeDecimal(precision=38, scale=2), pa.decimal128(38, 2)),
    (ds.DataTypeDecimal(precision=39, scale=-2), pa.decimal256(39, -2)),
    (ds.DataTypeBinary(fixed_length=16), pa.binary(16)),
    (ds.DataTypeList(item_type=ds.DataTypeInt8(), fixed_length=3), pa.list_(pa.field("item", pa.int8(), False), 3)),
    (ds.DataTypeMap(key_type=ds.DataTypeString(), value_type=ds.DataTypeOption(inner=ds.DataTypeInt64())),
     pa.map_(pa.field("keys", pa.string(), False), pa.field("values", pa.int64(), True))),
    (ds.DataTypeStruct(fields=(DataField(name="x", type=ds.DataTypeFloat32()),)),
     pa.struct([pa.field("x", pa.float32(), False)])),
])
def test_logical_types(odf, arrow):
    assert data_schema_to_arrow(DataSchema(fields=(DataField(name="c", type=odf),))).field("c").type == arrow


@pytest.mark.parametrize("encoding,odf,arrow", [
    ({"arrow.apache.org/bufferEncoding": {"kind": "Contiguous", "offsetBitWidth": 64}}, ds.DataTypeString(),
     pa.large_string()),
    ({"arrow.apache.org/bufferEncoding": {"kind": "Contiguous", "offsetBitWidth": 64}}, ds.DataTypeBinary(),
     pa.large_binary()),
    ({"arrow.apache.org/dateEncoding": {"unit": "Millisecond"}}, ds.DataTypeDate(), pa.date64()),
    ({"arrow.apache.org/decimalEncoding": {"bitWidth": 64}}, ds.DataTypeDecimal(precision=10, scale=0),
     pa.decimal64(10, 0)),
])
def test_arrow_encodings_choose_the_physical_type(encoding, odf, arrow):
    field = DataField(name="c", type=odf, extra=ExtraAttributes.of(encoding))
    assert data_schema_to_arrow(DataSchema(fields=(field,))).field("c").type == arrow


def test_engine_schemas_round_trip_through_data_schema():
    engine = pa.schema([
        pa.field("offset", pa.int64(), False), pa.field("op", pa.int32(), False),
        pa.field("system_time", UTC_MS, False),
        pa.field("event_time", pa.timestamp("us", tz="UTC")), pa.field("name", pa.string()),
        pa.field("amount", pa.decimal128(18, 4)), pa.field("tags", pa.list_(pa.string())),
        pa.field("attrs", pa.map_(pa.string(), pa.float64())), pa.field("pos", pa.struct([("x", pa.float64())])),
        pa.field("day", pa.date32()), pa.field("raw", pa.binary()),
    ])
    assert data_schema_to_arrow(arrow_to_data_schema(engine)).equals(engine)


@pytest.mark.parametrize("schema,problem", [
    (DataSchema(fields=(DataField(name="c",
                                  type=ds.DataTypeOption(inner=ds.DataTypeOption(inner=ds.DataTypeInt8()))),)),
     "c: nested Option types are not supported"),
    (DataSchema(fields=(DataField(name="c", type=ds.DataTypeDecimal(precision=80, scale=0)),)),
     "c: decimal precision 80 is over Arrow's maximum of 76"),
])
def test_unsupported_schemas_are_one_line_errors(schema, problem):
    with pytest.raises(MetadataError, match=problem):
        data_schema_to_arrow(schema)


def test_arrow_schema_bytes_prefers_the_raw_schema_verbatim():
    raw = b"\x10\x00\x00\x00verbatim"
    assert arrow_schema_bytes(SetDataSchema(schema=raw, data_schema=REFERENCE_DATA_SCHEMA)) == raw
    mapped = arrow_schema_bytes(SetDataSchema(data_schema=REFERENCE_DATA_SCHEMA))
    assert decode_arrow_schema(mapped) == data_schema_to_arrow(REFERENCE_DATA_SCHEMA)
    assert arrow_schema_bytes(SetDataSchema()) is None
    both = with_data_schema(SetDataSchema(schema=mapped))
    assert both.schema == mapped and data_schema_to_arrow(both.data_schema) == decode_arrow_schema(mapped)


def _slice_schema() -> pa.Schema:
    from ..chain.builders import slice_table

    return slice_table(0, 1).schema


def test_a_chain_with_a_reference_data_schema_block_ingests_further(tmp_path: Path):
    # The current reference writes SetDataSchema with only a DataSchema, in a version 3 block.
    ws, h = workspace_with_root(str(tmp_path / "ws"), tmp_path, slices=0)
    st = h.chain.state()
    event = SetDataSchema(data_schema=arrow_to_data_schema(_slice_schema()))
    raw = encode_block(MetadataBlock(system_time=st.system_time, prev_block_hash=st.head,
                                     sequence_number=st.sequence_number + 1, event=event, manifest_version=3))
    h.chain.append_bytes(raw)
    assert decode_arrow_schema(h.chain.state().schema) == _slice_schema()
    grow(h, tmp_path, 2)  # the data matches the schema the DataSchema gives: no new SetDataSchema
    events = [type(b.event).__name__ for _, b in h.chain.iter_blocks()]
    assert events.count("SetDataSchema") == 1 and events.count("AddData") == 2
    assert verify_integrity(h.store).ok


def test_a_chain_refuses_a_set_data_schema_without_a_schema(tmp_path: Path):
    ws, h = workspace_with_root(str(tmp_path / "ws"), tmp_path, slices=0)
    st = h.chain.state()
    raw = encode_block(MetadataBlock(system_time=st.system_time, prev_block_hash=st.head,
                                     sequence_number=st.sequence_number + 1, event=SetDataSchema()))
    with pytest.raises(OdfError, match="SetDataSchema carries no schema"):
        h.chain.append_bytes(raw)
    assert h.chain.head() == st.head


def _versions(h) -> list[int]:
    return [decode_block(h.store.get(DatasetLayout.block_key(bh))).manifest_version for bh, _ in h.chain.iter_blocks()]


def test_new_datasets_are_version_2_with_the_raw_schema_by_default(tmp_path: Path, monkeypatch):
    monkeypatch.delenv(BLOCK_VERSION_ENV, raising=False)
    _, h = workspace_with_root(str(tmp_path / "ws"), tmp_path, slices=1)
    assert set(_versions(h)) == {2}
    sds = [b.event for _, b in h.chain.iter_blocks() if isinstance(b.event, SetDataSchema)]
    assert len(sds) == 1 and sds[0].schema is not None and sds[0].data_schema is None


def test_odf_block_version_3_writes_as_the_current_reference(tmp_path: Path, monkeypatch):
    monkeypatch.setenv(BLOCK_VERSION_ENV, "3")
    _, h = workspace_with_root(str(tmp_path / "ws"), tmp_path, slices=2)
    assert set(_versions(h)) == {3}
    sds = [b.event for _, b in h.chain.iter_blocks() if isinstance(b.event, SetDataSchema)]
    assert len(sds) == 1 and sds[0].schema is not None  # the raw schema stays, for readers of v0.34.1
    assert data_schema_to_arrow(sds[0].data_schema) == decode_arrow_schema(sds[0].schema)
    assert all(isinstance(b.event, AddData) for _, b in list(h.chain.iter_blocks())[:2])
    assert verify_integrity(h.store).ok
    monkeypatch.setenv(BLOCK_VERSION_ENV, "4")
    with pytest.raises(OdfError, match="ODF_BLOCK_VERSION='4': expected one of 2, 3"):
        grow(h, tmp_path, 1, tag="b")
    assert set(_versions(h)) == {3}  # the setting is for writing: blocks still read, each in its own version
