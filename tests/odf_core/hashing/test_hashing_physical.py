"""Physical hash: SHA3-256 of a whole file, streamed, from every kind of source."""
from __future__ import annotations

import hashlib
import io
import os
from pathlib import Path

import fsspec
import pytest

from odf_core.hashing import HashingError, physical_hash
from odf_core.hashing.physical import CHUNK_SIZE
from odf_core.identity.multihash import SHA3_256, Multihash


@pytest.fixture(scope="module")
def big_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bytes]:
    data = os.urandom(2 * CHUNK_SIZE + 12345)  # several chunks plus a partial one
    path = tmp_path_factory.mktemp("phys") / "data.bin"
    path.write_bytes(data)
    return path, data


class ReadOnly:
    """A file-like object with only ``read`` (no ``readinto``), like some network streams."""

    def __init__(self, data: bytes):
        self._inner = io.BytesIO(data)
        self.reads = 0

    def read(self, n: int = -1) -> bytes:
        self.reads += 1
        return self._inner.read(n)


def test_every_source_kind_gives_sha3_of_the_bytes(big_file: tuple[Path, bytes]) -> None:
    path, data = big_file
    expected = Multihash(SHA3_256, hashlib.sha3_256(data).digest())
    assert physical_hash(str(path)) == expected
    assert physical_hash(path) == expected
    assert physical_hash(path.as_uri()) == expected  # fsspec URL (file://)
    assert physical_hash((fsspec.filesystem("file"), str(path))) == expected
    with open(path, "rb") as f:
        assert physical_hash(f) == expected
        assert not f.closed  # the caller's file stays open
    reader = ReadOnly(data)
    assert physical_hash(reader) == expected
    assert reader.reads > 2  # streamed in chunks, not read at once
    assert expected.to_multibase().startswith("f1620")


def test_file_object_is_hashed_from_its_position(big_file: tuple[Path, bytes]) -> None:
    path, data = big_file
    with open(path, "rb") as f:
        f.seek(100)
        assert physical_hash(f).digest == hashlib.sha3_256(data[100:]).digest()


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty"
    path.write_bytes(b"")
    assert physical_hash(path).digest == hashlib.sha3_256(b"").digest()


def test_unreadable_sources_raise_clear_errors(tmp_path: Path) -> None:
    missing = tmp_path / "nope.parquet"
    with pytest.raises(HashingError, match="nope.parquet"):
        physical_hash(missing)
    with pytest.raises(HashingError, match="nope.parquet"):
        physical_hash(missing.as_uri())
    with pytest.raises(HashingError, match="cannot read data from 42"):
        physical_hash(42)  # type: ignore[arg-type]
