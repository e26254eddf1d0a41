from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from odf_core.storage import ObjectStore


@pytest.fixture(params=["local", "memory", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ObjectStore]:
    """An empty store on a real local directory, on fsspec's memory file system, and in a fresh bucket of the moto S3
    server on loopback (tests/s3_server.py: conditional writes as AWS S3 does them)."""
    if request.param == "local":
        yield ObjectStore.open(str(tmp_path / "store"))
    elif request.param == "s3":
        server = request.getfixturevalue("s3_server")
        yield ObjectStore.open(f"s3://{server.bucket()}/store")
    else:
        s = ObjectStore.open(f"memory://odf-test-{uuid.uuid4().hex}")
        yield s
        if s.fs.exists(s.root):
            s.fs.rm(s.root, recursive=True)
