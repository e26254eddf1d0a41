"""Committing a transaction's output to a dataset: files first, then blocks by compare-and-swap.

Shared by ingestion (``AddData``) and transformation (``ExecuteTransform``). A commit is planned on top of a base head;
re-running it after a crash finds its own block already in the chain and returns it instead of adding a duplicate,
which is what makes an Airflow retry of the commit task safe.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from odf_core.chain import ChainState, MetadataChain
from odf_core.errors import ChainError, RefConflict
from odf_core.identity import Multihash
from odf_core.metadata import (
    AddData,
    Checkpoint,
    DataSlice,
    ExecuteTransform,
    ExecuteTransformInput,
    SetDataSchema,
    SourceState,
    Timestamp,
)
from odf_core.storage import DatasetLayout, crash_point

if TYPE_CHECKING:
    import pyarrow as pa

    from odf_core.engine.protocol import SliceDescription

log = logging.getLogger(__name__)

COMMIT_CRASH_POINTS = ("commit.after_data_file", "commit.after_checkpoint_file", "commit.after_schema_block")


@dataclass(frozen=True)
class SliceFile:
    """A finished Parquet slice in staging, with what its block will record: its ``DataSlice`` and its schema as
    ``SetDataSchema`` records it (a bare Arrow Schema FlatBuffer of
    :func:`odf_core.metadata.arrow_schema.recorded_schema`)."""

    path: str
    data_slice: DataSlice
    schema: bytes


def describe_slice(path: str, offset_column: str, expected_start: int) -> SliceFile:
    """Hash a slice and check its offsets run consecutively from ``expected_start``
    (:func:`odf_core.engine.slice_description.describe`, which the engine runs on the slices it writes)."""
    from odf_core.engine.slice_description import describe

    described = describe(path, offset_column, expected_start)
    return SliceFile(path, described.data_slice, bytes(described.schema))


def described_slice(path: str, offset_column: str, expected_start: int,
                    described: "SliceDescription | None") -> SliceFile:
    """The slice at ``path`` as the engine described it, when the file is the one it described: the same size and
    physical hash (SHA3 of its bytes, computed here) and the offsets this commit expects. Otherwise (an engine that
    sends no description, a staged answer of an earlier build, a file changed since) :func:`describe_slice` reads
    the file itself. Either way the block records the same values: the engine's come from the same function."""
    from odf_core.hashing import physical_hash

    if described is not None:
        ds = described.data_slice
        if (ds.offset_interval.start == expected_start and ds.size == os.path.getsize(path)
                and physical_hash(path) == ds.physical_hash):
            return SliceFile(path, ds, bytes(described.schema))
        log.warning("%s is not the slice the engine described: hashing it here", path)
    return describe_slice(path, offset_column, expected_start)


def describe_checkpoint(path: str) -> Checkpoint:
    from odf_core.hashing import physical_hash

    return Checkpoint(physical_hash=physical_hash(path), size=os.path.getsize(path))


def _same_schema(a: "pa.Schema", b: "pa.Schema") -> bool:
    return [(f.name, f.type) for f in a] == [(f.name, f.type) for f in b]


def ensure_schema(chain: MetadataChain, state: ChainState, schema: bytes, system_time: Timestamp) -> ChainState:
    """Append ``SetDataSchema`` when the dataset has none or the data's schema evolved (validated by the chain).
    ``schema`` is the slice's recorded schema, encoded: the same bytes as the dataset's need no decoding."""
    if state.schema is not None:
        if bytes(state.schema) == schema:
            return state
        from odf_core.metadata.arrow_schema import decode_arrow_schema

        if _same_schema(decode_arrow_schema(state.schema), decode_arrow_schema(schema)):
            return state
    chain.append_event(SetDataSchema(schema=schema), system_time, state=state)
    crash_point("commit.after_schema_block")
    return chain.state()


def _find_committed(chain: MetadataChain, base_head: Multihash | None, event) -> Multihash | None:
    """Our event already committed after ``base_head`` (a retried commit), or None."""
    for h, block in chain.iter_blocks(stop=base_head):
        if type(block.event) is type(event) and _same_commit(block.event, event):
            return h
    return None


def _same_commit(a, b) -> bool:
    keys: tuple[str, ...] = ("new_data", "new_checkpoint", "new_watermark")
    if isinstance(a, AddData):
        keys += ("new_source_state",)
    else:
        keys += ("query_inputs",)
    return all(getattr(a, k) == getattr(b, k) for k in keys)


def commit_data(
    chain: MetadataChain,
    *,
    base_head: Multihash | None,
    slice_file: SliceFile | None,
    checkpoint_path: str | None,
    system_time: Timestamp,
    new_watermark: Timestamp | None = None,
    source_state: SourceState | None = None,
    query_inputs: tuple[ExecuteTransformInput, ...] | None = None,
    carry_checkpoint: bool = True,
) -> Multihash | None:
    """Commit one transaction: an ``AddData`` (root) or, with ``query_inputs``, an ``ExecuteTransform``.

    ``base_head`` is the head the transaction was planned on. Returns the new block's hash, the hash of the same
    block committed by an earlier attempt, or None when there is nothing to commit.
    """
    store = chain.store
    state = chain.state()
    found: list[tuple[str, str]] = []  # files already in place: an orphan 'odf gc' could be removing right now
    if slice_file is not None:
        key = DatasetLayout.data_key(slice_file.data_slice.physical_hash)
        if not store.put_file_if_absent(key, slice_file.path):
            found.append((key, slice_file.path))
        crash_point("commit.after_data_file")
    new_checkpoint = None
    if checkpoint_path is not None:
        new_checkpoint = describe_checkpoint(checkpoint_path)
        key = DatasetLayout.checkpoint_key(new_checkpoint.physical_hash)
        if not store.put_file_if_absent(key, checkpoint_path):
            found.append((key, checkpoint_path))
        crash_point("commit.after_checkpoint_file")
    elif carry_checkpoint:
        new_checkpoint = state.last_checkpoint

    def build(st: ChainState):
        watermark = new_watermark
        if st.last_watermark is not None and (watermark is None or watermark < st.last_watermark):
            watermark = st.last_watermark
        common: dict[str, Any] = dict(
            prev_checkpoint=st.last_checkpoint.physical_hash if st.last_checkpoint else None,
            prev_offset=st.last_offset,
            new_data=slice_file.data_slice if slice_file else None,
            new_checkpoint=new_checkpoint,
            new_watermark=watermark,
        )
        if query_inputs is not None:
            return ExecuteTransform(query_inputs=query_inputs, **common)
        return AddData(new_source_state=source_state, **common)

    if state.head != base_head:
        # Either a retry of a commit that already went through, or someone else committed meanwhile.
        probe = build(chain.state_at(base_head))
        done = _find_committed(chain, base_head, probe)
        if done is not None:
            return done
        # Only our own SetDataSchema (an interrupted earlier attempt) may sit between: offsets are still right.
        if not all(isinstance(b.event, SetDataSchema) for _, b in chain.iter_blocks(stop=base_head)):
            raise RefConflict("refs/head", str(base_head) if base_head else None, str(state.head))
    if slice_file is not None:
        state = ensure_schema(chain, state, slice_file.schema, system_time)
    event = build(state)
    try:
        block = chain.append_event(event, system_time, state=state)
    except ChainError as e:
        if "changes nothing" in str(e):
            return None
        raise
    for key, path in found:  # removed by a collector between our check and our block: publish it again
        if not store.exists(key):
            store.put_file_if_absent(key, path)
    return block

