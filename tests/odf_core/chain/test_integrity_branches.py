"""The verification branches a healthy or tampered chain rarely takes: no head, a head that is no hash, a summary
cache of a block that is not in this chain, and ``verify()`` (reproduction) stopping at its own integrity check before
it runs any engine. Each through the library and, where a user meets it, ``odf verify`` (one error line, exit 1)."""
from __future__ import annotations

import os

import pytest

from odf_core.chain.integrity import verify_integrity
from odf_core.chain.summary import SUMMARY_KEY
from odf_core.cli import main
from odf_core.commit import commit_data, describe_slice
from odf_core.engine import Engine
from odf_core.errors import OdfError
from odf_core.identity import Multihash
from odf_core.metadata import (
    DatasetKind,
    DatasetSnapshot,
    SetInfo,
    SetTransform,
    Timestamp,
    TransformInput,
    TransformSql,
)
from odf_core.storage import DatasetLayout
from odf_core.transform import verify
from odf_core.workspace import Workspace

from .builders import new_root, write_slice

T0 = Timestamp.parse("2024-03-01T00:00:00Z")


class UnusedEngine(Engine):
    """Verification must stop before any reproduction: running anything here fails the test."""

    def execute(self, request, *, what: str = "engine request"):
        raise AssertionError(f"{what}: the engine ran although the integrity check had failed")

    def describe(self) -> str:
        return "unused engine"


@pytest.fixture
def root(tmp_path):
    ws = Workspace.init(tmp_path / "ws")
    h = new_root(ws)
    sf = describe_slice(write_slice(tmp_path / "s.parquet", 0, 5), "offset", 0)
    commit_data(h.chain, base_head=h.chain.head(), slice_file=sf, checkpoint_path=None,
                system_time=Timestamp.parse("2024-01-02T00:00:00Z"))
    return h


def _cli_verify(tmp_path, capsys, dataset: str) -> tuple[int, str]:
    code = main(["-w", str(tmp_path / "ws"), "verify", "--integrity", dataset])
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) <= 1 and "Traceback" not in err, err
    return code, err


def test_a_dataset_without_a_head(root, tmp_path, capsys):
    root.store.delete(DatasetLayout.head_ref)
    report = verify_integrity(root.store)
    assert not report.ok and report.problem == "the dataset has no head (refs/head is missing)"
    assert report.summary() == "integrity check failed: the dataset has no head (refs/head is missing)"
    # the CLI does not find such a dataset at all: one line saying so
    code, err = _cli_verify(tmp_path, capsys, str(root.name))
    assert code == 1 and f"dataset '{root.name}' does not exist in workspace " in err, err


def test_a_head_that_is_not_a_block_hash(root, tmp_path, capsys):
    with open(root.store.local_path(DatasetLayout.head_ref), "w") as f:
        f.write("f" + "1" * 70)  # hex multibase, but the multihash header does not match its length
    report = verify_integrity(root.store)
    assert not report.ok and report.block is None
    assert "refs/head holds an invalid block hash: invalid multihash bytes" in report.problem, report.problem
    code, err = _cli_verify(tmp_path, capsys, str(root.name))
    assert code == 1 and f"{root.name}: integrity check failed: " in err and \
        "refs/head holds an invalid block hash" in err, err


def test_a_head_naming_a_block_that_does_not_exist(root, tmp_path, capsys):
    nowhere = Multihash.sha3_256(b"no such block")
    with open(root.store.local_path(DatasetLayout.head_ref), "w") as f:
        f.write(str(nowhere))
    report = verify_integrity(root.store)
    assert not report.ok and report.block == nowhere and f"block {nowhere} is missing" in report.problem
    code, err = _cli_verify(tmp_path, capsys, str(root.name))
    assert code == 1 and f"block {nowhere} is missing" in err, err


def test_a_summary_of_a_block_that_is_not_in_this_chain(root, tmp_path, capsys):
    """A chain rolled back and grown again: the summary cache written at the abandoned head names a block that is no
    longer an ancestor of the head (an authentic summary, so only its place in the chain gives it away)."""
    base = root.chain.head()
    abandoned = root.chain.append_event(SetInfo(description="abandoned"), T0)
    summary = root.store.get(SUMMARY_KEY)
    root.store.compare_and_swap_ref(DatasetLayout.head_ref, str(abandoned), str(base))
    assert root.chain.head() == base
    root.chain.append_event(SetInfo(description="kept"), T0)
    root.store.put(SUMMARY_KEY, summary)
    report = verify_integrity(root.store)
    assert not report.ok and report.block is None
    assert report.problem.startswith(f"{SUMMARY_KEY} is at block {abandoned}, which is not in this chain; it is only "
                                     "a cache: "), report.problem
    code, err = _cli_verify(tmp_path, capsys, str(root.name))
    assert code == 1 and f"is at block {abandoned}, which is not in this chain" in err, err


def test_reproduction_stops_at_its_own_integrity_check(root, tmp_path):
    """``verify()`` checks the chain (without reading data) before replaying anything: a corrupted block of the
    derivative is reported as such, with no transformation checked and no engine run."""
    ws = Workspace.open(str(tmp_path / "ws"))
    d = ws.create(DatasetSnapshot(name="d", kind=DatasetKind.DERIVATIVE, metadata=(SetTransform(
        inputs=(TransformInput(dataset_ref=str(root.name)),),
        transform=TransformSql(engine="spark", query="select event_time, offset from root")),)))
    head = d.chain.head()
    path = d.store.local_path(DatasetLayout.block_key(head))
    raw = bytearray(open(path, "rb").read())
    raw[-3] ^= 0xFF
    with open(path, "wb") as f:
        f.write(bytes(raw))
    rep = verify(ws, "d", engine=UnusedEngine())
    assert not rep.ok and rep.blocks_checked == 0 and rep.block == str(head)
    assert f"block {head} is corrupted: its bytes hash to {Multihash.sha3_256(bytes(raw))}" in rep.problem, rep.problem


def test_reproduction_of_a_dataset_without_a_head(root, tmp_path):
    ws = Workspace.open(str(tmp_path / "ws"))
    root.store.delete(DatasetLayout.head_ref)
    with pytest.raises(OdfError, match=f"dataset '{root.name}' does not exist"):
        verify(ws, str(root.name), engine=UnusedEngine())
    assert not os.path.exists(root.store.local_path(DatasetLayout.head_ref))
