"""SIGKILL a writer at every step of an object write or ref update; the store must stay valid.

Valid means: every object under its final key is complete (content-addressed blocks hash to their key), refs hold
the old or the new value and point at existing blocks, no lock stays held, and temp leftovers are recognizable
so ``remove_stale_temp`` cleans them up.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from odf_core.identity import Multihash
from odf_core.storage import STORAGE_CRASH_POINTS, DatasetLayout, ObjectStore, crash_env, was_killed

from .storage_worker import block_key_for, content, run_worker

SIZE = 1 << 20


def assert_valid(store: ObjectStore) -> None:
    for key in store.list("blocks"):
        assert Multihash.sha3_256(store.get(key)) == DatasetLayout.multihash_of(key), f"{key} is incomplete"
    head = store.get_ref(DatasetLayout.head_ref)
    if head is not None:
        assert store.exists(DatasetLayout.block_key(head)), "head points at a missing block"


def crash(point: str, *args: str) -> None:
    proc = run_worker(*args, env=crash_env(point))
    assert was_killed(proc.returncode), f"child did not die at {point}: rc={proc.returncode} {proc.stderr}"


def temp_leftovers(store: ObjectStore) -> list[str]:
    return [p for p in store.fs.find(store.root) if "/.tmp-" in p]


PUT_IF_ABSENT_CASES = [("object.after_temp_write", False), ("object.after_publish", True)]


@pytest.mark.parametrize("point, visible", PUT_IF_ABSENT_CASES)
def test_crash_during_put_if_absent(tmp_path: Path, point: str, visible: bool) -> None:
    root = str(tmp_path / "store")
    store = ObjectStore.open(root)
    key = block_key_for(content("c1", SIZE))
    crash(point, "put-blocks", root, "c1", str(SIZE))
    assert_valid(store)
    assert store.exists(key) is visible
    assert len(temp_leftovers(store)) == 1  # the dead writer never reached its cleanup
    assert len(store.remove_stale_temp(0)) == 1 and temp_leftovers(store) == []
    proc = run_worker("put-blocks", root, "c1", str(SIZE))  # a retry after the crash converges
    assert proc.stdout.strip() == ("[false]" if visible else "[true]")
    assert store.get(key) == content("c1", SIZE)


def test_crash_at_nth_hit_leaves_earlier_objects_complete(tmp_path: Path) -> None:
    root = str(tmp_path / "store")
    store = ObjectStore.open(root)
    proc = run_worker("put-blocks", root, "c1,c2,c3", str(SIZE), env=crash_env("object.after_temp_write", 2))
    assert was_killed(proc.returncode)
    assert store.list("blocks") == [block_key_for(content("c1", SIZE))]
    assert_valid(store)


PUT_FILE_CASES = [
    ("copy", "object.after_temp_write", False, 1),
    ("copy", "object.after_publish", True, 1),
    ("move", "object.after_publish", True, 0),  # a move links the source in place: no temp file
]


@pytest.mark.parametrize("move, point, visible, leftovers", PUT_FILE_CASES)
def test_crash_during_put_file(tmp_path: Path, move: str, point: str, visible: bool, leftovers: int) -> None:
    root = str(tmp_path / "store")
    store = ObjectStore.open(root)
    src = tmp_path / "part.bin"
    src.write_bytes(content("file", SIZE))
    key = block_key_for(content("file", SIZE))
    crash(point, "put-file", root, key, str(src), move)
    assert_valid(store)
    assert store.exists(key) is visible
    assert src.read_bytes() == content("file", SIZE)  # the source survives a crash before its removal
    assert len(temp_leftovers(store)) == leftovers
    proc = run_worker("put-file", root, key, str(src), move)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ("false" if visible else "true")
    assert store.get(key) == content("file", SIZE) and src.exists() is (move == "copy")
    assert len(store.remove_stale_temp(0)) == leftovers


OVERWRITE_CASES = [("put.after_temp_write", "old"), ("put.after_replace", "new")]


@pytest.mark.parametrize("point, expect", OVERWRITE_CASES)
def test_crash_during_overwrite(tmp_path: Path, point: str, expect: str) -> None:
    root = str(tmp_path / "store")
    store = ObjectStore.open(root)
    store.put("info/summary", content("old", SIZE))
    crash(point, "put", root, "info/summary", "new", str(SIZE))
    assert store.get("info/summary") == content(expect, SIZE)


REF_UPDATE_CASES = [("ref.locked", "old", 0), ("ref.after_temp_write", "old", 1), ("ref.after_replace", "new", 0)]


@pytest.mark.parametrize("point, expect, leftovers", REF_UPDATE_CASES)
def test_crash_during_ref_update(tmp_path: Path, point: str, expect: str, leftovers: int) -> None:
    root = str(tmp_path / "store")
    store = ObjectStore.open(root)
    hashes = {}
    for name in ("old", "new", "next"):  # commit order: blocks are in place before the ref moves
        data = content(name, 1000)
        store.put_if_absent(block_key_for(data), data)
        hashes[name] = Multihash.sha3_256(data).to_multibase()
    store.compare_and_swap_ref("refs/head", None, hashes["old"])

    crash(point, "cas", root, "refs/head", hashes["old"], hashes["new"])

    assert store.get_ref("refs/head") == hashes[expect]
    assert_valid(store)
    assert len(temp_leftovers(store)) == leftovers
    # The dead process's flock is gone: the next writer gets the lock and swaps at once.
    store.compare_and_swap_ref("refs/head", hashes[expect], hashes["next"])
    assert store.get_ref("refs/head") == hashes["next"]
    assert len(store.remove_stale_temp(0)) == leftovers


def test_every_storage_crash_point_is_exercised() -> None:
    """Keeps this file in step with the crash points the storage code declares: the points the crash tests above
    are parametrized with (read from their pytest marks, so a point dropped from a list shows up here) must be
    exactly the points the storage code declares, and each declared point must really be in the storage code."""
    import inspect
    import sys

    from odf_core.storage import backends

    module = sys.modules[__name__]
    covered = set()
    for name, fn in inspect.getmembers(module, inspect.isfunction):
        for mark in getattr(fn, "pytestmark", []):
            if name.startswith("test_crash") and mark.name == "parametrize":
                names = [n.strip() for n in mark.args[0].split(",")]
                covered |= {case[names.index("point")] for case in mark.args[1]}
    assert covered == set(STORAGE_CRASH_POINTS)
    source = inspect.getsource(backends)
    assert [p for p in STORAGE_CRASH_POINTS if f'crash_point("{p}")' not in source] == []
