from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from odf_core.storage import ObjectStore


@pytest.fixture(params=["local", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ObjectStore]:
    """An empty store on a real local directory, then on fsspec's memory file system."""
    if request.param == "local":
        yield ObjectStore.open(str(tmp_path / "store"))
    else:
        s = ObjectStore.open(f"memory://odf-test-{uuid.uuid4().hex}")
        yield s
        if s.fs.exists(s.root):
            s.fs.rm(s.root, recursive=True)
