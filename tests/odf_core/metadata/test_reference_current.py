"""Byte-compatibility with the current reference implementation (kamu-cli 0.265.0, ODF spec after v0.34.1).

The vectors are the reference's own FlatBuffers serde tests (``src/odf/metadata/tests/tests/test_serde_flatbuffers.rs``:
``get_test_events`` / ``test_serializer_stability`` and ``serde_set_data_schema*``; ``test_serde_yaml.rs`` for the YAML
text), re-expressed in our model. The reference writes manifest version 3 (the ``Timestamp`` struct aligned to 4);
version 2 vectors (v0.34.1) are in test_flatbuffers.py and tests/conformance/.
"""
from __future__ import annotations

import base64
import hashlib
import textwrap

import flatbuffers
import pytest

from odf_core.cli import main
from odf_core.errors import DecodeError
from odf_core.identity import DatasetID, Multihash
from odf_core.identity.multihash import ODF_METADATA_BLOCK
from odf_core.metadata import MetadataBlock, Timestamp, block_hash, decode_block, encode_block
from odf_core.metadata.data_schema import (
    DataField,
    DataSchema,
    DataTypeInt32,
    DataTypeList,
    DataTypeOption,
    DataTypeString,
    DataTypeUInt64,
    ExtraAttributes,
)
from odf_core.metadata.events import AddData, ExecuteTransform, SetDataSchema, SetPollingSource, SetTransform
from odf_core.metadata.flatbuffers_serde import encode_root, unwrap_manifest_versioned, wrap_manifest
from odf_core.metadata.fragments import (
    CompressionFormat,
    DataSlice,
    EventTimeSourceFromMetadata,
    ExecuteTransformInput,
    FetchStepFilesGlob,
    MergeStrategyLedger,
    OffsetInterval,
    PrepStepDecompress,
    ReadStepGeoJson,
    SourceCachingForever,
    SourceOrdering,
    SourceState,
    TransformInput,
    TransformSql,
)
from odf_core.metadata.yaml_serde import dump_manifest, load_manifest

H = Multihash.sha3_256
NOON = Timestamp.parse("2020-01-01T12:00:00Z")


def seeded_dataset_id(seed: bytes) -> DatasetID:
    """The reference's ``DatasetID::new_seeded_ed25519`` (a test helper): the key is 32 bytes of rand's ``SmallRng``
    (xoshiro256++) seeded with ``seed`` zero-padded to 32 bytes."""
    mask = (1 << 64) - 1

    def rotl(x: int, k: int) -> int:
        return ((x << k) | (x >> (64 - k))) & mask

    s = [int.from_bytes(seed.ljust(32, b"\0")[i:i + 8], "little") for i in range(0, 32, 8)]
    key = b""
    for _ in range(4):
        key += ((rotl((s[0] + s[3]) & mask, 23) + s[0]) & mask).to_bytes(8, "little")
        t = (s[1] << 17) & mask
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = rotl(s[3], 45)
    return DatasetID(key)


def _slice(start: int = 10, end: int = 99, size: int = 100, logical=b"logical", physical=b"physical") -> DataSlice:
    return DataSlice(logical_hash=H(logical), physical_hash=H(physical),
                     offset_interval=OffsetInterval(start=start, end=end), size=size)


def _polling_source(read: ReadStepGeoJson) -> SetPollingSource:
    return SetPollingSource(
        fetch=FetchStepFilesGlob(path="./*.csv", event_time=EventTimeSourceFromMetadata(),
                                 cache=SourceCachingForever(), order=SourceOrdering.BY_NAME),
        prepare=(PrepStepDecompress(format=CompressionFormat.GZIP),),
        read=read,
        preprocess=TransformSql(engine="spark", version="1.0.0", query="SELECT * FROM input"),
        merge=MergeStrategyLedger(primary_key=("a",)),
    )


_STATE = SourceState(source_name="push-source-1", kind="kamu/kafka-offset", value="SOME_OFFSET")

# get_test_events(), in order, with the hashes of test_serializer_stability (manifest version 3)
TEST_EVENTS = [
    (AddData(), "a93874702479f83ddff1e7a660ca78085def333c86501b0d895fa3aec79c7189"),
    (AddData(prev_checkpoint=H(b"prev"), prev_offset=9),
     "86aeb7dee0502b4886761de5e45b5111c0bc9e0fbfee02e3685487109305ef56"),
    (AddData(prev_checkpoint=H(b"prev"), prev_offset=9, new_watermark=NOON),
     "d1b412dab2a6af53f3e1b183834557bbf1c4689e2fc9b92fc0d04741ef607ecc"),
    (AddData(prev_checkpoint=H(b"prev"), prev_offset=9, new_data=_slice(), new_watermark=NOON),
     "1fcf10cb843746c4c44e6c288e216995701aa073426fc4bebe14f1680f8ec6d1"),
    (_polling_source(ReadStepGeoJson(schema=("a: INT", "b: INT"))),
     "eb61498b7362d334131a8486a5ce4cc2638d7c1aa3e4da82a19cf834a77df718"),
    (_polling_source(ReadStepGeoJson(data_schema=DataSchema(fields=(
        DataField(name="a", type=DataTypeInt32()), DataField(name="b", type=DataTypeInt32()))))),
     "f96c90e9e9700819ba05d87f66b200a18a08404706ac62cde6d68bc350e73861"),
    (AddData(prev_checkpoint=H(b"checkpoint"), prev_offset=9, new_data=_slice(), new_source_state=_STATE),
     "9326dc5daab04877a9f006ff6b1636a8fa9dcec9615b54f741a1a90091eaf694"),
    (AddData(prev_checkpoint=H(b"checkpoint"), prev_offset=9, new_data=_slice(), new_source_state=_STATE,
             extra=ExtraAttributes.of({"opendatafabric.org/linkedObjects": {"numObjectsNaive": 10, "sizeNaive": 100}})),
     "54f64c642cca6f67416ebe2b29e5d9414ece91f819efe97cd437fbe542c61bbb"),
    (SetTransform(
        inputs=(TransformInput(dataset_ref=str(seeded_dataset_id(b"input1")), alias="input1"),
                TransformInput(dataset_ref="input2", alias="input2")),
        transform=TransformSql(engine="spark", query="SELECT * FROM input1 UNION ALL SELECT * FROM input2")),
     "bb6aa1f9689b794c75affa709ae2477b209411d9ad092c2318ecd9ea94121bcc"),
    (ExecuteTransform(
        query_inputs=(
            ExecuteTransformInput(dataset_id=seeded_dataset_id(b"input1"), prev_block_hash=H(b"a"),
                                  new_block_hash=H(b"b"), prev_offset=9, new_offset=20),
            ExecuteTransformInput(dataset_id=seeded_dataset_id(b"input2"), prev_block_hash=H(b"a"),
                                  new_block_hash=H(b"b"))),
        prev_checkpoint=H(b"checkpoint"), prev_offset=9, new_data=_slice(10, 19, 10, b"foo", b"bar"),
        new_watermark=NOON),
     "21cab7396525e614beeafe21c05a38bf597a39a191cc14147b9c5ec32210cf82"),
]


def _block(event, sequence_number: int = 117, version: int = 3) -> MetadataBlock:
    return MetadataBlock(system_time=NOON, prev_block_hash=H(b"prev"), sequence_number=sequence_number, event=event,
                         manifest_version=version)


@pytest.mark.parametrize("event,expected", TEST_EVENTS, ids=[f"case{i}" for i in range(len(TEST_EVENTS))])
def test_serializer_stability_version_3(event, expected):
    raw = encode_block(_block(event))
    assert hashlib.sha3_256(raw).hexdigest() == expected
    decoded = decode_block(raw)
    assert decoded == _block(event) and decoded.manifest_version == 3
    assert encode_block(decoded) == raw  # a decoded v3 block writes back as v3


@pytest.mark.parametrize("event,expected", TEST_EVENTS[:4], ids=[f"case{i}" for i in range(4)])
def test_version_2_of_the_same_block_is_another_layout_that_reads_alike(event, expected):
    v2 = encode_block(_block(event, version=2))
    assert hashlib.sha3_256(v2).hexdigest() != expected
    assert decode_block(v2) == decode_block(encode_block(_block(event)))
    assert decode_block(v2).manifest_version == 2


def test_version_3_aligns_the_timestamp_struct():
    def system_time_position(raw: bytes) -> int:
        """Where the block's system_time struct starts in the block's own buffer (the manifest content)."""
        _, content = unwrap_manifest_versioned(raw, ODF_METADATA_BLOCK, (2, 3), "block")
        root = int.from_bytes(content[:4], "little")
        vtable = root - int.from_bytes(content[root:root + 4], "little", signed=True)
        return root + int.from_bytes(content[vtable + 4:vtable + 6], "little")

    v3 = [system_time_position(encode_block(_block(e, version=3))) % 4 for e, _ in TEST_EVENTS]
    v2 = [system_time_position(encode_block(_block(e, version=2))) % 4 for e, _ in TEST_EVENTS]
    assert set(v3) == {0}
    assert set(v2) != {0}  # the old layout is unaligned for some of these blocks


REFERENCE_DATA_SCHEMA = DataSchema(
    fields=(
        DataField(name="city", type=DataTypeString(),
                  extra=ExtraAttributes.of(
                      {"arrow.apache.org/bufferEncoding": {"kind": "View", "offsetBitWidth": 32}})),
        DataField(name="population", type=DataTypeUInt64()),
        DataField(name="census", type=DataTypeOption(inner=DataTypeString()),
                  extra=ExtraAttributes.of(
                      {"opendatafabric.org/type": {"kind": "ObjectLink", "linkType": {"kind": "Multihash"}}})),
        DataField(name="links", type=DataTypeList(item_type=DataTypeString())),
    ),
    extra=ExtraAttributes.of({"kamu.dev/archetype": "Collection"}),
)

# test_serde_yaml.rs: serde_set_data_schema (sequence number 123)
REFERENCE_DATA_SCHEMA_YAML = textwrap.dedent("""\
    kind: MetadataBlock
    version: 3
    content:
      systemTime: 2020-01-01T12:00:00Z
      prevBlockHash: f16209eb949bd8ff0bb1d827f11809aebc6bd0d5955c7f368469a913c70d196620272
      sequenceNumber: 123
      event:
        kind: SetDataSchema
        schema:
          fields:
          - name: city
            type:
              kind: String
            extra:
              arrow.apache.org/bufferEncoding:
                kind: View
                offsetBitWidth: 32
          - name: population
            type:
              kind: UInt64
          - name: census
            type:
              kind: Option
              inner:
                kind: String
            extra:
              opendatafabric.org/type:
                kind: ObjectLink
                linkType:
                  kind: Multihash
          - name: links
            type:
              kind: List
              itemType:
                kind: String
          extra:
            kamu.dev/archetype: Collection
    """)

# test_serde_yaml.rs: serde_set_data_schema_legacy (Arrow schema a: Int64, b: Boolean, both non-nullable)
REFERENCE_RAW_ARROW_B64 = (
    "DAAAAAgACAAAAAQACAAAAAQAAAACAAAAQAAAAAQAAADY////GAAAAAwAAAAAAAAGEAAAAAAAAAAEAAQABAAAAAEAAABiAAAAEAAUABAAAAAPAAQAAA"
    "AIABAAAAAYAAAAIAAAAAAAAAIcAAAACAAMAAQACwAIAAAAQAAAAAAAAAEAAAAAAQAAAGEAAAA="
)


def test_set_data_schema_with_data_schema():
    raw = encode_block(_block(SetDataSchema(data_schema=REFERENCE_DATA_SCHEMA)))
    assert hashlib.sha3_256(raw).hexdigest() == "80865248519d55fa04598e24ba42884728efe70956e640dca4df5ec8043c69ca"
    assert decode_block(raw).event.data_schema == REFERENCE_DATA_SCHEMA
    assert decode_block(raw).event.schema is None


def test_set_data_schema_legacy_raw_arrow():
    event = SetDataSchema(schema=base64.b64decode(REFERENCE_RAW_ARROW_B64))
    raw = encode_block(_block(event))
    assert hashlib.sha3_256(raw).hexdigest() == "a7e79d088ca7bac689f12d71ae64b93e7bab62a7db2fec83ea89e9bf90dd89ed"


def test_set_data_schema_yaml_is_the_reference_text():
    block = _block(SetDataSchema(data_schema=REFERENCE_DATA_SCHEMA), sequence_number=123)
    assert dump_manifest(block) == REFERENCE_DATA_SCHEMA_YAML
    read = load_manifest(REFERENCE_DATA_SCHEMA_YAML)
    assert read == block and read.manifest_version == 3


def test_set_data_schema_legacy_yaml_reads_both_names():
    legacy = base64.b64decode(REFERENCE_RAW_ARROW_B64)
    head = "kind: MetadataBlock\nversion: 3\ncontent:\n  systemTime: 2020-01-01T12:00:00Z\n  sequenceNumber: 1\n"
    current = load_manifest(
        head + f"  event:\n    kind: SetDataSchema\n    rawArrowSchema: {REFERENCE_RAW_ARROW_B64}\n")
    v0341 = load_manifest(head + f"  event:\n    kind: SetDataSchema\n    schema: {REFERENCE_RAW_ARROW_B64}\n")
    assert current.event == v0341.event == SetDataSchema(schema=legacy)
    # alone, the raw schema keeps its v0.34.1 name; next to a DataSchema it takes the current one
    assert "    schema: DAAA" in dump_manifest(current)
    both = current.replace(event=SetDataSchema(schema=legacy, data_schema=REFERENCE_DATA_SCHEMA))
    text = dump_manifest(both)
    assert "    rawArrowSchema: DAAA" in text and "    schema:\n      fields:" in text
    assert load_manifest(text) == both


def test_read_step_yaml_reads_ddl_schema_and_data_schema():
    head = ("kind: DatasetSnapshot\nversion: 1\ncontent:\n  name: a\n  kind: Root\n  metadata:\n"
            "  - kind: AddPushSource\n")
    tail = "    merge:\n      kind: ChangelogStream\n      primaryKey: [id]\n"
    current = load_manifest(head + "    sourceName: s\n    read:\n      kind: NdJson\n      ddlSchema: ['id INT']\n"
                            "      schema:\n        fields:\n        - name: id\n          type: Int32\n" + tail)
    read = current.metadata[0].read
    assert read.schema == ("id INT",)
    assert read.data_schema == DataSchema(fields=(DataField(name="id", type=DataTypeInt32()),))  # short-form union
    text = dump_manifest(current)
    assert "ddlSchema:" in text and load_manifest(text) == current
    v0341 = load_manifest(head + "    sourceName: s\n    read:\n      kind: NdJson\n      schema: ['id INT']\n" + tail)
    assert v0341.metadata[0].read.schema == ("id INT",) and v0341.metadata[0].read.data_schema is None
    assert "ddlSchema" not in dump_manifest(v0341)


def test_unknown_trailing_field_reads_and_hashes_the_bytes_as_received():
    # A future writer adds field slot 7 to AddData: we read what we know and the hash stays that of the bytes.
    b = flatbuffers.Builder(256)
    b.StartObject(8)
    b.PrependUint64Slot(1, 41, None)  # prev_offset
    b.PrependUint64Slot(7, 12345, 0)  # unknown
    add_data = b.EndObject()
    b.StartObject(5)
    b.Prep(4, 16)
    for value, flags in ((0, "Uint32"), (43200, "Uint32"), (0, "Uint16"), (1, "Uint16"), (2020, "Int32")):
        b.Place(value, getattr(flatbuffers.number_types, flags + "Flags"))
    b.Slot(0)
    b.PrependUint64Slot(2, 5, 0)
    b.PrependUint8Slot(3, 1, 0)
    b.PrependUOffsetTRelativeSlot(4, add_data, 0)
    b.Finish(b.EndObject())
    raw = wrap_manifest(ODF_METADATA_BLOCK, 3, bytes(b.Output()))
    block = decode_block(raw)
    assert block.event == AddData(prev_offset=41) and block.sequence_number == 5 and block.system_time == NOON
    assert block_hash(raw) == Multihash.sha3_256(raw)
    assert encode_block(block) != raw  # our encoding would drop the field: that is why blocks keep their bytes


def test_unsupported_versions_are_refused():
    content = encode_root(_block(TEST_EVENTS[0][0]))
    for version in (1, 4):
        with pytest.raises(DecodeError, match=f"unsupported manifest version {version}, expected 2 or 3"):
            decode_block(wrap_manifest(ODF_METADATA_BLOCK, version, content))


def test_cli_block_hash_and_encode_use_the_yaml_version(tmp_path, capsys):
    for version in (2, 3):
        f = tmp_path / f"v{version}.yaml"
        f.write_text(dump_manifest(_block(TEST_EVENTS[3][0], version=version)))
        assert main(["block", "hash", str(f)]) == 0
        printed = capsys.readouterr().out.strip()
        assert main(["block", "encode", str(f), "-o", str(tmp_path / f"v{version}.bin")]) == 0
        raw = (tmp_path / f"v{version}.bin").read_bytes()
        assert printed == str(Multihash.sha3_256(raw))
        assert (hashlib.sha3_256(raw).hexdigest() == TEST_EVENTS[3][1]) == (version == 3)
        capsys.readouterr()
        assert main(["block", "decode", str(tmp_path / f"v{version}.bin")]) == 0
        assert f"version: {version}\n" in capsys.readouterr().out
