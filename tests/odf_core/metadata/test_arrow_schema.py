"""Arrow schemas as bare Schema FlatBuffers (SetDataSchema.schema) and the schema evolution rule."""
from __future__ import annotations

import base64
import os
import struct

import flatbuffers
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from odf_core.errors import ChainError, DecodeError, MetadataError, SchemaEvolutionError
from odf_core.metadata.arrow_schema import check_schema_evolution, decode_arrow_schema, encode_arrow_schema

# kamu-cli's test `serde_set_data_schema` (src/odf/metadata tests): arrow-rs bytes of SetDataSchema.schema for
# Schema[a: Int64 not null, b: Boolean not null], as printed in its expected YAML.
ARROW_RS_A_B = base64.b64decode(
    "DAAAAAgACAAAAAQACAAAAAQAAAACAAAAQAAAAAQAAADY////GAAAAAwAAAAAAAAGEAAAAAAAAAAEAAQABAAAAAEAAABiAAAAEAAUABAAAAAP"
    "AAQAAAAIABAAAAAYAAAAIAAAAAAAAAIcAAAACAAMAAQACwAIAAAAQAAAAAAAAAEAAAAAAQAAAGEAAAA="
)
# IPC Message flatbuffers that arrow-rs wrote for Schema[<empty name>: Utf8] and Schema[<empty name>: Int32] (taken
# from the schema message of Rust-written Arrow files pinned in LanceDB's tests). The Schema table is built first
# into the message's builder, so its bytes are the message's tail, up to the IPC padding.
ARROW_RS_MESSAGE_UTF8 = bytes.fromhex(
    "1000000000000a000c000a00090004000a00000010000000000104000800080000000400080000000400000001000000140000001000"
    "140010000e000f0004000000080010000000180000000c0000000000010510000000000000000400040004000000000000000000000000"
    "0000000000000000000000"
)
ARROW_RS_MESSAGE_INT32 = bytes.fromhex(
    "1000000000000a000c000a00090004000a00000010000000000104000800080000000400080000000400000001000000140000001000"
    "140010000e000f00040000000800100000001800000020000000000001021c00000008000c0004000b00080000002000000000000001"
    "000000000000000000000000"
)


# ---------------------------------------------------------------------------------------------------------------------
# Helpers: a minimal reader of our own, independent of the code under test, to look inside the bytes.


def _table(buf: bytes, pos: int) -> tuple[int, list[int]]:
    vtable = pos - struct.unpack_from("<i", buf, pos)[0]
    size = struct.unpack_from("<H", buf, vtable)[0]
    return pos, list(struct.unpack_from(f"<{size // 2}H", buf, vtable))


def _ref(buf: bytes, pos: int) -> int:
    return pos + struct.unpack_from("<I", buf, pos)[0]


def _first_field_type_vtable(buf: bytes) -> list[int]:
    """The vtable ([size, table size, field offsets...]) of fields[0]'s type table."""
    schema, vt = _table(buf, _ref(buf, 0))
    fields = _ref(buf, schema + vt[3])
    field, fvt = _table(buf, _ref(buf, fields + 4))
    return _table(buf, _ref(buf, field + fvt[5]))[1]


def _rerooted_pyarrow_schema(schema: pa.Schema) -> bytes:
    """pyarrow's own IPC message for ``schema``, turned into a bare Schema FlatBuffer by pointing the root at the
    message's header table (the Message table stays in the bytes, unreferenced)."""
    framed = schema.serialize().to_pybytes()
    assert framed[:4] == b"\xff\xff\xff\xff"
    msg = bytearray(framed[8:])
    message, vt = _table(msg, _ref(msg, 0))
    assert msg[message + vt[3]] == 1  # header_type == Schema
    header = _ref(msg, message + vt[4])
    struct.pack_into("<I", msg, 0, header)
    return bytes(msg)


def _children(t: pa.DataType) -> list[pa.Field]:
    if isinstance(t, pa.BaseExtensionType):
        t = t.storage_type
    if pa.types.is_dictionary(t):
        t = t.value_type
    return [t.field(i) for i in range(t.num_fields)]


def _tree(f: pa.Field) -> tuple:
    return (f.name, f.nullable, f.metadata or None, str(f.type), tuple(_tree(c) for c in _children(f.type)))


def assert_same_schema(actual: pa.Schema, expected: pa.Schema) -> None:
    """Equal including nullability and metadata at every nesting level."""
    assert actual.equals(expected, check_metadata=True), f"\n{actual}\n!=\n{expected}"
    assert [_tree(f) for f in actual] == [_tree(f) for f in expected]


# ---------------------------------------------------------------------------------------------------------------------
# Hypothesis: schemas over every supported type.

names = st.text(max_size=8)
metadata = st.none() | st.dictionaries(st.text(max_size=6), st.text(max_size=10), max_size=3)
timezones = st.sampled_from([None, "UTC", "+07:30", "America/New_York"])
time_units = st.sampled_from(["s", "ms", "us", "ns"])
integers = st.sampled_from([pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32(),
                            pa.uint64()])


@st.composite
def decimals(draw):
    factory, max_precision = draw(st.sampled_from([(pa.decimal32, 9), (pa.decimal64, 18), (pa.decimal128, 38),
                                                   (pa.decimal256, 76)]))
    precision = draw(st.integers(1, max_precision))
    return factory(precision, draw(st.integers(-3, precision)))


leaf_types = st.one_of(
    st.sampled_from([
        pa.null(), pa.bool_(), pa.float16(), pa.float32(), pa.float64(), pa.binary(), pa.large_binary(), pa.string(),
        pa.large_string(), pa.string_view(), pa.binary_view(), pa.date32(), pa.date64(), pa.time32("s"),
        pa.time32("ms"), pa.time64("us"), pa.time64("ns"), pa.month_day_nano_interval(),
    ]),
    integers,
    decimals(),
    st.integers(1, 64).map(pa.binary),
    st.builds(pa.timestamp, time_units, timezones),
    st.builds(pa.duration, time_units),
    st.builds(pa.dictionary, integers, st.sampled_from([pa.string(), pa.binary(), pa.int64()]), st.booleans()),
)


def fields_of(types, name=names):
    def make(n, t, nullable, md):
        return pa.field(n, t, nullable or pa.types.is_null(t), md)  # a null-typed field must be nullable

    return st.builds(make, name, types, st.booleans(), metadata)


def nested_types(children):
    child = fields_of(children)
    return st.one_of(
        st.builds(pa.list_, child),
        st.builds(pa.large_list, child),
        st.builds(pa.list_view, child),
        st.builds(pa.large_list_view, child),
        st.builds(pa.list_, child, st.integers(1, 5)),
        st.lists(child, max_size=4).map(pa.struct),
        # pyarrow's IPC reader names map children "entries", "key" and "value" whatever the bytes say
        st.builds(
            pa.map_,
            st.sampled_from([pa.string(), pa.int32(), pa.date32()]),
            fields_of(children, st.just("value")),
            st.booleans(),
        ),
        st.builds(
            lambda fs, mode, codes: pa.union(fs, mode, codes[: len(fs)]),
            st.lists(child, min_size=1, max_size=3),
            st.sampled_from(["sparse", "dense"]),
            st.lists(st.integers(0, 127), min_size=3, max_size=3, unique=True),
        ),
        st.builds(pa.run_end_encoded, st.sampled_from([pa.int16(), pa.int32(), pa.int64()]), leaf_types),
    )


data_types = st.recursive(leaf_types, nested_types, max_leaves=8)
schemas = st.builds(pa.schema, st.lists(fields_of(data_types), max_size=5), metadata)
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ---------------------------------------------------------------------------------------------------------------------
# Byte compatibility with arrow-rs (the reference implementation).


def test_bytes_equal_arrow_rs_reference():
    schema = pa.schema([pa.field("a", pa.int64(), nullable=False), pa.field("b", pa.bool_(), nullable=False)])
    assert encode_arrow_schema(schema) == ARROW_RS_A_B
    assert_same_schema(decode_arrow_schema(ARROW_RS_A_B), schema)


@pytest.mark.parametrize("message, typ", [(ARROW_RS_MESSAGE_UTF8, pa.string()), (ARROW_RS_MESSAGE_INT32, pa.int32())])
def test_schema_table_bytes_equal_arrow_rs_ipc_message_tail(message, typ):
    ours = encode_arrow_schema(pa.schema([pa.field("", typ)]))
    tables = ours[4:]  # everything after our root offset
    end = message.index(tables) + len(tables)
    assert message[end:] == b"\0" * (len(message) - end)  # only the IPC message's padding follows


@pytest.mark.parametrize(
    "typ, present",
    [
        (pa.date64(), []),  # Date.unit MILLISECOND is the default
        (pa.date32(), [0]),
        (pa.time32("ms"), []),  # Time.unit MILLISECOND and Time.bitWidth 32 are defaults
        (pa.time32("s"), [0]),
        (pa.time64("ns"), [0, 1]),
        (pa.decimal128(10, 0), [0]),  # scale 0 and bitWidth 128 omitted
        (pa.decimal256(10, 2), [0, 1, 2]),
        (pa.timestamp("s"), []),  # unit SECOND is the default, no timezone
        (pa.timestamp("s", tz="UTC"), [1]),
        (pa.duration("ms"), []),  # Duration.unit MILLISECOND is the default
        (pa.float16(), []),  # precision HALF is the default
        (pa.uint8(), [0]),  # is_signed false omitted
        (pa.int8(), [0, 1]),
    ],
)
def test_scalars_equal_to_their_default_are_omitted(typ, present):
    vtable = _first_field_type_vtable(encode_arrow_schema(pa.schema([pa.field("x", typ)])))
    assert [slot for slot, off in enumerate(vtable[2:]) if off] == present


_DETERMINISM_PROBE = """
import pyarrow as pa, sys
from odf_core.metadata.arrow_schema import encode_arrow_schema
schema = pa.schema(
    [pa.field("m", pa.map_(pa.string(), pa.dictionary(pa.int8(), pa.string())), metadata={"k": "v", "a": "b"}),
     pa.field("d", pa.dictionary(pa.int16(), pa.string()))],
    metadata={"z": "1", "y": "2"},
)
sys.stdout.write(encode_arrow_schema(schema).hex())
"""


def test_encoding_is_deterministic_across_processes():
    """Equal schemas give equal bytes in any process (no dependence on hash seeds, ids or object identity), and
    metadata entries keep pyarrow's order (arrow-rs would take them from a hash map)."""
    import subprocess
    import sys

    here: dict = {}
    exec(_DETERMINISM_PROBE.replace("sys.stdout.write(", "here['hex'] = ("), {"here": here})
    outs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run([sys.executable, "-c", _DETERMINISM_PROBE], env=env, capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 0, out.stderr
        outs.append(out.stdout)
    assert outs == [here["hex"], here["hex"]]
    decoded = decode_arrow_schema(bytes.fromhex(here["hex"]))
    assert list(decoded.metadata) == [b"z", b"y"] and list(decoded.field("m").metadata) == [b"k", b"a"]


# ---------------------------------------------------------------------------------------------------------------------
# Round trips.


@FAST
@given(schemas)
def test_round_trip(schema):
    data = encode_arrow_schema(schema)
    assert_same_schema(decode_arrow_schema(data), schema)


@FAST
@given(schemas)
def test_decodes_schema_written_by_pyarrow(schema):
    assert_same_schema(decode_arrow_schema(_rerooted_pyarrow_schema(schema)), schema)


@pytest.mark.parametrize(
    "typ",
    [
        pa.uuid(),
        pa.json_(),
        pa.bool8(),
        pa.fixed_shape_tensor(pa.float32(), [2, 3], dim_names=["r", "c"]),
        pa.opaque(pa.int64(), "geometry", "postgis"),
    ],
)
def test_extension_types_round_trip(typ):
    schema = pa.schema([pa.field("x", typ, metadata={"own": "kept"}), pa.field("y", pa.list_(typ))])
    assert_same_schema(decode_arrow_schema(encode_arrow_schema(schema)), schema)


def test_odf_system_columns_round_trip():
    schema = pa.schema(
        [
            pa.field("offset", pa.int64(), nullable=False),
            pa.field("op", pa.int32(), nullable=False),
            pa.field("system_time", pa.timestamp("ms", tz="UTC"), nullable=False),
            pa.field("event_time", pa.timestamp("ms", tz="UTC")),
            pa.field("city", pa.string(), metadata={"opendatafabric.org/description": "Name"}),
            pa.field("population", pa.uint64()),
        ],
        metadata={"spark.sql": "x"},
    )
    assert_same_schema(decode_arrow_schema(encode_arrow_schema(schema)), schema)


# ---------------------------------------------------------------------------------------------------------------------
# Bad input.


def test_unsupported_type_names_field_and_type():
    schema = pa.schema([pa.field("s", pa.struct([pa.field("inner", pa.dictionary(pa.int32(), pa.uuid()))]))])
    with pytest.raises(MetadataError, match=r"'s\.inner'.*extension<arrow\.uuid>|extension<arrow\.uuid>.*'s\.inner'"):
        encode_arrow_schema(schema)


def test_non_utf8_metadata_is_refused():
    schema = pa.schema([pa.field("x", pa.int8(), metadata={b"k": b"\xff\xfe"})])
    with pytest.raises(MetadataError, match="'x' metadata value.*UTF-8"):
        encode_arrow_schema(schema)


def test_too_deep_nesting_is_refused_on_both_sides():
    t = pa.int8()
    for _ in range(70):
        t = pa.list_(t)
    with pytest.raises(MetadataError, match="nested deeper"):
        encode_arrow_schema(pa.schema([pa.field("x", t)]))
    with pytest.raises(DecodeError, match="nested deeper"):
        decode_arrow_schema(_rerooted_pyarrow_schema(pa.schema([pa.field("x", t)])))


_COMPLEX = pa.schema(
    [
        pa.field("offset", pa.int64(), nullable=False, metadata={"a": "b"}),
        pa.field("ts", pa.timestamp("ms", tz="UTC")),
        pa.field("s", pa.struct([pa.field("x", pa.list_(pa.decimal128(12, 3))), pa.field("y", pa.string())])),
        pa.field("m", pa.map_(pa.string(), pa.dictionary(pa.int16(), pa.string()))),
        pa.field("u", pa.union([pa.field("i", pa.int8()), pa.field("f", pa.float64())], "dense", [5, 9])),
    ],
    metadata={"schema": "meta"},
)


def test_every_truncation_is_refused():
    data = encode_arrow_schema(_COMPLEX)
    for cut in range(len(data)):
        try:
            decoded = decode_arrow_schema(data[:cut])
        except DecodeError:
            continue
        # Only the builder's alignment padding after the last object may go unnoticed, and then nothing is lost.
        assert cut >= len(data) - 3 and data[cut:] == b"\0" * (len(data) - cut), cut
        assert_same_schema(decoded, _COMPLEX)


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_corrupted_bytes_give_decode_error_or_a_schema_never_a_crash(data):
    buf = bytearray(encode_arrow_schema(_COMPLEX))
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(buf) - 1))
        buf[pos] = data.draw(st.integers(0, 255))
    try:
        result = decode_arrow_schema(bytes(buf))
    except DecodeError:
        return
    # what decodes is a whole, usable schema: it encodes and reads back as itself (no half-read field survives)
    assert_same_schema(decode_arrow_schema(encode_arrow_schema(result)), result)


@pytest.mark.parametrize(
    "data, message",
    [
        (b"", "outside the buffer"),
        (b"\x04\x00", "outside the buffer"),
        (b"\xff" * 64, "continuation marker"),
        (bytes(64), "outside the buffer"),
    ],
)
def test_garbage_is_refused(data, message):
    with pytest.raises(DecodeError, match=message):
        decode_arrow_schema(data)


def test_ipc_message_instead_of_bare_schema_is_refused():
    with pytest.raises(DecodeError, match="continuation marker"):
        decode_arrow_schema(pa.schema([pa.field("a", pa.int8())]).serialize().to_pybytes())


def _patch_first_field(data: bytes, slot: int, fmt: str, value: int) -> bytes:
    buf = bytearray(data)
    schema, vt = _table(buf, _ref(buf, 0))
    field, fvt = _table(buf, _ref(buf, _ref(buf, schema + vt[3]) + 4))
    struct.pack_into(fmt, buf, field + fvt[2 + slot], value)
    return bytes(buf)


def test_unknown_type_tag_is_refused_naming_the_field():
    data = _patch_first_field(encode_arrow_schema(pa.schema([pa.field("price", pa.int8())])), 2, "<B", 99)
    with pytest.raises(DecodeError, match=r"fields\[0\] 'price': has Arrow type tag 99"):
        decode_arrow_schema(data)


@pytest.mark.parametrize(
    "tag, message",
    [
        (9, r"fields\[0\] 't'\.type: field 1 at offset 11 lies outside"),  # Time's int32 bitWidth over Int's bool
        (12, "List must have exactly 1 child field"),  # found by pyarrow, past our structural checks
    ],
)
def test_type_table_not_matching_its_tag_is_refused(tag, message):
    data = _patch_first_field(encode_arrow_schema(pa.schema([pa.field("t", pa.int8())])), 2, "<B", tag)
    with pytest.raises(DecodeError, match=message):
        decode_arrow_schema(data)


def _handmade_schema(*, endianness: int = 0, name: str | None = "a", features: list[int] | None = None) -> bytes:
    """A bare Schema built field by field as another producer might: explicit endianness, optional name, features,
    no children vector, fields in schema order."""
    b = flatbuffers.Builder(256)
    name_off = b.CreateString(name) if name is not None else None
    b.StartObject(2)
    b.PrependInt32Slot(0, 16, 0)
    b.PrependBoolSlot(1, True, False)
    int_type = b.EndObject()
    b.StartObject(7)
    if name_off is not None:
        b.PrependUOffsetTRelativeSlot(0, name_off, 0)
    b.PrependBoolSlot(1, True, False)
    b.PrependUint8Slot(2, 2, 0)
    b.PrependUOffsetTRelativeSlot(3, int_type, 0)
    field = b.EndObject()
    b.StartVector(4, 1, 4)
    b.PrependUOffsetTRelative(field)
    fields = b.EndVector()
    features_off = None
    if features is not None:
        b.StartVector(8, len(features), 8)
        for f in reversed(features):
            b.PrependInt64(f)
        features_off = b.EndVector()
    b.StartObject(4)
    b.ForceDefaults(True)
    b.PrependInt16Slot(0, endianness, 0)
    b.ForceDefaults(False)
    b.PrependUOffsetTRelativeSlot(1, fields, 0)
    if features_off is not None:
        b.PrependUOffsetTRelativeSlot(3, features_off, 0)
    b.Finish(b.EndObject())
    return bytes(b.Output())


def test_decodes_schemas_laid_out_differently():
    assert_same_schema(decode_arrow_schema(_handmade_schema()), pa.schema([pa.field("a", pa.int16())]))
    assert_same_schema(decode_arrow_schema(_handmade_schema(name=None, features=[1, 2])),
                       pa.schema([pa.field("", pa.int16())]))


def test_big_endian_schema_is_refused():
    with pytest.raises(DecodeError, match="big-endian"):
        decode_arrow_schema(_handmade_schema(endianness=1))


# ---------------------------------------------------------------------------------------------------------------------
# Schema evolution.

BASE = pa.schema(
    [
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("event_time", pa.timestamp("ms", tz="UTC")),
        pa.field("city", pa.string()),
        pa.field("info", pa.struct([pa.field("pop", pa.int64()), pa.field("area", pa.float64())])),
        pa.field("tags", pa.list_(pa.struct([pa.field("k", pa.string())]))),
    ]
)


@pytest.mark.parametrize(
    "new",
    [
        BASE,
        BASE.append(pa.field("extra", pa.int32())),
        BASE.append(pa.field("extra", pa.int32())).append(pa.field("more", pa.list_(pa.string()))),
        # nullability flips both ways; metadata changes
        BASE.set(0, pa.field("offset", pa.int64(), nullable=True)).set(
            1, pa.field("event_time", pa.timestamp("ms", tz="UTC"), nullable=False, metadata={"x": "y"})
        ),
        # struct gains a child at its end, also inside a list
        BASE.set(3, pa.field("info", pa.struct([pa.field("pop", pa.int64()), pa.field("area", pa.float64()),
                                                pa.field("gdp", pa.float64())]))),
        BASE.set(4, pa.field("tags", pa.list_(pa.field("element", pa.struct([pa.field("k", pa.string()),
                                                                              pa.field("v", pa.string())]))))),
        BASE.with_metadata({"any": "thing"}),
    ],
)
def test_allowed_evolution(new):
    check_schema_evolution(BASE, new, where="SetDataSchema")


@pytest.mark.parametrize(
    "new, expected",
    [
        (BASE.remove(2), ["column 'city' removed or renamed (was string)"]),
        (BASE.set(2, pa.field("town", pa.string())), ["column 'city' removed or renamed (was string)"]),
        (BASE.set(0, pa.field("offset", pa.int32())), ["column 'offset' type changed from int64 to int32"]),
        (
            BASE.set(1, pa.field("event_time", pa.timestamp("ms", tz="+00:00"))),
            ["column 'event_time' type changed from timestamp[ms, tz=UTC] to timestamp[ms, tz=+00:00]"],
        ),
        (BASE.set(2, pa.field("city", pa.dictionary(pa.int32(), pa.string()))), ["'city' type changed"]),
        (BASE.insert(1, pa.field("extra", pa.int8())), ["column 'extra' (int8) added before existing column 'tags'"]),
        (
            BASE.set(3, pa.field("info", pa.struct([pa.field("area", pa.float64()), pa.field("pop", pa.int64())]))),
            ["existing fields of 'info' reordered"],
        ),
        (
            BASE.set(3, pa.field("info", pa.struct([pa.field("pop", pa.int32()), pa.field("area", pa.float64())]))),
            ["column 'info.pop' type changed from int64 to int32"],
        ),
        (
            BASE.set(3, pa.field("info", pa.struct([pa.field("pop", pa.int64())]))),
            ["column 'info.area' removed or renamed (was double)"],
        ),
        (
            BASE.set(4, pa.field("tags", pa.list_(pa.struct([pa.field("k", pa.binary())])))),
            ["column 'tags[].k' type changed from string to binary"],
        ),
        (
            BASE.set(4, pa.field("tags", pa.large_list(pa.struct([pa.field("k", pa.string())])))),
            ["'tags' type changed"],
        ),
        (
            pa.schema([BASE.field(i) for i in (0, 2, 1, 3, 4)]),
            ["existing columns reordered"],
        ),
        (BASE.append(pa.field("city", pa.string())), ["column 'city' added again (string)"]),
    ],
)
def test_refused_evolution(new, expected):
    with pytest.raises(SchemaEvolutionError) as info:
        check_schema_evolution(BASE, new, where="SetDataSchema")
    text = str(info.value)
    assert text.startswith("SetDataSchema: schema change not allowed")
    for part in expected:
        assert part in text
    assert isinstance(info.value, ChainError)


def test_refusal_lists_every_offending_column():
    new = pa.schema([pa.field("offset", pa.uint64()), pa.field("event_time", pa.timestamp("ms", tz="UTC")),
                     pa.field("info", pa.int8()), pa.field("tags", BASE.field("tags").type)])
    with pytest.raises(SchemaEvolutionError) as info:
        check_schema_evolution(BASE, new)
    assert info.value.problems == [
        "column 'offset' type changed from int64 to uint64",
        "column 'city' removed or renamed (was string)",
        "column 'info' type changed from struct<pop: int64, area: double> to int8",
    ]


@FAST
@given(schemas, st.lists(fields_of(data_types), max_size=3))
def test_appending_columns_is_always_allowed_and_survives_encoding(schema, extra):
    names_taken = {f.name for f in schema}
    extra = [f for f in extra if f.name not in names_taken]
    assume(extra and len({f.name for f in extra}) == len(extra))
    new = pa.schema(list(schema) + extra)
    old_decoded = decode_arrow_schema(encode_arrow_schema(schema))
    new_decoded = decode_arrow_schema(encode_arrow_schema(new))
    assert_same_schema(new_decoded, new)
    check_schema_evolution(old_decoded, new_decoded)
    if len(schema):  # the same columns put in front of the existing ones are refused: only the end is free
        with pytest.raises(SchemaEvolutionError, match="added before existing column"):
            check_schema_evolution(old_decoded, pa.schema(extra + list(schema)))
