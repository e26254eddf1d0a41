"""Every ObjectStore method on a real local directory and on memory:// (the ``store`` fixture runs both)."""
from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from odf_core.errors import IntegrityError, InvalidIdentifier, OdfError, RefConflict
from odf_core.storage import ObjectNotFound, ObjectStore, UnsafeRefUpdate


def test_open_forms(tmp_path: Path) -> None:
    plain = ObjectStore.open(str(tmp_path / "a" / ".." / "ds"))
    url = ObjectStore.open(f"file://{tmp_path}/ds")
    pathlike = ObjectStore.open(tmp_path / "ds")
    assert plain.root == url.root == pathlike.root == str(tmp_path / "ds")
    assert plain.url == f"file://{tmp_path}/ds"
    assert plain.is_local and url.is_local
    mem = ObjectStore.open("memory://some/where/")
    assert mem.url == "memory:///some/where" and not mem.is_local
    assert repr(mem) == "ObjectStore('memory:///some/where')"
    for bad in ("", None, 3):
        with pytest.raises(OdfError, match="invalid store location"):
            ObjectStore.open(bad)  # type: ignore[arg-type]
    with pytest.raises(OdfError, match="cannot open store"):
        ObjectStore.open("nosuchprotocol-xyz://bucket/x")



def test_a_local_store_makes_its_fsspec_file_system_only_when_asked(tmp_path: Path) -> None:
    """Issue #64: a command on local disk does not import fsspec (~60 ms); the names it gives are fsspec's, and the
    file system is there for whoever asks (readers that take one)."""
    import subprocess
    import sys

    from fsspec.implementations.local import LocalFileSystem

    code = ("import sys\nfrom odf_core.storage import ObjectStore\n"
            "s = ObjectStore.open(sys.argv[1]).child('ds')\n"
            "s.put_if_absent('data/x', b'1'); assert s.get('data/x') == b'1' and s.list('data')\n"
            "s.compare_and_swap_ref('refs/head', None, 'h1')\n"
            "print(s.url, s.url_of('data/x'), 'fsspec' in sys.modules)\n"
            "print(type(s.fs).__name__, 'fsspec' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "root")], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    fs = LocalFileSystem()
    first, second = done.stdout.splitlines()
    assert first.split() == [fs.unstrip_protocol(str(tmp_path / "root" / "ds")),
                             fs.unstrip_protocol(str(tmp_path / "root" / "ds" / "data" / "x")), "False"]
    assert second.split() == ["LocalFileSystem", "True"]
    assert ObjectStore.open("/").url == fs.unstrip_protocol("/") == "file:///"

def test_get_put_if_absent_and_reads(store: ObjectStore) -> None:
    assert store.put_if_absent("blocks/b1", b"first") is True
    assert store.put_if_absent("blocks/b1", b"other") is False  # existing object kept
    assert store.get("blocks/b1") == b"first"
    assert store.put_if_absent("blocks/b2", bytearray(b"x" * 1000)) is True
    assert store.exists("blocks/b1") and not store.exists("blocks/nope")
    assert not store.exists("blocks")  # a prefix is not an object
    assert store.size("blocks/b2") == 1000
    with store.open_read("blocks/b1") as f:
        assert f.read() == b"first"
    assert store.put_if_absent("empty", b"") is True and store.get("empty") == b""


def test_missing_objects_raise_object_not_found(store: ObjectStore) -> None:
    store.put_if_absent("blocks/b1", b"x")
    for call in (store.get, store.open_read, store.size):
        for key in ("blocks/nope", "blocks", "nothing/here"):
            with pytest.raises(ObjectNotFound, match=repr(key)) as e:
                call(key)
            assert e.value.key == key and e.value.url == store.url


def test_put_overwrites(store: ObjectStore) -> None:
    store.put("info/summary", b"one")
    store.put("info/summary", memoryview(b"two"))
    assert store.get("info/summary") == b"two"
    with pytest.raises(TypeError, match="info/summary"):
        store.put("info/summary", "text")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="blocks/x"):
        store.put_if_absent("blocks/x", 42)  # type: ignore[arg-type]


@pytest.mark.parametrize("move", [False, True])
def test_put_file_if_absent(store: ObjectStore, tmp_path: Path, move: bool) -> None:
    src = tmp_path / "src.bin"
    src.write_bytes(b"payload" * 1000)
    assert store.put_file_if_absent("data/d1", src, move=move) is True
    assert store.get("data/d1") == b"payload" * 1000
    assert src.exists() is not move
    src.write_bytes(b"different")
    assert store.put_file_if_absent("data/d1", str(src), move=move) is False
    assert store.get("data/d1") == b"payload" * 1000
    assert src.exists() is not move  # with move the source is consumed even when the key existed
    with pytest.raises(OdfError, match="does not exist"):
        store.put_file_if_absent("data/d2", tmp_path / "missing.bin")
    assert not store.exists("data/d2")


def test_put_file_move_on_local_links_without_copy(tmp_path: Path) -> None:
    store = ObjectStore.open(str(tmp_path / "store"))
    src = tmp_path / "part-0.parquet"
    src.write_bytes(b"p" * 4096)
    inode = src.stat().st_ino
    assert store.put_file_if_absent("data/x", src, move=True)
    assert os.stat(store.local_path("data/x")).st_ino == inode


def test_list_delete_and_prefixes(store: ObjectStore) -> None:
    for key in ("blocks/b2", "blocks/b1", "data/d1", "refs/head", "info/deep/er"):
        store.put(key, key.encode())
    assert store.list() == ["blocks/b1", "blocks/b2", "data/d1", "info/deep/er", "refs/head"]
    assert store.list("blocks") == store.list("blocks/") == ["blocks/b1", "blocks/b2"]
    assert store.list("info") == ["info/deep/er"]
    assert store.list("checkpoints") == []
    assert store.delete("blocks/b1") is True
    assert store.delete("blocks/b1") is False
    assert store.delete("blocks") is False  # a prefix, not an object: untouched
    assert store.list("blocks") == ["blocks/b2"]
    store.delete_prefix("info")
    store.delete_prefix("never-existed")
    assert store.list() == ["blocks/b2", "data/d1", "refs/head"]
    with pytest.raises(OdfError, match="refusing to delete the whole store"):
        store.delete_prefix("")
    with pytest.raises(InvalidIdentifier, match="absolute path"):
        store.delete_prefix("/")
    assert store.list() == ["blocks/b2", "data/d1", "refs/head"]


def test_list_hides_internal_files(store: ObjectStore) -> None:
    store.compare_and_swap_ref("refs/head", None, "fa")  # creates refs/.head.lock on local stores
    store.fs.pipe_file(store.root.rstrip("/") + "/refs/.tmp-dead-head", b"partial")
    assert store.list() == ["refs/head"]


def test_child_is_a_sub_store(store: ObjectStore) -> None:
    ds = store.child("my-dataset")
    ds.put_if_absent("blocks/b1", b"x")
    assert store.list() == ["my-dataset/blocks/b1"]
    assert ds.list() == ["blocks/b1"]
    assert ds.url == store.url.rstrip("/") + "/my-dataset"
    assert store.child("a/b/").child("c").url == store.url.rstrip("/") + "/a/b/c"
    assert store.child("") is store
    ds.compare_and_swap_ref("refs/head", None, "fb")
    assert store.get_ref("my-dataset/refs/head") == "fb"
    store.delete_prefix("my-dataset")
    assert ds.list() == [] and ds.get_ref("refs/head") is None


def test_local_path_and_url_of(store: ObjectStore) -> None:
    store.put_if_absent("data/d1", b"abc")
    path = store.local_path("data/d1")
    if store.is_local:
        assert path is not None and open(path, "rb").read() == b"abc"
        assert store.url_of("data/d1") == "file://" + path
    else:
        assert path is None
        assert store.url_of("data/d1") == store.url + "/data/d1"
        assert store.fs.cat_file(store.url_of("data/d1")) == b"abc"


def test_refs_compare_and_swap(store: ObjectStore) -> None:
    assert store.get_ref("refs/head") is None
    with pytest.raises(RefConflict) as e:
        store.compare_and_swap_ref("refs/head", "fexpected", "fnew")
    assert (e.value.ref, e.value.expected, e.value.actual) == ("refs/head", "fexpected", None)
    store.compare_and_swap_ref("refs/head", None, "f01")
    assert store.get_ref("refs/head") == "f01"
    assert store.get("refs/head") == b"f01"  # exact bytes: no trailing newline
    with pytest.raises(RefConflict) as e:
        store.compare_and_swap_ref("refs/head", None, "f02")
    assert e.value.actual == "f01"
    with pytest.raises(RefConflict) as e:
        store.compare_and_swap_ref("refs/head", "f00", "f02")
    assert e.value.actual == "f01" and store.get_ref("refs/head") == "f01"
    store.compare_and_swap_ref("refs/head", "f01", "f02")
    assert store.get_ref("refs/head") == "f02"


@pytest.mark.parametrize("value", ["", "two words", "line\n", "caf\u00e9", None, 5])
def test_ref_values_are_validated(store: ObjectStore, value: object) -> None:
    with pytest.raises(InvalidIdentifier, match="refs/head"):
        store.compare_and_swap_ref("refs/head", None, value)  # type: ignore[arg-type]
    with pytest.raises(InvalidIdentifier, match="refs/head"):
        store.compare_and_swap_ref("refs/head", value if value is not None else "", "fa")  # type: ignore[arg-type]
    assert store.get_ref("refs/head") is None


def test_ref_written_by_other_tools(store: ObjectStore) -> None:
    store.put("refs/head", b"fabc\n")  # tolerated trailing newline
    assert store.get_ref("refs/head") == "fabc"
    store.compare_and_swap_ref("refs/head", "fabc", "fdef")
    for corrupt in (b"", b"fa bc", b"\xff\xfe"):
        store.put("refs/head", corrupt)
        with pytest.raises(IntegrityError, match="refs/head"):
            store.get_ref("refs/head")


def test_threads_racing_on_one_ref(store: ObjectStore) -> None:
    """Threads of one process: covers the memory backend's lock (processes are tested in the race test)."""
    store.compare_and_swap_ref("refs/head", None, "0")
    written: list[int] = []
    conflicts = [0]

    def work() -> None:
        done = 0
        while done < 40:
            old = store.get_ref("refs/head")
            try:
                store.compare_and_swap_ref("refs/head", old, str(int(old) + 1))
                written.append(int(old) + 1)
                done += 1
            except RefConflict:
                conflicts[0] += 1

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert int(store.get_ref("refs/head")) == 160
    assert sorted(written) == list(range(1, 161))  # every value written exactly once: no lost update


def test_remove_stale_temp(store: ObjectStore) -> None:
    base = store.root.rstrip("/")
    store.put_if_absent("blocks/b1", b"x")
    store.compare_and_swap_ref("refs/head", None, "fa")
    store.fs.pipe_file(f"{base}/blocks/.tmp-0-b2", b"partial")
    store.fs.pipe_file(f"{base}/refs/.tmp-1-head", b"f0")
    assert store.remove_stale_temp(older_than_s=3600) == []  # too young to be judged dead
    assert store.remove_stale_temp(older_than_s=0) == ["blocks/.tmp-0-b2", "refs/.tmp-1-head"]
    left = store.fs.find(base)
    assert f"{base}/blocks/b1" in left and not any(".tmp-" in p for p in left)
    assert store.list() == ["blocks/b1", "refs/head"]


def test_non_atomic_backend_refuses_ref_updates_unless_opted_in(tmp_path: Path) -> None:
    """Any fsspec backend other than local/memory (here DirFileSystem over a real directory) takes the remote path."""
    opts = dict(path=str(tmp_path), target_protocol="file", target_options={"auto_mkdir": True})
    store = ObjectStore.open("dir://", **opts)
    assert not store.is_local and store.local_path("blocks/b1") is None
    assert store.put_if_absent("blocks/b1", b"x") is True
    assert store.put_if_absent("blocks/b1", b"y") is False
    src = tmp_path / "src"
    src.write_bytes(b"file")
    assert store.put_file_if_absent("data/d1", src, move=True) is True and not src.exists()
    assert store.get("data/d1") == b"file" and (tmp_path / "data" / "d1").read_bytes() == b"file"
    store.put("info/summary", b"s")
    assert store.list() == ["blocks/b1", "data/d1", "info/summary"]
    with pytest.raises(UnsafeRefUpdate, match="unsafe_ref_updates=True"):
        store.compare_and_swap_ref("refs/head", None, "fa")
    assert store.get_ref("refs/head") is None

    unsafe = ObjectStore.open("dir://", unsafe_ref_updates=True, **opts)
    unsafe.compare_and_swap_ref("refs/head", None, "fa")
    with pytest.raises(RefConflict):
        unsafe.compare_and_swap_ref("refs/head", None, "fb")
    unsafe.compare_and_swap_ref("refs/head", "fa", "fb")
    assert store.get_ref("refs/head") == "fb" and (tmp_path / "refs" / "head").read_bytes() == b"fb"
