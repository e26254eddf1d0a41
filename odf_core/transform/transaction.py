"""One transaction of a derivative: plan it, run the engine, commit ``ExecuteTransform``.

The engine gets the spec's ``TransformRequest`` (plus each input's history, for our stateful path) and answers with a
``TransformResponse``; the answer is kept in the transaction's staging directory, so a retried commit needs no
second run."""
from __future__ import annotations

import json
import logging
import os
import shutil
import uuid
from dataclasses import asdict, dataclass

from odf_core.chain import ChainState
from odf_core.commit import commit_data, described_slice
from odf_core.dataset_files import checkpoint_path
from odf_core.engine import Engine
from odf_core.engine.protocol import (
    OdfTransformRequest,
    OdfTransformResponse,
)
from odf_core.engine.responses import unwrap
from odf_core.engine.version import running_engine_version
from odf_core.errors import OdfError, RefConflict, os_errors
from odf_core.identity import Multihash
from odf_core.ingest.staging import atomic_write_text, part_file, staging_name, staging_root
from odf_core.metadata import (
    ExecuteTransform,
    ExecuteTransformInput,
    SetDataSchema,
    SetTransform,
    Timestamp,
    TransformRequest,
    TransformResponseSuccess,
)
from odf_core.metadata.yaml_serde import to_data
from odf_core.workspace import DatasetHandle, Workspace

from odf_core.transform.diagnostics import log_diagnostics
from odf_core.transform.engine_policy import check_engine_semantics
from odf_core.transform.errors import invalid_query
from odf_core.transform.planning import check_engine, engine_request, plan_inputs, transform_of

log = logging.getLogger("odf.transform")


@dataclass(frozen=True)
class TransformResult:
    block_hash: str | None
    head: str
    offset_interval: tuple[int, int] | None
    num_records: int
    watermark: str | None
    plan_class: str | None = None


def run_engine(engine: Engine, request: OdfTransformRequest, dataset: str, *, where: str | None = None
               ) -> OdfTransformResponse:
    """Run the transaction on the engine; an invalid query raises :class:`InvalidQuery`, an engine failure
    :class:`~odf_core.engine.EngineError` (one line, the trace in a log file it names)."""
    what = f"transformation of dataset '{dataset}'"
    response = engine.execute(request, what=what)
    unwrap(response, OdfTransformResponse, what, invalid=invalid_query(dataset), success=TransformResponseSuccess,
           where=where)
    assert isinstance(response, OdfTransformResponse)  # unwrap raised for any other answer
    return response


def run(ws: Workspace, dataset: str, *, engine: Engine, txn_id: str | None = None) -> TransformResult | None:
    """Run the next transaction of a derivative dataset; None when there is nothing new (or an input has no data).

    With a known ``txn_id`` a retry reuses the transaction's staging area: if the engine already answered, its
    output is committed; if the commit already happened, its result is returned. Staging never outlives its use:
    once committed only ``commit.json`` stays (none for a random ``txn_id``, which nobody retries: its directory
    goes whether the transaction commits or fails); an engine run that fails leaves no output behind. An
    operating-system failure (a full disk) is one line naming what was written and where.
    """
    handle = ws.get(dataset)
    state = handle.state()
    st = transform_of(state, str(handle.name))
    check_engine(st.transform, str(handle.name))
    check_engine_semantics(ws, str(handle.name), st.transform, running_engine_version(engine))
    ephemeral = txn_id is None
    txn_id = txn_id or uuid.uuid4().hex
    staging = transaction_staging(ws, state, txn_id)
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


def transaction_staging(ws: Workspace, state: ChainState, txn_id: str) -> str:
    """The staging directory of a derivative's transaction; distinct ids never share one (as for ingest)."""
    return os.path.join(staging_root(ws), str(state.dataset_id).removeprefix("did:odf:"),
                        "transform-" + staging_name(txn_id))


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
            log_diagnostics(str(handle.name), response)  # type: ignore[arg-type]
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
        dataset_id=state.seeded_id, dataset_alias=str(handle.name), system_time=system_time,
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
    log_diagnostics(str(handle.name), response)
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
        slice_file = described_slice(data_path, state.vocab.offset_column, start, response.slice)
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
