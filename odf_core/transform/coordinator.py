"""Derivative transformations: plan a transaction from the chains, run the Spark engine, commit ``ExecuteTransform``.

Also query evolution (``set_transform``), verification by reproduction (``verify``) and upstream ordering for
``odf pull --recursive``. The engine gets the spec's ``TransformRequest`` (plus each input's history, for our stateful
path) and answers with a ``TransformResponse``; the answer is kept in the transaction's staging directory, so a
retried commit needs no second run.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import uuid
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import pyarrow.parquet as pq

from odf_core.chain import ChainState
from odf_core.commit import commit_data, describe_slice
from odf_core.dataset_files import checkpoint_path, engine_path
from odf_core.engine import Engine, EngineError
from odf_core.engine import internal_error as engine_internal_error
from odf_core.engine.protocol import (
    EngineInternalError,
    InputHistory,
    OdfTransformRequest,
    OdfTransformResponse,
    QueryResponseInvalidQuery,
    ValidateInput,
    ValidateQueryRequest,
    ValidateQueryResponseSuccess,
    ValidateQueryResult,
)
from odf_core.errors import DatasetNotFound, OdfError, RefConflict, os_errors
from odf_core.identity import DatasetID, Multihash
from odf_core.ingest.staging import atomic_write_text, part_file
from odf_core.ingest.transaction import staging_root
from odf_core.metadata import (
    DatasetKind,
    ExecuteTransform,
    ExecuteTransformInput,
    MetadataBlock,
    OffsetInterval,
    SetDataSchema,
    SetTransform,
    Timestamp,
    TransformRequest,
    TransformRequestInput,
    TransformResponseInternalError,
    TransformResponseInvalidQuery,
    TransformResponseSuccess,
    TransformSql,
)
from odf_core.metadata.arrow_schema import decode_arrow_schema
from odf_core.metadata.yaml_serde import to_data
from odf_core.storage import DatasetLayout
from odf_core.transform.engine_version import engine_version
from odf_core.transform.inputs import all_slices_upto, blocks_between
from odf_core.workspace import DatasetHandle, Workspace

if TYPE_CHECKING:
    from odf_core.progress import Progress

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
            data_paths=tuple(engine_path(h.store, DatasetLayout.data_key(s.physical_hash), scratch)
                             for s in blocks.slices),
            schema_file=_schema_file(h, ist, os.path.join(scratch, f"schema-{len(planned)}.parquet")),
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


def run_engine(engine: Engine, request: OdfTransformRequest, dataset: str, *, where: str | None = None
               ) -> OdfTransformResponse:
    """Run the transaction on the engine; an invalid query raises :class:`InvalidQuery`, an engine failure
    :class:`~odf_core.engine.EngineError` (one line, the trace in a log file it names)."""
    what = f"transformation of dataset '{dataset}'"
    response = engine.execute(request, what=what)
    if not isinstance(response, OdfTransformResponse):
        raise EngineError(f"{what}: the engine answered with {type(response).__name__}")
    value = response.response
    if isinstance(value, TransformResponseInvalidQuery):
        raise InvalidQuery(f"dataset '{dataset}': invalid query: {value.message}")
    if isinstance(value, TransformResponseInternalError):
        raise engine_internal_error(what, value.message, None, value.backtrace, where=where)
    if not isinstance(value, TransformResponseSuccess):
        raise EngineError(f"{what}: unexpected engine response {type(value).__name__}")
    return response


def input_without_data(ws: Workspace, dataset: str) -> str | None:
    """The name of the derivative's first input that has no data yet (its transform waits for it), or None."""
    st = _transform_of(ws.get(dataset).state(), dataset)
    for inp in st.inputs:
        h = _input_handle(ws, inp.dataset_ref, dataset)
        if h.state().last_offset is None:
            return str(h.name)
    return None


# -- one transaction ----------------------------------------------------------------------------------------------


def run(ws: Workspace, dataset: str, *, engine: Engine, txn_id: str | None = None,
        allow_engine_mismatch: bool = False) -> TransformResult | None:
    """Run the next transaction of a derivative dataset; None when there is nothing new (or an input has no data).

    With a known ``txn_id`` a retry reuses the transaction's staging area: if the engine already answered, its
    output is committed; if the commit already happened, its result is returned. Staging never outlives its use:
    once committed only ``commit.json`` stays (none for a random ``txn_id``, which nobody retries: its directory
    goes whether the transaction commits or fails); an engine run that fails leaves no output behind. An
    operating-system failure (a full disk) is one line naming what was written and where.
    """
    handle = ws.get(dataset)
    state = handle.state()
    st = _transform_of(state, str(handle.name))
    _check_engine(st.transform, str(handle.name), allow_engine_mismatch)
    ephemeral = txn_id is None
    txn_id = "".join(c if c.isalnum() or c in "-_." else "_" for c in (txn_id or uuid.uuid4().hex))[:120]
    staging = os.path.join(staging_root(ws), str(state.dataset_id).removeprefix("did:odf:"), "transform-" + txn_id)
    done = os.path.join(staging, COMMIT_FILE)
    if os.path.exists(done):
        with open(done, encoding="utf-8") as f:
            d = json.load(f)
        return TransformResult(**{**d, "offset_interval": tuple(d["offset_interval"]) if d["offset_interval"]
                                  else None})
    try:
        with os_errors(f"running the transformation of dataset '{handle.name}' in", staging):
            result = _run(ws, handle, state, st, staging, txn_id, engine)
    except BaseException:
        if ephemeral:  # nobody retries it: no trace in staging
            _remove_staging(staging)
        raise
    if ephemeral or result is None:
        _remove_staging(staging)
    else:
        _record_commit(staging, result)
    return result


COMMIT_FILE, PLAN_FILE, RESPONSE_FILE = "commit.json", "plan.json", "response.fb"
OUTPUTS = ("output.parquet", "checkpoint.parquet")


def _run(ws: Workspace, handle: DatasetHandle, state: ChainState, st: SetTransform, staging: str, txn_id: str,
         engine: Engine) -> TransformResult | None:
    from odf_core.engine.protocol import decode_response, encode_response

    os.makedirs(staging, exist_ok=True)
    plan_file = os.path.join(staging, PLAN_FILE)
    response_path = os.path.join(staging, RESPONSE_FILE)
    if os.path.exists(plan_file) and os.path.exists(response_path):
        with open(plan_file, encoding="utf-8") as f:
            plan = json.load(f)
        if _staged_answer_fits(handle, plan["base_head"], state.head):
            with open(response_path, "rb") as f:
                response = decode_response(f.read())
            _log_diagnostics(str(handle.name), response)  # type: ignore[arg-type]
            try:
                return _commit(handle, staging, plan, response)  # type: ignore[arg-type]
            except RefConflict:  # another transaction committed on top of our base: plan anew
                log.info("%s: the staged answer of transaction %s no longer fits the head: planning anew",
                         handle.name, txn_id)
                state = handle.state()
    planned = plan_inputs(ws, handle, state, staging)
    if isinstance(planned, str):
        log.info("%s: nothing to do: %s", handle.name, planned)
        return None
    system_time = max(Timestamp.now(), state.system_time) if state.system_time else Timestamp.now()
    request = TransformRequest(
        dataset_id=state.dataset_id, dataset_alias=str(handle.name), system_time=system_time,
        vocab=state.vocab, transform=st.transform, query_inputs=tuple(p.request_input for p in planned),
        next_offset=state.next_offset,
        prev_checkpoint_path=checkpoint_path(handle.store, state.last_checkpoint, staging)
        if state.last_checkpoint else None,
        new_checkpoint_path=os.path.join(staging, OUTPUTS[1]),
        new_data_path=os.path.join(staging, OUTPUTS[0]),
    )
    plan = {"base_head": str(state.head), "system_time": system_time.isoformat(),
            "query_inputs": [to_data(p.execute) for p in planned]}
    log.info("%s: transaction %s over %s", handle.name, txn_id,
             ", ".join(f"{p.alias} {p.request_input.offset_interval}" for p in planned))
    # An earlier answer (on an older head) and its outputs are superseded; if this run fails, nothing of it stays:
    # a retry plans and runs anew.
    _remove_files(staging, (RESPONSE_FILE, PLAN_FILE, *OUTPUTS))
    try:
        response = run_engine(engine, engine_request(request, planned), str(handle.name), where=staging)
        atomic_write_text(plan_file, json.dumps(plan))
        with part_file(response_path) as tmp, open(tmp, "wb") as f:
            f.write(encode_response(response))
    except BaseException:
        _remove_staging(staging)
        raise
    _log_diagnostics(str(handle.name), response)
    # A failed commit keeps the answer and its outputs (complete, consistent): a retry commits them, no second run.
    return _commit(handle, staging, plan, response)


def _staged_answer_fits(handle: DatasetHandle, base_head: str, head: Multihash | None) -> bool:
    """Whether an engine answer planned on ``base_head`` can still be committed at ``head``: nothing since, or only
    what an interrupted commit of it appended (its SetDataSchema, its block: the commit finds those)."""
    if base_head == str(head):
        return True
    base = None if base_head == "None" else Multihash.parse(base_head)
    for h, block in handle.chain.iter_blocks(head):
        if h == base:
            return True
        if not isinstance(block.event, (SetDataSchema, ExecuteTransform)):
            return False
    return base is None


def _remove_files(staging: str, names: tuple[str, ...]) -> None:
    for name in names:
        try:
            os.remove(os.path.join(staging, name))
        except OSError:
            pass


def _remove_staging(staging: str) -> None:
    shutil.rmtree(staging, ignore_errors=True)
    try:
        os.rmdir(os.path.dirname(staging))  # the dataset's staging directory, when this was its last transaction
    except OSError:
        pass


def _record_commit(staging: str, result: TransformResult) -> None:
    """After the commit: ``commit.json`` (so a retried task returns this result), and every other staged file goes.
    The chain already holds the commit, so a failure here is a warning: a retry without ``commit.json`` plans anew on
    the new head and finds nothing to do."""
    if os.path.isdir(staging):
        try:
            with os_errors("recording the commit in", staging):
                atomic_write_text(os.path.join(staging, COMMIT_FILE), json.dumps(asdict(result)))
        except OdfError as e:
            log.warning("%s is committed, but %s", result.block_hash, e)
        for entry in os.listdir(staging):
            if entry != COMMIT_FILE:
                path = os.path.join(staging, entry)
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    _remove_files(staging, (entry,))


def _log_diagnostics(dataset: str, response: OdfTransformResponse) -> None:
    d = response.diagnostics
    if d is None:
        return
    why = f" ({d.reason} is not row-wise)" if d.reason else ""
    path = f", {d.path} path" if d.path else ""
    state = f", {d.state_rows} state row(s)" if d.state_rows is not None else ""
    state += f" ({d.sizing})" if d.sizing else ""
    state += f", slice {d.slice}" if d.slice else ""
    state += f", history read: {d.history}" if d.history else ""
    log.info("%s: %s plan%s%s; %s output row(s)%s; %s", dataset, d.plan_class, why, path, d.output_rows, state,
             d.timings or "")
    for line in explain_lines(d.operators or ()):
        log.info("%s:   %s", dataset, line)
    for w in d.warnings or ():
        log.warning("%s: %s", dataset, w)


def explain_lines(operators) -> list[str]:
    """One indented line per operator: ``Aggregate  incremental  state per group ...``."""
    return [f"{'  ' * o.depth}{o.operator}: {o.path}" + (f" ({o.detail})" if o.detail else "") for o in operators]


def _commit(handle: DatasetHandle, staging: str, plan: dict, response: OdfTransformResponse) -> TransformResult:
    from odf_core.metadata.yaml_serde import from_data

    value = response.response
    assert isinstance(value, TransformResponseSuccess)
    state = handle.state()
    data_path = os.path.join(staging, "output.parquet")
    cp_path = os.path.join(staging, "checkpoint.parquet")
    slice_file = None
    if os.path.exists(data_path):
        start = value.new_offset_interval.start if value.new_offset_interval else state.next_offset
        slice_file = describe_slice(data_path, state.vocab.offset_column, start)
    query_inputs = tuple(from_data(ExecuteTransformInput, d) for d in plan["query_inputs"])
    block = commit_data(
        handle.chain,
        base_head=Multihash.parse(plan["base_head"]) if plan["base_head"] != "None" else None,
        slice_file=slice_file,
        checkpoint_path=cp_path if os.path.exists(cp_path) else None,
        system_time=Timestamp.parse(plan["system_time"]),
        new_watermark=value.new_watermark,
        query_inputs=query_inputs,
    )
    st = handle.state()
    iv = slice_file.data_slice.offset_interval if slice_file else None
    plan_class = response.diagnostics.plan_class if response.diagnostics else None
    res = TransformResult(
        block_hash=str(block) if block else None, head=str(st.head),
        offset_interval=(iv.start, iv.end) if iv else None,
        num_records=(iv.end - iv.start + 1) if iv else 0,
        watermark=str(st.last_watermark) if st.last_watermark else None, plan_class=plan_class)
    log.info("%s: committed %s (%s, %d records, %s plan)", handle.name, res.block_hash, res.offset_interval,
             res.num_records, plan_class)
    return res


# -- query evolution ----------------------------------------------------------------------------------------------


def validate_query(ws: Workspace, engine: Engine, dataset: str, event: SetTransform, vocab) -> bytes | None:
    """The output schema (Arrow, SetDataSchema form) of ``event``'s query on its inputs' schemas, validated by the
    engine; None when an input has no schema yet (the query is then validated on its first data)."""
    answer = _validate(ws, engine, dataset, event, vocab)
    return answer.output_schema if answer is not None else None


def explain(ws: Workspace, engine: Engine, dataset: str) -> ValidateQueryResponseSuccess:
    """How the engine evaluates a derivative's current query: its plan class and, for stateful queries, the path of
    each operator (incremental, row-wise or full, with why). Reads nothing but the inputs' schemas."""
    handle = ws.get(dataset)
    state = handle.state()
    if state.transform is None:
        raise InvalidQuery(f"dataset '{dataset}' has no transform (is it a root dataset?)")
    answer = _validate(ws, engine, dataset, state.transform, state.vocab)
    if answer is None:
        raise InvalidQuery(f"dataset '{dataset}': an input has no schema yet (pull it first)")
    return answer


def _validate(ws: Workspace, engine: Engine, dataset: str, event: SetTransform, vocab
              ) -> ValidateQueryResponseSuccess | None:
    with tempfile.TemporaryDirectory(prefix="odf-validate-") as tmp:
        inputs, missing = [], []
        for i, inp in enumerate(event.inputs):
            h = _input_handle(ws, inp.dataset_ref, dataset)
            ist = h.state()
            if ist.schema is None:
                missing.append(str(h.name))
                continue
            inputs.append(ValidateInput(query_alias=inp.alias or str(h.name), vocab=ist.vocab,
                                        schema_file=_schema_file(h, ist, os.path.join(tmp, f"s{i}.parquet"))))
        if missing:
            log.warning("%s: inputs %s have no schema yet: the query is validated on their first data",
                        dataset, ", ".join(missing))
            return None
        what = f"query validation of dataset '{dataset}'"
        result = engine.execute(ValidateQueryRequest(vocab=vocab, transform=event.transform, inputs=tuple(inputs)),
                                what=what)
    if not isinstance(result, ValidateQueryResult):
        raise EngineError(f"{what}: the engine answered with {type(result).__name__}")
    value = result.value
    if isinstance(value, QueryResponseInvalidQuery):
        raise InvalidQuery(f"dataset '{dataset}': invalid query: {value.message}")
    if isinstance(value, EngineInternalError):
        raise engine_internal_error(what, value.message, value.error_class, value.backtrace)
    return value


def set_transform(ws: Workspace, dataset: str, event: SetTransform, *, engine: Engine) -> Multihash:
    """Query evolution: validate the new query with Spark against the inputs' schemas, check the output schema only
    adds columns (the chain's own rule), then append the new ``SetTransform``."""
    event = validate_transform(ws, dataset, event, engine=engine)
    return ws.get(dataset).chain.append_event(event)


def validate_transform(ws: Workspace, dataset: str, event: SetTransform, *, engine: Engine) -> SetTransform:
    """The checks of :func:`set_transform` without the append (so a batch can be validated before any write); returns
    the event as it would be appended."""
    from odf_core.errors import SchemaEvolutionError
    from odf_core.metadata import DatasetSnapshot
    from odf_core.metadata.schema_evolution import check_schema_evolution

    handle = ws.get(dataset)
    state = handle.state()
    if state.kind is not DatasetKind.DERIVATIVE:
        raise TransformError(f"dataset '{handle.name}' is not a derivative dataset")
    event = ws.normalize_event(event, DatasetSnapshot(name=str(handle.name), kind=DatasetKind.DERIVATIVE,
                                                       metadata=(event,)))
    _check_engine(event.transform, str(handle.name), False)
    output = validate_query(ws, engine, str(handle.name), event, state.vocab)
    if output is not None and state.schema is not None:
        try:
            check_schema_evolution(decode_arrow_schema(state.schema), decode_arrow_schema(output))
        except SchemaEvolutionError as e:
            raise SchemaEvolutionError(f"dataset '{handle.name}': new query", e.problems) from None
    return event


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


def verify(ws: Workspace, dataset: str, *, engine: Engine, progress: "Progress | None" = None) -> VerifyReport:
    """Re-execute every ``ExecuteTransform`` from its recorded inputs; compare logical hashes. ``progress``
    (:class:`odf_core.progress.Progress`) counts the transforms replayed."""
    from odf_core.chain.integrity import verify_integrity
    from odf_core.chain.state import fold

    handle = ws.get(dataset)
    integrity = verify_integrity(handle.store, check_data=False)
    if not integrity.ok:
        return VerifyReport(False, 0, integrity.problem, str(integrity.block))
    blocks = list(handle.chain.iter_blocks())[::-1]
    state = ChainState()
    checked = 0
    if progress is not None:
        progress.set_total(sum(1 for _, b in blocks if isinstance(b.event, ExecuteTransform)))
    with tempfile.TemporaryDirectory(prefix="odf-verify-") as tmp:
        for h, block in blocks:
            ev = block.event
            if isinstance(ev, ExecuteTransform):
                problem = _reproduce(ws, handle, state, block, ev, tmp, engine)
                checked += 1
                if progress is not None:
                    progress.advance(1, ev.new_data.size if ev.new_data else 0)
                if problem:
                    return VerifyReport(False, checked, problem, str(h))
            state = fold(state, block, h)
    return VerifyReport(True, checked)


def _reproduce(ws, handle, state: ChainState, block: MetadataBlock, ev: ExecuteTransform, tmp: str,
               engine: Engine) -> str | None:
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
