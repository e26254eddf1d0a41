"""Arrow schemas as the bare FlatBuffers that ``SetDataSchema.schema`` holds (conformance §1).

The bytes are an Arrow ``Schema`` table (Arrow's ``Schema.fbs``) as the root of its own finished FlatBuffer, with no IPC
message around it. The reference implementation writes them with arrow-rs (``IpcSchemaEncoder::schema_to_fb``), so the
encoder below makes the same builder calls in the same order and our bytes equal theirs for the same schema, except:
arrow-rs takes custom metadata entries from a hash map (random order) where we keep pyarrow's order, and it gives
every dictionary-encoded field the id it carries (0 unless set) where we number them 0, 1, 2, ... as pyarrow's reader
needs distinct ids for distinct dictionary types.

Decoding checks every reference against the bounds of the given bytes, then lets pyarrow parse the table by wrapping
it in an IPC ``Message``, so schemas written by any implementation read back as pyarrow sees them. Callers that read a
foreign block keep its original bytes: re-encoding a decoded schema is not guaranteed to give them back.
"""
from __future__ import annotations

import ctypes
import struct
from typing import Callable

import pyarrow as pa

from odf_core.errors import DecodeError, MetadataError
from odf_core.metadata.arrow_fb_verify import ArrowTypeTag as T
from odf_core.metadata.arrow_fb_verify import MAX_FIELD_DEPTH, verify_arrow_schema
from odf_core.metadata.flatbuffers_lib import flatbuffers
from odf_core.metadata.schema_evolution import check_schema_evolution

__all__ = ["encode_arrow_schema", "decode_arrow_schema", "check_schema_evolution", "recorded_schema"]

_TIME_UNIT = {"s": 0, "ms": 1, "us": 2, "ns": 3}  # TimeUnit enum; SECOND is the default of Timestamp.unit
_MS = 1  # default of Date.unit, Time.unit and Duration.unit
_EXT_NAME, _EXT_META = b"ARROW:extension:name", b"ARROW:extension:metadata"

# A scalar or offset slot of a table, in the order arrow-rs adds it: (builder method suffix, slot, value, default).
_Slot = tuple[str, int, object, object]


def recorded_schema(schema: pa.Schema) -> pa.Schema:
    """The schema as ``SetDataSchema`` records it: writer metadata (Spark's, pandas') stripped. The coordinator
    (committing a slice) and the engine (announcing a transform's output schema) both record through this."""
    return pa.schema([pa.field(f.name, f.type, f.nullable) for f in schema])


def encode_arrow_schema(schema: pa.Schema) -> bytes:
    """Serialize ``schema`` as a bare finished Schema FlatBuffer (what ``SetDataSchema.schema`` holds)."""
    return _Encoder().schema(schema)


def decode_arrow_schema(data: bytes) -> pa.Schema:
    """Parse a bare Schema FlatBuffer written by any Arrow implementation; bad bytes raise ``DecodeError``."""
    data = bytes(data)
    root = verify_arrow_schema(data)
    try:
        return pa.ipc.read_schema(pa.py_buffer(_as_ipc_message(data, root)))
    except (pa.ArrowException, OSError) as e:  # pyarrow raises a bare OSError for IOError statuses
        raise DecodeError(f"Arrow schema FlatBuffer ({len(data)} bytes) is not a valid schema: {e}") from None


def _as_ipc_message(schema: bytes, root: int) -> bytes:
    """Frame the bare schema as an encapsulated IPC ``Message`` (version V5, header Schema) that pyarrow can read.

    The schema bytes go in verbatim at an 8-aligned position after a hand-laid Message table: FlatBuffers offsets are
    relative, so the schema's internal references stay valid, and the header offset points at its root table.
    """
    head = bytearray(32)
    struct.pack_into("<I", head, 0, 16)  # root offset -> Message table at 16
    struct.pack_into("<5H", head, 4, 10, 12, 8, 10, 4)  # vtable: 10 bytes, 12-byte table; version, header_type, header
    struct.pack_into("<i", head, 16, 16 - 4)  # table -> its vtable at 4
    struct.pack_into("<I", head, 20, len(head) + root - 20)  # header -> the schema's root table
    struct.pack_into("<hB", head, 24, 4, 1)  # MetadataVersion.V5, MessageHeader.Schema
    body = bytes(head) + schema
    body += b"\0" * (-len(body) % 8)
    return b"\xff\xff\xff\xff" + struct.pack("<i", len(body)) + body


class _Encoder:
    """One schema's worth of FlatBuffers building, mirroring arrow-rs ``convert.rs`` call for call."""

    def __init__(self) -> None:
        self.b = flatbuffers.Builder(1024)
        self.next_dictionary_id = 0
        self.depth = 0

    def schema(self, schema: pa.Schema) -> bytes:
        fields = self.offsets([self.field(f, f.name) for f in schema])
        metadata = self.metadata(schema.metadata, "schema metadata") if schema.metadata else None
        slots: list[_Slot] = [("UOffsetTRelative", 1, fields, 0)]
        if metadata is not None:
            slots.append(("UOffsetTRelative", 2, metadata, 0))
        self.b.Finish(self.table(slots))
        return bytes(self.b.Output())

    def field(self, f: pa.Field, path: str) -> int:
        self.depth += 1
        try:
            return self._field(f, path)
        finally:
            self.depth -= 1

    def _field(self, f: pa.Field, path: str) -> int:
        if self.depth > MAX_FIELD_DEPTH:  # the decoder refuses these, so do not write them
            raise MetadataError(f"fields nested deeper than {MAX_FIELD_DEPTH} levels", path=f"field {path!r}")
        typ, metadata = f.type, dict(f.metadata or {})
        if isinstance(typ, pa.BaseExtensionType):
            metadata.update(_extension_metadata(typ))
            typ = typ.storage_type
        md = self.metadata(metadata, f"field {path!r} metadata") if metadata else None
        name = self.b.CreateString(_utf8(f.name, f"field {path!r} name"))
        dictionary = typ if pa.types.is_dictionary(typ) else None
        tag, type_table, children = self.type(dictionary.value_type if dictionary else typ, path)
        encoding = self.dictionary_encoding(dictionary, path) if dictionary else None
        slots: list[_Slot] = [("UOffsetTRelative", 0, name, 0)]
        if encoding is not None:
            slots.append(("UOffsetTRelative", 4, encoding, 0))
        slots += [
            ("Uint8", 2, int(tag), 0),
            ("Bool", 1, f.nullable, False),
            ("UOffsetTRelative", 5, children, 0),
            ("UOffsetTRelative", 3, type_table, 0),
        ]
        if md is not None:
            slots.append(("UOffsetTRelative", 6, md, 0))
        return self.table(slots)

    def type(self, typ: pa.DataType, path: str) -> tuple[T, int, int]:
        """Return (union tag, type table, children vector), built in arrow-rs's order for that type."""
        t = pa.types
        for check, tag in _EMPTY_LEAVES:
            if check(typ):
                return self.leaf(tag, [])
        if t.is_integer(typ):
            return self.leaf(T.INT, _int_slots(typ), children_first=True)
        if t.is_floating(typ):
            precision = {16: 0, 32: 1, 64: 2}[typ.bit_width]
            return self.leaf(T.FLOATING_POINT, [("Int16", 0, precision, 0)], children_first=True)
        if t.is_decimal(typ):
            slots: list[_Slot] = [("Int32", 0, typ.precision, 0), ("Int32", 1, typ.scale, 0),
                                  ("Int32", 2, typ.bit_width, 128)]
            return self.leaf(T.DECIMAL, slots)
        if t.is_fixed_size_binary(typ):
            return self.leaf(T.FIXED_SIZE_BINARY, [("Int32", 0, typ.byte_width, 0)])
        if t.is_date(typ):
            return self.leaf(T.DATE, [("Int16", 0, 0 if t.is_date32(typ) else 1, _MS)])
        if t.is_time(typ):
            return self.leaf(T.TIME, [("Int32", 1, typ.bit_width, 32), ("Int16", 0, _TIME_UNIT[typ.unit], _MS)])
        if t.is_timestamp(typ):
            tz = self.b.CreateString(_utf8(typ.tz or "", f"field {path!r} time zone"))  # arrow-rs always makes it
            slots = [("Int16", 0, _TIME_UNIT[typ.unit], 0)]
            if typ.tz:
                slots.append(("UOffsetTRelative", 1, tz, 0))
            return self.leaf(T.TIMESTAMP, slots)
        if t.is_duration(typ):
            return self.leaf(T.DURATION, [("Int16", 0, _TIME_UNIT[typ.unit], _MS)])
        if t.is_interval(typ):  # pyarrow's only interval type is MONTH_DAY_NANO
            return self.leaf(T.INTERVAL, [("Int16", 0, 2, 0)])
        for check, tag in _LISTS:
            if check(typ):
                return self.nested(tag, [typ.value_field], [], path)
        if t.is_fixed_size_list(typ):
            return self.nested(T.FIXED_SIZE_LIST, [typ.value_field], [("Int32", 0, typ.list_size, 0)], path)
        if t.is_struct(typ):
            return self.nested(T.STRUCT, [typ.field(i) for i in range(typ.num_fields)], [], path)
        if t.is_map(typ):
            return self.nested(T.MAP, [typ.field(0)], [("Bool", 0, typ.keys_sorted, False)], path)
        if t.is_run_end_encoded(typ):
            return self.nested(T.RUN_END_ENCODED, [typ.field(0), typ.field(1)], [], path)
        if t.is_union(typ):
            children = [self.field(typ.field(i), f"{path}.{typ.field(i).name}") for i in range(typ.num_fields)]
            type_ids = self.ints(typ.type_codes)
            mode = 0 if typ.mode == "sparse" else 1
            table = self.table([("Int16", 0, mode, 0), ("UOffsetTRelative", 1, type_ids, 0)])
            return T.UNION, table, self.offsets(children)
        raise MetadataError(f"Arrow type {typ} cannot be written to a SetDataSchema schema", path=f"field {path!r}")

    def leaf(self, tag: T, slots: list[_Slot], *, children_first: bool = False) -> tuple[T, int, int]:
        if children_first:
            children = self.offsets([])
            return tag, self.table(slots), children
        table = self.table(slots)
        return tag, table, self.offsets([])

    def nested(self, tag: T, fields: list[pa.Field], slots: list[_Slot], path: str) -> tuple[T, int, int]:
        children = [self.field(f, f"{path}.{f.name}") for f in fields]
        table = self.table(slots)
        return tag, table, self.offsets(children)

    def dictionary_encoding(self, typ: pa.DictionaryType, path: str) -> int:
        if not pa.types.is_integer(typ.index_type):
            raise MetadataError(f"dictionary index type {typ.index_type} is not an integer", path=f"field {path!r}")
        index_type = self.table(_int_slots(typ.index_type))
        dictionary_id, self.next_dictionary_id = self.next_dictionary_id, self.next_dictionary_id + 1
        return self.table(
            [("Int64", 0, dictionary_id, 0), ("UOffsetTRelative", 1, index_type, 0), ("Bool", 2, typ.ordered, False)]
        )

    def metadata(self, metadata: dict[bytes, bytes], what: str) -> int:
        entries = []
        for key, value in metadata.items():
            k = self.b.CreateString(_utf8(key, f"{what} key"))
            v = self.b.CreateString(_utf8(value, f"{what} value of {key!r}"))
            entries.append(self.table([("UOffsetTRelative", 0, k, 0), ("UOffsetTRelative", 1, v, 0)]))
        return self.offsets(entries)

    def table(self, slots: list[_Slot]) -> int:
        """A table whose fields are added in the given order; scalars equal to their default are left out."""
        self.b.StartObject(max((s[1] for s in slots), default=-1) + 1)
        for kind, slot, value, default in slots:
            getattr(self.b, f"Prepend{kind}Slot")(slot, value, default)
        return self.b.EndObject()

    def offsets(self, items: list[int]) -> int:
        self.b.StartVector(4, len(items), 4)
        for item in reversed(items):
            self.b.PrependUOffsetTRelative(item)
        return self.b.EndVector()

    def ints(self, items: list[int]) -> int:
        self.b.StartVector(4, len(items), 4)
        for item in reversed(items):
            self.b.PrependInt32(item)
        return self.b.EndVector()


def _int_slots(typ: pa.DataType) -> list[_Slot]:
    return [("Bool", 1, pa.types.is_signed_integer(typ), False), ("Int32", 0, typ.bit_width, 0)]


_EMPTY_LEAVES: list[tuple[Callable[[pa.DataType], bool], T]] = [
    (pa.types.is_null, T.NULL),
    (pa.types.is_boolean, T.BOOL),
    (pa.types.is_binary, T.BINARY),
    (pa.types.is_large_binary, T.LARGE_BINARY),
    (pa.types.is_binary_view, T.BINARY_VIEW),
    (pa.types.is_string_view, T.UTF8_VIEW),
    (pa.types.is_string, T.UTF8),
    (pa.types.is_large_string, T.LARGE_UTF8),
]
_LISTS: list[tuple[Callable[[pa.DataType], bool], T]] = [
    (pa.types.is_list, T.LIST),
    (pa.types.is_large_list, T.LARGE_LIST),
    (pa.types.is_list_view, T.LIST_VIEW),
    (pa.types.is_large_list_view, T.LARGE_LIST_VIEW),
]


def _utf8(value: str | bytes, what: str) -> bytes:
    """FlatBuffers strings must be UTF-8 (arrow-rs refuses to read anything else)."""
    try:
        return value.encode("utf-8") if isinstance(value, str) else bytes(value).decode("utf-8").encode("utf-8")
    except UnicodeError:
        raise MetadataError(f"{what} is not valid UTF-8", value=value) from None


class _ArrowSchemaC(ctypes.Structure):
    """The Arrow C data interface's ``struct ArrowSchema`` (a stable ABI)."""


_ArrowSchemaC._fields_ = [
    ("format", ctypes.c_char_p),
    ("name", ctypes.c_char_p),
    ("metadata", ctypes.c_void_p),
    ("flags", ctypes.c_int64),
    ("n_children", ctypes.c_int64),
    ("children", ctypes.c_void_p),
    ("dictionary", ctypes.c_void_p),
    ("release", ctypes.CFUNCTYPE(None, ctypes.POINTER(_ArrowSchemaC))),
    ("private_data", ctypes.c_void_p),
]


def _extension_metadata(typ: pa.BaseExtensionType) -> dict[bytes, bytes]:
    """The ``ARROW:extension:*`` field metadata that stands for an extension type in IPC.

    pyarrow exposes the serialized parameters only through its C data export (the canonical types are C++ classes).
    """
    c = _ArrowSchemaC()
    typ._export_to_c(ctypes.addressof(c))
    try:
        found: dict[bytes, bytes] = {}
        if c.metadata:
            pos = c.metadata
            (count,) = struct.unpack("=i", ctypes.string_at(pos, 4))
            pos += 4
            for _ in range(count):
                (klen,) = struct.unpack("=i", ctypes.string_at(pos, 4))
                key = ctypes.string_at(pos + 4, klen)
                pos += 4 + klen
                (vlen,) = struct.unpack("=i", ctypes.string_at(pos, 4))
                found[key] = ctypes.string_at(pos + 4, vlen)
                pos += 4 + vlen
    finally:
        c.release(ctypes.byref(c))
    return {_EXT_NAME: found.get(_EXT_NAME, typ.extension_name.encode()), _EXT_META: found.get(_EXT_META, b"")}
