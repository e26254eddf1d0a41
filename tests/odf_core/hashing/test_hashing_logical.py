"""Logical hash (arrow-digest V0) against a slow per-value reference written straight from conformance notes §4."""
from __future__ import annotations

import hashlib
import struct
from contextlib import contextmanager
from decimal import Decimal
from typing import Any, Iterator
from unittest import mock

import numpy as np
import pyarrow as pa
import pyarrow.types as pt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import odf_core.hashing.arrow_values as arrow_values
import odf_core.hashing.logical as logical
from odf_core.errors import OdfError
from odf_core.hashing import (
    RecordsDigest,
    SchemaMismatchError,
    UnsupportedTypeError,
    logical_hash_table,
)
from odf_core.identity.multihash import ARROW0_SHA3_256

# =====================================================================================================================
# Reference implementation: one value at a time from Python objects, nothing shared with the library.


def ref_u64(n: int) -> bytes:
    return struct.pack("<Q", n % (1 << 64))


def ref_u16(n: int) -> bytes:
    return struct.pack("<H", n)


REF_UNITS = {"s": 0, "ms": 1, "us": 2, "ns": 3}


def ref_type(t: pa.DataType) -> bytes:
    """§4 type table."""
    if pt.is_dictionary(t):
        return ref_type(t.value_type)
    if pt.is_integer(t):
        return ref_u16(1) + bytes([1 if pt.is_signed_integer(t) else 0]) + ref_u64(t.bit_width)
    if pt.is_floating(t):
        return ref_u16(2) + ref_u64(t.bit_width)
    if pt.is_binary(t) or pt.is_large_binary(t) or pt.is_fixed_size_binary(t) or pt.is_binary_view(t):
        return ref_u16(3)
    if pt.is_string(t) or pt.is_large_string(t) or pt.is_string_view(t):
        return ref_u16(4)
    if pt.is_boolean(t):
        return ref_u16(5)
    if pt.is_decimal(t):
        return ref_u16(6) + ref_u64(t.bit_width) + ref_u64(t.precision) + ref_u64(t.scale)
    if pt.is_date32(t):
        return ref_u16(7) + ref_u64(32) + ref_u16(0)
    if pt.is_date64(t):
        return ref_u16(7) + ref_u64(64) + ref_u16(1)
    if pt.is_time32(t):
        return ref_u16(8) + ref_u64(32) + ref_u16(REF_UNITS[t.unit])
    if pt.is_time64(t):
        return ref_u16(8) + ref_u64(64) + ref_u16(REF_UNITS[t.unit])
    if pt.is_timestamp(t):
        zone = b"\x00" if t.tz is None else ref_u64(len(t.tz.encode())) + t.tz.encode()
        return ref_u16(9) + ref_u16(REF_UNITS[t.unit]) + zone
    if pt.is_list(t) or pt.is_large_list(t) or pt.is_fixed_size_list(t):
        return ref_u16(11) + ref_type(t.value_type)
    raise AssertionError(f"reference does not know {t}")


def ref_value(t: pa.DataType, v: Any) -> bytes:
    """§4 value rules; temporal values arrive as their integer storage (see ``as_python``)."""
    if v is None:
        return b"\x00"
    if pt.is_dictionary(t):
        return ref_value(t.value_type, v)
    if pt.is_integer(t):
        return v.to_bytes(t.bit_width // 8, "little", signed=pt.is_signed_integer(t))
    if pt.is_float16(t):
        return struct.pack("<e", v)
    if pt.is_float32(t):
        return struct.pack("<f", v)
    if pt.is_float64(t):
        return struct.pack("<d", v)
    if pt.is_decimal(t):
        sign, digits, exponent = v.as_tuple()
        unscaled = int("".join(map(str, digits)) or "0") * 10 ** (exponent + t.scale)
        return (-unscaled if sign else unscaled).to_bytes(t.bit_width // 8, "little", signed=True)
    if pt.is_date(t) or pt.is_time(t) or pt.is_timestamp(t):
        return v.to_bytes(t.bit_width // 8, "little", signed=True)
    if pt.is_boolean(t):
        return b"\x02" if v else b"\x01"
    if pt.is_string(t) or pt.is_large_string(t) or pt.is_string_view(t):
        data = v.encode("utf-8")
        return ref_u64(len(data)) + data
    if pt.is_binary(t) or pt.is_large_binary(t) or pt.is_fixed_size_binary(t) or pt.is_binary_view(t):
        return ref_u64(len(v)) + v
    if pt.is_list(t) or pt.is_large_list(t) or pt.is_fixed_size_list(t):
        return ref_u64(len(v)) + b"".join(ref_value(t.value_type, x) for x in v)
    raise AssertionError(f"reference does not know {t}")


def storage_type(t: pa.DataType) -> pa.DataType:
    """Temporal types → same-width ints, recursively, so that ``to_pylist`` yields exact integers."""
    if pt.is_date32(t) or pt.is_time32(t):
        return pa.int32()
    if pt.is_date64(t) or pt.is_time64(t) or pt.is_timestamp(t):
        return pa.int64()
    if pt.is_list(t):
        return pa.list_(storage_type(t.value_type))
    if pt.is_large_list(t):
        return pa.large_list(storage_type(t.value_type))
    if pt.is_fixed_size_list(t):
        return pa.list_(storage_type(t.value_type), t.list_size)
    if pt.is_struct(t):
        return pa.struct([pa.field(f.name, storage_type(f.type)) for f in t.fields])
    return t


def as_python(col: pa.Array | pa.ChunkedArray) -> list:
    if pt.is_dictionary(col.type):
        col = col.cast(col.type.value_type)
    return col.cast(storage_type(col.type)).to_pylist()


def ref_logical_hash(table: pa.Table) -> bytes:
    record = hashlib.sha3_256()
    leaves: list[tuple[pa.DataType, list]] = []

    def walk(fields: list[pa.Field], level: int, columns: list[list]) -> None:
        for field, values in zip(fields, columns):
            name = field.name.encode("utf-8")
            record.update(ref_u64(len(name)) + name + ref_u64(level))
            if pt.is_struct(field.type):
                children = list(field.type.fields)
                # a null struct makes every leaf below it null
                walk(children, level + 1,
                     [[None if v is None else v[c.name] for v in values] for c in children])
            else:
                leaves.append((field.type, values))

    walk(list(table.schema), 0, [as_python(table.column(i)) for i in range(table.num_columns)])
    for t, values in leaves:
        column = hashlib.sha3_256(ref_type(t))
        for v in values:
            column.update(ref_value(t, v))
        record.update(column.digest())
    return record.digest()


# =====================================================================================================================
# Random tables of every supported type, with nulls everywhere.

LEAF_TYPES = [
    pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64(),
    pa.float16(), pa.float32(), pa.float64(),
    pa.decimal128(9, 2), pa.decimal128(38, 10), pa.decimal256(60, 5), pa.decimal128(5, 0),
    pa.date32(), pa.date64(),
    pa.time32("s"), pa.time32("ms"), pa.time64("us"), pa.time64("ns"),
    pa.timestamp("s"), pa.timestamp("ms", "UTC"), pa.timestamp("us", "+00:00"), pa.timestamp("ns", "Europe/Berlin"),
    pa.string(), pa.large_string(), pa.binary(), pa.large_binary(), pa.binary(3), pa.bool_(),
]


def value_strategy(t: pa.DataType) -> st.SearchStrategy:
    if pt.is_integer(t):
        lo, hi = (-(1 << (t.bit_width - 1)), (1 << (t.bit_width - 1)) - 1) if pt.is_signed_integer(t) \
            else (0, (1 << t.bit_width) - 1)
        inner = st.integers(lo, hi)
    elif pt.is_float16(t):
        inner = st.floats(width=16, allow_nan=False)
    elif pt.is_float32(t):
        inner = st.floats(width=32, allow_nan=False)
    elif pt.is_float64(t):
        inner = st.floats()  # NaN included: its exact bits must survive
    elif pt.is_decimal(t):
        bound = Decimal(10) ** (t.precision - t.scale - 1)
        inner = st.decimals(min_value=-bound, max_value=bound, places=t.scale, allow_nan=False, allow_infinity=False)
    elif pt.is_date32(t):
        inner = st.integers(-100_000, 100_000)
    elif pt.is_date64(t):
        inner = st.integers(-100_000, 100_000).map(lambda d: d * 86_400_000)
    elif pt.is_time32(t):
        inner = st.integers(0, 86_399 if t.unit == "s" else 86_399_999)
    elif pt.is_time64(t):
        inner = st.integers(0, 86_399_999_999 if t.unit == "us" else 86_399_999_999_999)
    elif pt.is_timestamp(t):
        inner = st.integers(-(1 << 50), 1 << 50)
    elif pt.is_string(t) or pt.is_large_string(t):
        inner = st.text(max_size=12)
    elif pt.is_fixed_size_binary(t):
        inner = st.binary(min_size=t.byte_width, max_size=t.byte_width)
    elif pt.is_binary(t) or pt.is_large_binary(t):
        inner = st.binary(max_size=12)
    elif pt.is_boolean(t):
        inner = st.booleans()
    elif pt.is_fixed_size_list(t):
        inner = st.lists(value_strategy(t.value_type), min_size=t.list_size, max_size=t.list_size)
    elif pt.is_list(t) or pt.is_large_list(t):
        inner = st.lists(value_strategy(t.value_type), max_size=4)
    elif pt.is_struct(t):
        inner = st.fixed_dictionaries({f.name: value_strategy(f.type) for f in t.fields})
    else:
        raise AssertionError(t)
    return st.none() | inner


leaf_types = st.sampled_from(LEAF_TYPES)


def _list_types(item: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(
        item.map(pa.list_),
        item.map(pa.large_list),
        st.tuples(item, st.integers(0, 3)).map(lambda a: pa.list_(a[0], a[1])),
    )


list_types = _list_types(leaf_types | _list_types(leaf_types))  # nested lists up to depth 2
column_types = leaf_types | list_types | st.recursive(
    leaf_types | list_types,
    lambda children: st.lists(children, min_size=1, max_size=3).map(
        lambda ts: pa.struct([pa.field(f"f{i}", t) for i, t in enumerate(ts)])
    ),
    max_leaves=4,
)


@st.composite
def tables(draw: st.DrawFn, max_rows: int = 25) -> pa.Table:
    types = draw(st.lists(column_types, min_size=1, max_size=4))
    n = draw(st.integers(0, max_rows))
    columns = {}
    for i, t in enumerate(types):
        values = draw(st.lists(value_strategy(t), min_size=n, max_size=n))
        arr = pa.array(values, type=t)
        if (pt.is_string(t) or pt.is_integer(t) or pt.is_binary(t)) and draw(st.booleans()):
            arr = arr.dictionary_encode()
        columns[f"c{i}"] = arr
    return pa.table(columns)


@contextmanager
def tiny_chunks() -> Iterator[None]:
    """Force many chunks per column, the large_binary path for strings and column-parallel hashing, so that those
    code paths run on small tables."""
    with mock.patch.object(arrow_values, "ROWS_PER_CHUNK", 3), \
            mock.patch.object(arrow_values, "BYTES_PER_CHUNK", 16), \
            mock.patch.object(arrow_values, "ITEMS_PER_CHUNK", 4), \
            mock.patch.object(arrow_values, "INT32_OFFSETS_LIMIT", 20), \
            mock.patch.object(logical, "PARALLEL_MIN_VALUES", 1):
        yield


def random_batches(table: pa.Table, cuts: list[int]) -> list[pa.RecordBatch]:
    bounds = sorted({0, table.num_rows, *(c % (table.num_rows + 1) for c in cuts)})
    out = []
    for a, b in zip(bounds, bounds[1:]):
        out.extend(table.slice(a, b - a).to_batches())
    return out


# =====================================================================================================================
# Tests


def test_published_vector_from_kamu_cli() -> None:
    # kamu-data/kamu-cli, src/adapter/http/tests/tests/test_data_query.rs (test_data_query_handler_full): the
    # query "select offset, city, population ... order by offset desc" returns rows (1, "B", 200), (0, "A", 100) with
    # schema offset Int64, city Utf8, population UInt64 and "resultHash" = the arrow-digest V0 logical hash below.
    table = pa.table({
        "offset": pa.array([1, 0], pa.int64()),
        "city": pa.array(["B", "A"], pa.string()),
        "population": pa.array([200, 100], pa.uint64()),
    })
    expected = "f9680c001200b3483eecc3d5c6b50ee6b8cba11b51c08f89ea1f53d3a334c743199f5fe656e"
    assert logical_hash_table(table).to_multibase() == expected
    assert ref_logical_hash(table).hex() == expected[len("f9680c00120"):]
    # the same records with city dictionary-encoded or as large_string, split into single-row batches
    for city in (pa.array(["B", "A"]).dictionary_encode(), pa.array(["B", "A"], pa.large_string())):
        variant = table.set_column(1, "city", city)
        assert logical_hash_table(variant.to_batches(max_chunksize=1)).to_multibase() == expected


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table=tables(), cuts=st.lists(st.integers(0, 100), max_size=4), window=st.tuples(st.integers(0, 30),
                                                                                          st.integers(0, 30)))
def test_matches_reference_on_random_tables(table: pa.Table, cuts: list[int], window: tuple[int, int]) -> None:
    expected = ref_logical_hash(table)
    got = logical_hash_table(table)
    assert got.code == ARROW0_SHA3_256
    assert got.digest == expected
    # invariant under how rows are split into batches, and under chunked/pipelined/parallel execution
    batches = random_batches(table, cuts)
    assert logical_hash_table(batches, schema=table.schema, parallel=False).digest == expected
    with tiny_chunks():
        assert logical_hash_table(batches, schema=table.schema).digest == expected
    # arrays with a non-zero slice offset
    start = window[0] % (table.num_rows + 1)
    sliced = table.slice(start, window[1])
    assert logical_hash_table(sliced).digest == ref_logical_hash(sliced)
    with tiny_chunks():
        assert logical_hash_table(sliced).digest == ref_logical_hash(sliced)


def _with_all_valid_bitmap(arr: pa.Array) -> pa.Array:
    """The same values with an explicit all-ones validity bitmap instead of none."""
    assert arr.null_count == 0 and arr.offset == 0
    bitmap = pa.py_buffer(np.packbits(np.ones(len(arr), bool), bitorder="little"))
    if pt.is_list(arr.type):
        return pa.Array.from_buffers(arr.type, len(arr), [bitmap, arr.buffers()[1]], children=[arr.values])
    return pa.Array.from_buffers(arr.type, len(arr), [bitmap, *arr.buffers()[1:]])


@pytest.mark.parametrize("arr", [
    pa.array([1, -2, 3], pa.int64()),
    pa.array([1.5, 0.0, -0.0], pa.float32()),
    pa.array([True, False, True]),
    pa.array(["a", "", "ccc"]),
    pa.array([b"ab", b"cd"], pa.binary(2)),
    pa.array([[1, 2], [], [3]], pa.list_(pa.int32())),
], ids=lambda a: str(a.type))
def test_validity_bitmap_presence_does_not_matter(arr: pa.Array) -> None:
    with_bitmap = _with_all_valid_bitmap(arr)
    assert arr.buffers()[0] is None and with_bitmap.buffers()[0] is not None
    assert with_bitmap.to_pylist() == arr.to_pylist()
    a = logical_hash_table(pa.table({"x": arr}))
    b = logical_hash_table(pa.table({"x": with_bitmap}))
    assert a == b
    assert a.digest == ref_logical_hash(pa.table({"x": arr}))


def test_null_slots_backed_by_data() -> None:
    # Arrow allows a null string or list to cover a non-empty range of the data; those bytes must not be hashed.
    strings = pa.Array.from_buffers(pa.string(), 3, [
        pa.py_buffer(np.packbits([1, 0, 1], bitorder="little")),
        pa.py_buffer(np.array([0, 2, 5, 6], np.int32)),
        pa.py_buffer(b"abXYZc"),
    ])
    assert strings.to_pylist() == ["ab", None, "c"]
    lists = pa.ListArray.from_buffers(pa.list_(pa.int8()), 3, [
        pa.py_buffer(np.packbits([1, 0, 1], bitorder="little")),
        pa.py_buffer(np.array([0, 1, 3, 4], np.int32)),
    ], children=[pa.array([1, 7, 7, 2], pa.int8())])
    assert lists.to_pylist() == [[1], None, [2]]
    table = pa.table({"s": strings, "l": lists})
    clean = pa.table({"s": pa.array(["ab", None, "c"]), "l": pa.array([[1], None, [2]], pa.list_(pa.int8()))})
    assert logical_hash_table(table) == logical_hash_table(clean)
    assert logical_hash_table(table).digest == ref_logical_hash(clean)


def test_physical_layouts_of_one_logical_type_hash_the_same() -> None:
    def h(arr: pa.Array) -> bytes:
        return logical_hash_table(pa.table({"x": arr})).digest

    words = ["foo", None, "", "bär"]
    assert h(pa.array(words, pa.string())) == h(pa.array(words, pa.large_string())) \
        == h(pa.array(words, pa.string_view())) == h(pa.array(words).dictionary_encode())
    blobs = [b"one", b"two", None, b"six"]
    assert h(pa.array(blobs, pa.binary())) == h(pa.array(blobs, pa.large_binary())) \
        == h(pa.array(blobs, pa.binary(3))) == h(pa.array(blobs, pa.binary_view()))
    lists = [[1, 2], None, [3, None]]
    assert h(pa.array(lists, pa.list_(pa.int16()))) == h(pa.array(lists, pa.large_list(pa.int16()))) \
        == h(pa.array(lists, pa.list_(pa.int16(), 2)))
    # arrow-digest's own test: Binary ["one", "two"] equals FixedSizeBinary(3) over b"onetwo"
    assert h(pa.array([b"one", b"two"])) == h(pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(3), 2, [None, pa.py_buffer(b"onetwo")]))


@pytest.mark.parametrize("a,b", [
    (pa.array([1, 2, 3], pa.int32()), pa.array([1, 2, 3], pa.uint32())),
    (pa.array([1, 2], pa.timestamp("ms", "UTC")), pa.array([1, 2], pa.timestamp("ms", "+00:00"))),
    (pa.array([1, 2], pa.timestamp("ms", "UTC")), pa.array([1, 2], pa.timestamp("ms"))),
    (pa.array([1, 2], pa.timestamp("ms")), pa.array([1, 2], pa.timestamp("us"))),
    (pa.array([1, 2], pa.date32()), pa.array([1, 2], pa.int32())),
    (pa.array([1, 2], pa.time32("s")), pa.array([1, 2], pa.time32("ms"))),
    (pa.array(["a"]), pa.array([b"a"])),
    (pa.array([Decimal("1.0")], pa.decimal128(5, 1)), pa.array([Decimal("1.0")], pa.decimal128(6, 1))),
    (pa.array([1, 2, 3], pa.int32()), pa.array([1, 2, None, 3], pa.int32())),
    (pa.array([[0, 1, 2], None, [3, None, 4, 5], [6, 7]]), pa.array([[0, 1, 2], None, [3, None, 4], [5, 6, 7]])),
], ids=["int32-uint32", "UTC-+00:00", "UTC-naive", "ms-us", "date32-int32", "s-ms", "utf8-binary",
        "precision", "null-inserted", "list-item-slides"])
def test_different_types_or_values_hash_differently(a: pa.Array, b: pa.Array) -> None:
    assert logical_hash_table(pa.table({"x": a})) != logical_hash_table(pa.table({"x": b}))


def test_names_are_hashed_but_nullability_and_metadata_are_not() -> None:
    values = [pa.array([1, 2, 3], pa.int32()), pa.StructArray.from_arrays(
        [pa.array(["a", "b", "c"]), pa.array([3, 2, 1], pa.int32())], names=["c", "d"])]

    def h(*fields: pa.Field, metadata: dict | None = None) -> bytes:
        return logical_hash_table(pa.Table.from_arrays(values, schema=pa.schema(fields, metadata=metadata))).digest

    struct_t = pa.struct([pa.field("c", pa.string(), False), pa.field("d", pa.int32(), False)])
    base = h(pa.field("a", pa.int32(), False), pa.field("b", struct_t, False))
    assert base == h(pa.field("a", pa.int32(), True), pa.field("b", struct_t, True), metadata={"k": "v"})
    assert base != h(pa.field("a", pa.int32()), pa.field("bee", struct_t))  # arrow-digest's test_batch_nested
    renamed_child = pa.struct([pa.field("c", pa.string()), pa.field("e", pa.int32())])
    assert base != h(pa.field("a", pa.int32()), pa.field("b", renamed_child))


def test_struct_validity_is_anded_into_leaves() -> None:
    # arrow-digest's test_batch_nested: an all-valid struct bitmap hashes like none, a null row does not
    c, d = pa.array(["a", "b", "c"]), pa.array([3, 2, 1], pa.int32())
    plain = pa.StructArray.from_arrays([c, d], names=["c", "d"])
    all_valid = pa.StructArray.from_arrays([c, d], names=["c", "d"], mask=pa.array([False, False, False]))
    middle_null = pa.StructArray.from_arrays([c, d], names=["c", "d"], mask=pa.array([False, True, False]))
    h = {name: logical_hash_table(pa.table({"a": pa.array([1, 2, 3], pa.int32()), "b": s}))
         for name, s in [("plain", plain), ("all_valid", all_valid), ("middle_null", middle_null)]}
    assert h["plain"] == h["all_valid"] != h["middle_null"]
    # a null parent nulls the leaf exactly like a null leaf under a valid parent
    leaf_null = pa.StructArray.from_arrays([pa.array(["a", None, "c"]), pa.array([3, None, 1], pa.int32())],
                                           names=["c", "d"])
    assert h["middle_null"] == logical_hash_table(pa.table({"a": pa.array([1, 2, 3], pa.int32()), "b": leaf_null}))
    # deeper nesting with nulls at two levels, sliced
    inner = pa.StructArray.from_arrays([pa.array([1, 2, 3, 4]), pa.array([[1], None, [2, 3], []])],
                                       names=["x", "y"], mask=pa.array([False, False, True, False]))
    outer = pa.StructArray.from_arrays([inner, pa.array([True, None, False, True])], names=["in", "flag"],
                                       mask=pa.array([True, False, False, False]))
    table = pa.table({"o": outer})
    for t in (table, table.slice(1), table.slice(1, 2)):
        assert logical_hash_table(t).digest == ref_logical_hash(t)


def test_bool_bitmaps_from_arrow_digest_tests() -> None:
    # arrow-digest's test_bool_array: values bitmap 0b0011_0101 (len 6) is [T, F, T, F, T, T]; bits past the length
    # do not count; with validity 0b1110_1110 over values 0b1111_0101 it is [None, F, T, F, None, T].
    def bools(values: int, nulls: int | None) -> pa.Array:
        validity = None if nulls is None else pa.py_buffer(bytes([nulls]))
        return pa.Array.from_buffers(pa.bool_(), 6, [validity, pa.py_buffer(bytes([values]))])

    def h(arr: pa.Array) -> bytes:
        return logical_hash_table(pa.table({"b": arr})).digest

    assert h(bools(0b0011_0101, None)) == h(pa.array([True, False, True, False, True, True]))
    assert h(bools(0b0011_0101, None)) == h(bools(0b1111_0101, None))
    assert h(bools(0b0011_0101, None)) != h(pa.array([True, False, True, False, True, False]))
    assert h(bools(0b1111_0101, 0b1110_1110)) == h(pa.array([None, False, True, False, None, True]))
    assert h(bools(0b1111_0101, 0b1110_1110)) == ref_logical_hash(pa.table({"b": bools(0b1111_0101, 0b1110_1110)}))


def test_dictionary_arrays_hash_as_their_values_at_any_level() -> None:
    words = pa.array(["x", "y", None, "x", "z"])
    dict_words = words.dictionary_encode()
    lists_plain = pa.ListArray.from_arrays(pa.array([0, 2, 2, 5], pa.int32()), words)
    lists_dict = pa.ListArray.from_arrays(pa.array([0, 2, 2, 5], pa.int32()), dict_words)
    struct_plain = pa.StructArray.from_arrays([words.slice(0, 3)], names=["w"])
    struct_dict = pa.StructArray.from_arrays([dict_words.slice(2, 3)], names=["w"])
    plain = pa.table({"l": lists_plain, "s": struct_plain})
    assert logical_hash_table(plain) != logical_hash_table(pa.table({"l": lists_dict, "s": struct_dict}))
    struct_dict = pa.StructArray.from_arrays([dict_words.slice(0, 3)], names=["w"])
    assert logical_hash_table(plain) == logical_hash_table(pa.table({"l": lists_dict, "s": struct_dict}))
    assert logical_hash_table(plain).digest == ref_logical_hash(plain)


@pytest.mark.parametrize("data_type", [
    pa.map_(pa.string(), pa.int32()),
    pa.dense_union([pa.field("i", pa.int32())]),
    pa.month_day_nano_interval(),
    pa.duration("ms"),
    pa.null(),
    pa.list_(pa.struct([pa.field("a", pa.int32())])),
    pa.decimal32(5, 2),
], ids=str)
def test_unsupported_types_are_rejected_naming_the_column(data_type: pa.DataType) -> None:
    schema = pa.schema([pa.field("ok", pa.int64()), pa.field("outer", pa.struct([pa.field("bad_col", data_type)]))])
    with pytest.raises(UnsupportedTypeError) as info:
        RecordsDigest(schema)
    assert isinstance(info.value, OdfError)
    assert "outer.bad_col" in str(info.value) and str(data_type) in str(info.value)


def test_batches_must_match_the_digest_schema() -> None:
    digest = RecordsDigest(pa.schema([pa.field("a", pa.int64()), pa.field("t", pa.timestamp("ms", "UTC"))]))
    good = pa.record_batch([pa.array([1], pa.int64()), pa.array([1], pa.timestamp("ms", "UTC"))], names=["a", "t"])
    digest.update(good)
    wrong_zone = pa.record_batch([pa.array([1], pa.int64()), pa.array([1], pa.timestamp("ms"))], names=["a", "t"])
    with pytest.raises(SchemaMismatchError, match="'t'"):
        digest.update(wrong_zone)
    with pytest.raises(SchemaMismatchError, match="leaf columns"):
        digest.update(pa.record_batch([pa.array([1], pa.int64())], names=["a"]))
    renamed = pa.record_batch(good.columns, names=["a", "u"])
    with pytest.raises(SchemaMismatchError, match="'u'"):
        digest.update(renamed)


def test_streaming_digest_equals_one_shot_and_is_final() -> None:
    table = pa.table({"n": pa.array(range(1000), pa.int64()), "s": pa.array([str(i) if i % 7 else None
                                                                              for i in range(1000)])})
    digest = RecordsDigest(table.schema)
    for batch in table.to_batches(max_chunksize=99):
        digest.update(batch)
    first = digest.finalize()
    assert len(first) == 32 and digest.finalize() == first
    assert first == logical_hash_table(table).digest == ref_logical_hash(table)
    with pytest.raises(OdfError, match="after finalize"):
        digest.update(table.to_batches()[0])


def test_empty_inputs() -> None:
    schema = pa.schema([pa.field("a", pa.int64()), pa.field("b", pa.list_(pa.string()))])
    empty = schema.empty_table()
    assert logical_hash_table(empty).digest == ref_logical_hash(empty)
    assert logical_hash_table([], schema=schema) == logical_hash_table(empty)
    with pytest.raises(OdfError, match="without a schema"):
        logical_hash_table([])


def test_long_columns_across_many_chunks_match_reference() -> None:
    # Real chunk sizes (no patching): > ROWS_PER_CHUNK rows so the pipelined path runs, nulls everywhere.
    n = arrow_values.ROWS_PER_CHUNK * 2 + 123
    rng = np.random.default_rng(7)
    valid = rng.random(n) > 0.1
    lens = rng.integers(0, 6, n)
    table = pa.table({
        "i": pa.array(rng.integers(-1000, 1000, n), mask=~valid),
        "s": pa.array([("x" * int(k)) if v else None for k, v in zip(lens, valid)]),
        "b": pa.array(rng.random(n) > 0.5, mask=~valid),
        "l": pa.array([[int(k)] * int(k) if v else None for k, v in zip(lens, valid)], pa.list_(pa.int16())),
    })
    expected = ref_logical_hash(table)
    assert logical_hash_table(table).digest == expected
    assert logical_hash_table(table, parallel=False).digest == expected
    floats = pa.table({"f": pa.array([0.0, -0.0, float("nan"), float("inf"), None], pa.float64())})
    assert logical_hash_table(floats).digest == ref_logical_hash(floats)
