"""Reading an input dataset's chain for a transaction: the slices and watermarks in a block interval."""
from __future__ import annotations

from dataclasses import dataclass

from odf_core.identity import Multihash
from odf_core.metadata import DataSlice, Timestamp, Watermark
from odf_core.workspace import DatasetHandle


@dataclass(frozen=True)
class InputBlocks:
    """What an input's blocks ``(prev, new]`` hold, in chain order."""

    slices: tuple[DataSlice, ...]
    watermarks: tuple[Watermark, ...]


def blocks_between(handle: DatasetHandle, prev: Multihash | None, new: Multihash | None) -> InputBlocks:
    """Data slices and explicit watermarks of the blocks after ``prev`` up to and including ``new``.

    Walks only those blocks (never the history before ``prev``)."""
    if new is None:
        return InputBlocks((), ())
    slices, marks = [], []
    for _, block in handle.chain.iter_blocks(start=new, stop=prev):
        ev = block.event
        nd = getattr(ev, "new_data", None)
        if nd is not None:
            slices.append(nd)
        wm = getattr(ev, "new_watermark", None)
        if wm is not None:
            marks.append(Watermark(system_time=block.system_time, event_time=wm))
    return InputBlocks(tuple(reversed(slices)), tuple(reversed(marks)))


def all_slices_upto(handle: DatasetHandle, head: Multihash | None) -> tuple[DataSlice, ...]:
    return blocks_between(handle, None, head).slices


def latest_watermark(marks: tuple[Watermark, ...]) -> Timestamp | None:
    return marks[-1].event_time if marks else None
