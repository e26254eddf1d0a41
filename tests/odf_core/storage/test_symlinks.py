"""Symlinks out of a local store are refused, not followed (issue #12 item 8).

Decision: every key must resolve inside the root of the store it is read through. For a dataset that is the
dataset's own directory, so a link to another dataset or to the workspace's ``keys/`` is refused too; links that stay
inside the dataset, and a workspace root that is itself a symlink, keep working.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from odf_core.chain.integrity import verify_integrity
from odf_core.cli import main
from odf_core.commit import commit_data, describe_slice
from odf_core.metadata import Timestamp
from odf_core.storage import DatasetLayout, ObjectStore, StoreEscape
from odf_core.workspace import Workspace

from ..chain.builders import new_root, write_slice


def _dataset(tmp_path: Path, ws_dir: Path | None = None, name: str = "root"):
    ws_dir = ws_dir or tmp_path / "ws"
    ws = Workspace.open(ws_dir) if (ws_dir / "workspace.version").exists() else Workspace.init(ws_dir)
    h = new_root(ws, name)
    start = 0
    for i, n in enumerate((4, 3)):
        sf = describe_slice(write_slice(tmp_path / f"{name}-s{i}.parquet", start, n), "offset", start)
        commit_data(h.chain, base_head=h.chain.head(), slice_file=sf, checkpoint_path=None,
                    system_time=Timestamp.parse(f"2024-01-0{i + 2}T00:00:00Z"))
        start += n
    return ws, h


def _data_keys(h) -> list[str]:
    """Data keys, oldest first."""
    return [DatasetLayout.data_key(b.event.new_data.physical_hash)
            for _, b in h.chain.iter_blocks() if getattr(b.event, "new_data", None)][::-1]


def _move_out(path: Path, outside: Path) -> Path:
    """Move ``path`` to ``outside`` and leave a symlink to it in its place."""
    outside.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(path), str(outside))
    os.symlink(outside, path)
    return outside


def test_data_dir_symlinked_out_of_the_workspace_is_refused(tmp_path, capsys):
    ws, h = _dataset(tmp_path)
    root = Path(h.store.root)
    target = _move_out(root / "data", tmp_path / "elsewhere" / "data")
    key = _data_keys(h)[0]
    store = Workspace.open(tmp_path / "ws").get("root").store
    with pytest.raises(StoreEscape, match=f"'{key}' .* resolves to {target}/.*outside the store root {root}"):
        store.get(key)
    for read in (store.open_read, store.exists, store.size, store.local_path, store.url_of):
        with pytest.raises(StoreEscape, match=key):
            read(key)
    with pytest.raises(StoreEscape, match="'data' .*resolves to .*elsewhere/data"):
        store.list("data")
    with pytest.raises(StoreEscape, match="'data' "):
        store.list()
    with pytest.raises(StoreEscape):
        store.put_if_absent("data/new", b"x")
    assert sorted(os.listdir(target)) == sorted(k.split("/")[1] for k in _data_keys(h))  # nothing written there

    report = verify_integrity(store)
    assert not report.ok and "outside the store root" in report.problem and key in report.problem
    code = main(["-w", str(tmp_path / "ws"), "verify", "--integrity", "root"])
    err = capsys.readouterr().err
    assert code == 1 and err.startswith("odf: error: root: integrity check failed") and "elsewhere/data" in err
    assert len(err.strip().splitlines()) == 1


def test_single_data_file_symlinked_out_is_refused(tmp_path):
    _, h = _dataset(tmp_path)
    key = _data_keys(h)[-1]
    target = _move_out(Path(h.store.root) / key, tmp_path / "elsewhere" / "f")
    with pytest.raises(StoreEscape, match=f"'{key}' .* resolves to {target}"):
        h.store.get(key)
    with pytest.raises(StoreEscape, match=key):
        h.store.exists(key)
    report = verify_integrity(h.store)
    assert not report.ok and key in report.problem and str(target) in report.problem
    # a new slice with the same content must not be "already there" through the link
    with pytest.raises(StoreEscape):
        h.store.put_if_absent(key, b"x")
    assert target.read_bytes()[:4] == b"PAR1"


def test_writes_through_a_symlinked_directory_are_refused(tmp_path):
    _, h = _dataset(tmp_path)
    root = Path(h.store.root)
    outside = tmp_path / "elsewhere" / "info"
    shutil.rmtree(root / "info", ignore_errors=True)
    outside.mkdir(parents=True)
    os.symlink(outside, root / "info")
    with pytest.raises(StoreEscape, match="'info/summary'"):
        h.store.put("info/summary", b"{}")
    assert h.chain.state().num_records == 7  # the cache is skipped, the chain still reads
    assert list(outside.iterdir()) == []

    refs = _move_out(root / "refs", tmp_path / "elsewhere" / "refs")
    before = {p.name: p.read_bytes() for p in refs.iterdir()}
    with pytest.raises(StoreEscape, match="'refs/head'"):
        h.chain.head()
    with pytest.raises(StoreEscape, match="'refs/head'"):
        h.store.compare_and_swap_ref("refs/head", before["head"].decode(), "x")
    assert {p.name: p.read_bytes() for p in refs.iterdir()} == before


def test_dataset_directory_symlinked_out_of_the_workspace(tmp_path):
    ws, h = _dataset(tmp_path)
    _move_out(Path(h.store.root), tmp_path / "elsewhere" / "root")
    with pytest.raises(StoreEscape, match="'datasets/root/refs/head' in .*ws resolves to .*elsewhere/root/refs/head"):
        Workspace.open(tmp_path / "ws").list()
    child = ws.store.child("datasets/root")
    with pytest.raises(StoreEscape, match="'datasets/root'"):
        child.get_ref("refs/head")


def test_links_to_another_dataset_are_refused(tmp_path):
    ws, a = _dataset(tmp_path, name="a")
    _, b = _dataset(tmp_path, tmp_path / "ws", name="b")
    a_file = next((Path(a.store.root) / "data").iterdir())
    os.symlink(a_file, Path(b.store.root) / "data" / "from-a")  # b's data dir links to a file of a
    with pytest.raises(StoreEscape, match=f"resolves to {Path(a.store.root)}/data/"):
        b.store.list("data")


def test_symlinks_inside_the_store_are_followed(tmp_path):
    real_ws = tmp_path / "real-ws"
    _, h = _dataset(tmp_path, real_ws)
    root = Path(h.store.root)
    # the dataset's data/ lives in another directory of the same dataset, reached through a link
    os.rename(root / "data", root / "data-volume")
    os.symlink(root / "data-volume", root / "data")
    # and the workspace itself is opened through a symlink
    os.symlink(real_ws, tmp_path / "ws-link")
    store = Workspace.open(tmp_path / "ws-link").get("root").store
    report = verify_integrity(store)
    assert report.ok and report.records_checked == 7, report.summary()
    keys = _data_keys(h)
    assert set(keys) <= set(store.list("data"))
    assert store.get(keys[0])[:4] == b"PAR1"
    assert store.put_if_absent("data/extra", b"x") and (root / "data-volume" / "extra").read_bytes() == b"x"


def test_memory_stores_have_no_symlinks_to_check(tmp_path):
    store = ObjectStore.open("memory://symlink-free")
    store.put("data/x", b"1")
    assert store.get("data/x") == b"1" and store.list("data") == ["data/x"]
