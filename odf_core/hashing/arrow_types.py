"""Type part of the logical hash (arrow-digest V0): which Arrow types are hashed and how a type is encoded.

Every leaf column's hasher starts with ``u16le(type_id)`` plus extras (conformance notes §4). Encodings that differ
only in physical layout share one logical type: string/large_string/string_view, binary/large_binary/
fixed_size_binary/binary_view, list/large_list/fixed_size_list. Dictionary arrays hash as their value type and
extension types as their storage type, which is what the Rust reference sees when it reads the same Parquet file.
"""
from __future__ import annotations

import struct

import pyarrow as pa
import pyarrow.types as pt

from odf_core.hashing.errors import UnsupportedTypeError

TYPE_INT = 1
TYPE_FLOAT = 2
TYPE_BINARY = 3
TYPE_UTF8 = 4
TYPE_BOOL = 5
TYPE_DECIMAL = 6
TYPE_DATE = 7
TYPE_TIME = 8
TYPE_TIMESTAMP = 9
TYPE_LIST = 11

_TIME_UNITS = {"s": 0, "ms": 1, "us": 2, "ns": 3}

_U16 = struct.Struct("<H")
_U64 = struct.Struct("<Q")


def u64(n: int) -> bytes:
    """``u64le`` of ``n``; negative numbers wrap like Rust's ``as u64`` (two's complement)."""
    return _U64.pack(n & 0xFFFF_FFFF_FFFF_FFFF)


def logical_value_type(t: pa.DataType) -> pa.DataType:
    """The type whose values are hashed: dictionary → value type, extension → storage type (repeatedly)."""
    while True:
        if isinstance(t, pa.ExtensionType):
            t = t.storage_type
        elif pt.is_dictionary(t):
            t = t.value_type
        else:
            return t


def is_list_like(t: pa.DataType) -> bool:
    return pt.is_list(t) or pt.is_large_list(t) or pt.is_fixed_size_list(t)


def fixed_width(t: pa.DataType) -> int | None:
    """Byte width of types hashed as their raw little-endian value bytes, else None."""
    if (
        pt.is_integer(t)
        or pt.is_floating(t)
        or pt.is_decimal128(t)
        or pt.is_decimal256(t)
        or pt.is_date(t)
        or pt.is_time(t)
        or pt.is_timestamp(t)
    ):
        return t.bit_width // 8
    return None


def encode_type(t: pa.DataType, column: str) -> bytes:
    """The bytes a leaf column's hasher absorbs first; raises :class:`UnsupportedTypeError` naming ``column``."""
    t = logical_value_type(t)
    if pt.is_integer(t):
        return _U16.pack(TYPE_INT) + bytes([1 if pt.is_signed_integer(t) else 0]) + u64(t.bit_width)
    if pt.is_floating(t):
        return _U16.pack(TYPE_FLOAT) + u64(t.bit_width)
    if pt.is_binary(t) or pt.is_large_binary(t) or pt.is_fixed_size_binary(t) or pt.is_binary_view(t):
        return _U16.pack(TYPE_BINARY)
    if pt.is_string(t) or pt.is_large_string(t) or pt.is_string_view(t):
        return _U16.pack(TYPE_UTF8)
    if pt.is_boolean(t):
        return _U16.pack(TYPE_BOOL)
    if pt.is_decimal128(t) or pt.is_decimal256(t):
        return _U16.pack(TYPE_DECIMAL) + u64(t.bit_width) + u64(t.precision) + u64(t.scale)
    if pt.is_date32(t):
        return _U16.pack(TYPE_DATE) + u64(32) + _U16.pack(0)
    if pt.is_date64(t):
        return _U16.pack(TYPE_DATE) + u64(64) + _U16.pack(1)
    if pt.is_time32(t) or pt.is_time64(t):
        return _U16.pack(TYPE_TIME) + u64(t.bit_width) + _U16.pack(_TIME_UNITS[t.unit])
    if pt.is_timestamp(t):
        tz = b"\x00" if t.tz is None else u64(len(t.tz.encode())) + t.tz.encode()
        return _U16.pack(TYPE_TIMESTAMP) + _U16.pack(_TIME_UNITS[t.unit]) + tz
    if is_list_like(t):
        item = logical_value_type(t.value_type)
        if pt.is_struct(item):
            raise UnsupportedTypeError(column, t, "lists of structs are not defined by arrow-digest V0")
        return _U16.pack(TYPE_LIST) + encode_type(item, column)
    raise UnsupportedTypeError(column, t)
