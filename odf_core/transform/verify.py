"""Verification by reproduction: every ``ExecuteTransform`` is run again from its recorded inputs and its
logical hash compared; a block recorded by an engine of other semantics is its own outcome, never tampering."""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from odf_core.chain import ChainState
from odf_core.dataset_files import engine_path
from odf_core.engine import Engine
from odf_core.engine.version import describe as describe_engine
from odf_core.engine.version import running_engine_version, same_semantics
from odf_core.metadata import (
    ExecuteTransform,
    MetadataBlock,
    TransformRequest,
)
from odf_core.storage import DatasetLayout
from odf_core.workspace import Workspace

from odf_core.transform.planning import engine_request, plan_inputs
from odf_core.transform.transaction import run_engine

if TYPE_CHECKING:
    from odf_core.progress import Progress


@dataclass
class VerifyReport:
    """``ok``: every transformation reproduced. Reproductions by an engine whose semantics differ from the recorded
    one are their own outcome (``other_engine``): a match is still ok, a difference is reported as such — the recorded
    engine computes differently — never as tampering."""
    ok: bool
    blocks_checked: int
    problem: str | None = None
    block: str | None = None
    other_engine: list[str] = field(default_factory=list)
    engine_differs: bool = False

    def summary(self) -> str:
        if self.ok:
            line = f"ok: {self.blocks_checked} transformation(s) reproduced with matching logical hashes"
            return line + (f" ({len(self.other_engine)} by another engine's semantics)" if self.other_engine else "")
        if self.engine_differs:
            return (f"not reproducible with this engine: {len(self.other_engine)} transformation(s) were recorded "
                    f"with other engine semantics; {self.problem}")
        return f"verification failed at block {self.block}: {self.problem}"


def verify(ws: Workspace, dataset: str, *, engine: Engine, progress: "Progress | None" = None) -> VerifyReport:
    """Re-execute every ``ExecuteTransform`` from its recorded inputs; compare logical hashes. ``progress``
    (:class:`odf_core.progress.Progress`) counts the transforms replayed. A block whose transform was set for an
    engine of other semantics is reproduced too, and its outcome is reported as ``reproduced with engine X,
    recorded Y: hashes match|differ``; such differences do not stop the replay of later blocks."""
    from odf_core.chain.integrity import verify_integrity
    from odf_core.chain.state import fold

    handle = ws.get(dataset)
    integrity = verify_integrity(handle.store, check_data=False)
    if not integrity.ok:
        return VerifyReport(False, 0, integrity.problem, str(integrity.block))
    blocks = list(handle.chain.iter_blocks())[::-1]
    state = ChainState()
    checked = 0
    running = None
    report = VerifyReport(True, 0)
    if progress is not None:
        progress.set_total(sum(1 for _, b in blocks if isinstance(b.event, ExecuteTransform)))
    with tempfile.TemporaryDirectory(prefix="odf-verify-") as tmp:
        for h, block in blocks:
            ev = block.event
            if isinstance(ev, ExecuteTransform):
                running = running or running_engine_version(engine)
                recorded = state.transform.transform.version if state.transform else None
                problem = _reproduce(ws, handle, state, block, ev, tmp, engine)
                checked += 1
                if progress is not None:
                    progress.advance(1, ev.new_data.size if ev.new_data else 0)
                if not same_semantics(recorded, running):
                    note = (f"block {h}: reproduced with engine {describe_engine(running)}, recorded "
                            f"{describe_engine(recorded)}: hashes {'differ' if problem else 'match'}")
                    report.other_engine.append(note)
                    if problem:
                        report.ok, report.engine_differs = False, True
                        report.problem, report.block = report.problem or problem, report.block or str(h)
                elif problem:
                    return VerifyReport(False, checked, problem, str(h), report.other_engine)
            state = fold(state, block, h)
    report.blocks_checked = checked
    return report


def _reproduce(ws, handle, state: ChainState, block: MetadataBlock, ev: ExecuteTransform, tmp: str,
               engine: Engine) -> str | None:
    from odf_core.hashing import logical_hash_file

    step = os.path.join(tmp, f"b{block.sequence_number}")
    os.makedirs(step)
    positions = {qi.dataset_id: (qi.prev_block_hash, qi.prev_offset, qi.new_block_hash, qi.new_offset)
                 for qi in ev.query_inputs}
    planned = plan_inputs(ws, handle, state, step, positions)
    assert not isinstance(planned, str)
    assert state.transform is not None  # an ExecuteTransform follows a SetTransform
    request = TransformRequest(
        dataset_id=state.seeded_id, dataset_alias=str(handle.name), system_time=block.system_time,
        vocab=state.vocab, transform=state.transform.transform, query_inputs=tuple(p.request_input for p in planned),
        next_offset=state.next_offset,
        prev_checkpoint_path=engine_path(handle.store, DatasetLayout.checkpoint_key(ev.prev_checkpoint), step)
        if ev.prev_checkpoint else None,
        new_checkpoint_path=os.path.join(step, "checkpoint.parquet"),
        new_data_path=os.path.join(step, "output.parquet"))
    run_engine(engine, engine_request(request, planned), str(handle.name))
    produced = os.path.exists(request.new_data_path)
    if ev.new_data is None:
        return "the block records no data but the transformation produced some" if produced else None
    if not produced:
        return f"the block records data {ev.new_data.offset_interval} but the transformation produced none"
    actual = logical_hash_file(request.new_data_path)
    if actual != ev.new_data.logical_hash:
        return f"logical hash of the reproduced data is {actual}, the block records {ev.new_data.logical_hash}"
    return None
