"""Planning a derivative's next transaction from the chains: its inputs' new intervals, slices and schemas
(pure reads; nothing is written but schema files in a scratch directory)."""
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass

from odf_core.chain import ChainState
from odf_core.dataset_files import engine_path
from odf_core.engine.protocol import (
    InputHistory,
    OdfTransformRequest,
)
from odf_core.errors import DatasetNotFound
from odf_core.identity import DatasetID, Multihash
from odf_core.metadata import (
    DatasetKind,
    ExecuteTransformInput,
    OffsetInterval,
    SetTransform,
    TransformRequest,
    TransformRequestInput,
    TransformSql,
)
from odf_core.storage import DatasetLayout
from odf_core.transform.inputs import all_slices_upto, blocks_between
from odf_core.workspace import DatasetHandle, Workspace

from odf_core.transform.errors import InvalidQuery, TransformError


@dataclass(frozen=True)
class PlannedInput:
    handle: DatasetHandle
    alias: str
    state: ChainState
    execute: ExecuteTransformInput  # what the block will record
    request_input: TransformRequestInput
    history: tuple[str, ...]  # every slice up to the new position (stateful path only)


def input_handle(ws: Workspace, ref: str, dataset: str) -> DatasetHandle:
    try:
        return ws.get(ref)
    except DatasetNotFound:
        raise TransformError(f"dataset '{dataset}': input {ref} does not exist in workspace {ws.url}") from None


def schema_file(handle: DatasetHandle, state: ChainState, path: str) -> str:
    """An empty Parquet file with the input's schema at ``path`` (the spec's ``schemaFile``), copied from the user's
    cache of such files (:func:`cached_schema_file`)."""
    if state.schema is None:
        raise TransformError(f"input '{handle.name}' has no data schema yet")
    cached = cached_schema_file(bytes(state.schema))
    if cached is None:
        _write_schema_file(bytes(state.schema), path)
    else:
        shutil.copyfile(cached, path)
    return path


def schema_cache_dir() -> str:
    """``$XDG_CACHE_HOME/odf/schemas``, else ``~/.cache/odf/schemas``."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "odf", "schemas")


def cached_schema_file(schema: bytes) -> str | None:
    """The user's empty Parquet file of ``schema`` (a ``SetDataSchema`` FlatBuffer), written on first use and named by
    the schema's bytes. Writing one needs pyarrow, whose import is ~0.15 s of a warm step's client that otherwise
    has no use for it (issue #64); a step copies the cached file into its staging, which never outlives the step.
    Only this client reads the cache (the engine reads the copy), and a file that is not whole Parquet is written
    again. None when the cache cannot be written (a read-only home): the caller writes the file itself."""
    path = os.path.join(schema_cache_dir(), hashlib.sha256(schema).hexdigest()[:40] + ".parquet")
    if _whole_parquet(path):
        return path
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".schema-", suffix=".part", dir=os.path.dirname(path))  # one per writer
    except OSError:
        return None
    try:
        os.close(fd)
        _write_schema_file(schema, tmp)
        os.replace(tmp, path)
    except OSError:
        return None
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return path


def _whole_parquet(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            head = f.read(4)
            f.seek(-4, os.SEEK_END)
            return head == b"PAR1" and f.read(4) == b"PAR1"
    except OSError:
        return False


def _write_schema_file(schema: bytes, path: str) -> None:
    import pyarrow.parquet as pq

    from odf_core.metadata.arrow_schema import decode_arrow_schema

    pq.write_table(decode_arrow_schema(schema).empty_table(), path)


def transform_of(state: ChainState, dataset: str) -> SetTransform:
    if state.kind is not DatasetKind.DERIVATIVE:
        raise TransformError(f"dataset '{dataset}' is not a derivative dataset")
    if state.transform is None:
        raise TransformError(f"dataset '{dataset}' has no transform (SetTransform)")
    return state.transform


def check_engine(transform: TransformSql, dataset: str) -> None:
    if transform.engine.lower() != "spark":
        raise TransformError(f"dataset '{dataset}': engine '{transform.engine}' is not supported (only 'spark')")
    if transform.temporal_tables:
        raise InvalidQuery(f"dataset '{dataset}': temporalTables is a Flink-specific feature; Spark SQL has "
                           "no temporal table joins — express the join in the query instead")


def plan_inputs(ws: Workspace, handle: DatasetHandle, state: ChainState, scratch: str,
                positions: dict[DatasetID, tuple[Multihash | None, int | None, Multihash | None, int | None]]
                | None = None) -> list[PlannedInput] | str:
    """Inputs of the next transaction, or a reason to wait / nothing to do (a string)."""
    st = transform_of(state, str(handle.name))
    planned: list[PlannedInput] = []
    for inp in st.inputs:
        h = input_handle(ws, inp.dataset_ref, str(handle.name))
        ist = h.state()
        did = ist.dataset_id
        if did is None:  # not reached (get() finds only datasets with a head); no data, as the steps below conclude
            return f"input '{h.name}' has no data yet"
        if positions is not None:  # reproduction: the recorded interval
            prev_hash, prev_off, new_hash, new_off = positions[did]
        else:
            last = state.transform_input(did)
            prev_hash = last.new_block_hash if last else None
            prev_off = last.new_offset if last else None
            new_hash = ist.head if ist.head != prev_hash else None
            new_off = ist.last_offset if ist.last_offset != prev_off else None
            if ist.last_offset is None:
                return f"input '{h.name}' has no data yet"
        blocks = blocks_between(h, prev_hash, new_hash)
        interval = None
        if new_off is not None:
            interval = OffsetInterval(start=0 if prev_off is None else prev_off + 1, end=new_off)
        alias = inp.alias or str(h.name)
        request_input = TransformRequestInput(
            dataset_id=did,
            dataset_alias=str(h.name),
            query_alias=alias,
            vocab=ist.vocab,
            offset_interval=interval,
            data_paths=tuple(engine_path(h.store, DatasetLayout.data_key(s.physical_hash), scratch)
                             for s in blocks.slices),
            schema_file=schema_file(h, ist, os.path.join(scratch, f"schema-{len(planned)}.parquet")),
            explicit_watermarks=blocks.watermarks,
        )
        history = tuple(engine_path(h.store, DatasetLayout.data_key(s.physical_hash), scratch)
                        for s in all_slices_upto(h, new_hash or prev_hash))
        planned.append(PlannedInput(
            h, alias, ist,
            ExecuteTransformInput(dataset_id=did, prev_block_hash=prev_hash, new_block_hash=new_hash,
                                  prev_offset=prev_off, new_offset=new_off),
            request_input, history))
    if positions is None and all(p.execute.new_block_hash is None for p in planned):
        return "up to date"
    return planned


def engine_request(request: TransformRequest, inputs: list[PlannedInput]) -> OdfTransformRequest:
    """The spec's request plus each input's history (our stateful path re-reads it)."""
    return OdfTransformRequest(request=request, histories=tuple(
        InputHistory(query_alias=p.request_input.query_alias, data_paths=p.history) for p in inputs))


def input_without_data(ws: Workspace, dataset: str) -> str | None:
    """The name of the derivative's first input that has no data yet (its transform waits for it), or None."""
    st = transform_of(ws.get(dataset).state(), dataset)
    for inp in st.inputs:
        h = input_handle(ws, inp.dataset_ref, dataset)
        if h.state().last_offset is None:
            return str(h.name)
    return None
