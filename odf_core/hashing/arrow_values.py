"""Value part of the logical hash (arrow-digest V0): the byte stream of one leaf column, built without per-row Python.

Per row (conformance notes §4): a null is the byte ``0x00``; fixed-size values are their little-endian bytes;
Bool is ``1`` (false) / ``2`` (true); Utf8/Binary is ``u64le(len)`` + bytes (FixedSizeBinary ``u64le(size)`` + bytes);
a list is ``u64le(len)`` followed by its items, each encoded by the same rules with the items' own validity.

Strategy: fixed-size columns without nulls go to the hasher straight from the Arrow value buffer (zero copy).
Everything else is *encoded*: :func:`_encode` turns an array into a ``binary``/``large_binary`` array whose i-th
value is the exact byte encoding of row i, so its data buffer is the stream to hash and its offsets delimit rows
(what a parent list needs). Fixed-size values with nulls: the values viewed as ``fixed_size_binary`` with nulls
filled by ``0x00``. Variable-size rows: per-row prefixes ``u64le(len)`` (``0x00`` markers on null rows) and
segments (value bytes or the children's encodings, null on null rows) are interleaved by one Arrow ``take``.
Long columns are cut into chunks; the next chunk is encoded on a worker thread while the current one is hashed.
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from functools import lru_cache, partial
from typing import Any, Callable, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as pt

from odf_core.hashing.arrow_types import fixed_width
from odf_core.hashing.errors import UnsupportedTypeError

ROWS_PER_CHUNK = 65536
BYTES_PER_CHUNK = 8 * 1024 * 1024  # value bytes of a binary column per chunk
ITEMS_PER_CHUNK = 1 << 20  # child items of a list column per chunk
INT32_OFFSETS_LIMIT = 2**31  # encoded strings at least this long switch from binary to large_binary

_LB = pa.large_binary()


@lru_cache(maxsize=1)
def _null_marker() -> pa.Scalar:
    """Built on first use: making a pyarrow scalar imports pandas (0.25 s), which a CLI command should not pay."""
    return pa.scalar(b"\x00", _LB)


class Hasher(Protocol):
    def update(self, data: Any, /) -> None: ...


# ---------------------------------------------------------------------------------------------------------------
# Entry point


def feed_column(hasher: Hasher, arr: pa.Array, *, pipeline: bool = True) -> None:
    """Absorb the values of ``arr`` into ``hasher`` in row order (the column's type was absorbed before)."""
    arr = normalize(arr)
    n = len(arr)
    if n == 0:
        return
    width = fixed_width(arr.type)
    if width is not None and arr.null_count == 0:
        hasher.update(arr.buffers()[1].slice(arr.offset * width, n * width))
        return
    bounds = chunk_bounds(arr)
    if len(bounds) == 1 or not pipeline:
        for start, length in bounds:
            hasher.update(_stream(_encode(arr.slice(start, length))))
        return
    _feed_pipelined(hasher, [partial(_slice_stream, arr, start, length) for start, length in bounds])


def _slice_stream(arr: pa.Array, start: int, length: int) -> Any:
    return _stream(_encode(arr.slice(start, length)))


def normalize(arr: pa.Array) -> pa.Array:
    """Bring an array to the physical form the encoders handle, keeping its logical values."""
    while True:
        t = arr.type
        if isinstance(t, pa.ExtensionType):
            arr = arr.storage
        elif pt.is_dictionary(t):
            arr = arr.dictionary_decode()
        elif pt.is_string_view(t) or pt.is_binary_view(t):
            arr = arr.cast(_LB)
        else:
            return arr


# ---------------------------------------------------------------------------------------------------------------
# Chunking and pipelining


def chunk_bounds(arr: pa.Array) -> list[tuple[int, int]]:
    """Split rows into ``(start, length)`` chunks that bound both the row count and the bytes/items per chunk."""
    n = len(arr)
    t = arr.type
    if pt.is_string(t) or pt.is_binary(t) or pt.is_large_string(t) or pt.is_large_binary(t):
        return _greedy_bounds(n, ROWS_PER_CHUNK, _offsets(arr), BYTES_PER_CHUNK)
    if pt.is_list(t) or pt.is_large_list(t):
        return _greedy_bounds(n, ROWS_PER_CHUNK, _offsets(arr), ITEMS_PER_CHUNK)
    if pt.is_fixed_size_list(t):
        return _greedy_bounds(n, max(1, min(ROWS_PER_CHUNK, ITEMS_PER_CHUNK // max(1, t.list_size))))
    if pt.is_fixed_size_binary(t):
        return _greedy_bounds(n, max(1, min(ROWS_PER_CHUNK, BYTES_PER_CHUNK // max(1, t.byte_width))))
    return _greedy_bounds(n, ROWS_PER_CHUNK)


def _greedy_bounds(n: int, rows: int, cum: np.ndarray | None = None, limit: int = 0) -> list[tuple[int, int]]:
    bounds = []
    start = 0
    while start < n:
        end = min(start + rows, n)
        if cum is not None and cum[end] - cum[start] > limit:
            end = max(start + 1, int(np.searchsorted(cum, cum[start] + limit, side="right")) - 1)
        bounds.append((start, end - start))
        start = end
    return bounds


_executor: ThreadPoolExecutor | None = None
_executor_pid = -1
_executor_lock = threading.Lock()


def executor() -> ThreadPoolExecutor:
    """The shared worker pool (re-created after a fork: a forked child has no worker threads)."""
    global _executor, _executor_pid
    with _executor_lock:
        if _executor is None or _executor_pid != os.getpid():
            _executor = ThreadPoolExecutor(max_workers=max(2, min(4, os.cpu_count() or 2)),
                                           thread_name_prefix="odf-hash")
            _executor_pid = os.getpid()
        return _executor


def _feed_pipelined(hasher: Hasher, jobs: list[Callable[[], Any]]) -> None:
    """Hash job i's bytes on this thread while job i+1 is encoded on a worker (numpy, Arrow and hashlib
    release the GIL)."""
    pool = executor()
    pending: Future = pool.submit(jobs[0])
    for job in jobs[1:]:
        ready = pending.result()
        pending = pool.submit(job)
        hasher.update(ready)
    hasher.update(pending.result())


# ---------------------------------------------------------------------------------------------------------------
# Encoders: array -> large_binary array whose i-th value is the encoding of row i


def _encode(arr: pa.Array) -> pa.Array:
    arr = normalize(arr)
    if len(arr) == 0:
        return _empty()
    t = arr.type
    width = fixed_width(t)
    if width is not None:
        return _encode_fixed(arr, width)
    if pt.is_boolean(t):
        return _encode_bool(arr)
    if pt.is_string(t) or pt.is_binary(t) or pt.is_large_string(t) or pt.is_large_binary(t):
        return _encode_binary(arr)
    if pt.is_fixed_size_binary(t):
        return _encode_fixed_size_binary(arr)
    if pt.is_list(t) or pt.is_large_list(t):
        return _encode_list(arr)
    if pt.is_fixed_size_list(t):
        return _encode_fixed_size_list(arr)
    raise UnsupportedTypeError("<list item>", t)


def _encode_fixed(arr: pa.Array, width: int) -> pa.Array:
    n, off = len(arr), arr.offset
    validity, values = arr.buffers()[:2]
    if arr.null_count == 0:
        return pa.Array.from_buffers(_LB, n, [None, _step_offsets(n, width, True),
                                              values.slice(off * width, n * width)])
    as_bytes = pa.Array.from_buffers(pa.binary(width), n, [validity, values], offset=off)
    return pc.fill_null(as_bytes.cast(_LB), _null_marker())


def _encode_bool(arr: pa.Array) -> pa.Array:
    out = _unpack_bits(arr.buffers()[1], arr.offset, len(arr)) + np.uint8(1)
    valid = _validity(arr)
    if valid is not None:
        out *= valid
    return pa.Array.from_buffers(_LB, len(arr), [None, _step_offsets(len(arr), 1, True), pa.py_buffer(out)])


def _encode_binary(arr: pa.Array) -> pa.Array:
    offsets = _offsets(arr)
    large = pt.is_large_string(arr.type) or pt.is_large_binary(arr.type)
    segments = arr.view(_LB if large else pa.binary())
    if not large and int(offsets[-1] - offsets[0]) + 9 * len(arr) >= INT32_OFFSETS_LIMIT:  # would overflow
        segments = segments.cast(_LB)
    return _join(np.diff(offsets), segments, _validity(arr))


def _encode_fixed_size_binary(arr: pa.Array) -> pa.Array:
    n, off, size = len(arr), arr.offset, arr.type.byte_width
    valid = _validity(arr)
    data = arr.buffers()[1].slice(off * size, n * size)
    segments = pa.Array.from_buffers(_LB, n, [_bitmap(valid), _step_offsets(n, size, True), data])
    return _join(np.full(n, size, np.int64), segments, valid)


def _encode_list(arr: pa.Array) -> pa.Array:
    offsets = _offsets(arr)
    base = int(offsets[0])
    items = _encode(arr.values.slice(base, int(offsets[-1]) - base))
    return _join_items(np.diff(offsets), offsets - base, items, _validity(arr))


def _encode_fixed_size_list(arr: pa.Array) -> pa.Array:
    n, size = len(arr), arr.type.list_size
    items = _encode(arr.values.slice(arr.offset * size, n * size))
    return _join_items(np.full(n, size, np.int64), np.arange(n + 1, dtype=np.int64) * size, items, _validity(arr))


def _join_items(lengths: np.ndarray, item_bounds: np.ndarray, items: pa.Array, valid: np.ndarray | None) -> pa.Array:
    """Rows of a list: row i spans items ``item_bounds[i]:item_bounds[i+1]`` of the encoded ``items``."""
    item_offsets = _offsets(items)
    n = len(lengths)
    segment_offsets = np.ascontiguousarray(item_offsets[item_bounds], dtype=np.int64)
    data = items.buffers()[2]
    if data is None:
        data = pa.py_buffer(b"")
    segments = pa.Array.from_buffers(_LB, n, [_bitmap(valid), pa.py_buffer(segment_offsets), data])
    return _join(lengths, segments, valid)


def _join(lengths: np.ndarray, segments: pa.Array, valid: np.ndarray | None) -> pa.Array:
    """Row i = ``u64le(lengths[i])`` + segment i, or ``0x00`` where ``valid`` is False (segments must be null there).

    Prefixes, segments and ``0x00`` markers go into one array ``[prefix_0.., segment_0.., marker_0..]`` and ``take``
    with indices ``p_0, n, p_1, n+1, …`` (``p_i`` = i, or the marker 2n+i on null rows) copies them out
    interleaved: its data buffer is the byte stream of the rows; a null segment contributes no bytes. The result
    has the segments' type: ``binary`` (32-bit offsets, a little faster) or ``large_binary``.
    """
    n = len(lengths)
    large = pt.is_large_binary(segments.type)
    prefixes = pa.Array.from_buffers(segments.type, n, [None, _step_offsets(n, 8, large),
                                                        pa.py_buffer(lengths.astype("<u8", copy=False))])
    if valid is None:
        pieces = pa.concat_arrays([prefixes, segments]).take(_interleave(n))
    else:
        indices: np.ndarray = np.empty((n, 2), _index_dtype(3 * n))
        indices[:, 0] = np.where(valid, _arange(n, 0), _arange(n, 2 * n))
        indices[:, 1] = _arange(n, n)
        pieces = pa.concat_arrays([prefixes, segments, _markers(n, large)]).take(pa.array(indices.reshape(-1)))
    row_offsets = np.ascontiguousarray(_offsets(pieces)[::2])
    return pa.Array.from_buffers(segments.type, n, [None, pa.py_buffer(row_offsets), pieces.buffers()[2]])


# ---------------------------------------------------------------------------------------------------------------
# Buffer helpers


def _stream(encoded: pa.Array) -> Any:
    """The bytes of all rows of an encoded array, as a zero-copy buffer slice."""
    offsets = _offsets(encoded)
    data = encoded.buffers()[2]
    start, end = int(offsets[0]), int(offsets[-1])
    return b"" if data is None or end == start else data.slice(start, end - start)


def _offsets(arr: pa.Array) -> np.ndarray:
    """The n+1 offsets of a binary/string/list array as numpy, honouring the array's slice offset (zero copy)."""
    t = arr.type
    dtype = np.int64 if pt.is_large_binary(t) or pt.is_large_string(t) or pt.is_large_list(t) else np.int32
    n, off = len(arr), arr.offset
    return np.frombuffer(arr.buffers()[1], dtype, n + 1, off * np.dtype(dtype).itemsize)


def _validity(arr: pa.Array) -> np.ndarray | None:
    """Row validity as a bool array, or None when the array has no nulls."""
    if arr.null_count == 0:
        return None
    return _unpack_bits(arr.buffers()[0], arr.offset, len(arr)).view(np.bool_)


def _unpack_bits(bitmap: pa.Buffer, offset: int, n: int) -> np.ndarray:
    """Bits ``offset .. offset+n`` of an Arrow (LSB-first) bitmap as 0/1 bytes; reads only the bytes needed."""
    first = offset // 8
    shift = offset - 8 * first
    raw = np.frombuffer(bitmap, np.uint8, (shift + n + 7) // 8, first)
    return np.unpackbits(raw, count=shift + n, bitorder="little")[shift:]


def _bitmap(valid: np.ndarray | None) -> pa.Buffer | None:
    return None if valid is None else pa.py_buffer(np.packbits(valid, bitorder="little"))


def _empty() -> pa.Array:
    return pa.Array.from_buffers(_LB, 0, [None, _step_offsets(0, 0, True), pa.py_buffer(b"")])


def _cached_for_chunks(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Memoize a constant-array builder for chunk-sized ``n`` (chunks repeat the same n); build bigger ones fresh."""
    cached = lru_cache(maxsize=16)(fn)

    def wrapper(n: int, *args: Any) -> Any:
        return cached(n, *args) if n <= ROWS_PER_CHUNK else fn(n, *args)

    wrapper.__doc__ = fn.__doc__
    return wrapper


@_cached_for_chunks
def _step_offsets(n: int, step: int, large: bool) -> pa.Buffer:
    """Offsets ``0, step, 2*step, …`` (n+1 of them) for rows of equal size, 64-bit if ``large`` else 32-bit."""
    return pa.py_buffer(np.arange(n + 1, dtype=np.int64 if large else np.int32) * step)


@_cached_for_chunks
def _markers(n: int, large: bool) -> pa.Array:
    """``n`` values ``b"\\x00"`` (the null marker) as ``large_binary`` or ``binary``."""
    return pa.Array.from_buffers(_LB if large else pa.binary(), n,
                                 [None, _step_offsets(n, 1, large), pa.py_buffer(np.zeros(n, np.uint8))])


def _index_dtype(limit: int) -> type:
    return np.int32 if limit < 2**31 else np.int64


@_cached_for_chunks
def _arange(n: int, start: int) -> np.ndarray:
    """``start, start+1, …, start+n-1`` as take indices (int32 unless they would overflow)."""
    out: np.ndarray = np.arange(start, start + n, dtype=_index_dtype(start + n))
    out.flags.writeable = False
    return out


@_cached_for_chunks
def _interleave(n: int) -> pa.Array:
    """Take indices ``0, n, 1, n+1, …, n-1, 2n-1``."""
    return pa.array(np.stack([_arange(n, 0), _arange(n, n)], axis=1).reshape(-1))
