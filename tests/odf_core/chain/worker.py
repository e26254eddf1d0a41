"""Child-process entry points for race and crash tests (run as ``python -m tests.odf_core.chain.worker``)."""
from __future__ import annotations

import sys
from pathlib import Path

from odf_core.chain import MetadataChain
from odf_core.errors import RefConflict
from odf_core.identity import Multihash
from odf_core.metadata import SetInfo, Timestamp
from odf_core.storage import ObjectStore
from odf_core.workspace import Workspace

T = Timestamp.parse("2024-01-03T00:00:00Z")


def _chain(store_root: str) -> MetadataChain:
    """The dataset's chain as its workspace opens it (with the summary key) when it lies in one, else the bare store."""
    ws_dir = Path(store_root).resolve().parents[1]
    if (ws_dir / "workspace.version").exists():
        return Workspace.open(ws_dir).get(Path(store_root).name).chain
    return MetadataChain(ObjectStore.open(store_root))


def append_many(store_root: str, worker: str, n: int) -> None:
    chain = _chain(store_root)
    conflicts = 0
    for i in range(n):
        while True:
            try:
                chain.append_event(SetInfo(description=f"{worker}-{i}"), T)
                break
            except RefConflict:
                conflicts += 1
    print(conflicts)


def commit(store_root: str, slice_path: str, base_head: str) -> None:
    from odf_core.commit import commit_data, describe_slice

    chain = _chain(store_root)
    checkpoint = slice_path + ".checkpoint"
    with open(checkpoint, "wb") as f:
        f.write(b"engine state for " + slice_path.encode())
    sf = describe_slice(slice_path, "offset", chain.state().next_offset if base_head == "-" else 0)
    h = commit_data(chain, base_head=None if base_head == "-" else Multihash.parse(base_head), slice_file=sf,
                    checkpoint_path=checkpoint, system_time=T, new_watermark=T)
    print(h)


if __name__ == "__main__":
    mode, *rest = sys.argv[1:]
    if mode == "append":
        append_many(rest[0], rest[1], int(rest[2]))
    elif mode == "commit":
        commit(*rest)
