"""Tiny real datasets for repository tests, built without Spark: a root dataset with Parquet slices and checkpoints
committed through the real commit path (odf_core.commit)."""
from __future__ import annotations

from pathlib import Path

from odf_core.commit import commit_data, describe_slice
from odf_core.metadata import Timestamp
from odf_core.workspace import DatasetHandle, Workspace

from ..chain.builders import new_root, write_slice


def grow(handle: DatasetHandle, tmp: Path, slices: int, rows: int = 50, tag: str = "") -> None:
    """Append ``slices`` AddData blocks, each with a data file and a checkpoint."""
    for _ in range(slices):
        state = handle.chain.state()
        start = state.last_offset + 1 if state.last_offset is not None else 0
        i = start // rows
        sf = describe_slice(write_slice(tmp / f"s{tag}{start}.parquet", start, rows, system_ms=1_704_067_200_000 + i),
                            "offset", start)
        cp = tmp / f"cp{tag}{start}.bin"
        cp.write_bytes(f"checkpoint {tag} {start}".encode())
        commit_data(handle.chain, base_head=state.head, slice_file=sf, checkpoint_path=str(cp),
                    system_time=Timestamp(1_704_067_200_000_000_000 + (i + 1) * 1_000_000_000))


def workspace_with_root(location: str, tmp: Path, slices: int = 3, name: str = "root") -> tuple[Workspace,
                                                                                                DatasetHandle]:
    ws = Workspace.init(location)
    h = new_root(ws, name)
    grow(h, tmp, slices)
    return ws, h


def chain_hashes(handle: DatasetHandle) -> list[str]:
    return [str(h) for h, _ in handle.chain.iter_blocks()]
