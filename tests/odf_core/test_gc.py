"""``odf gc``: what it removes (orphans, stale temp files, finished or abandoned staging), what it never touches
(referenced or young files, datasets it cannot read), its dry run and its report — on real workspaces on disk."""
from __future__ import annotations

import os
import time

import pytest

from odf_core import gc
from odf_core.cli import main
from odf_core.commit import commit_data, describe_checkpoint, describe_slice
from odf_core.metadata import Timestamp
from odf_core.storage import DatasetLayout
from odf_core.storage.faults import inject_enospc
from odf_core.workspace import Workspace
from tests.odf_core.chain.builders import new_root, write_slice

HOUR = 3600


def _age(path: str, seconds: float = 2 * HOUR) -> None:
    past = time.time() - seconds
    os.utime(path, (past, past))


def _age_tree(root: str, seconds: float = 2 * HOUR) -> None:
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            _age(os.path.join(d, n), seconds)
    _age(root, seconds)


def _root_with_data(tmp_path):
    ws = Workspace.init(tmp_path / "ws")
    h = new_root(ws)
    sf = describe_slice(write_slice(tmp_path / "s0.parquet", 0, 5), "offset", 0)
    cp = tmp_path / "c0"
    cp.write_bytes(b"checkpoint 0")
    commit_data(h.chain, base_head=h.chain.head(), slice_file=sf, checkpoint_path=str(cp),
                system_time=Timestamp.parse("2024-01-02T00:00:00Z"))
    return ws, h


def _orphan_of_a_failed_commit(tmp_path, h) -> list[str]:
    """A commit that published its data and checkpoint files, then failed on a full disk before its block."""
    sf = describe_slice(write_slice(tmp_path / "s1.parquet", 5, 3), "offset", 5)
    cp = tmp_path / "c1"
    cp.write_bytes(b"checkpoint 1")
    with pytest.raises(Exception, match="no space left on device"), inject_enospc(1, only="/blocks/"):
        commit_data(h.chain, base_head=h.chain.head(), slice_file=sf, checkpoint_path=str(cp),
                    system_time=Timestamp.parse("2024-01-03T00:00:00Z"))
    return [DatasetLayout.data_key(sf.data_slice.physical_hash),
            DatasetLayout.checkpoint_key(describe_checkpoint(str(cp)).physical_hash)]


def _all_files(h) -> set[str]:
    return {k for folder in ("data", "checkpoints", "blocks") for k in h.store.list(folder)}


def test_removes_old_orphans_and_nothing_referenced(tmp_path):
    ws, h = _root_with_data(tmp_path)
    referenced = _all_files(h)
    head = h.chain.head()
    orphans = set(_orphan_of_a_failed_commit(tmp_path, h))
    assert _all_files(h) - referenced == orphans and h.chain.head() == head
    sizes = sum(os.path.getsize(h.store.local_path(k)) for k in orphans)
    _age_tree(h.store.root)

    report = gc.collect(ws)  # default min age: an hour
    assert sorted(r.path for r in report.removed) == sorted(f"datasets/root/{k}" for k in orphans)
    assert report.bytes_freed == sizes
    assert _all_files(h) == referenced and not report.problems
    assert gc.collect(ws).removed == []  # nothing left to do


def test_young_files_are_never_candidates(tmp_path):
    ws, h = _root_with_data(tmp_path)
    _orphan_of_a_failed_commit(tmp_path, h)  # just written: could belong to a commit still under way
    before = _all_files(h)
    assert gc.collect(ws).removed == []
    assert _all_files(h) == before


def test_a_writer_that_finds_an_old_orphan_in_place_makes_it_young(tmp_path):
    """A retried commit finds its data file from the failed try already there: it is about to reference it, so
    ``odf gc`` must not take it away (the writer touches it)."""
    ws, h = _root_with_data(tmp_path)
    data_key, _ = _orphan_of_a_failed_commit(tmp_path, h)
    _age_tree(h.store.root)
    assert h.store.put_file_if_absent(data_key, str(tmp_path / "s1.parquet")) is False  # found in place
    removed = {r.path for r in gc.collect(ws).removed}
    assert f"datasets/root/{data_key}" not in removed
    assert h.store.exists(data_key)


def test_dry_run_lists_without_removing(tmp_path, capsys):
    ws, h = _root_with_data(tmp_path)
    _orphan_of_a_failed_commit(tmp_path, h)
    _age_tree(h.store.root)
    before = _all_files(h)
    assert main(["-w", str(tmp_path / "ws"), "gc", "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 3 and all(line.startswith("would remove datasets/root/") for line in out[:2])
    assert out[-1].startswith("2 item(s) would remove, ") and out[-1].endswith(" bytes would free")
    assert _all_files(h) == before
    assert main(["-w", str(tmp_path / "ws"), "gc"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split(" (")[0] for line in out[:2]] == [line.split(" (")[0].replace("would remove", "removed")
                                                         for line in out[:2]]
    freed = int(out[-1].split(", ")[1].split(" ")[0])
    assert freed > 0 and len(_all_files(h)) == len(before) - 2


def test_stale_temp_files_go_young_ones_stay(tmp_path):
    ws, h = _root_with_data(tmp_path)
    old = os.path.join(h.store.local_path("data"), ".tmp-0123-dead-writer")
    young = os.path.join(h.store.local_path("blocks"), ".tmp-4567-live-writer")
    for p in (old, young):
        with open(p, "wb") as f:
            f.write(b"partial")
    _age(old)
    report = gc.collect(ws)
    assert [(r.path, r.kind, r.size) for r in report.removed] == [("datasets/root/data/.tmp-0123-dead-writer",
                                                                   "temp", 7)]
    assert not os.path.exists(old) and os.path.exists(young)


def test_staging_of_finished_and_abandoned_transactions(tmp_path):
    ws, h = _root_with_data(tmp_path)
    did = str(h.state().dataset_id).removeprefix("did:odf:")
    staging = ws.store.local_path("staging")
    txns = {"committed": {"transaction.json": b"{}", "commit.json": b"{}"},
            "abandoned": {"transaction.json": b"{}", "slice.parquet": b"x" * 100},
            "running": {"transaction.json": b"{}", "read.parquet": b"y" * 10}}
    for name, files in txns.items():
        os.makedirs(os.path.join(staging, did, name))
        for f, body in files.items():
            with open(os.path.join(staging, did, name, f), "wb") as out:
                out.write(body)
        if name != "running":
            _age_tree(os.path.join(staging, did, name))
    os.makedirs(os.path.join(staging, "gone-dataset-id", "t1"))  # a deleted dataset's leftovers
    _age_tree(os.path.join(staging, "gone-dataset-id"))
    report = gc.collect(ws)
    got = sorted((r.path, r.kind, r.size) for r in report.removed)
    assert got == [(f"staging/{did}/abandoned", "staging (abandoned)", 102),
                   (f"staging/{did}/committed", "staging (committed)", 4),
                   ("staging/gone-dataset-id/t1", "staging (abandoned)", 0)]
    assert os.listdir(os.path.join(staging, did)) == ["running"]
    assert not os.path.exists(os.path.join(staging, "gone-dataset-id"))


def test_a_shared_staging_root_is_collected_only_for_this_workspace(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    monkeypatch.setenv("ODF_STAGING_DIR", str(shared))
    ws, h = _root_with_data(tmp_path)
    did = str(h.state().dataset_id).removeprefix("did:odf:")
    for d in (shared / did / "t1", shared / "someone-elses-dataset" / "t2"):
        d.mkdir(parents=True)
        (d / "transaction.json").write_text("{}")
        _age_tree(str(d))
    assert [r.path for r in gc.collect(ws).removed] == [str(shared / did / "t1")]
    assert (shared / "someone-elses-dataset" / "t2").exists()


def test_nothing_is_removed_from_a_dataset_whose_chain_cannot_be_read(tmp_path, capsys):
    ws, h = _root_with_data(tmp_path)
    _orphan_of_a_failed_commit(tmp_path, h)
    seed = [k for k in h.store.list("blocks")][0]
    with open(h.store.local_path(seed), "r+b") as f:  # every block is referenced through the chain: corrupt one
        f.seek(-5, os.SEEK_END)
        b = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([b[0] ^ 0xFF]))  # a flip: writing a fixed byte was a no-op whenever it was already there
    _age_tree(h.store.root)
    before = _all_files(h)
    assert main(["-w", str(tmp_path / "ws"), "gc"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("odf gc: datasets/root: cannot read its metadata chain, nothing "
                                               "removed from it: ")
    assert _all_files(h) == before


def test_a_directory_without_a_head_is_reported_not_removed(tmp_path, capsys):
    ws, h = _root_with_data(tmp_path)
    half = os.path.join(ws.store.root, "datasets", "half")
    os.makedirs(os.path.join(half, "blocks"))
    with open(os.path.join(half, "blocks", "f1620" + "0" * 64), "wb") as f:
        f.write(b"a block of an interrupted creation")
    _age_tree(half)
    assert main(["-w", str(tmp_path / "ws"), "gc"]) == 1
    err = capsys.readouterr().err
    assert err == ("odf gc: datasets/half has no refs/head: left alone (if it is what an interrupted 'odf add' "
                   "left, delete the directory)\n")
    assert os.path.exists(os.path.join(half, "blocks"))


def test_min_age_must_not_be_negative(tmp_path, capsys):
    Workspace.init(tmp_path / "ws")
    assert main(["-w", str(tmp_path / "ws"), "gc", "--min-age", "-1"]) == 1
    assert capsys.readouterr().err == "odf: error: --min-age must be >= 0 seconds, got -1.0\n"
