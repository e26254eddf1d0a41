"""Committing a transaction's output to a dataset: files first, then blocks by compare-and-swap.

Shared by ingestion (``AddData``) and transformation (``ExecuteTransform``). A commit is planned on top of a base head;
re-running it after a crash finds its own block already in the chain and returns it instead of adding a duplicate,
which is what makes an Airflow retry of the commit task safe.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from odf_core.chain import ChainState, MetadataChain
from odf_core.errors import ChainError, IntegrityError, RefConflict
from odf_core.identity import Multihash
from odf_core.metadata import (
    AddData,
    Checkpoint,
    DataSlice,
    ExecuteTransform,
    ExecuteTransformInput,
    OffsetInterval,
    SetDataSchema,
    SourceState,
    Timestamp,
)
from odf_core.metadata.arrow_schema import recorded_schema
from odf_core.storage import DatasetLayout, crash_point

COMMIT_CRASH_POINTS = ("commit.after_data_file", "commit.after_checkpoint_file", "commit.after_schema_block")


@dataclass(frozen=True)
class SliceFile:
    """A finished Parquet slice in staging, with what its block will record."""

    path: str
    data_slice: DataSlice
    schema: pa.Schema


def describe_slice(path: str, offset_column: str, expected_start: int) -> SliceFile:
    """Hash a slice and check its offsets run consecutively from ``expected_start``."""
    from odf_core.hashing import logical_hash_file, physical_hash

    pf = pq.ParquetFile(path)
    offsets = pf.read(columns=[offset_column]).column(offset_column).to_numpy()
    n = len(offsets)
    if n == 0:
        raise IntegrityError(f"{path}: an empty slice must not be committed")
    if offsets[0] != expected_start or (n > 1 and not (offsets[1:] - offsets[:-1] == 1).all()):
        raise IntegrityError(
            f"{path}: offsets must run consecutively from {expected_start}, found {offsets[0]}..{offsets[-1]}"
        )
    import os
    from concurrent.futures import ThreadPoolExecutor

    # Both hashes read the whole file and spend their time in SHA3 and Parquet decoding, which release the GIL.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="odf-physical-hash") as pool:
        physical = pool.submit(physical_hash, path)
        logical = logical_hash_file(path)
        ds = DataSlice(
            logical_hash=logical,
            physical_hash=physical.result(),
            offset_interval=OffsetInterval(start=int(offsets[0]), end=int(offsets[-1])),
            size=os.path.getsize(path),
        )
    return SliceFile(path, ds, recorded_schema(pf.schema_arrow))


def describe_checkpoint(path: str) -> Checkpoint:
    import os

    from odf_core.hashing import physical_hash

    return Checkpoint(physical_hash=physical_hash(path), size=os.path.getsize(path))


def _same_schema(a: pa.Schema, b: pa.Schema) -> bool:
    return [(f.name, f.type) for f in a] == [(f.name, f.type) for f in b]


def ensure_schema(chain: MetadataChain, state: ChainState, schema: pa.Schema,
                  system_time: Timestamp) -> ChainState:
    """Append ``SetDataSchema`` when the dataset has none or the data's schema evolved (validated by the chain)."""
    from odf_core.metadata.arrow_schema import decode_arrow_schema, encode_arrow_schema

    if state.schema is not None and _same_schema(decode_arrow_schema(state.schema), schema):
        return state
    chain.append_event(SetDataSchema(schema=encode_arrow_schema(recorded_schema(schema))), system_time, state=state)
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

