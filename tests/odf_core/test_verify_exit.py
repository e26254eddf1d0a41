"""``odf verify`` exits 0 exactly when verification passed, however the process ends (issue #12 item 2).

The failure: an abort at interpreter exit (exit code 134, "terminate called without an active exception") after
"ok" was printed. ``pq.read_table`` over a Python file object scans through pyarrow's dataset layer, which can drop
its last references to the file (and to the buffers read from it) on an Arrow worker thread after the call returned;
when that happens while Python is finalizing, the thread is killed inside a C++ destructor and the process aborts.

Two tests: the mechanism, checked in-process (after a verification returns, no file object it opened may still be
referenced: on the unfixed code about one call in eight left one behind), and the symptom, many real ``odf verify``
processes side by side (a race: see RUNS).
"""
from __future__ import annotations

import io
import os
import subprocess
import sys
import uuid
import weakref
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from odf_core.chain.integrity import verify_integrity
from odf_core.commit import commit_data, describe_slice
from odf_core.metadata import Timestamp
from odf_core.storage import ObjectStore
from odf_core.workspace import Workspace

from .chain.builders import new_root, write_slice

REPO = Path(__file__).resolve().parents[2]
SLICES = (3000, 2000, 2500, 1500)
OK_LINE = f"integrity ok: 7 blocks, {len(SLICES)} files, {sum(SLICES)} records verified"


def _root_with_slices(tmp_path: Path, location: str):
    ws = Workspace.init(location)
    h = new_root(ws)
    start = 0
    for i, n in enumerate(SLICES):
        sf = describe_slice(write_slice(tmp_path / f"s{i}.parquet", start, n), "offset", start)
        commit_data(h.chain, base_head=h.chain.head(), slice_file=sf, checkpoint_path=None,
                    system_time=Timestamp.parse(f"2024-01-0{i + 2}T00:00:00Z"))
        start += n
    return h


class TrackingStore(ObjectStore):
    """A real store that remembers (weakly) every stream it handed out.

    The streams are fresh in-memory copies: fsspec's ``memory://`` hands out the same stored file object every time,
    which stays alive anyway.
    """

    def __init__(self, store: ObjectStore):
        super().__init__(store.fs, store.root, store._backend)
        self.opened: list[weakref.ref] = []

    def open_read(self, key):
        with super().open_read(key) as f:
            copy = io.BytesIO(f.read())
        self.opened.append(weakref.ref(copy))
        return copy


@pytest.mark.parametrize("where", ["local", "memory"])
def test_no_file_object_outlives_a_verification(tmp_path, where):
    location = str(tmp_path / "ws") if where == "local" else f"memory://verify-{uuid.uuid4().hex}"
    h = _root_with_slices(tmp_path, location)
    for _ in range(80):
        store = TrackingStore(h.store)
        report = verify_integrity(store)
        # Checked at once, without collecting or waiting: whatever is still alive is held by a native thread.
        alive = sum(ref() is not None for ref in store.opened)
        assert report.ok and alive == 0, f"{alive} of {len(store.opened)} streams still referenced after verify"


# The symptom is a race between Arrow's threads and interpreter shutdown, so this loop is a smoke test of it: on the
# unfixed code 22 of 1026 such runs aborted (0-7 % per batch, fewer when other work saturated the cores), so 64 runs
# catch it about three times in four; the in-process test above catches the mechanism nearly always. After the fix:
# 0 of 480. About 40 s on 2 cores shared with other work.
RUNS = 64
PARALLEL = 4


def _verify(ws: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "odf_core.cli", "-w", ws, "verify", "--integrity", "root"],
                          capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.slow
def test_verify_exit_code_is_zero_every_time(tmp_path):
    ws = str(tmp_path / "ws")
    _root_with_slices(tmp_path, ws)
    with ThreadPoolExecutor(PARALLEL) as pool:
        results = list(pool.map(lambda _: _verify(ws), range(RUNS)))
    bad = [(r.returncode, r.stderr.strip().splitlines()[-1:]) for r in results if r.returncode != 0]
    assert not bad, f"{len(bad)} of {RUNS} runs failed: {bad[:5]}"
    assert all(OK_LINE in r.stdout for r in results)
