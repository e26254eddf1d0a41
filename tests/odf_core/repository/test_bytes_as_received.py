"""Blocks travel and are stored as the bytes they came in (kamu-cli 0.265.0 does the same): a manifest version 3
block and a block with a field this version does not know pull and push byte-identical, verify, and the dataset
grows on top of them."""
from __future__ import annotations

import threading
from pathlib import Path

from odf_core.chain.integrity import verify_integrity
from odf_core.metadata import MetadataBlock, SetInfo, decode_block, encode_block
from odf_core.repository import pull_remote, push
from odf_core.repository.serve import make_server
from odf_core.storage import DatasetLayout
from odf_core.workspace import Workspace

from ..metadata.foreign_blocks import set_info_with_unknown_field
from .datasets import chain_hashes, grow, workspace_with_root


def _with_foreign_blocks(tmp_path: Path):
    """A root dataset whose chain holds, after its own blocks, a v3 block and a block with an unknown field."""
    ws, h = workspace_with_root(str(tmp_path / "ws"), tmp_path, slices=2)
    st = h.chain.state()
    v3 = encode_block(MetadataBlock(system_time=st.system_time, prev_block_hash=st.head,
                                    sequence_number=st.sequence_number + 1, event=SetInfo(description="v3"),
                                    manifest_version=3))
    h3 = h.chain.append_bytes(v3)
    unknown = set_info_with_unknown_field(st.system_time, h3, st.sequence_number + 2, "from the future")
    hu = h.chain.append_bytes(unknown)
    assert encode_block(decode_block(unknown)) != unknown  # re-encoding would lose the field and change the hash
    return ws, h, {h3: v3, hu: unknown}


def _blocks_of(handle) -> dict:
    return {h: handle.store.get(DatasetLayout.block_key(h)) for h, _ in handle.chain.iter_blocks()}


def test_append_bytes_stores_the_bytes_as_received(tmp_path: Path) -> None:
    _, h, foreign = _with_foreign_blocks(tmp_path)
    stored = _blocks_of(h)
    for bh, raw in foreign.items():
        assert stored[bh] == raw
    assert verify_integrity(h.store).ok  # the integrity check hashes the stored bytes, not a re-encoding
    grow(h, tmp_path, 1, tag="b")  # the dataset ingests further on top of them
    assert verify_integrity(h.store).ok
    assert h.chain.state().sequence_number == max(b.sequence_number for _, b in h.chain.iter_blocks())


def test_push_and_pull_keep_foreign_blocks_byte_identical(tmp_path: Path) -> None:
    ws, h, foreign = _with_foreign_blocks(tmp_path)
    url = f"file://{tmp_path}/repo/root"
    push(ws, "root", url)
    ws2 = Workspace.init(str(tmp_path / "ws2"))
    name, _ = pull_remote(ws2, url, "copy")
    copy = ws2.get(name)
    assert chain_hashes(copy) == chain_hashes(h)
    assert _blocks_of(copy) == _blocks_of(h)
    assert verify_integrity(copy.store).ok
    # ... and over HTTP from `odf serve`, after the origin grew on top of them
    grow(h, tmp_path, 1, tag="c")
    server = make_server(ws, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        ws3 = Workspace.init(str(tmp_path / "ws3"))
        name, result = pull_remote(ws3, f"http://127.0.0.1:{server.server_address[1]}/root", "web")
        assert _blocks_of(ws3.get(name)) == _blocks_of(h)
        assert verify_integrity(ws3.get(name).store).ok
    finally:
        server.shutdown()
        server.server_close()
    assert all(_blocks_of(ws3.get(name))[bh] == raw for bh, raw in foreign.items())
