"""Reproduction (``verify``) against a block that records another outcome than the transformation gives: data where
the engine produces none, and none where it produces some. The chain is re-signed by a careful forger (every hash
matches, the summary cache dropped), so only reproducing the transformation can tell."""
from __future__ import annotations

import pytest

from odf_core.chain.integrity import verify_integrity
from odf_core.identity import Multihash
from odf_core.metadata import (DataSlice, ExecuteTransform, MetadataBlock, OffsetInterval, SetDataSchema,
                               encode_block)
from odf_core.storage import DatasetLayout
from odf_core.transform import run, verify

from .test_coordinator import add_rows, derivative, make_root

pytestmark = pytest.mark.spark


@pytest.fixture
def engine(spark):
    from odf_core.engine import LocalEngine

    return LocalEngine.with_session(spark)


@pytest.fixture
def ws(tmp_path):
    from odf_core.workspace import Workspace

    return Workspace.init(tmp_path / ".odf")


def _put(d, block: MetadataBlock) -> Multihash:
    raw = encode_block(block)
    mh = Multihash.sha3_256(raw)
    d.store.put_if_absent(DatasetLayout.block_key(mh), raw)
    return mh


def _forge_head(d, schema: SetDataSchema | None = None, **event_changes) -> Multihash:
    """Replace the head block by one whose ExecuteTransform differs by ``event_changes`` (after a ``schema`` block,
    which data needs before it); returns its hash."""
    head = d.chain.head()
    block = d.chain.get_block(head)
    assert isinstance(block.event, ExecuteTransform)
    prev, seq = block.prev_block_hash, block.sequence_number
    if schema is not None:
        prev = _put(d, MetadataBlock(system_time=block.system_time, prev_block_hash=prev, sequence_number=seq,
                                     event=schema))
        seq += 1
    mh = _put(d, MetadataBlock(system_time=block.system_time, prev_block_hash=prev, sequence_number=seq,
                               event=block.event.replace(**event_changes)))
    d.store.compare_and_swap_ref(DatasetLayout.head_ref, str(head), str(mh))
    d.store.delete("info/summary")
    return mh


def test_a_block_recording_no_data_where_the_transformation_produces_some(ws, engine, tmp_path):
    root = make_root(ws)
    add_rows(root, tmp_path, [("a", 1, 0), ("b", 2, 1)])
    d = derivative(ws, "d", "select event_time, k, v from root", "root")
    assert run(ws, "d", engine=engine).block_hash
    assert verify(ws, "d", engine=engine).ok
    forged = _forge_head(d, new_data=None)
    assert verify_integrity(d.store, check_data=False).ok  # a valid chain: only the replay can see it
    rep = verify(ws, "d", engine=engine)
    assert not rep.ok and rep.block == str(forged) and rep.blocks_checked == 1
    assert rep.problem == "the block records no data but the transformation produced some", rep.problem


def test_a_block_recording_data_where_the_transformation_produces_none(ws, engine, tmp_path):
    root = make_root(ws)
    add_rows(root, tmp_path, [("a", 1, 0), ("b", 2, 1)])
    d = derivative(ws, "d", "select event_time, k, v from root where v > 100", "root")
    assert run(ws, "d", engine=engine).block_hash
    head = d.chain.get_block(d.chain.head())
    assert isinstance(head.event, ExecuteTransform) and head.event.new_data is None  # no rows: inputs advanced only
    assert verify(ws, "d", engine=engine).ok
    # a slice of the root recorded as the derivative's output (the reproduction check reads no stored data)
    added = next(b.event.new_data for _, b in root.chain.iter_blocks() if getattr(b.event, "new_data", None))
    recorded = DataSlice(logical_hash=added.logical_hash, physical_hash=added.physical_hash,
                         offset_interval=OffsetInterval(start=0, end=1), size=added.size)
    # and the root's schema before it, as the chain's rules want before any data
    schema = next(b.event for _, b in root.chain.iter_blocks() if isinstance(b.event, SetDataSchema))
    forged = _forge_head(d, schema, new_data=recorded)
    assert verify_integrity(d.store, check_data=False).ok
    rep = verify(ws, "d", engine=engine)
    assert not rep.ok and rep.block == str(forged) and rep.blocks_checked == 1
    assert rep.problem.startswith("the block records data ") and \
        rep.problem.endswith(" but the transformation produced none"), rep.problem
