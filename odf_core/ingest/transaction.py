"""One ingest transaction of a root dataset, step by step: begin → fetch → prepare → read → merge → commit.

Every step reads its inputs from and writes its outputs to the transaction's staging directory, recording its
outcome in a JSON manifest there, so each step can run in its own process (an Airflow task) and be retried: a
retry overwrites the step's own outputs, and nothing touches the dataset before ``commit``, which is itself
idempotent (see :mod:`odf_core.commit`). ``pull`` runs the whole chain in one process with one Spark session.

Staging never outlives its use. A step that fails removes the bulky files it was writing (no half-written output is
left for a retry to trust), and an operating-system failure (a full disk) is one line naming the step and the path.
A transaction with a fixed id (an Airflow run, ``--txn-id``) keeps its small manifests until it commits, so a retried
task finds its way back; once committed only ``transaction.json`` and ``commit.json`` stay, so a retried commit task
answers "already committed" (``odf gc`` removes those later). A transaction with a random id (the CLI's) is never
retried: its whole staging directory goes when it ends, committed or not.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from odf_core.chain import ChainState
from odf_core.commit import commit_data, described_slice
from odf_core.engine import Engine
from odf_core.engine.responses import unwrap
from odf_core.engine.protocol import (
    IngestInputFile,
    IngestRequest,
    IngestResponseSuccess,
    IngestResult,
    MergeOutcome,
    MergePhase,
    ReadPhase,
    SliceDescription,
)
from odf_core.errors import DatasetChanged, OdfError, RefConflict, os_errors
from odf_core.identity import Multihash
from odf_core.dataset_files import checkpoint_path, engine_path
from odf_core.engine.checkpoint_format import serves as checkpoint_serves
from odf_core.ingest.errors import IngestError
from odf_core.ingest.fetch import FetchOptions
from odf_core.ingest.fetch import fetch as fetch_source
from odf_core.ingest.options import IngestOptions
from odf_core.ingest.manifest import FetchedFile, FetchResult, read_fetch_manifest, read_prepare_manifest
from odf_core.ingest.prepare import prepare as prepare_files
from odf_core.ingest.push_keys import CommittedPush, check_key, default_not_before, find_push
from odf_core.ingest.source_state import push_key_state
from odf_core.ingest.staging import atomic_write_text, staging_name, staging_root
from odf_core.metadata import AddData, DatasetKind, Timestamp
from odf_core.metadata.yaml_serde import from_data, to_data
from odf_core.workspace import DatasetHandle, Workspace

if TYPE_CHECKING:
    from odf_core.progress import Progress

log = logging.getLogger("odf.ingest")

POLLING = "<polling>"
TXN_FILE, READ_FILE, MERGE_FILE, COMMIT_FILE = "transaction.json", "read.json", "merge.json", "commit.json"


class InvalidInput(IngestError):
    """The source's data does not fit the dataset's read step, schema or merge strategy."""


@dataclass(frozen=True)
class IngestTransaction:
    dataset: str
    dataset_id: str
    txn_id: str
    staging_dir: str
    base_head: str | None
    system_time: str
    source: str  # POLLING or a push source name
    # a keyed push: its idempotency key, recorded in the block; base_head was checked to hold no block of it
    push_key: str | None = None
    # a random id nobody will retry (the CLI's): the staging directory is removed when the transaction ends
    ephemeral: bool = False

    def to_ref(self) -> dict:
        return {"dataset": self.dataset, "txn_id": self.txn_id, "staging_dir": self.staging_dir}

    @classmethod
    def from_ref(cls, ws: Workspace | None, ref: dict) -> "IngestTransaction":
        return cls.load(ref["staging_dir"])

    @classmethod
    def load(cls, staging_dir: str) -> "IngestTransaction":
        path = os.path.join(staging_dir, TXN_FILE)
        try:
            with open(path, encoding="utf-8") as f:
                return cls(**json.load(f))
        except (OSError, ValueError, TypeError) as e:
            raise IngestError(f"cannot load ingest transaction {path}: {e}") from None

    def path(self, name: str) -> str:
        return os.path.join(self.staging_dir, name)

    @property
    def time(self) -> Timestamp:
        return Timestamp.parse(self.system_time)


@dataclass(frozen=True)
class StepResult:
    """What a read/merge/commit step produced (also what the Airflow operators log and pass on)."""

    num_records: int = 0
    offset_interval: tuple[int, int] | None = None
    block_hash: str | None = None
    head: str | None = None
    watermark: str | None = None
    max_event_time: str | None = None
    up_to_date: bool = False
    already_ingested: bool = False  # a keyed push found its block (block_hash) committed by an earlier attempt
    duplicates_dropped: int = 0  # Ledger: rows dropped for repeating the key of an earlier row of the same input
    duplicate_key: str | None = None  # one such key (JSON)

    def duplicates_note(self) -> str:
        """The summary's part about dropped duplicate-key rows (empty when none were)."""
        if not self.duplicates_dropped:
            return ""
        return f", {self.duplicates_dropped} duplicate-key row(s) dropped (e.g. {self.duplicate_key})"

    @classmethod
    def from_json(cls, text: str) -> "StepResult":
        d = json.loads(text)
        if d.get("offset_interval") is not None:
            d["offset_interval"] = tuple(d["offset_interval"])
        return cls(**d)


def _staging_dir(ws: Workspace, state: ChainState, txn_id: str) -> str:
    return os.path.join(staging_root(ws), str(state.dataset_id).removeprefix("did:odf:"), staging_name(txn_id))


def begin(ws: Workspace, dataset: str, *, txn_id: str | None = None, source: str | None = None,
          system_time: Timestamp | None = None) -> IngestTransaction:
    """Plan a transaction; with a known ``txn_id`` the existing plan is returned (an Airflow retry)."""
    handle = ws.get(dataset)
    state = handle.state()
    src = _resolve_source(handle, state, source)
    ephemeral = txn_id is None
    txn_id = staging_name(txn_id or f"{Timestamp.now().epoch_ns}-{uuid.uuid4().hex[:8]}")
    staging = _staging_dir(ws, state, txn_id)
    if os.path.exists(os.path.join(staging, TXN_FILE)):
        return IngestTransaction.load(staging)
    return _write_plan(handle, state, src, txn_id, staging, system_time, ephemeral=ephemeral)


def _write_plan(handle: DatasetHandle, state: ChainState, src: str, txn_id: str, staging: str,
                system_time: Timestamp | None = None, push_key: str | None = None, *,
                ephemeral: bool = False) -> IngestTransaction:
    try:
        with os_errors("planning an ingest transaction in", staging):
            return _plan_files(handle, state, src, txn_id, staging, system_time, push_key, ephemeral)
    except BaseException:
        if ephemeral:
            shutil.rmtree(staging, ignore_errors=True)
        raise


def _plan_files(handle: DatasetHandle, state: ChainState, src: str, txn_id: str, staging: str,
                system_time: Timestamp | None, push_key: str | None, ephemeral: bool) -> IngestTransaction:
    os.makedirs(staging, exist_ok=True)
    txn = IngestTransaction(
        dataset=str(handle.name),
        dataset_id=str(state.dataset_id),
        txn_id=txn_id,
        staging_dir=staging,
        base_head=str(state.head) if state.head else None,
        system_time=(system_time or Timestamp.now()).isoformat(),
        source=src,
        push_key=push_key,
        ephemeral=ephemeral,
    )
    atomic_write_text(os.path.join(staging, TXN_FILE), json.dumps(asdict(txn), indent=2))
    log.info("ingest transaction %s of %s planned on head %s", txn_id, handle.name, txn.base_head)
    return txn


def _resolve_source(handle: DatasetHandle, state: ChainState, source: str | None) -> str:
    if state.kind is not DatasetKind.ROOT:
        raise IngestError(f"dataset '{handle.name}' is not a root dataset: it cannot ingest data")
    if source is None or source == POLLING:
        if state.polling_source is not None:
            return POLLING
        if source is None and len(state.push_sources) == 1:
            return state.push_sources[0].source_name
        if source is None and state.push_sources:
            names = ", ".join(s.source_name for s in state.push_sources)
            raise IngestError(f"dataset '{handle.name}' has several push sources ({names}): name one with --source")
        raise IngestError(f"dataset '{handle.name}' has no active polling source")
    if state.push_source(source) is None:
        names = ", ".join(s.source_name for s in state.push_sources) or "none"
        raise IngestError(f"dataset '{handle.name}' has no push source named '{source}' (push sources: {names})")
    return source


def _handle(ws: Workspace, txn: IngestTransaction) -> DatasetHandle:
    return ws.get(txn.dataset_id)


# -- staging hygiene --------------------------------------------------------------------------------------------


@contextmanager
def _step(txn: IngestTransaction, operation: str, outputs: tuple[str, ...] = ()) -> Iterator[None]:
    """Run one step: an OS failure becomes one line naming ``operation`` and the path; when the step fails, the files
    it writes (``outputs``, relative to the staging directory) are removed, so nothing half-written stays behind."""
    try:
        with os_errors(operation, txn.staging_dir):
            yield
    except BaseException:
        _remove(txn, outputs)
        raise


def _remove(txn: IngestTransaction, names: tuple[str, ...]) -> None:
    for name in names:
        p = txn.path(name)
        if os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p, ignore_errors=True)
        else:
            try:
                os.remove(p)
            except OSError:
                pass


def remove_staging(txn: IngestTransaction) -> None:
    """Remove the transaction's whole staging directory (and its dataset's directory under the staging root when
    that is left empty)."""
    shutil.rmtree(txn.staging_dir, ignore_errors=True)
    try:
        os.rmdir(os.path.dirname(txn.staging_dir))
    except OSError:
        pass  # other transactions of the dataset, or already gone


@contextmanager
def _ends(txn: IngestTransaction) -> Iterator[None]:
    """A transaction with a random id leaves nothing in staging, whether it commits or fails."""
    try:
        yield
    finally:
        if txn.ephemeral:
            remove_staging(txn)


# -- fetch / prepare (Python) -----------------------------------------------------------------------------------


def fetch(ws: Workspace, txn: IngestTransaction, options: FetchOptions | None = None) -> FetchResult:
    state = _handle(ws, txn).state()
    if txn.source != POLLING:
        raise IngestError(f"transaction {txn.txn_id} ingests from push source '{txn.source}': nothing to fetch")
    if state.polling_source is None:
        raise IngestError(f"dataset '{txn.dataset}' has no active polling source")
    from odf_core.ingest.fetch import CONTAINER_OUT_DIR, FETCH_DIR

    with _step(txn, "fetching into", (FETCH_DIR, CONTAINER_OUT_DIR)):
        result = fetch_source(
            state.polling_source.fetch,
            staging_dir=txn.staging_dir,
            source_state=state.source_state("default"),
            system_time=txn.time,
            already_ingested=state.data_blocks > 0 or state.source_state("default") is not None,
            options=options or FetchOptions(),
        )
    log.info("fetched %d file(s), %d bytes%s", len(result.files), result.bytes_fetched,
             " (up to date)" if result.up_to_date else "")
    return result


def prepare(ws: Workspace, txn: IngestTransaction) -> tuple[FetchedFile, ...]:
    from odf_core.ingest.prepare import PREPARE_DIR

    fetched = read_fetch_manifest(txn.staging_dir)
    source = _handle(ws, txn).state().polling_source
    assert source is not None  # fetch() checked it
    steps = source.prepare
    with _step(txn, "preparing files in", (PREPARE_DIR,)):
        return prepare_files(steps, fetched.files, staging_dir=txn.staging_dir)


def stage_push_file(txn: IngestTransaction, path: str | None) -> tuple[FetchedFile, ...]:
    """Copy the pushed file (or stdin when ``path`` is None or ``-``) into staging as the prepared input."""
    with _step(txn, "copying the pushed file into", ("push",)):
        return _stage_push_file(txn, path)


def _stage_push_file(txn: IngestTransaction, path: str | None) -> tuple[FetchedFile, ...]:
    from odf_core.ingest.manifest import write_prepare_manifest
    from odf_core.ingest.staging import part_file

    target_dir = os.path.join(txn.staging_dir, "push")
    os.makedirs(target_dir, exist_ok=True)
    target = os.path.join(target_dir, "data")
    if path in (None, "-"):
        with part_file(target) as tmp, open(tmp, "wb") as out:
            shutil.copyfileobj(sys.stdin.buffer, out)
        name = "<stdin>"
    else:
        if not os.path.isfile(path):
            raise IngestError(f"{path}: no such file")
        with part_file(target) as tmp:
            shutil.copyfile(path, tmp)
        name = path
    files = (FetchedFile(path=target, event_time=None, name=name),)
    write_prepare_manifest(txn.staging_dir, files)
    return files


# -- read / merge (Spark) ---------------------------------------------------------------------------------------


def _source_steps(state: ChainState, txn: IngestTransaction):
    src = state.polling_source if txn.source == POLLING else state.push_source(txn.source)
    if src is None:
        raise IngestError(f"dataset '{txn.dataset}': source '{txn.source}' is no longer active")
    return src


def _read_phase(state: ChainState, txn: IngestTransaction, files, *, output_path: str | None) -> ReadPhase:
    src = _source_steps(state, txn)
    # A source that gives no time of its own (no Last-Modified, pushed data) falls back to the system time.
    return ReadPhase(
        inputs=tuple(IngestInputFile(path=f.path, display_name=f.name or f.path, event_time=f.event_time or txn.time)
                     for f in files),
        read_step=src.read, preprocess=src.preprocess, output_path=output_path, dataset_schema=state.schema)


def _merge_phase(handle: DatasetHandle, state: ChainState, txn: IngestTransaction, *, input_path: str | None,
                 options: IngestOptions | None = None) -> MergePhase:
    src = _source_steps(state, txn)
    strategy = src.merge
    prev_checkpoint, prev_data = None, None
    if state.last_checkpoint is not None:
        prev_checkpoint = checkpoint_path(handle.store, state.last_checkpoint, txn.path("inputs"))
    if strategy.KIND != "Append" and state.data_blocks:
        # Read only when the checkpoint cannot serve (another strategy or key wrote it): listed, copied lazily.
        from odf_core.query import data_files

        if prev_checkpoint is None or not checkpoint_serves(prev_checkpoint, strategy):
            prev_data = tuple(engine_path(handle.store, key, txn.path("inputs")) for key in data_files(handle))
    return MergePhase(
        strategy=strategy, system_time=txn.time, output_path=txn.path("slice.parquet"),
        new_checkpoint_path=txn.path("checkpoint.parquet"), prev_offset=state.last_offset, prev_schema=state.schema,
        prev_checkpoint_path=prev_checkpoint, prev_data_paths=prev_data, input_path=input_path,
        not_null=_not_null(state, src.read) or None,
        duplicates=options.duplicates if options is not None and options.duplicates != "first" else None)


def _not_null(state: ChainState, read_step) -> tuple[str, ...]:
    """Columns the new rows must not hold nulls in: NOT NULL in the read schema or in the dataset's schema."""
    from odf_core.metadata.arrow_fb_verify import top_level_fields
    from odf_core.metadata.ddl import not_null_columns

    names = list(not_null_columns(getattr(read_step, "schema", None)))
    if state.schema:
        system = (state.vocab.offset_column, state.vocab.operation_type_column, state.vocab.system_time_column)
        names += [name for name, nullable in top_level_fields(state.schema)
                  if not nullable and name not in system and name not in names]
    return tuple(names)


def _request(state: ChainState, txn: IngestTransaction, *, read: ReadPhase | None = None,
             merge: MergePhase | None = None, keep: bool = False) -> IngestRequest:
    return IngestRequest(dataset=txn.dataset, vocab=state.vocab, work_dir=txn.staging_dir, read=read, merge=merge,
                         keep_read_as=f"{txn.dataset_id}/{txn.txn_id}" if keep else None)


def run_request(engine: Engine, request: IngestRequest) -> IngestResponseSuccess:
    """Run an ingest request on the engine; the user's errors become :class:`InvalidInput`, the engine's
    :class:`~odf_core.engine.EngineError` (one line; the trace in a log file it names)."""
    what = f"ingest of dataset '{request.dataset}'"
    result = engine.execute(request, what=what)
    return unwrap(result, IngestResult, what, invalid=lambda message: InvalidInput(f"dataset '{request.dataset}': "
                                                                                   f"{message}"),
                  where=request.work_dir)


def read(ws: Workspace, txn: IngestTransaction, engine: Engine) -> StepResult:
    """Read the prepared files: into ``read.parquet`` in staging, or kept by a long-lived engine for the merge."""
    state = _handle(ws, txn).state()
    files = read_prepare_manifest(txn.staging_dir)
    n, no_columns = 0, False
    with _step(txn, "reading into", ("read.parquet", READ_FILE)):
        if files:
            keep = engine.keeps_reads
            request = _request(state, txn, read=_read_phase(state, txn, files, output_path=None if keep
                                                            else txn.path("read.parquet")), keep=keep)
            outcome = run_request(engine, request).read
            assert outcome is not None  # a read request answers with its read outcome
            n = outcome.num_records or 0
            # Only empty files without a read schema: no columns, no read.parquet; the merge has nothing to do.
            no_columns = not outcome.columns
        atomic_write_text(txn.path(READ_FILE), json.dumps({"numRecords": n, "files": len(files),
                                                           "noColumns": no_columns}))
    log.info("read %d record(s)", n)
    return StepResult(num_records=n)


def _read_had_no_columns(txn: IngestTransaction) -> bool:
    try:
        with open(txn.path(READ_FILE), encoding="utf-8") as f:
            return bool(json.load(f).get("noColumns"))
    except (OSError, ValueError):
        return False


def merge(ws: Workspace, txn: IngestTransaction, engine: Engine, *, with_read: bool = False,
          options: IngestOptions | None = None) -> StepResult:
    """Merge the read rows into the slice: in one request with the read (``pull``, push, a long-lived engine that
    reads again when it kept nothing), or from the read step's ``read.parquet``. ``options``: what the merge does
    with duplicate Ledger keys inside the input (:class:`~odf_core.ingest.options.IngestOptions`)."""
    with _step(txn, "merging into", ("slice.parquet", "checkpoint.parquet", MERGE_FILE)):
        return _merge(ws, txn, engine, with_read, options)


def _merge(ws: Workspace, txn: IngestTransaction, engine: Engine, with_read: bool,
           options: IngestOptions | None = None) -> StepResult:
    _remove(txn, ("slice.parquet", "checkpoint.parquet", MERGE_FILE))
    handle = _handle(ws, txn)
    state = handle.state()
    files = read_prepare_manifest(txn.staging_dir)
    outcome = MergeOutcome(num_records=0)
    if files:
        if with_read or engine.keeps_reads:
            request = _request(state, txn, read=_read_phase(state, txn, files, output_path=None),
                               merge=_merge_phase(handle, state, txn, input_path=None, options=options),
                               keep=engine.keeps_reads)
        elif _read_had_no_columns(txn):
            request = None
        else:
            if not os.path.exists(txn.path("read.parquet")):
                raise IngestError(f"transaction {txn.txn_id}: the read step's output is missing: run read again")
            request = _request(state, txn, merge=_merge_phase(handle, state, txn, input_path=txn.path("read.parquet"),
                                                              options=options))
        if request is not None:
            response = run_request(engine, request)
            outcome = response.merge or outcome
            if response.read_reused:
                log.info("used the rows the engine kept from the read step")
    atomic_write_text(txn.path(MERGE_FILE), json.dumps(to_data(outcome)))
    iv = outcome.offset_interval
    result = StepResult(num_records=outcome.num_records,
                        offset_interval=(iv.start, iv.end) if iv else None,
                        max_event_time=str(outcome.max_event_time) if outcome.max_event_time else None,
                        duplicates_dropped=outcome.duplicates_dropped or 0, duplicate_key=outcome.duplicate_key)
    log.info("merged %d record(s), offsets %s", result.num_records, result.offset_interval)
    if result.duplicates_dropped:
        log.warning(duplicates_warning(txn.dataset, _source_steps(state, txn).merge, result))
    return result


def _described(merged: dict) -> SliceDescription | None:
    """The engine's description of the slice, from the merge step's record (none in one an earlier build wrote)."""
    if not merged.get("slice"):
        return None
    try:
        return from_data(MergeOutcome, merged).slice
    except OdfError as e:
        log.warning("the merge step's record of the slice is unreadable (%s): hashing the slice here", e)
        return None


def duplicates_warning(dataset: str, strategy, result: StepResult) -> str:
    """The WARNING of a Ledger merge that dropped rows repeating a key inside its input (conformance D1)."""
    key = ", ".join(getattr(strategy, "primary_key", None) or ())
    return (f"dataset '{dataset}': {result.duplicates_dropped} row(s) of this input repeat the primary key ({key}) of "
            f"an earlier row of it and were dropped, the first per key kept, e.g. {result.duplicate_key}; "
            "--duplicates error refuses such input")


# -- commit -----------------------------------------------------------------------------------------------------


def commit(ws: Workspace, txn: IngestTransaction) -> StepResult:
    """Commit the merged slice; a repeated commit returns the first one's result."""
    done = txn.path(COMMIT_FILE)
    if os.path.exists(done):
        with open(done, encoding="utf-8") as f:
            return StepResult.from_json(f.read())
    with _step(txn, "committing from"):  # the staged slice stays for a retry: it is complete
        result = _commit(ws, txn)
    _record_commit(txn, result)
    return result


def _commit(ws: Workspace, txn: IngestTransaction) -> StepResult:
    handle = _handle(ws, txn)
    source_state = None
    if txn.source == POLLING:
        fetched = read_fetch_manifest(txn.staging_dir)
        if fetched.up_to_date:
            return StepResult(up_to_date=True, head=str(handle.chain.head()))
        source_state = fetched.new_source_state
    elif txn.push_key is not None:
        source_state = push_key_state(txn.source, txn.push_key)
    if not os.path.exists(txn.path(MERGE_FILE)):
        raise IngestError(f"transaction {txn.txn_id}: the merge step's output is missing: run merge again")
    with open(txn.path(MERGE_FILE), encoding="utf-8") as f:
        merged = json.load(f)
    state = handle.state()
    slice_path = txn.path("slice.parquet")
    slice_file = None
    if os.path.exists(slice_path):
        start = 0 if txn.base_head is None else _next_offset_at_base(handle, txn, state)
        slice_file = described_slice(slice_path, state.vocab.offset_column, start, _described(merged))
    checkpoint = txn.path("checkpoint.parquet")
    watermark = None
    if merged.get("maxEventTime"):
        watermark = Timestamp.parse(merged["maxEventTime"])
        if state.last_watermark is not None and watermark < state.last_watermark:
            watermark = state.last_watermark
    try:
        block = commit_data(
            handle.chain,
            base_head=Multihash.parse(txn.base_head) if txn.base_head else None,
            slice_file=slice_file,
            checkpoint_path=checkpoint if os.path.exists(checkpoint) else None,
            system_time=txn.time,
            new_watermark=watermark,
            source_state=source_state,
        )
    except RefConflict as e:  # the merge was planned on the old head (Ledger keys, Snapshot state): not re-planned here
        raise DatasetChanged(str(handle.name), e.expected, e.actual) from None
    st = handle.state()
    iv = slice_file.data_slice.offset_interval if slice_file else None
    result = StepResult(
        num_records=(iv.end - iv.start + 1) if iv else 0,
        offset_interval=(iv.start, iv.end) if iv else None,
        block_hash=str(block) if block else None,
        head=str(st.head),
        watermark=str(st.last_watermark) if st.last_watermark else None,
        duplicates_dropped=merged.get("duplicatesDropped") or 0,
        duplicate_key=merged.get("duplicateKey"),
    )
    if block:
        log.info("committed block %s: offsets %s, watermark %s", block, result.offset_interval, result.watermark)
    else:
        log.info("nothing to commit")
    return result


def _record_commit(txn: IngestTransaction, result: StepResult) -> None:
    """After the commit: ``commit.json`` for a retried task, then the payload goes. The chain already holds the
    commit, so a failure here (a full disk) is a warning, not an error; the payload then stays, so a retry without
    ``commit.json`` still finds its block (``commit_data``). A random-id transaction is never retried: no
    ``commit.json``, and its staging directory goes as a whole (:func:`_ends`)."""
    if not txn.ephemeral:
        try:
            with os_errors("recording the commit in", txn.path(COMMIT_FILE)):
                atomic_write_text(txn.path(COMMIT_FILE), json.dumps(asdict(result)))
        except OdfError as e:
            log.warning("transaction %s is committed, but %s; its staged files stay until 'odf gc'", txn.txn_id, e)
            return
    _cleanup_payload(txn)


def _next_offset_at_base(handle: DatasetHandle, txn: IngestTransaction, state: ChainState) -> int:
    if state.head is not None and str(state.head) == txn.base_head:
        return state.next_offset
    assert txn.base_head is not None, "a transaction planned on a chain without a head"
    return handle.chain.state_at(Multihash.parse(txn.base_head)).next_offset


PAYLOAD = ("fetch", "container-out", "prepare", "push", "inputs", "slice.parquet", "checkpoint.parquet",
           "read.parquet")
"""What a transaction stages besides its small manifests: every copy of data, removed once it is committed."""


def _cleanup_payload(txn: IngestTransaction) -> None:
    """Drop the bulky staged files once committed (also scratch of an engine killed mid-request); the manifests stay
    so a retried step sees it is done."""
    engine_scratch: tuple[str, ...] = ()
    if os.path.isdir(txn.staging_dir):
        engine_scratch = tuple(n for n in os.listdir(txn.staging_dir) if n.startswith(".odf-engine-"))
    _remove(txn, PAYLOAD + engine_scratch)


# -- whole chains -----------------------------------------------------------------------------------------------


def pull(ws: Workspace, dataset: str, engine: Engine, *, once: bool = False,
         options: FetchOptions | None = None, max_transactions: int = 10_000,
         progress: "Progress | None" = None, ingest_options: IngestOptions | None = None) -> list[StepResult]:
    """Ingest until the source is up to date (or one transaction with ``once``), in one Spark session;
    ``progress`` (:mod:`odf_core.progress`) counts the files fetched and their bytes."""
    results = []
    for _ in range(max_transactions):
        txn = begin(ws, dataset, source=POLLING)
        with _ends(txn):
            fetched = fetch(ws, txn, options)
            if fetched.up_to_date:
                results.append(commit(ws, txn))
                break
            if progress is not None:
                progress.advance(len(fetched.files), sum(_size(f.path) for f in fetched.files))
            prepare(ws, txn)
            merge(ws, txn, engine, with_read=True, options=ingest_options)
            results.append(commit(ws, txn))
        if once or not fetched.has_more:
            break
    return results


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def push(ws: Workspace, dataset: str, path: str | None, *, source: str | None = None, engine: Engine,
         txn_id: str | None = None, not_before: Timestamp | None = None,
         options: IngestOptions | None = None) -> StepResult:
    """Ingest one file (or stdin) through a push source.

    ``txn_id`` is the push's idempotency key: it is recorded in the committed block, and a push whose key is found
    in the chain does nothing and returns that block (``already_ingested``), even after other pushes moved the head
    and without its staging directory.  ``not_before``: no attempt of this key started before then (see
    :mod:`odf_core.ingest.push_keys`; default: a week ago).
    """
    if txn_id is None:
        txn = begin(ws, dataset, source=source)
        with _ends(txn):
            if txn.source == POLLING:
                raise IngestError(f"dataset '{txn.dataset}' has no push source: use 'odf pull' for its polling source")
            stage_push_file(txn, path)
            merge(ws, txn, engine, with_read=True, options=options)
            return commit(ws, txn)
    planned = begin_push(ws, dataset, txn_id, source=source, not_before=not_before)
    if isinstance(planned, StepResult):
        return planned
    txn = planned
    if not os.path.exists(txn.path(COMMIT_FILE)):
        stage_push_file(txn, path)
        merge(ws, txn, engine, with_read=True, options=options)
        head = _handle(ws, txn).chain.head()
        if (str(head) if head else None) != txn.base_head:
            # someone appended while we merged: the slice no longer fits; a retry plans again on the new head
            raise DatasetChanged(txn.dataset, txn.base_head, str(head) if head else None)
    return commit(ws, txn)


def begin_push(ws: Workspace, dataset: str, key: str, *, source: str | None = None,
               not_before: Timestamp | None = None) -> IngestTransaction | StepResult:
    """Plan a push with idempotency key ``key`` — or, when an earlier attempt committed it, that attempt's result
    (``already_ingested``).  The plan's ``base_head`` is the head the chain was searched from."""
    key = check_key(key)
    handle = ws.get(dataset)
    state = handle.state()
    src = _resolve_source(handle, state, source)
    if src == POLLING:
        raise IngestError(f"dataset '{handle.name}' has no push source: use 'odf pull' for its polling source")
    staging = _staging_dir(ws, state, key)
    plan = _load_plan(staging, key, src)
    if plan is not None:  # blocks down to its base_head were checked when it was made
        found = find_push(handle.chain, src, key, start=state.head,
                          stop=Multihash.parse(plan.base_head) if plan.base_head else None)
    else:
        found = find_push(handle.chain, src, key, start=state.head, not_before=not_before or default_not_before())
    if found is not None:
        log.info("push %s into %s was already ingested in block %s", key, handle.name, found.block_hash)
        if plan is not None:
            _cleanup_payload(plan)  # what the committing attempt did not live to remove
        return _already_ingested(state, found)
    if plan is not None and plan.base_head == (str(state.head) if state.head else None):
        return plan
    # no plan, or one made on an older head (the key is in none of the blocks since): plan again on this head
    if os.path.exists(staging):
        _remove_plan(staging)
    return _write_plan(handle, state, src, staging_name(key), staging, push_key=key)


def _load_plan(staging: str, key: str, source: str) -> IngestTransaction | None:
    """The staged plan of this key and source, if any (a plan made some other way was not checked against it)."""
    if not os.path.exists(os.path.join(staging, TXN_FILE)):
        return None
    try:
        plan = IngestTransaction.load(staging)
    except IngestError as e:
        log.warning("ignoring the unreadable plan in %s: %s", staging, e)
        return None
    return plan if plan.push_key == key and plan.source == source else None


def _remove_plan(staging: str) -> None:
    """The plan goes first, so a crash half-way leaves a staging directory without one (which is re-planned)."""
    plan = os.path.join(staging, TXN_FILE)
    if os.path.exists(plan):
        os.remove(plan)
    shutil.rmtree(staging)


def _already_ingested(state: ChainState, found: CommittedPush) -> StepResult:
    ev = found.block.event
    assert isinstance(ev, AddData)  # push keys are only in AddData blocks
    iv = ev.new_data.offset_interval if ev.new_data is not None else None
    return StepResult(
        num_records=(iv.end - iv.start + 1) if iv else 0,
        offset_interval=(iv.start, iv.end) if iv else None,
        block_hash=str(found.block_hash),
        head=str(state.head),
        watermark=str(ev.new_watermark) if ev.new_watermark else None,
        already_ingested=True,
    )
