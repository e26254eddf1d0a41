"""Bounds-checked walk over a bare Arrow ``Schema`` FlatBuffer (Arrow's ``Schema.fbs``).

pyarrow parses the schema for us, but only once we wrap the bytes in an IPC message; its verifier would then accept
offsets that leave the schema bytes and land in our wrapper. So before that, every table, vtable, string and vector
reachable from the root is checked to lie inside the given bytes, and unknown union tags or enum values are refused.
Each error names where in the schema it is (``fields[2] 'price'.children[0]``).
"""
from __future__ import annotations

import enum
import struct
from dataclasses import dataclass
from typing import Union

from odf_core.errors import DecodeError

MAX_FIELD_DEPTH = 64  # pyarrow's own verifier stops at a nesting depth of 128 tables
MAX_TABLES = 100_000  # shared sub-tables could otherwise make the walk exponential


class ArrowTypeTag(enum.IntEnum):
    """Tags of the ``Type`` union in Schema.fbs (0 is NONE)."""

    NULL = 1
    INT = 2
    FLOATING_POINT = 3
    BINARY = 4
    UTF8 = 5
    BOOL = 6
    DECIMAL = 7
    DATE = 8
    TIME = 9
    TIMESTAMP = 10
    INTERVAL = 11
    LIST = 12
    STRUCT = 13
    UNION = 14
    FIXED_SIZE_BINARY = 15
    FIXED_SIZE_LIST = 16
    MAP = 17
    DURATION = 18
    LARGE_BINARY = 19
    LARGE_UTF8 = 20
    LARGE_LIST = 21
    RUN_END_ENCODED = 22
    BINARY_VIEW = 23
    UTF8_VIEW = 24
    LIST_VIEW = 25
    LARGE_LIST_VIEW = 26


@dataclass(frozen=True)
class Scalar:
    slot: int
    size: int


@dataclass(frozen=True)
class Str:
    slot: int


@dataclass(frozen=True)
class ScalarVector:
    slot: int
    size: int


@dataclass(frozen=True)
class SubTable:
    slot: int
    spec: tuple


Slot = Union[Scalar, Str, ScalarVector, SubTable]

_INT = (Scalar(0, 4), Scalar(1, 1))
_UNIT = (Scalar(0, 2),)
# Table layouts of the Type union members that have fields; the others are empty tables.
TYPE_TABLES: dict[ArrowTypeTag, tuple[Slot, ...]] = {
    ArrowTypeTag.INT: _INT,
    ArrowTypeTag.FLOATING_POINT: _UNIT,
    ArrowTypeTag.DECIMAL: (Scalar(0, 4), Scalar(1, 4), Scalar(2, 4)),
    ArrowTypeTag.DATE: _UNIT,
    ArrowTypeTag.TIME: (Scalar(0, 2), Scalar(1, 4)),
    ArrowTypeTag.TIMESTAMP: (Scalar(0, 2), Str(1)),
    ArrowTypeTag.INTERVAL: _UNIT,
    ArrowTypeTag.UNION: (Scalar(0, 2), ScalarVector(1, 4)),
    ArrowTypeTag.FIXED_SIZE_BINARY: (Scalar(0, 4),),
    ArrowTypeTag.FIXED_SIZE_LIST: (Scalar(0, 4),),
    ArrowTypeTag.MAP: (Scalar(0, 1),),
    ArrowTypeTag.DURATION: _UNIT,
}
_DICTIONARY_ENCODING = (Scalar(0, 8), SubTable(1, _INT), Scalar(2, 1), Scalar(3, 2))
_KNOWN_TAGS = {int(t) for t in ArrowTypeTag}


@dataclass(frozen=True)
class _Table:
    pos: int
    vtable: int
    vtable_size: int
    size: int


class _Walker:
    def __init__(self, buf: bytes):
        self.buf = buf
        self.tables = 0

    def fail(self, where: str, problem: str) -> DecodeError:
        return DecodeError(f"Arrow schema FlatBuffer ({len(self.buf)} bytes): {where}: {problem}")

    def unpack(self, fmt: str, pos: int, where: str) -> int:
        if pos < 0 or pos + struct.calcsize(fmt) > len(self.buf):
            raise self.fail(where, f"reference to byte {pos} is outside the buffer (truncated or corrupted)")
        return struct.unpack_from(fmt, self.buf, pos)[0]

    def deref(self, pos: int, where: str) -> int:
        off = self.unpack("<I", pos, where)
        if off == 0 or pos + off >= len(self.buf):
            raise self.fail(where, f"offset {off} at byte {pos} points outside the buffer (truncated or corrupted)")
        return pos + off

    def table(self, pos: int, where: str) -> _Table:
        self.tables += 1
        if self.tables > MAX_TABLES:
            raise self.fail(where, f"more than {MAX_TABLES} tables")
        vtable = pos - self.unpack("<i", pos, where)
        vt_size = self.unpack("<H", vtable, f"{where} (vtable)")
        size = self.unpack("<H", vtable + 2, f"{where} (vtable)")
        if vt_size < 4 or vt_size % 2 or vtable + vt_size > len(self.buf):
            raise self.fail(where, f"invalid vtable of {vt_size} bytes at byte {vtable}")
        if size < 4 or pos + size > len(self.buf):
            raise self.fail(where, f"table of {size} bytes at byte {pos} does not fit in the buffer")
        return _Table(pos, vtable, vt_size, size)

    def field_pos(self, t: _Table, slot: int, size: int, where: str) -> int | None:
        entry = 4 + 2 * slot
        if entry + 2 > t.vtable_size:
            return None
        off = self.unpack("<H", t.vtable + entry, where)
        if off == 0:
            return None
        if off < 4 or off + size > t.size:
            raise self.fail(where, f"field {slot} at offset {off} lies outside its {t.size}-byte table")
        return t.pos + off

    def scalar(self, t: _Table, slot: int, fmt: str, default: int, where: str) -> int:
        pos = self.field_pos(t, slot, struct.calcsize(fmt), where)
        return default if pos is None else self.unpack(fmt, pos, where)

    def string(self, t: _Table, slot: int, where: str) -> str | None:
        pos = self.field_pos(t, slot, 4, where)
        if pos is None:
            return None
        start = self.deref(pos, where)
        length = self.unpack("<I", start, where)
        end = start + 4 + length
        if end >= len(self.buf) or self.buf[end] != 0:
            raise self.fail(where, f"string of {length} bytes at byte {start} is truncated or not 0-terminated")
        try:
            return self.buf[start + 4 : end].decode("utf-8")
        except UnicodeDecodeError as e:
            raise self.fail(where, f"string is not valid UTF-8 ({e.reason})") from None

    def vector(self, t: _Table, slot: int, elem_size: int, where: str) -> tuple[int, int] | None:
        pos = self.field_pos(t, slot, 4, where)
        if pos is None:
            return None
        start = self.deref(pos, where)
        count = self.unpack("<I", start, where)
        if start + 4 + count * elem_size > len(self.buf):
            raise self.fail(where, f"vector of {count} elements at byte {start} runs past the end of the buffer")
        return start + 4, count

    def tables_of(self, t: _Table, slot: int, where: str) -> list[int] | None:
        vec = self.vector(t, slot, 4, where)
        if vec is None:
            return None
        start, count = vec
        return [self.deref(start + 4 * i, f"{where}[{i}]") for i in range(count)]

    def check_slots(self, t: _Table, spec: tuple, where: str) -> None:
        for s in spec:
            if isinstance(s, Scalar):
                self.field_pos(t, s.slot, s.size, where)
            elif isinstance(s, Str):
                self.string(t, s.slot, where)
            elif isinstance(s, ScalarVector):
                self.vector(t, s.slot, s.size, where)
            else:
                pos = self.field_pos(t, s.slot, 4, where)
                if pos is not None:
                    self.check_slots(self.table(self.deref(pos, where), where), s.spec, where)

    def key_values(self, t: _Table, slot: int, where: str) -> None:
        for i, pos in enumerate(self.tables_of(t, slot, f"{where}.custom_metadata") or []):
            at = f"{where}.custom_metadata[{i}]"
            self.check_slots(self.table(pos, at), (Str(0), Str(1)), at)

    def field(self, pos: int, where: str, depth: int) -> None:
        if depth > MAX_FIELD_DEPTH:
            raise self.fail(where, f"fields nested deeper than {MAX_FIELD_DEPTH} levels")
        t = self.table(pos, where)
        name = self.string(t, 0, f"{where}.name")
        if name:
            where = f"{where} {name!r}"
        self.field_pos(t, 1, 1, f"{where}.nullable")
        tag = self.scalar(t, 2, "<B", 0, f"{where}.type_type")
        if tag not in _KNOWN_TAGS:
            problem = "has no type" if tag == 0 else f"has Arrow type tag {tag}, which this reader does not know"
            raise self.fail(where, problem)
        type_pos = self.field_pos(t, 3, 4, f"{where}.type")
        if type_pos is None:
            raise self.fail(where, f"type {ArrowTypeTag(tag).name} has no type table")
        type_table = self.table(self.deref(type_pos, f"{where}.type"), f"{where}.type")
        self.check_slots(type_table, TYPE_TABLES.get(ArrowTypeTag(tag), ()), f"{where}.type")
        dict_pos = self.field_pos(t, 4, 4, f"{where}.dictionary")
        if dict_pos is not None:
            at = f"{where}.dictionary"
            self.check_slots(self.table(self.deref(dict_pos, at), at), _DICTIONARY_ENCODING, at)
        for i, child in enumerate(self.tables_of(t, 5, f"{where}.children") or []):
            self.field(child, f"{where}.children[{i}]", depth + 1)
        self.key_values(t, 6, where)


def verify_arrow_schema(buf: bytes) -> int:
    """Check that ``buf`` is a structurally sound bare Schema FlatBuffer; return the position of its root table."""
    w = _Walker(buf)
    if buf[:4] == b"\xff\xff\xff\xff":
        raise w.fail("start", "begins with an IPC continuation marker: expected a bare Schema FlatBuffer")
    root = w.deref(0, "root offset")
    schema = w.table(root, "Schema")
    endianness = w.scalar(schema, 0, "<h", 0, "Schema.endianness")
    if endianness != 0:
        what = "big-endian" if endianness == 1 else f"unknown endianness {endianness}"
        raise w.fail("Schema.endianness", f"{what} schemas are not supported (ODF data is little-endian)")
    fields = w.tables_of(schema, 1, "Schema.fields")
    if fields is None:
        raise w.fail("Schema.fields", "missing")
    for i, pos in enumerate(fields):
        w.field(pos, f"fields[{i}]", 1)
    w.key_values(schema, 2, "Schema")
    w.vector(schema, 3, 8, "Schema.features")
    return root


def top_level_fields(buf: bytes) -> tuple[tuple[str, bool], ...]:
    """The top-level fields of a bare Schema FlatBuffer as ``(name, nullable)``, after checking the whole buffer:
    what a command needs of a dataset's schema (its NOT NULL columns) without importing pyarrow."""
    buf = bytes(buf)
    w = _Walker(buf)
    schema = w.table(verify_arrow_schema(buf), "Schema")
    out = []
    for i, pos in enumerate(w.tables_of(schema, 1, "Schema.fields") or []):
        t = w.table(pos, f"fields[{i}]")
        out.append((w.string(t, 0, f"fields[{i}].name") or "", bool(w.scalar(t, 1, "<B", 0, f"fields[{i}].nullable"))))
    return tuple(out)
