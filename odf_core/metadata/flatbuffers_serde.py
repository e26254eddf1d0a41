"""FlatBuffers encoding of metadata, byte-compatible with the ODF reference implementation (conformance §1).

The encoder walks the model's wire specs in schema order in two passes per table (variable-size values first,
then the table's fields). The decoder is a bounds-checked reader: any truncated or corrupted input raises
:class:`~odf_core.errors.DecodeError` instead of crashing or producing a wrong object.
"""
from __future__ import annotations

import struct
from typing import Any

from odf_core.metadata.flatbuffers_lib import flatbuffers
from odf_core.metadata.flatbuffers_lib import number_types as N

from odf_core.errors import DecodeError, InvalidIdentifier
from odf_core.identity import DatasetID, Multihash
from odf_core.identity.multihash import ODF_METADATA_BLOCK
from odf_core.metadata.manifests import BlockVersionSettingError
from odf_core.metadata.schema import W, FieldInfo, Wire, fields_of, slot_count, table, union
from odf_core.metadata.timestamp import InvalidTimestamp, Timestamp

# ------------------------------------------------------------------------------------------------------------------
# Encoding
# ------------------------------------------------------------------------------------------------------------------


class _Builder(flatbuffers.Builder):
    """A builder that knows how the ``Timestamp`` struct is aligned in the buffer being written."""

    def __init__(self, size: int, timestamp_alignment: int):
        super().__init__(size)
        self.timestamp_alignment = timestamp_alignment


TIMESTAMP_ALIGNMENT_V2 = 1
"""Block manifest versions up to 2 (and ODF v0.34.1) push the struct unaligned: the reference's old quirk (§1)."""
TIMESTAMP_ALIGNMENT_V3 = 4
"""Block manifest version 3 (the reference since 0.265.0) aligns it to 4, its largest member."""


def _place_timestamp(b: flatbuffers.Builder, ts: Timestamp) -> None:
    # Layout <iHxxII>; aligned as the block's manifest version says (1 unless told otherwise).
    year, ordinal, secs, nanos = ts.parts()
    b.Prep(getattr(b, "timestamp_alignment", TIMESTAMP_ALIGNMENT_V2), 16)
    b.Place(nanos, N.Uint32Flags)
    b.Place(secs, N.Uint32Flags)
    b.Pad(2)
    b.Place(ordinal, N.Uint16Flags)
    b.Place(year, N.Int32Flags)


def _create_value(b: flatbuffers.Builder, w: Wire, v: Any, wrapped: bool = False) -> int | None:
    """Pass 1: create a non-scalar value and return its offset (None for inline values)."""
    k = w.kind
    if k is W.STR:
        return b.CreateString(v)
    if k is W.MULTIHASH or k is W.DATASET_ID:
        return b.CreateByteVector(v.to_bytes())
    if k is W.BYTES:
        return b.CreateByteVector(bytes(v))
    if k is W.TABLE or k is W.UNION:
        return encode_table(b, v)
    if k is W.LIST:
        elems = []
        for x in v:
            off = _create_value(b, w.ref, x)
            if wrapped:
                b.StartObject(2)
                b.PrependUint8Slot(0, union(w.ref.ref).tag_of(x), 0)
                b.PrependUOffsetTRelativeSlot(1, off, 0)
                off = b.EndObject()
            elems.append(off)
        b.StartVector(4, len(elems), 4)
        for off in reversed(elems):
            b.PrependUOffsetTRelative(off)
        return b.EndVector()
    return None


def _add_field(b: flatbuffers.Builder, f: FieldInfo, v: Any, off: int | None) -> None:
    """Pass 2: add one present field to the open table."""
    k, s = f.wire.kind, f.slot
    if k is W.U64:
        b.PrependUint64Slot(s, v, 0)
    elif k is W.U32:
        b.PrependUint32Slot(s, v, 0)
    elif k is W.U64N:
        b.PrependUint64Slot(s, v, None)
    elif k is W.I64:
        b.PrependInt64Slot(s, v, 0)
    elif k is W.I32:
        b.PrependInt32Slot(s, v, 0)
    elif k is W.BOOLN:
        b.PrependBoolSlot(s, bool(v), None)
    elif k is W.ENUM:
        b.PrependInt32Slot(s, f.wire.ref.index_of(v), 0)
    elif k is W.ENUMN:
        b.PrependInt32Slot(s, f.wire.ref.index_of(v), None)
    elif k is W.ENUMN16:
        b.PrependInt16Slot(s, f.wire.ref.index_of(v), None)
    elif k is W.TIMESTAMP:
        _place_timestamp(b, v)
        b.Slot(s)
    elif k is W.UNION:
        b.PrependUint8Slot(s, union(f.wire.ref).tag_of(v), 0)
        b.PrependUOffsetTRelativeSlot(s + 1, off, 0)
    else:
        b.PrependUOffsetTRelativeSlot(s, off, 0)


def encode_table(b: flatbuffers.Builder, obj: Any) -> int:
    fs = fields_of(type(obj))
    values = [getattr(obj, f.name) for f in fs]
    offsets = [
        None if v is None else _create_value(b, f.wire, v, f.wire.wrapped) for f, v in zip(fs, values)
    ]
    b.StartObject(slot_count(type(obj)))
    for f, v, off in zip(fs, values, offsets):
        if v is not None:
            _add_field(b, f, v, off)
    return b.EndObject()


def encode_root(obj: Any, timestamp_alignment: int = TIMESTAMP_ALIGNMENT_V2) -> bytes:
    """Serialize a model object as a finished FlatBuffer with it as the root table."""
    b = _Builder(256, timestamp_alignment)
    b.Finish(encode_table(b, obj))
    return bytes(b.Output())


def wrap_manifest(kind: int, version: int, content: bytes) -> bytes:
    b = flatbuffers.Builder(len(content) + 64)
    vec = b.CreateByteVector(content)
    b.StartObject(3)
    b.PrependInt64Slot(0, kind, 0)
    b.PrependInt32Slot(1, version, 0)
    b.PrependUOffsetTRelativeSlot(2, vec, 0)
    b.Finish(b.EndObject())
    return bytes(b.Output())


# ------------------------------------------------------------------------------------------------------------------
# Decoding
# ------------------------------------------------------------------------------------------------------------------

_U8, _I16, _U16, _I32, _U32, _I64, _U64 = (struct.Struct(f) for f in ("<B", "<h", "<H", "<i", "<I", "<q", "<Q"))


class _Reader:
    """Bounds-checked access to a FlatBuffer."""

    def __init__(self, buf: bytes, what: str):
        self.buf = memoryview(buf)
        self.n = len(buf)
        self.what = what

    def fail(self, problem: str) -> DecodeError:
        return DecodeError(f"corrupted {self.what}: {problem}")

    def get(self, st: struct.Struct, pos: int) -> int:
        if pos < 0 or pos + st.size > self.n:
            raise self.fail(f"read of {st.size} bytes at {pos} is out of bounds (buffer is {self.n} bytes)")
        return st.unpack_from(self.buf, pos)[0]

    def indirect(self, pos: int) -> int:
        return pos + self.get(_U32, pos)

    def table(self, pos: int) -> tuple[int, tuple[int, ...]]:
        """(table position, its vtable's field offsets), the vtable read in one go."""
        vt = pos - self.get(_I32, pos)
        vt_len = self.get(_U16, vt)
        obj_len = self.get(_U16, vt + 2)
        if vt_len < 4 or vt_len % 2 or vt + vt_len > self.n or pos + obj_len > self.n:
            raise self.fail(f"invalid vtable at {vt}")
        return pos, struct.unpack_from(f"<{(vt_len - 4) // 2}H", self.buf, vt + 4)

    def field(self, tab: tuple[int, tuple[int, ...]], slot: int) -> int | None:
        pos, offsets = tab
        rel = offsets[slot] if slot < len(offsets) else 0
        return pos + rel if rel else None

    def vector(self, pos: int) -> tuple[int, int]:
        start = self.indirect(pos)
        length = self.get(_U32, start)
        return start + 4, length

    def bytes_(self, pos: int) -> bytes:
        start, length = self.vector(pos)
        if start + length > self.n:
            raise self.fail(f"vector of {length} bytes at {start} runs past the end")
        return bytes(self.buf[start:start + length])

    def string(self, pos: int) -> str:
        raw = self.bytes_(pos)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"string at {pos} is not valid UTF-8") from None


def _decode_value(r: _Reader, w: Wire, pos: int, path: str, wrapped: bool = False) -> Any:
    k = w.kind
    if k is W.STR:
        return r.string(pos)
    if k is W.MULTIHASH or k is W.DATASET_ID:
        raw = r.bytes_(pos)
        try:
            return Multihash.from_bytes(raw) if k is W.MULTIHASH else DatasetID.from_bytes(raw)
        except InvalidIdentifier as e:
            raise r.fail(f"{path}: {e}") from None
    if k is W.BYTES:
        return r.bytes_(pos)
    if k is W.TABLE:
        return decode_table(r, table(w.ref), r.indirect(pos), path)
    if k is W.LIST:
        start, length = r.vector(pos)
        if start + 4 * length > r.n:
            raise r.fail(f"{path}: vector of {length} elements runs past the end")
        out = []
        for i in range(length):
            epos = start + 4 * i
            if wrapped:
                tab = r.table(r.indirect(epos))
                out.append(_decode_union(r, w.ref.ref, tab, 0, f"{path}[{i}]"))
            else:
                out.append(_decode_value(r, w.ref, epos, f"{path}[{i}]"))
        return tuple(out)
    raise r.fail(f"{path}: unexpected wire kind {k}")


def _decode_union(r: _Reader, name: str, tab: tuple[int, tuple[int, ...]], slot: int, path: str) -> Any:
    tpos = r.field(tab, slot)
    vpos = r.field(tab, slot + 1)
    if tpos is None or vpos is None:
        return None
    tag = r.get(_U8, tpos)
    u = union(name)
    if not 1 <= tag <= len(u.variants):
        raise r.fail(f"{path}: unknown {name} variant tag {tag}")
    return decode_table(r, u.variants[tag - 1], r.indirect(vpos), path)


def decode_table(r: _Reader, cls: type, pos: int, path: str, given: dict[str, Any] | None = None) -> Any:
    """``given``: attributes that are not fields of the bytes (a block's manifest version)."""
    tab = r.table(pos)
    kwargs: dict[str, Any] = dict(given or {})
    for f in fields_of(cls):
        fpath = f"{path}.{f.yaml_name}" if path else f.yaml_name
        k = f.wire.kind
        if k is W.UNION:
            v = _decode_union(r, f.wire.ref, tab, f.slot, fpath)
            if v is not None:
                kwargs[f.name] = v
            elif f.required:
                raise r.fail(f"{fpath}: required union is missing")
            continue
        fpos = r.field(tab, f.slot)
        if fpos is None:
            if k in (W.U64, W.U32, W.I64, W.I32):
                kwargs[f.name] = 0
            elif k is W.ENUM:
                kwargs[f.name] = f.wire.ref.from_index(0)
            elif f.required:
                raise r.fail(f"{fpath}: required field is missing")
            continue
        if k is W.U64:
            v = r.get(_U64, fpos)
        elif k is W.U64N:
            v = r.get(_U64, fpos)
        elif k is W.U32:
            v = r.get(_U32, fpos)
        elif k is W.I64:
            v = r.get(_I64, fpos)
        elif k is W.I32:
            v = r.get(_I32, fpos)
        elif k is W.BOOLN:
            v = r.get(_U8, fpos) != 0
        elif k in (W.ENUM, W.ENUMN, W.ENUMN16):
            idx = r.get(_I16 if k is W.ENUMN16 else _I32, fpos)
            if not 0 <= idx < len(f.wire.ref):
                raise r.fail(f"{fpath}: value {idx} is not a valid {f.wire.ref.__name__}")
            v = f.wire.ref.from_index(idx)
        elif k is W.TIMESTAMP:
            if fpos + 16 > r.n:
                raise r.fail(f"{fpath}: timestamp runs past the end")
            year, ordinal, secs, nanos = struct.unpack_from("<iHxxII", r.buf, fpos)
            try:
                v = Timestamp.from_parts(year, ordinal, secs, nanos)
            except InvalidTimestamp as e:
                raise r.fail(f"{fpath}: {e}") from None
        else:
            v = _decode_value(r, f.wire, fpos, fpath, f.wire.wrapped)
        kwargs[f.name] = v
    try:
        return cls(**kwargs)
    except BlockVersionSettingError:  # a setting of this process, not the bytes
        raise
    except Exception as e:  # noqa: BLE001 - model-level validation
        raise r.fail(f"{path or cls.__name__}: {e}") from None


def decode_root(data: bytes, cls: type, what: str | None = None, given: dict[str, Any] | None = None) -> Any:
    r = _Reader(bytes(data), what or cls.__name__)
    if r.n < 8:
        raise r.fail(f"only {r.n} bytes")
    return decode_table(r, cls, r.indirect(0), "", given)


def unwrap_manifest(data: bytes, expected_kind: int, expected_version: int | tuple[int, ...], what: str) -> bytes:
    return unwrap_manifest_versioned(data, expected_kind, expected_version, what)[1]


def unwrap_manifest_versioned(
    data: bytes, expected_kind: int, accepted_versions: int | tuple[int, ...], what: str
) -> tuple[int, bytes]:
    """(manifest version, content) of a manifest of the expected kind in one of the accepted versions."""
    accepted = (accepted_versions,) if isinstance(accepted_versions, int) else accepted_versions
    r = _Reader(bytes(data), what)
    if r.n < 8:
        raise r.fail(f"only {r.n} bytes")
    tab = r.table(r.indirect(0))
    kpos, vpos, cpos = r.field(tab, 0), r.field(tab, 1), r.field(tab, 2)
    kind = r.get(_I64, kpos) if kpos is not None else 0
    version = r.get(_I32, vpos) if vpos is not None else 0
    if kind != expected_kind:
        raise DecodeError(f"{what}: manifest kind is {kind:#x}, expected {expected_kind:#x}")
    if version not in accepted:
        want = " or ".join(map(str, accepted))
        raise DecodeError(f"{what}: unsupported manifest version {version}, expected {want}")
    if cpos is None:
        raise r.fail("manifest has no content")
    return version, r.bytes_(cpos)


# ------------------------------------------------------------------------------------------------------------------
# Metadata blocks
# ------------------------------------------------------------------------------------------------------------------


def encode_block(block: Any, version: int | None = None) -> bytes:
    """The block's manifest bytes in manifest ``version`` (default: the block's own, see
    :attr:`~odf_core.metadata.manifests.MetadataBlock.manifest_version`): what a new block is stored and hashed as.
    A block read from elsewhere is kept as the bytes it came in, never re-encoded (the hash is of those bytes)."""
    from odf_core.metadata.manifests import BLOCK_MANIFEST_VERSIONS, BLOCK_VERSION_ALIGNED

    version = block.manifest_version if version is None else version
    if version not in BLOCK_MANIFEST_VERSIONS:
        raise ValueError(f"cannot write MetadataBlock manifest version {version}: supported are "
                         f"{BLOCK_MANIFEST_VERSIONS}")
    alignment = TIMESTAMP_ALIGNMENT_V3 if version >= BLOCK_VERSION_ALIGNED else TIMESTAMP_ALIGNMENT_V2
    return wrap_manifest(ODF_METADATA_BLOCK, version, encode_root(block, alignment))


def decode_block(data: bytes, what: str = "metadata block") -> Any:
    """The block of manifest bytes of any supported version (the Timestamp layout is read where the vtable points,
    so versions 2 and 3 read alike); it remembers its version."""
    from odf_core.metadata.manifests import BLOCK_MANIFEST_VERSIONS, MetadataBlock

    version, content = unwrap_manifest_versioned(data, ODF_METADATA_BLOCK, BLOCK_MANIFEST_VERSIONS, what)
    # The version is passed in, not defaulted: reading never consults the setting for new blocks (ODF_BLOCK_VERSION).
    return decode_root(content, MetadataBlock, what, {"manifest_version": version})


def block_hash(block_or_bytes: Any) -> Multihash:
    data = block_or_bytes if isinstance(block_or_bytes, (bytes, bytearray)) else encode_block(block_or_bytes)
    return Multihash.sha3_256(bytes(data))
