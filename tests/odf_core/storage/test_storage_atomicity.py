"""A reader running concurrently with a writer only ever sees complete objects under their final keys."""
from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

from odf_core.identity import Multihash
from odf_core.storage import DatasetLayout, ObjectStore

from .storage_worker import WORKER, block_key_for, content

SIZE = 4 << 20  # 4 MiB: large enough that a non-atomic write is observable half-done


def _check_blocks(store: ObjectStore, expected_keys: set[str]) -> int:
    """Read every visible block and check it is complete (its content hashes to its key); returns how many."""
    keys = store.list("blocks")
    assert set(keys) <= expected_keys, f"unexpected keys {set(keys) - expected_keys}"
    for key in keys:
        data = store.get(key)
        assert len(data) == SIZE, f"{key}: partial object of {len(data)} bytes visible"
        assert Multihash.sha3_256(data) == DatasetLayout.multihash_of(key)
    return len(keys)


def test_put_if_absent_never_exposes_partial_objects_to_another_process(tmp_path: Path) -> None:
    root = str(tmp_path / "store")
    seeds = [f"obj{i}" for i in range(12)]
    expected = {block_key_for(content(s, SIZE)) for s in seeds}
    store = ObjectStore.open(root)
    writer = subprocess.Popen(
        [sys.executable, WORKER, "put-blocks", root, ",".join(seeds), str(SIZE)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    reads_during_write = 0
    while writer.poll() is None:
        reads_during_write += _check_blocks(store, expected)
    out, err = writer.communicate()
    assert writer.returncode == 0, err
    assert out.strip() == "[" + ", ".join(["true"] * len(seeds)) + "]"
    assert _check_blocks(store, expected) == len(seeds)
    assert reads_during_write > 0, "the reader never overlapped the writer; the test proved nothing"
    assert store.remove_stale_temp(0) == []  # a clean run leaves no temp files

    again = subprocess.run(
        [sys.executable, WORKER, "put-blocks", root, ",".join(seeds[:3]), str(SIZE)],
        capture_output=True, text=True, timeout=60,
    )
    assert again.stdout.strip() == "[false, false, false]"  # idempotent: existing objects kept


def test_put_overwrite_is_atomic_for_a_concurrent_reader(tmp_path: Path) -> None:
    root = str(tmp_path / "store")
    versions = {content(s, SIZE): s for s in ("v0", "v1")}
    store = ObjectStore.open(root)
    writer = subprocess.Popen(
        [sys.executable, WORKER, "put", root, "info/summary", ",".join(["v0", "v1"] * 6), str(SIZE)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    seen: set[str] = set()
    while writer.poll() is None:
        if store.exists("info/summary"):
            data = store.get("info/summary")
            assert data in versions, f"torn read of {len(data)} bytes"
            seen.add(versions[data])
    assert writer.wait() == 0
    assert store.get("info/summary") == content("v1", SIZE)
    assert seen, "the reader never overlapped the writer"


def test_memory_store_readers_see_whole_objects(tmp_path: Path) -> None:
    store = ObjectStore.open("memory://atomicity-test")
    seeds = [f"m{i}" for i in range(8)]
    expected = {block_key_for(content(s, SIZE)) for s in seeds}
    results: list[bool] = []
    progress = {"written": 0, "checked": 0}  # objects written; objects visible to the last full reader pass
    cond = threading.Condition()

    def write() -> None:
        for i, s in enumerate(seeds):
            data = content(s, SIZE)
            results.append(store.put_if_absent(block_key_for(data), data))
            with cond:  # hand over: the writer goes on only after a reader pass that began after this write
                progress["written"] = i + 1
                if i + 1 < len(seeds):
                    assert cond.wait_for(lambda i=i: progress["checked"] > i, timeout=60), "the reader stalled"

    seen_counts: set[int] = set()
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # hand the GIL over as often as possible, so reads fall inside writes
    try:
        t = threading.Thread(target=write)
        t.start()
        while t.is_alive():
            with cond:
                written = progress["written"]
            visible = _check_blocks(store, expected)
            assert visible >= written
            seen_counts.add(visible)
            with cond:
                progress["checked"] = max(progress["checked"], written)
                cond.notify_all()
        t.join()
        assert results == [True] * len(seeds) and _check_blocks(store, expected) == len(seeds)
        # the reader saw the store between every two writes of the writer: it overlapped the whole write sequence
        assert set(range(1, len(seeds))) <= seen_counts, seen_counts
    finally:
        sys.setswitchinterval(switch)
        store.fs.rm(store.root, recursive=True)
