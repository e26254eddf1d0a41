"""Integrity verification names the first bad block or file and what differs."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from odf_core.chain.integrity import verify_integrity
from odf_core.commit import SliceFile, commit_data, describe_slice
from odf_core.hashing import logical_hash_file, physical_hash
from odf_core.identity import Multihash
from odf_core.metadata.arrow_schema import encode_arrow_schema, recorded_schema
from odf_core.metadata import AddData, DataSlice, MetadataBlock, OffsetInterval, Timestamp, encode_block
from odf_core.storage import DatasetLayout
from odf_core.workspace import Workspace

from .builders import new_root, slice_table, write_slice

T_NEXT = Timestamp.parse("2024-01-05T00:00:00Z")


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


def _data_path(h, block) -> str:
    return h.store.local_path(DatasetLayout.data_key(block.event.new_data.physical_hash))


def _commit_as_recorded(h, path: Path, table: pa.Table, *, interval: tuple[int, int] | None = None,
                        logical: Multihash | None = None, checkpoint: str | None = None):
    """Commit ``table`` as the next slice through the real commit path, with a block that records ``interval`` and
    ``logical`` instead of what the file holds (the chain rules never read data files, so such a block appends)."""
    pq.write_table(table, str(path))
    offsets = table.column("offset").to_pylist()
    start, end = interval or (offsets[0], offsets[-1])
    recorded = DataSlice(logical_hash=logical or logical_hash_file(str(path)), physical_hash=physical_hash(str(path)),
                         offset_interval=OffsetInterval(start=start, end=end), size=path.stat().st_size)
    block = commit_data(h.chain, base_head=h.chain.head(), slice_file=SliceFile(str(path), recorded,
                                                                                encode_arrow_schema(recorded_schema(table.schema))),
                        checkpoint_path=checkpoint, system_time=T_NEXT)
    assert h.chain.head() == block
    return block, h.chain.get_block(block)


def test_valid_dataset(ds):
    r = verify_integrity(ds.store)
    assert r.ok and r.records_checked == 22 and r.files_checked == 3, r.summary()


def test_missing_data_file(ds):
    bh, b = _data_blocks(ds)[1]
    key = DatasetLayout.data_key(b.event.new_data.physical_hash)
    ds.store.delete(key)
    r = verify_integrity(ds.store)
    assert not r.ok and r.block == bh and r.problem == f"file {key} is missing"


def test_data_file_of_another_size(ds):
    bh, b = _data_blocks(ds)[0]
    path = _data_path(ds, b)
    pq.write_table(slice_table(0, 10).slice(0, 9), path)  # other content under the same name
    key = DatasetLayout.data_key(b.event.new_data.physical_hash)
    r = verify_integrity(ds.store)
    assert not r.ok and r.block == bh and r.sequence_number == b.sequence_number
    assert r.problem == f"file {key} is {Path(path).stat().st_size} bytes, the block records {b.event.new_data.size}"


def test_data_file_with_other_bytes_of_the_same_size(ds):
    bh, b = _data_blocks(ds)[1]
    path = Path(_data_path(ds, b))
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0x01
    path.write_bytes(bytes(raw))
    key = DatasetLayout.data_key(b.event.new_data.physical_hash)
    r = verify_integrity(ds.store)
    assert not r.ok and r.block == bh
    assert r.problem == f"file {key}: physical hash is {physical_hash(str(path))}, the block records " \
                        f"{b.event.new_data.physical_hash}"


def test_same_records_other_encoding_pass_logical_but_fail_physical(ds):
    bh, b = _data_blocks(ds)[2]
    path = _data_path(ds, b)
    recorded = b.event.new_data
    pq.write_table(pq.read_table(path), path, compression="gzip")
    # the records are the same, so the logical hash still matches: only the physical checks can tell
    assert logical_hash_file(path) == recorded.logical_hash
    assert physical_hash(path) != recorded.physical_hash
    size = Path(path).stat().st_size
    assert size != recorded.size
    r = verify_integrity(ds.store)
    assert not r.ok and r.block == bh and r.sequence_number == b.sequence_number
    assert r.problem == f"file {DatasetLayout.data_key(recorded.physical_hash)} is {size} bytes, the block records " \
                        f"{recorded.size}"


def test_block_recording_another_logical_hash(ds, tmp_path):
    real = logical_hash_file(write_slice(tmp_path / "probe.parquet", 22, 3))
    other = Multihash(real.code, bytes(32))
    bh, b = _commit_as_recorded(ds, tmp_path / "n.parquet", slice_table(22, 3), logical=other)
    key = DatasetLayout.data_key(b.event.new_data.physical_hash)
    r = verify_integrity(ds.store)
    assert not r.ok and r.block == bh and r.sequence_number == b.sequence_number
    assert r.problem == f"data file {key}: logical hash is {real}, the block records {other}"


@pytest.mark.parametrize("table, interval, holds", [
    (slice_table(22, 5), (22, 27), "5 rows, offsets 22..26"),  # fewer rows than the block records
    (slice_table(22, 5), (22, 25), "5 rows, offsets 22..26"),  # more rows than the block records
    (slice_table(22, 5).set_column(0, "offset", pa.array([23, 24, 25, 26, 27], pa.int64())), (22, 26),
     "5 rows, offsets 23..27"),  # as many rows, other range
    (slice_table(22, 5).set_column(0, "offset", pa.array([22, 23, 25, 26, 27], pa.int64())), (22, 27),
     "5 rows, offsets 22..27"),  # the recorded ends, a row missing in between
])
def test_data_file_holding_other_offsets_than_the_block_records(ds, tmp_path, table, interval, holds):
    bh, b = _commit_as_recorded(ds, tmp_path / "n.parquet", table, interval=interval)
    key = DatasetLayout.data_key(b.event.new_data.physical_hash)
    r = verify_integrity(ds.store)
    assert not r.ok and r.block == bh
    assert r.problem == f"data file {key}: holds {holds}, the block records [{interval[0]}, {interval[1]}]"


def test_offsets_out_of_sequence_inside_the_data_file(ds, tmp_path):
    table = slice_table(22, 5).set_column(0, "offset", pa.array([22, 24, 23, 25, 26], pa.int64()))
    bh, b = _commit_as_recorded(ds, tmp_path / "n.parquet", table, interval=(22, 26))
    key = DatasetLayout.data_key(b.event.new_data.physical_hash)
    r = verify_integrity(ds.store)
    assert not r.ok and r.block == bh and r.problem == f"data file {key}: offsets are not consecutive"


@pytest.fixture
def with_checkpoint(ds, tmp_path):
    ckpt = tmp_path / "state.bin"
    ckpt.write_bytes(b"engine state " * 100)
    bh, b = _commit_as_recorded(ds, tmp_path / "n.parquet", slice_table(22, 3), checkpoint=str(ckpt))
    assert b.event.new_checkpoint is not None and verify_integrity(ds.store).ok
    return bh, b, DatasetLayout.checkpoint_key(b.event.new_checkpoint.physical_hash)


def test_valid_checkpoint_is_counted(ds, with_checkpoint):
    r = verify_integrity(ds.store)
    assert r.ok and r.files_checked == 5 and r.records_checked == 25, r.summary()


def test_missing_checkpoint(ds, with_checkpoint):
    bh, _, key = with_checkpoint
    ds.store.delete(key)
    r = verify_integrity(ds.store)
    assert not r.ok and r.block == bh and r.problem == f"file {key} is missing"


def test_checkpoint_with_other_bytes(ds, with_checkpoint):
    bh, b, key = with_checkpoint
    path = Path(ds.store.local_path(key))
    path.write_bytes(b"ENGINE state " + path.read_bytes()[13:])
    r = verify_integrity(ds.store)
    assert not r.ok and r.block == bh
    assert r.problem == f"file {key}: physical hash is {physical_hash(str(path))}, the block records " \
                        f"{b.event.new_checkpoint.physical_hash}"


def test_checkpoint_of_another_size(ds, with_checkpoint):
    bh, b, key = with_checkpoint
    Path(ds.store.local_path(key)).write_bytes(b"short")
    r = verify_integrity(ds.store)
    assert not r.ok and r.block == bh
    assert r.problem == f"file {key} is 5 bytes, the block records {b.event.new_checkpoint.size}"


def test_hash_linked_block_breaking_a_chain_rule(ds):
    """A block written around the append checks (another writer, a hand-edited store) is caught by the replay."""
    st = ds.chain.state()
    recorded = _data_blocks(ds)[-1][1].event.new_data
    bad = MetadataBlock(system_time=T_NEXT, prev_block_hash=st.head, sequence_number=st.sequence_number + 1,
                        event=AddData(prev_offset=21, new_data=dataclasses.replace(
                            recorded, offset_interval=OffsetInterval(start=30, end=31))))
    raw = encode_block(bad)
    bh = Multihash.sha3_256(raw)
    ds.store.put_if_absent(DatasetLayout.block_key(bh), raw)
    ds.store.compare_and_swap_ref(DatasetLayout.head_ref, str(st.head), str(bh))
    r = verify_integrity(ds.store)
    assert not r.ok and r.block == bh and r.sequence_number == bad.sequence_number
    assert r.problem == "breaks a chain rule: AddData: offset gap: newData starts at 30, expected 22"
    assert r.blocks_checked == bad.sequence_number + 1  # every earlier block was replayed first


def test_tampered_block_bytes(ds):
    bh, b = _data_blocks(ds)[1]
    path = ds.store.local_path(DatasetLayout.block_key(bh))
    raw = bytearray(open(path, "rb").read())
    raw[-5] ^= 1
    open(path, "wb").write(bytes(raw))
    r = verify_integrity(ds.store)
    assert not r.ok and r.block == bh
    assert r.problem.endswith(f"block {bh} is corrupted: its bytes hash to {Multihash.sha3_256(bytes(raw))}")


def test_head_to_missing_block(ds):
    head = ds.chain.head()
    ds.store.delete(DatasetLayout.block_key(head))
    r = verify_integrity(ds.store)
    assert not r.ok and "missing" in r.problem and str(head) in r.summary()
