"""A crash at any step of a commit leaves the dataset valid at its old or new head; a retry commits exactly once."""
from __future__ import annotations

import subprocess
import sys

import pytest

from odf_core.chain import CHAIN_CRASH_POINTS
from odf_core.chain.integrity import verify_integrity
from odf_core.commit import COMMIT_CRASH_POINTS
from odf_core.metadata import AddData
from odf_core.storage import STORAGE_CRASH_POINTS, crash_env, was_killed
from odf_core.workspace import Workspace

from .builders import new_root, write_slice

# Every point once; the points a first commit passes twice (schema block + data block, several objects) twice.
POINTS = [(p, 1) for p in (*STORAGE_CRASH_POINTS, *CHAIN_CRASH_POINTS, *COMMIT_CRASH_POINTS)] + [
    (p, 2) for p in ("object.after_publish", "ref.after_temp_write", *CHAIN_CRASH_POINTS)]


def _commit(store_root, slice_path, base, env=None):
    return subprocess.run([sys.executable, "-m", "tests.odf_core.chain.worker", "commit", store_root, slice_path, base],
                          env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("point,nth", POINTS, ids=[f"{p}@{n}" for p, n in POINTS])
def test_crash_then_retry_commits_exactly_once(tmp_path, point, nth):
    ws = Workspace.init(tmp_path / "ws")
    h = new_root(ws)
    base = str(h.chain.head())
    path = write_slice(tmp_path / "slice.parquet", 0, 25)
    r = _commit(h.store.root, path, base, env=crash_env(point, nth))
    crashed = was_killed(r.returncode)
    assert crashed or r.returncode == 0, r.stderr
    assert crashed, f"{point}@{nth} was never reached"
    # valid at the old or the new head, whatever the crash point
    report = verify_integrity(h.store)
    assert report.ok, report.summary()
    # retrying the same transaction ends with exactly one AddData holding the slice
    r2 = _commit(h.store.root, path, base)
    assert r2.returncode == 0, r2.stderr
    adds = [b for _, b in h.chain.iter_blocks() if isinstance(b.event, AddData)]
    assert len(adds) == 1 and adds[0].event.new_data.offset_interval.end == 24
    assert verify_integrity(h.store).ok
    assert h.chain.state() == h.chain.rebuild_state()
