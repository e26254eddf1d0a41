"""Derivative transformations: plan a transaction from the chains, run the Spark engine, commit ``ExecuteTransform``.

Also query evolution (``set_transform``), verification by reproduction (``verify``) and upstream ordering for
``odf pull --recursive``. The engine contract is files: a ``TransformRequest`` manifest (JSON, which is YAML) written
to the transaction's staging directory, and a ``TransformResponse`` read back.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from odf_core.chain import ChainState
from odf_core.commit import commit_data, describe_slice
from odf_core.engine import EngineError, SparkEngine, job_script
from odf_core.errors import DatasetNotFound, OdfError
from odf_core.identity import DatasetID, Multihash
from odf_core.ingest.staging import atomic_write_text
from odf_core.ingest.transaction import staging_root
from odf_core.metadata import (
    DatasetKind,
    ExecuteTransform,
    ExecuteTransformInput,
    MetadataBlock,
    OffsetInterval,
    SetTransform,
    Timestamp,
    TransformRequest,
    TransformRequestInput,
    TransformSql,
)
from odf_core.metadata.arrow_schema import decode_arrow_schema
from odf_core.metadata.yaml_serde import to_data
from odf_core.storage import DatasetLayout
from odf_core.transform.engine_version import engine_version
from odf_core.transform.inputs import all_slices_upto, blocks_between
from odf_core.workspace import DatasetHandle, Workspace

log = logging.getLogger("odf.transform")


class TransformError(OdfError):
    pass


class InvalidQuery(TransformError):
    """The query is wrong for its inputs (syntax, analysis, output rules); the dataset is untouched."""


@dataclass(frozen=True)
class TransformResult:
    block_hash: str | None
    head: str
    offset_interval: tuple[int, int] | None
    num_records: int
    watermark: str | None
    plan_class: str | None = None


# -- planning -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlannedInput:
    handle: DatasetHandle
    alias: str
    state: ChainState
    execute: ExecuteTransformInput  # what the block will record
    request_input: TransformRequestInput
    history: tuple[str, ...]  # every slice up to the new position (stateful path only)


def _input_handle(ws: Workspace, ref: str, dataset: str) -> DatasetHandle:
    try:
        return ws.get(ref)
    except DatasetNotFound:
        raise TransformError(f"dataset '{dataset}': input {ref} does not exist in workspace {ws.url}") from None


def _local(handle: DatasetHandle, key: str, scratch: str) -> str:
    path = handle.store.local_path(key)
    if path:
        return path
    target = os.path.join(scratch, key.replace("/", "_"))
    if not os.path.exists(target):
        with handle.store.open_read(key) as src, open(target + ".tmp", "wb") as dst:
            shutil.copyfileobj(src, dst)
        os.replace(target + ".tmp", target)
    return target


def _schema_file(handle: DatasetHandle, state: ChainState, path: str) -> str:
    if state.schema is None:
        raise TransformError(f"input '{handle.name}' has no data schema yet")
    pq.write_table(decode_arrow_schema(state.schema).empty_table(), path)
    return path


def _transform_of(state: ChainState, dataset: str) -> SetTransform:
    if state.kind is not DatasetKind.DERIVATIVE:
        raise TransformError(f"dataset '{dataset}' is not a derivative dataset")
    if state.transform is None:
        raise TransformError(f"dataset '{dataset}' has no transform (SetTransform)")
    return state.transform


def _check_engine(transform: TransformSql, dataset: str, allow_mismatch: bool) -> None:
    if transform.engine.lower() != "spark":
        raise TransformError(f"dataset '{dataset}': engine '{transform.engine}' is not supported (only 'spark')")
    if transform.temporal_tables:
        raise InvalidQuery(f"dataset '{dataset}': temporalTables is a Flink-specific feature; Spark SQL has "
                           "no temporal table joins — express the join in the query instead")
    if transform.version and transform.version != engine_version() and not allow_mismatch:
        raise TransformError(
            f"dataset '{dataset}': the transform was set for engine {transform.version} but this engine is "
            f"{engine_version()}; results may not be reproducible. Re-set the transform or allow the mismatch "
            "explicitly (--allow-engine-mismatch)")


def plan_inputs(ws: Workspace, handle: DatasetHandle, state: ChainState, scratch: str,
                positions: dict[DatasetID, tuple[Multihash | None, int | None, Multihash | None, int | None]]
                | None = None) -> list[PlannedInput] | str:
    """Inputs of the next transaction, or a reason to wait / nothing to do (a string)."""
    st = _transform_of(state, str(handle.name))
    planned = []
    for inp in st.inputs:
        h = _input_handle(ws, inp.dataset_ref, str(handle.name))
        ist = h.state()
        did = ist.dataset_id
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
            data_paths=tuple(_local(h, DatasetLayout.data_key(s.physical_hash), scratch) for s in blocks.slices),
            schema_file=_schema_file(h, ist, os.path.join(scratch, f"schema-{len(planned)}.parquet")),
            explicit_watermarks=blocks.watermarks,
        )
        history = tuple(_local(h, DatasetLayout.data_key(s.physical_hash), scratch)
                        for s in all_slices_upto(h, new_hash or prev_hash))
        planned.append(PlannedInput(
            h, alias, ist,
            ExecuteTransformInput(dataset_id=did, prev_block_hash=prev_hash, new_block_hash=new_hash,
                                  prev_offset=prev_off, new_offset=new_off),
            request_input, history))
    if positions is None and all(p.execute.new_block_hash is None for p in planned):
        return "up to date"
    return planned


def write_request(path: str, request: TransformRequest, inputs: list[PlannedInput]) -> None:
    doc = {"kind": "TransformRequest", "version": 1, "content": to_data(request),
           "extensions": {"inputs": {p.alias: {"historyDataPaths": list(p.history)} for p in inputs}}}
    atomic_write_text(path, json.dumps(doc, indent=2))


def run_engine(engine: SparkEngine, request_path: str, response_path: str, *, in_process: bool,
               validate: bool = False) -> dict:
    if os.path.exists(response_path):
        os.remove(response_path)
    if in_process:
        from spark_jobs import transform as job

        fn = job.run_validate_file if validate else job.run_transform_file
        fn(engine.session(), request_path, response_path)
    else:
        args = (["--validate"] if validate else []) + [request_path, response_path]
        engine.run_job(job_script("transform"), args, what="Spark transform job")
    try:
        with open(response_path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise EngineError(f"the Spark transform job wrote no readable response: {e}") from None


def _value(response: dict, dataset: str) -> dict:
    value = response.get("content", {}).get("value", {})
    kind = value.get("kind")
    if kind == "InvalidQuery":
        raise InvalidQuery(f"dataset '{dataset}': invalid query: {value.get('message')}")
    if kind != "Success":
        raise EngineError(f"dataset '{dataset}': the Spark engine failed: {value.get('message')}")
    return value


# -- one transaction ----------------------------------------------------------------------------------------------


def run(ws: Workspace, dataset: str, *, engine: SparkEngine, txn_id: str | None = None, in_process: bool = True,
        allow_engine_mismatch: bool = False) -> TransformResult | None:
    """Run the next transaction of a derivative dataset; None when there is nothing new (or an input has no data).

    With a known ``txn_id`` a retry reuses the transaction's staging area: if the engine already answered, its
    output is committed; if the commit already happened, its result is returned.
    """
    handle = ws.get(dataset)
    state = handle.state()
    st = _transform_of(state, str(handle.name))
    _check_engine(st.transform, str(handle.name), allow_engine_mismatch)
    txn_id = "".join(c if c.isalnum() or c in "-_." else "_" for c in (txn_id or uuid.uuid4().hex))[:120]
    staging = os.path.join(staging_root(ws), str(state.dataset_id).removeprefix("did:odf:"), "transform-" + txn_id)
    done = os.path.join(staging, "commit.json")
    if os.path.exists(done):
        with open(done, encoding="utf-8") as f:
            d = json.load(f)
        return TransformResult(**{**d, "offset_interval": tuple(d["offset_interval"]) if d["offset_interval"]
                                  else None})
    os.makedirs(staging, exist_ok=True)
    plan_file = os.path.join(staging, "plan.json")
    request_path = os.path.join(staging, "request.json")
    response_path = os.path.join(staging, "response.json")
    reuse = os.path.exists(plan_file) and os.path.exists(response_path)
    if reuse:
        with open(plan_file, encoding="utf-8") as f:
            plan = json.load(f)
        if plan["base_head"] != str(state.head):
            reuse = False  # the dataset moved on: plan anew (the commit below detects a duplicate)
    if not reuse:
        planned = plan_inputs(ws, handle, state, staging)
        if isinstance(planned, str):
            log.info("%s: nothing to do: %s", handle.name, planned)
            return None
        system_time = max(Timestamp.now(), state.system_time) if state.system_time else Timestamp.now()
        request = TransformRequest(
            dataset_id=state.dataset_id, dataset_alias=str(handle.name), system_time=system_time,
            vocab=state.vocab, transform=st.transform, query_inputs=tuple(p.request_input for p in planned),
            next_offset=state.next_offset,
            prev_checkpoint_path=_local(handle, DatasetLayout.checkpoint_key(state.last_checkpoint.physical_hash),
                                        staging) if state.last_checkpoint else None,
            new_checkpoint_path=os.path.join(staging, "checkpoint.parquet"),
            new_data_path=os.path.join(staging, "output.parquet"),
        )
        for p in (request.new_checkpoint_path, request.new_data_path):
            if os.path.exists(p):
                os.remove(p)
        write_request(request_path, request, planned)
        plan = {"base_head": str(state.head), "system_time": system_time.isoformat(),
                "query_inputs": [to_data(p.execute) for p in planned]}
        log.info("%s: transaction %s over %s", handle.name, txn_id,
                 ", ".join(f"{p.alias} {p.request_input.offset_interval}" for p in planned))
        response = run_engine(engine, request_path, response_path, in_process=in_process)
        atomic_write_text(plan_file, json.dumps(plan))
    else:
        with open(response_path, encoding="utf-8") as f:
            response = json.load(f)
    value = _value(response, str(handle.name))
    result = _commit(handle, staging, plan, value, response.get("extensions", {}).get("planClass"))
    atomic_write_text(done, json.dumps(asdict(result)))
    return result


def _commit(handle: DatasetHandle, staging: str, plan: dict, value: dict, plan_class: str | None) -> TransformResult:
    from odf_core.metadata.yaml_serde import from_data

    state = handle.state()
    data_path = os.path.join(staging, "output.parquet")
    cp_path = os.path.join(staging, "checkpoint.parquet")
    slice_file = None
    if os.path.exists(data_path):
        start = value.get("newOffsetInterval", {}).get("start", state.next_offset)
        slice_file = describe_slice(data_path, state.vocab.offset_column, start)
    wm = Timestamp.parse(value["newWatermark"]) if value.get("newWatermark") else None
    query_inputs = tuple(from_data(ExecuteTransformInput, d) for d in plan["query_inputs"])
    block = commit_data(
        handle.chain,
        base_head=Multihash.parse(plan["base_head"]) if plan["base_head"] != "None" else None,
        slice_file=slice_file,
        checkpoint_path=cp_path if os.path.exists(cp_path) else None,
        system_time=Timestamp.parse(plan["system_time"]),
        new_watermark=wm,
        query_inputs=query_inputs,
    )
    st = handle.state()
    iv = slice_file.data_slice.offset_interval if slice_file else None
    res = TransformResult(
        block_hash=str(block) if block else None, head=str(st.head),
        offset_interval=(iv.start, iv.end) if iv else None,
        num_records=(iv.end - iv.start + 1) if iv else 0,
        watermark=str(st.last_watermark) if st.last_watermark else None, plan_class=plan_class)
    log.info("%s: committed %s (%s, %d records, %s plan)", handle.name, res.block_hash, res.offset_interval,
             res.num_records, plan_class)
    return res


# -- query evolution ----------------------------------------------------------------------------------------------

_SPARK_TO_ARROW = {"long": pa.int64(), "integer": pa.int32(), "short": pa.int16(), "byte": pa.int8(),
                   "double": pa.float64(), "float": pa.float32(), "string": pa.string(), "boolean": pa.bool_(),
                   "binary": pa.binary(), "date": pa.date32()}


def _compatible(arrow_type: pa.DataType, spark_type) -> bool:
    if isinstance(spark_type, str):
        if spark_type.startswith("timestamp"):
            return pa.types.is_timestamp(arrow_type)
        if spark_type.startswith("decimal"):
            return pa.types.is_decimal(arrow_type)
        expected = _SPARK_TO_ARROW.get(spark_type)
        if expected is None:
            return True
        if pa.types.is_large_string(arrow_type) and expected == pa.string():
            return True
        return arrow_type == expected
    return True  # nested types: names are checked, deep types are left to the chain's SetDataSchema rule


def set_transform(ws: Workspace, dataset: str, event: SetTransform, *, engine: SparkEngine,
                  in_process: bool = True) -> Multihash:
    """Query evolution: validate the new query with Spark against the inputs' schemas, check the output schema only
    adds columns, then append the new ``SetTransform``."""
    event = validate_transform(ws, dataset, event, engine=engine, in_process=in_process)
    return ws.get(dataset).chain.append_event(event)


def validate_transform(ws: Workspace, dataset: str, event: SetTransform, *, engine: SparkEngine,
                       in_process: bool = True) -> SetTransform:
    """The checks of :func:`set_transform` without the append (so a batch can be validated before any write); returns
    the event as it would be appended."""
    handle = ws.get(dataset)
    state = handle.state()
    if state.kind is not DatasetKind.DERIVATIVE:
        raise TransformError(f"dataset '{handle.name}' is not a derivative dataset")
    from odf_core.metadata import DatasetSnapshot

    event = ws.normalize_event(event, DatasetSnapshot(name=str(handle.name), kind=DatasetKind.DERIVATIVE,
                                                       metadata=(event,)))
    _check_engine(event.transform, str(handle.name), False)
    with tempfile.TemporaryDirectory(prefix="odf-validate-") as tmp:
        inputs, missing = [], []
        for i, inp in enumerate(event.inputs):
            h = _input_handle(ws, inp.dataset_ref, str(handle.name))
            ist = h.state()
            if ist.schema is None:
                missing.append(str(h.name))
                continue
            inputs.append({"queryAlias": inp.alias or str(h.name), "vocab": to_data(ist.vocab),
                           "schemaFile": _schema_file(h, ist, os.path.join(tmp, f"s{i}.parquet"))})
        if not missing:
            req = os.path.join(tmp, "validate.json")
            atomic_write_text(req, json.dumps({"kind": "TransformRequest", "version": 1, "content": {
                "transform": {"kind": "Sql", **to_data(event.transform)}, "vocab": to_data(state.vocab),
                "queryInputs": inputs}}))
            value = _value(run_engine(engine, req, os.path.join(tmp, "resp.json"), in_process=in_process,
                                      validate=True), str(handle.name))
            new_schema = json.loads(value["schema"])
            if state.schema is not None:
                _check_output_evolution(decode_arrow_schema(state.schema), new_schema, str(handle.name))
        else:
            log.warning("%s: inputs %s have no schema yet: the query is validated on their first data",
                        handle.name, ", ".join(missing))
    return event


def _check_output_evolution(old: pa.Schema, new_spark: dict, dataset: str) -> None:
    from odf_core.errors import SchemaEvolutionError

    new = [(f["name"], f["type"]) for f in new_spark["fields"]]
    names = [n for n, _ in new]
    problems = []
    for i, f in enumerate(old):
        if f.name not in names:
            problems.append(f"column '{f.name}' ({f.type}) would be removed or renamed")
        elif names.index(f.name) != i:
            problems.append(f"column '{f.name}' would move from position {i} to {names.index(f.name)}")
        elif not _compatible(f.type, new[names.index(f.name)][1]):
            problems.append(f"column '{f.name}' would change type from {f.type} to {new[names.index(f.name)][1]}")
    if problems:
        raise SchemaEvolutionError(f"dataset '{dataset}': new query", problems)


# -- graph --------------------------------------------------------------------------------------------------------


def upstream_order(ws: Workspace, names: list[str]) -> list[str]:
    """The named datasets and everything upstream of them, inputs first."""
    order: list[str] = []
    seen: set[str] = set()

    def visit(h: DatasetHandle, trail: tuple[str, ...]) -> None:
        key = str(h.name).lower()
        if key in seen:
            return
        if key in trail:
            raise TransformError(f"dataset dependency cycle: {' -> '.join(trail + (key,))}")
        st = h.state()
        if st.transform is not None:
            for inp in st.transform.inputs:
                visit(_input_handle(ws, inp.dataset_ref, str(h.name)), trail + (key,))
        seen.add(key)
        order.append(str(h.name))

    for n in names:
        visit(ws.get(n), ())
    return order


# -- verification by reproduction ---------------------------------------------------------------------------------


@dataclass
class VerifyReport:
    ok: bool
    blocks_checked: int
    problem: str | None = None
    block: str | None = None

    def summary(self) -> str:
        if self.ok:
            return f"ok: {self.blocks_checked} transformation(s) reproduced with matching logical hashes"
        return f"verification failed at block {self.block}: {self.problem}"


def verify(ws: Workspace, dataset: str, *, engine: SparkEngine, in_process: bool = True) -> VerifyReport:
    """Re-execute every ``ExecuteTransform`` from its recorded inputs; compare logical hashes."""
    from odf_core.chain.integrity import verify_integrity
    from odf_core.chain.state import fold

    handle = ws.get(dataset)
    integrity = verify_integrity(handle.store, check_data=False)
    if not integrity.ok:
        return VerifyReport(False, 0, integrity.problem, str(integrity.block))
    blocks = list(handle.chain.iter_blocks())[::-1]
    state = ChainState()
    checked = 0
    with tempfile.TemporaryDirectory(prefix="odf-verify-") as tmp:
        for h, block in blocks:
            ev = block.event
            if isinstance(ev, ExecuteTransform):
                problem = _reproduce(ws, handle, state, block, ev, tmp, engine, in_process)
                checked += 1
                if problem:
                    return VerifyReport(False, checked, problem, str(h))
            state = fold(state, block, h)
    return VerifyReport(True, checked)


def _reproduce(ws, handle, state: ChainState, block: MetadataBlock, ev: ExecuteTransform, tmp: str,
               engine: SparkEngine, in_process: bool) -> str | None:
    from odf_core.hashing import logical_hash_file

    step = os.path.join(tmp, f"b{block.sequence_number}")
    os.makedirs(step)
    positions = {qi.dataset_id: (qi.prev_block_hash, qi.prev_offset, qi.new_block_hash, qi.new_offset)
                 for qi in ev.query_inputs}
    planned = plan_inputs(ws, handle, state, step, positions)
    assert not isinstance(planned, str)
    request = TransformRequest(
        dataset_id=state.dataset_id, dataset_alias=str(handle.name), system_time=block.system_time,
        vocab=state.vocab, transform=state.transform.transform, query_inputs=tuple(p.request_input for p in planned),
        next_offset=state.next_offset,
        prev_checkpoint_path=_local(handle, DatasetLayout.checkpoint_key(ev.prev_checkpoint), step)
        if ev.prev_checkpoint else None,
        new_checkpoint_path=os.path.join(step, "checkpoint.parquet"),
        new_data_path=os.path.join(step, "output.parquet"))
    write_request(os.path.join(step, "request.json"), request, planned)
    _value(run_engine(engine, os.path.join(step, "request.json"), os.path.join(step, "response.json"),
                      in_process=in_process), str(handle.name))
    produced = os.path.exists(request.new_data_path)
    if ev.new_data is None:
        return "the block records no data but the transformation produced some" if produced else None
    if not produced:
        return f"the block records data {ev.new_data.offset_interval} but the transformation produced none"
    actual = logical_hash_file(request.new_data_path)
    if actual != ev.new_data.logical_hash:
        return f"logical hash of the reproduced data is {actual}, the block records {ev.new_data.logical_hash}"
    return None
