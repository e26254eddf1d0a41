"""kill -9 at every crash point of an ingest commit, a transform commit and a dataset creation.

The points are not listed by hand: a first run with ``ODF_CRASH_TRACE`` records every point the operation passes
(with how often), then for each ``point@N`` a child process is killed there. After each kill the dataset must be at
its old or its new head and verify; the retry must commit exactly once (the same block the undisturbed run made);
``odf gc`` must leave no unreferenced file and staging must be empty.
"""
from __future__ import annotations

import multiprocessing
import os

import pytest

from odf_core import gc
from odf_core.chain import CHAIN_CRASH_POINTS
from odf_core.commit import COMMIT_CRASH_POINTS
from odf_core.errors import OdfError
from odf_core.ingest import transaction as tx
from odf_core.metadata import Seed
from odf_core.storage import crash_env, was_killed
from odf_core.storage.faults import ENV_VAR, TRACE_ENV_VAR, inject_enospc, read_trace
from odf_core.transform import run as run_transform
from odf_core.workspace import Workspace

from . import workers
from .scenarios import (
    DERIVED,
    ROOT,
    Snapshot,
    derived_snapshot,
    intact,
    orphans,
    root_snapshot,
    rows,
    staged,
    temp_files,
    write_ndjson,
)

pytestmark = pytest.mark.spark

_CTX = multiprocessing.get_context("forkserver")
_CTX.set_forkserver_preload(workers.PRELOAD)


CHILD_TIMEOUT_S = 120.0


class ChildHung(Exception):
    """The child was still running at its time limit and the test killed it: not a kill at its crash point."""


def _child(target, env: dict[str, str], *args: str, timeout_s: float = CHILD_TIMEOUT_S) -> int | None:
    env = {ENV_VAR: "", TRACE_ENV_VAR: "", **env}
    p = _CTX.Process(target=target, args=(env, *args))
    p.start()
    p.join(timeout_s)
    if p.is_alive():
        p.kill()
        p.join()
        raise ChildHung(f"still running after {timeout_s:g} s, killed by the test (not at its crash point)")
    return p.exitcode


def _trace(tmp_path, target, *args: str) -> list[tuple[str, int]]:
    """Every crash point one undisturbed run of ``target`` passes, as (point, nth)."""
    path = str(tmp_path / "trace.txt")
    assert _child(target, {TRACE_ENV_VAR: path}, *args) == 0
    return read_trace(path)


def _heads_between(h, old_head, new_head) -> set:
    """The heads a commit from ``old_head`` to ``new_head`` passes: both ends and its SetDataSchema block."""
    return {old_head, *(b for b, _ in h.chain.iter_blocks(new_head, old_head))}


def _after_retry(ws: Workspace, name: str, ws_dir: str) -> list[str]:
    """What must hold once the retry went through and ``odf gc`` ran: problems found (empty: all good)."""
    h = ws.get(name)
    problems = []
    report = gc.collect(ws, min_age_s=0)
    problems += [f"gc: {p}" for p in report.problems]
    problems += [f"unreferenced after gc: {k}" for k in orphans(h)]
    problems += [f"temp file after gc: {f}" for f in temp_files(ws_dir)]
    problems += [f"staged after gc: {f}" for f in staged(ws)]
    if (p := intact(h)) is not None:
        problems.append(f"after gc: {p}")
    return problems


def _kill_everywhere(points, snapshot: Snapshot, fault_ledger, operation: str, kill, check) -> None:
    assert points, "the trace run reached no crash point"
    failures = []
    for point, nth in points:
        snapshot.restore()
        try:
            code = kill(crash_env(point, nth, base={}))
            problems = [] if was_killed(code) else [f"not killed (exit code {code})"]
        except ChildHung as e:
            problems = [str(e)]
        try:
            problems += check()
        except OdfError as e:
            problems.append(f"retry failed: {e}")
        fault_ledger.record("kill -9", operation, f"{point}@{nth}", lost_or_corrupted=bool(problems))
        if problems:
            failures.append(f"{point}@{nth}: {'; '.join(problems)}")
    assert not failures, "\n".join(failures)


def test_a_hung_child_is_not_counted_as_killed_at_its_point():
    """The harness itself: a child that never reaches its point is killed at the time limit (by the same signal)
    and must be reported as hung, not counted as a kill at the point."""
    recorded: list[dict] = []

    class Ledger:
        def record(self, *args: object, **kw: object) -> None:
            recorded.append(kw)

    class Nothing:
        def restore(self) -> None:
            pass

    with pytest.raises(AssertionError, match=r"^somewhere@1: still running after 1 s, killed by the test \(not at "
                                             r"its crash point\)"):
        _kill_everywhere([("somewhere", 1)], Nothing(), Ledger(), "hang", lambda env: _child(workers.hang, env,
                                                                                             timeout_s=1), lambda: [])
    assert recorded == [{"lost_or_corrupted": True}]


def test_kill_at_every_crash_point_of_an_ingest_commit(tmp_path, engine, fault_ledger):
    ws_dir = str(tmp_path / "ws")
    ws = Workspace.init(ws_dir)
    ws.create(root_snapshot())
    old_head = ws.get(ROOT).chain.head()
    # an Airflow-style transaction (fixed id), the dataset's first data (so a SetDataSchema too): merged, not committed
    txn = tx.begin(ws, ROOT, txn_id="af-run-1")
    tx.stage_push_file(txn, write_ndjson(tmp_path / "b.json", range(3, 10)))
    tx.merge(ws, txn, engine, with_read=True)
    snapshot = Snapshot.take(ws_dir, tmp_path / "snapshot")

    points = _trace(tmp_path, workers.ingest_commit, ws_dir, txn.staging_dir)
    new_head = ws.get(ROOT).chain.head()
    between = _heads_between(ws.get(ROOT), old_head, new_head)
    expected = rows(ws.get(ROOT))
    assert len(expected) == 7 and new_head != old_head
    assert {p for p, _ in points} >= {*COMMIT_CRASH_POINTS, *CHAIN_CRASH_POINTS}

    def check() -> list[str]:
        h = ws.get(ROOT)
        problems = []
        if h.chain.head() not in between:
            problems.append(f"head {h.chain.head()} is neither the old nor the new one (nor the schema between)")
        if (p := intact(h)) is not None:
            problems.append(f"after the kill: {p}")
        result = tx.commit(ws, tx.IngestTransaction.load(txn.staging_dir))
        if result.block_hash != str(new_head) or h.chain.head() != new_head:
            problems.append(f"the retry committed {result.block_hash}, not {new_head}")
        if rows(h) != expected:
            problems.append("the records differ from one undisturbed commit's")
        return problems + _after_retry(ws, ROOT, ws_dir)

    _kill_everywhere(points, snapshot, fault_ledger, "ingest commit",
                     lambda env: _child(workers.ingest_commit, env, ws_dir, txn.staging_dir), check)


def test_kill_at_every_crash_point_of_a_transform_commit(tmp_path, engine, fault_ledger):
    ws_dir = str(tmp_path / "ws")
    ws = Workspace.init(ws_dir)
    ws.create(root_snapshot())
    tx.push(ws, ROOT, write_ndjson(tmp_path / "a.json", range(0, 5)), engine=engine)
    tx.push(ws, ROOT, write_ndjson(tmp_path / "b.json", range(3, 10)), engine=engine)
    ws.create(derived_snapshot())
    old_head = ws.get(DERIVED).chain.head()
    # the engine answers, the commit's first write fails: the answer stays staged for the retry (fixed id)
    with pytest.raises(OdfError, match="no space left on device"), inject_enospc(1, only=f"/datasets/{DERIVED}/"):
        run_transform(ws, DERIVED, engine=engine, txn_id="af-run-1")
    assert ws.get(DERIVED).chain.head() == old_head
    snapshot = Snapshot.take(ws_dir, tmp_path / "snapshot")

    points = _trace(tmp_path, workers.transform_commit, ws_dir, DERIVED, "af-run-1")
    new_head = ws.get(DERIVED).chain.head()
    between = _heads_between(ws.get(DERIVED), old_head, new_head)
    expected = rows(ws.get(DERIVED))
    assert new_head != old_head and expected
    assert {p for p, _ in points} >= {*COMMIT_CRASH_POINTS, *CHAIN_CRASH_POINTS}

    def check() -> list[str]:
        h = ws.get(DERIVED)
        problems = []
        if h.chain.head() not in between:
            problems.append(f"head {h.chain.head()} is neither the old nor the new one (nor the schema between)")
        if (p := intact(h)) is not None:
            problems.append(f"after the kill: {p}")
        result = run_transform(ws, DERIVED, engine=workers.NoEngine(), txn_id="af-run-1")
        if h.chain.head() != new_head or (result is not None and result.block_hash != str(new_head)):
            problems.append(f"the retry ended at {h.chain.head()}, not {new_head}")
        if rows(h) != expected:
            problems.append("the records differ from one undisturbed commit's")
        return problems + _after_retry(ws, DERIVED, ws_dir)

    _kill_everywhere(points, snapshot, fault_ledger, "transform commit",
                     lambda env: _child(workers.transform_commit, env, ws_dir, DERIVED, "af-run-1"), check)


def test_kill_at_every_crash_point_of_a_dataset_creation(tmp_path, fault_ledger):
    ws_dir = str(tmp_path / "ws")
    ws = Workspace.init(ws_dir)
    ws.create(root_snapshot())  # a neighbour that must stay untouched
    neighbour = ws.get(ROOT).chain.head()
    snapshot = Snapshot.take(ws_dir, tmp_path / "snapshot")
    points = _trace(tmp_path, workers.create_dataset, ws_dir)
    assert {p for p, _ in points} >= {"object.after_temp_write", "object.after_publish", "put.after_replace",
                                      "ref.locked", "ref.after_replace"}

    def check() -> list[str]:
        problems = []
        if ws.exists("created"):  # killed after the head went in: the dataset exists and is whole
            if (p := intact(ws.get("created"))) is not None:
                problems.append(f"after the kill: {p}")
        else:  # killed before: the retry creates it
            ws.create(root_snapshot("created"))
        names = [str(h.name) for h in ws.list()]
        if sorted(names) != ["created", ROOT]:
            problems.append(f"datasets after the retry: {names}")
        seeds = [b for _, b in ws.get("created").chain.iter_blocks() if isinstance(b.event, Seed)]
        if len(seeds) != 1:
            problems.append(f"{len(seeds)} Seed blocks")
        if ws.get(ROOT).chain.head() != neighbour:
            problems.append("the neighbour dataset changed")
        return problems + _after_retry(ws, "created", ws_dir)

    _kill_everywhere(points, snapshot, fault_ledger, "dataset creation",
                     lambda env: _child(workers.create_dataset, env, ws_dir), check)
    assert os.path.isdir(ws_dir)
