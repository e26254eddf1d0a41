"""Integrity verification names the first bad block or file and what differs."""
from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from odf_core.chain.integrity import verify_integrity
from odf_core.commit import commit_data, describe_slice
from odf_core.metadata import Timestamp
from odf_core.storage import DatasetLayout
from odf_core.workspace import Workspace

from .builders import new_root, slice_table, write_slice


@pytest.fixture
def ds(tmp_path):
    ws = Workspace.init(tmp_path / "ws")
    h = new_root(ws)
    for i, (start, n) in enumerate([(0, 10), (10, 5), (15, 7)]):
        sf = describe_slice(write_slice(tmp_path / f"s{i}.parquet", start, n), "offset", start)
        commit_data(h.chain, base_head=h.chain.head(), slice_file=sf, checkpoint_path=None,
                    system_time=Timestamp.parse(f"2024-01-0{i + 2}T00:00:00Z"))
    return h


def _data_blocks(h):
    return [(bh, b) for bh, b in h.chain.iter_blocks() if getattr(b.event, "new_data", None)][::-1]


def test_valid_dataset(ds):
    r = verify_integrity(ds.store)
    assert r.ok and r.records_checked == 22 and r.files_checked == 3, r.summary()


def test_missing_data_file(ds):
    bh, b = _data_blocks(ds)[1]
    ds.store.delete(DatasetLayout.data_key(b.event.new_data.physical_hash))
    r = verify_integrity(ds.store)
    assert not r.ok and r.block == bh and "is missing" in r.problem


def test_data_file_with_different_bytes(ds):
    bh, b = _data_blocks(ds)[0]
    path = ds.store.local_path(DatasetLayout.data_key(b.event.new_data.physical_hash))
    pq.write_table(slice_table(0, 10).slice(0, 9), path)  # other content under the same name
    r = verify_integrity(ds.store)
    assert not r.ok and r.block == bh and r.sequence_number == b.sequence_number
    assert "bytes, the block records" in r.problem or "physical hash" in r.problem


def test_same_records_other_encoding_pass_logical_but_fail_physical(ds):
    bh, b = _data_blocks(ds)[2]
    path = ds.store.local_path(DatasetLayout.data_key(b.event.new_data.physical_hash))
    t = pq.read_table(path)
    pq.write_table(t, path, compression="gzip")
    r = verify_integrity(ds.store)
    assert not r.ok and r.block == bh and ("physical hash" in r.problem or "bytes" in r.problem)


def test_tampered_block_bytes(ds):
    bh, b = _data_blocks(ds)[1]
    path = ds.store.local_path(DatasetLayout.block_key(bh))
    raw = bytearray(open(path, "rb").read())
    raw[-5] ^= 1
    open(path, "wb").write(bytes(raw))
    r = verify_integrity(ds.store)
    assert not r.ok and r.block == bh and "corrupted" in r.problem


def test_head_to_missing_block(ds):
    head = ds.chain.head()
    ds.store.delete(DatasetLayout.block_key(head))
    r = verify_integrity(ds.store)
    assert not r.ok and "missing" in r.problem and str(head) in r.summary()
