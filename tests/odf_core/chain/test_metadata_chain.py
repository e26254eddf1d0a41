"""Appending, reading, O(1) current state, and summary catch-up."""
from __future__ import annotations

import pytest

from odf_core.chain import MetadataChain
from odf_core.chain.metadata_chain import SUMMARY_KEY
from odf_core.errors import IntegrityError, RefConflict
from odf_core.metadata import SetInfo
from odf_core.storage import DatasetLayout, ObjectStore
from odf_core.workspace import Workspace

from .builders import T0, new_root


class CountingStore(ObjectStore):
    """A real store that counts storage reads."""

    reads = 0

    def get(self, key):
        CountingStore.reads += 1
        return super().get(key)

    def get_ref(self, name):
        CountingStore.reads += 1
        return super().get_ref(name)


def _counting(store: ObjectStore) -> CountingStore:
    return CountingStore(store.fs, store.root, store._backend)


def _grow(chain: MetadataChain, n: int) -> None:
    """Append n blocks; the block with sequence number k describes itself as f"d{k}"."""
    start = chain.state().block_count
    for i in range(n):
        chain.append_event(SetInfo(description=f"d{start + i}"), T0)


@pytest.mark.parametrize("url", ["local", "memory"])
def test_state_costs_two_reads_whatever_the_length(tmp_path, url):
    import uuid

    loc = str(tmp_path / "ws") if url == "local" else f"memory://ws-{uuid.uuid4().hex}"
    ws = Workspace.init(loc)
    h = new_root(ws)
    counts = []
    for target in (10, 300):
        _grow(h.chain, target - h.state().block_count)
        cs = _counting(h.store)
        CountingStore.reads = 0
        st = MetadataChain(cs, h.summary_key).state()
        counts.append(CountingStore.reads)
        assert st.block_count == target and st.info.description == f"d{target - 1}"
    assert counts == [2, 2]


def test_stale_summary_is_caught_up_incrementally(tmp_path):
    ws = Workspace.init(tmp_path / "ws")
    h = new_root(ws)
    _grow(h.chain, 50)
    stale = h.store.get(SUMMARY_KEY)
    _grow(h.chain, 3)
    h.store.put(SUMMARY_KEY, stale)  # another writer's older summary landed last
    cs = _counting(h.store)
    CountingStore.reads = 0
    st = MetadataChain(cs, h.summary_key).state()
    assert st.block_count == 55 and st.info.description == "d54"
    assert CountingStore.reads == 2 + 3 + 1  # head + summary, 3 new blocks, the block where the summary was
    assert h.chain.state() == h.chain.rebuild_state()


def test_missing_or_garbage_summary_is_rebuilt(tmp_path):
    ws = Workspace.init(tmp_path / "ws")
    h = new_root(ws)
    _grow(h.chain, 5)
    full = h.chain.rebuild_state()
    h.store.put(SUMMARY_KEY, b"{not json")
    assert h.chain.state() == full
    h.store.delete(SUMMARY_KEY)
    assert h.chain.state() == full


def test_head_pointing_to_missing_block(tmp_path):
    ws = Workspace.init(tmp_path / "ws")
    h = new_root(ws)
    head = h.chain.head()
    h.store.delete(DatasetLayout.block_key(head))
    h.store.delete(SUMMARY_KEY)
    with pytest.raises(IntegrityError, match="is missing"):
        h.chain.state()


def test_block_whose_bytes_do_not_hash_to_its_name(tmp_path):
    ws = Workspace.init(tmp_path / "ws")
    h = new_root(ws)
    head = h.chain.head()
    path = h.store.local_path(DatasetLayout.block_key(head))
    data = bytearray(open(path, "rb").read())
    data[-3] ^= 0xFF
    open(path, "wb").write(bytes(data))
    with pytest.raises(IntegrityError, match="corrupted"):
        h.chain.get_block(head)


def test_stale_writer_gets_a_conflict(tmp_path):
    ws = Workspace.init(tmp_path / "ws")
    h = new_root(ws)
    old = h.chain.state()
    h.chain.append_event(SetInfo(description="winner"), T0)
    with pytest.raises(RefConflict):
        h.chain.append_event(SetInfo(description="loser"), T0, state=old)
    assert h.chain.state().info.description == "winner"
