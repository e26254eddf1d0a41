"""Planning a derivative's next transaction from the chains: its inputs' new intervals, slices and schemas
(pure reads; nothing is written but schema files in a scratch directory)."""
from __future__ import annotations

import hashlib
import os
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

SCHEMAS_DIR = "schemas"  # under the staging root; 'odf gc' removes transaction directories only, not this


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


def schema_file(handle: DatasetHandle, state: ChainState, directory: str) -> str:
    """An empty Parquet file with the input's schema (the spec's ``schemaFile``) in ``directory``, named by the
    schema's bytes: written once per schema and reused by later steps, since writing it needs pyarrow, whose import
    is ~0.15 s of a command that otherwise has no use for it (issue #64). Written atomically, so a concurrent step
    or a crash leaves either no file or a complete one."""
    if state.schema is None:
        raise TransformError(f"input '{handle.name}' has no data schema yet")
    path = os.path.join(directory, hashlib.sha256(bytes(state.schema)).hexdigest()[:40] + ".parquet")
    if not os.path.exists(path):
        import tempfile

        import pyarrow.parquet as pq

        from odf_core.metadata.arrow_schema import decode_arrow_schema

        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".schema-", suffix=".part", dir=directory)  # concurrent steps: one each
        try:
            with os.fdopen(fd, "wb") as f:
                pq.write_table(decode_arrow_schema(state.schema).empty_table(), f)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.remove(tmp)
            except OSError:
                pass
            raise
    return path


def schemas_dir(ws: Workspace) -> str:
    """Where the inputs' schema files are kept: beside the transactions' staging (which the engine may read)."""
    from odf_core.ingest.transaction import staging_root

    return os.path.join(staging_root(ws), SCHEMAS_DIR)


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
            schema_file=schema_file(h, ist, schemas_dir(ws)),
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
