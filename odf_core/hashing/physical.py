"""Physical hash of a data file: SHA3-256 (multihash code 0x16) of all its bytes, read in chunks."""
from __future__ import annotations

import hashlib

from odf_core.hashing.sources import DataSource, open_binary
from odf_core.identity.multihash import SHA3_256, Multihash

CHUNK_SIZE = 4 * 1024 * 1024


def physical_hash(source: DataSource) -> Multihash:
    """SHA3-256 of the whole file, streamed so memory stays at one chunk whatever the file size.

    ``source`` is a local path, an fsspec URL (``s3://…``, ``file://…``), a ``(filesystem, path)`` pair or an
    open binary file object (read from its current position to the end; it is left open).
    """
    hasher = hashlib.sha3_256()
    buf = bytearray(CHUNK_SIZE)
    view = memoryview(buf)
    with open_binary(source) as f:
        readinto = getattr(f, "readinto", None)
        while True:
            if readinto is not None:
                n = readinto(buf)
                if not n:
                    break
                hasher.update(view[:n])
            else:
                data = f.read(CHUNK_SIZE)
                if not data:
                    break
                hasher.update(data)
    return Multihash(SHA3_256, hasher.digest())
