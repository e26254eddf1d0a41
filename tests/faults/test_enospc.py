"""ENOSPC at every write: the N-th write of an ingest or a transform fails as if the disk filled up right then.

Writes are counted by the storage layer and the staging helpers (``odf_core.storage.faults.write_fault``: filling a
temp file, linking or renaming it into place, creating a directory), first in one undisturbed run, then each one is
failed in turn. Every failure must end in one clear error line (an ``OdfError`` saying "no space left on device while
… <path>"), the dataset verifying at its old head, no temp file anywhere, no staging left by a transaction nobody
will retry, nothing ``odf gc`` would not remove — and the next run, with the disk "freed", must succeed exactly once.
The writes Spark itself makes are failed for real on a full tmpfs, and writes no command wraps (an output file,
stdout) on ``/dev/full`` (last two tests).
"""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from odf_core import gc
from odf_core.errors import OdfError
from odf_core.ingest import transaction as tx
from odf_core.storage.faults import count_writes, inject_enospc
from odf_core.transform import run as run_transform
from odf_core.workspace import Workspace

from . import workers
from .scenarios import (
    DERIVED,
    ROOT,
    Snapshot,
    derived_snapshot,
    error_lines,
    intact,
    is_one_clear_line,
    orphans,
    root_snapshot,
    rows,
    run_cli_batch,
    staged,
    temp_files,
    write_ndjson,
)

pytestmark = pytest.mark.spark


def _clear(e: BaseException) -> bool:
    """What the CLI would print as one line: an OdfError naming the full disk."""
    return isinstance(e, OdfError) and "no space left on device while" in str(e) and "\n" not in str(e)


def _leftovers(ws: Workspace, ws_dir: str, name: str, *, ephemeral: bool) -> list[str]:
    """Temp files, staging of a transaction nobody retries (``ephemeral``), and what ``odf gc`` leaves behind."""
    problems = [f"temp file left: {f}" for f in temp_files(ws_dir)]
    if ephemeral:
        problems += [f"staged file left: {f}" for f in staged(ws)]
    report = gc.collect(ws, min_age_s=0)
    problems += [f"gc: {p}" for p in report.problems]
    problems += [f"unreferenced after gc: {k}" for k in orphans(ws.get(name))]
    problems += [f"staged file left after gc: {f}" for f in staged(ws)]
    return problems


def _each_write(paths: list[str], ws_dir: str, snapshot: Snapshot, fault_ledger, operation: str, attempt,
                check) -> None:
    """Fail write N (1..len(paths)) of ``attempt`` in turn from the same starting point; ``check`` judges each."""
    assert paths, "the undisturbed run made no write"
    failures = []
    for n, _path in enumerate(paths, start=1):
        snapshot.restore()
        error: BaseException | None = None
        try:
            with inject_enospc(n) as plan:
                attempt()
        except Exception as e:  # noqa: BLE001 - judged below
            error = e
        where = os.path.relpath(plan.failed[0], ws_dir) if plan.failed else f"write {n} (not reached)"
        problems = [] if plan.failed else [f"write {n} was never reached"]
        traceback = error is not None and not _clear(error)
        if traceback:
            problems.append(f"not one clear line: {type(error).__name__}: {error}")
        try:
            problems += check(error, plan.failed[0] if plan.failed else "")
        except Exception as e:  # noqa: BLE001
            problems.append(f"check failed: {type(e).__name__}: {e}")
        fault_ledger.record("ENOSPC", operation, where,
                            lost_or_corrupted=any(not p.startswith("not one clear line") for p in problems),
                            traceback=traceback)
        if problems:
            failures.append(f"write {n} ({where}): {'; '.join(problems)}")
    assert not failures, "\n".join(failures)


def _after_the_commit(written: str) -> bool:
    """Writes made once the head moved, which the commit does not depend on: the summary cache (or its temp file)
    and ``commit.json``. Their failure is a warning; the commit stands."""
    return ("/info/" in written and written.endswith("summary")) or written.endswith("/commit.json")


def _outcome(h, error, old_head, written) -> list[str]:
    """A failure leaves the old head; a success is only right when the failed write came after the head moved."""
    problems = []
    if (p := intact(h)) is not None:
        problems.append(p)
    if error is not None and h.chain.head() != old_head:
        problems.append(f"failed, yet the head moved to {h.chain.head()}")
    if error is None and not _after_the_commit(written):
        problems.append(f"succeeded although writing {written} failed")
    return problems


def test_enospc_at_every_write_of_an_odf_ingest(tmp_path, engine, fault_ledger):
    """The CLI's push (random transaction id): whatever write fails, staging is empty afterwards."""
    ws_dir = str(tmp_path / "ws")
    ws = Workspace.init(ws_dir)
    ws.create(root_snapshot())
    tx.push(ws, ROOT, write_ndjson(tmp_path / "a.json", range(0, 5)), engine=engine)
    old_head = ws.get(ROOT).chain.head()
    new_file = write_ndjson(tmp_path / "b.json", range(3, 10))
    snapshot = Snapshot.take(ws_dir, tmp_path / "snapshot")
    with count_writes() as counted:
        tx.push(ws, ROOT, new_file, engine=engine)
    expected = rows(ws.get(ROOT))
    assert len(expected) == 10

    def check(error, written: str) -> list[str]:
        h = ws.get(ROOT)
        problems = _outcome(h, error, old_head, written)
        problems += _leftovers(ws, ws_dir, ROOT, ephemeral=True)
        tx.push(ws, ROOT, new_file, engine=engine)  # the disk is free again
        if rows(h) != expected:
            problems.append("the next push did not add the records exactly once")
        problems += _leftovers(ws, ws_dir, ROOT, ephemeral=True)
        return problems

    _each_write(counted.paths, ws_dir, snapshot, fault_ledger, "odf ingest: every write",
                lambda: tx.push(ws, ROOT, new_file, engine=engine), check)


def test_enospc_at_every_write_of_an_airflow_ingest_commit(tmp_path, engine, fault_ledger):
    """The Commit task of a DAG run (fixed id): a failed try keeps what the retry needs, the retry commits once and
    leaves only the manifests."""
    ws_dir = str(tmp_path / "ws")
    ws = Workspace.init(ws_dir)
    ws.create(root_snapshot())
    tx.push(ws, ROOT, write_ndjson(tmp_path / "a.json", range(0, 5)), engine=engine)
    old_head = ws.get(ROOT).chain.head()
    txn = tx.begin(ws, ROOT, txn_id="af-run-7")
    tx.stage_push_file(txn, write_ndjson(tmp_path / "b.json", range(3, 10)))
    tx.merge(ws, txn, engine, with_read=True)
    snapshot = Snapshot.take(ws_dir, tmp_path / "snapshot")
    with count_writes() as counted:
        tx.commit(ws, txn)
    expected = rows(ws.get(ROOT))
    assert len(expected) == 10

    def check(error, written: str) -> list[str]:
        h = ws.get(ROOT)
        problems = _outcome(h, error, old_head, written)
        if error is not None and not os.path.exists(txn.path("slice.parquet")):
            problems.append("the failed try removed the staged slice its retry needs")
        problems += [f"temp file left: {f}" for f in temp_files(ws_dir)]
        tx.commit(ws, tx.IngestTransaction.from_ref(ws, txn.to_ref()))  # the task's retry
        if rows(h) != expected:
            problems.append("the retry did not commit the records exactly once")
        left = set(os.listdir(txn.staging_dir))
        if left - {"transaction.json", "prepare.json", "merge.json", "commit.json"}:
            problems.append(f"staged after the commit: {sorted(left)}")
        return problems + _leftovers(ws, ws_dir, ROOT, ephemeral=False)

    _each_write(counted.paths, ws_dir, snapshot, fault_ledger, "ingest commit (Airflow task): every write",
                lambda: tx.commit(ws, tx.IngestTransaction.from_ref(ws, txn.to_ref())), check)


def _derivative_waiting(tmp_path, engine) -> tuple[Workspace, str]:
    ws_dir = str(tmp_path / "ws")
    ws = Workspace.init(ws_dir)
    ws.create(root_snapshot())
    tx.push(ws, ROOT, write_ndjson(tmp_path / "a.json", range(0, 5)), engine=engine)
    ws.create(derived_snapshot())
    run_transform(ws, DERIVED, engine=engine)
    tx.push(ws, ROOT, write_ndjson(tmp_path / "b.json", range(3, 10)), engine=engine)
    return ws, ws_dir


def test_enospc_at_every_write_of_a_transform_commit(tmp_path, engine, fault_ledger):
    """The engine answered (its answer staged, fixed id); each write of the commit fails in turn, the retry commits
    the staged answer without Spark."""
    ws, ws_dir = _derivative_waiting(tmp_path, engine)
    old_head = ws.get(DERIVED).chain.head()
    with pytest.raises(OdfError, match="no space left on device"), inject_enospc(1, only=f"/datasets/{DERIVED}/"):
        run_transform(ws, DERIVED, engine=engine, txn_id="af-run-3")
    snapshot = Snapshot.take(ws_dir, tmp_path / "snapshot")
    with count_writes() as counted:
        run_transform(ws, DERIVED, engine=workers.NoEngine(), txn_id="af-run-3")
    expected = rows(ws.get(DERIVED))
    staging = os.path.dirname(next(p for p in counted.paths if p.endswith("commit.json")))

    def check(error, written: str) -> list[str]:
        h = ws.get(DERIVED)
        problems = _outcome(h, error, old_head, written)
        problems += [f"temp file left: {f}" for f in temp_files(ws_dir)]
        run_transform(ws, DERIVED, engine=workers.NoEngine(), txn_id="af-run-3")  # the task's retry
        if rows(h) != expected:
            problems.append("the retry did not commit exactly once")
        left = sorted(os.listdir(staging)) if os.path.isdir(staging) else []
        if left not in ([], ["commit.json"]):  # [] when commit.json could not be written: the chain answers then
            problems.append(f"staged after the commit: {left}")
        return problems + _leftovers(ws, ws_dir, DERIVED, ephemeral=False)

    _each_write(counted.paths, ws_dir, snapshot, fault_ledger, "transform commit (Airflow task): every write",
                lambda: run_transform(ws, DERIVED, engine=workers.NoEngine(), txn_id="af-run-3"), check)


def test_enospc_while_a_cli_transform_stages_its_answer(tmp_path, engine, fault_ledger):
    """The writes before the commit (the plan, the engine's answer) and the first of the commit, for the CLI's random
    transaction id: its staging goes whatever fails; the next run succeeds."""
    ws, ws_dir = _derivative_waiting(tmp_path, engine)
    old_head = ws.get(DERIVED).chain.head()
    snapshot = Snapshot.take(ws_dir, tmp_path / "snapshot")
    with count_writes() as counted:
        run_transform(ws, DERIVED, engine=engine)
    expected = rows(ws.get(DERIVED))
    first = [p for p in counted.paths][:3]
    assert [os.path.basename(p) for p in first[:2]] == ["plan.json", "response.fb"], first

    def check(error, written: str) -> list[str]:
        h = ws.get(DERIVED)
        problems = _outcome(h, error, old_head, written)
        problems += _leftovers(ws, ws_dir, DERIVED, ephemeral=True)
        run_transform(ws, DERIVED, engine=engine)
        if rows(h) != expected:
            problems.append("the next run did not commit exactly once")
        return problems + _leftovers(ws, ws_dir, DERIVED, ephemeral=True)

    _each_write(first, ws_dir, snapshot, fault_ledger, "odf pull (transform): plan, answer, first commit write",
                lambda: run_transform(ws, DERIVED, engine=engine), check)


def _mount_namespace_missing() -> str | None:
    if shutil.which("unshare") is None:
        return "unshare (util-linux) is not installed"
    p = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt 2>/dev/null || "
                        "mount -t tmpfs -o size=64k tmpfs /tmp"], capture_output=True, text=True)
    return None if p.returncode == 0 else f"no private mount namespace here: {p.stderr.strip()}"


def test_a_really_full_disk_under_the_engine(tmp_path, engine, fault_ledger):
    """Staging on a 256 KiB tmpfs (a private mount namespace): the engine's own writers — pyarrow's for an ingest's
    slice, Spark's for a transform's output — hit a real ENOSPC. The CLI says so in one line and where, leaves
    nothing in staging; after the disk is grown, the same commands succeed."""
    missing = _mount_namespace_missing()
    if missing:
        pytest.skip(missing)
    ws_dir = str(tmp_path / "ws")
    ws = Workspace.init(ws_dir)
    ws.create(root_snapshot())

    def random_keys(path, n: int, v0: int) -> str:  # incompressible keys: the files are as big as they look
        with open(path, "w", encoding="utf-8") as f:
            for i in range(v0, v0 + n):
                f.write(f'{{"k": "{os.urandom(16).hex()}", "v": {i}}}\n')
        return str(path)

    tx.push(ws, ROOT, random_keys(tmp_path / "a.json", 8000, 0), engine=engine)  # its aggregation does not fit
    ws.create(derived_snapshot())
    big = random_keys(tmp_path / "big.json", 2500, 8000)  # 120 KiB that fits the disk; its merge output does not
    stg = tmp_path / "staging"
    stg.mkdir()
    wrap = ["unshare", "-rm", "sh", "-c", 'mount -t tmpfs -o size=256k tmpfs "$0" && exec "$@"', str(stg)]
    w = ["-w", ws_dir]
    results = run_cli_batch([
        {"odf": [*w, "ingest", ROOT, str(big), "--master", "local[1]"]},
        {"odf": [*w, "pull", DERIVED, "--master", "local[1]"]},
        {"run": ["mount", "-o", "remount,size=64m", str(stg)]},
        {"odf": [*w, "ingest", ROOT, str(big), "--master", "local[1]"]},
        {"odf": [*w, "pull", DERIVED, "--master", "local[1]"]},
    ], env={"ODF_STAGING_DIR": str(stg), "ODF_LOG_DIR": str(tmp_path / "logs")}, wrap=wrap)
    failures = []
    for (what, r) in (("odf ingest on a full disk: the engine's pyarrow writer", results[0]),
                      ("odf pull on a full disk: the engine's Spark writer", results[1])):
        problems = []
        if r["code"] != 1 or "no space left on device while writing under" not in r["err"]:
            problems.append(f"exit {r['code']}, stderr {error_lines(r['err'])}")
        if r["staged"]:
            problems.append(f"staged after the failure: {r['staged']}")
        traceback = not is_one_clear_line(r["err"])
        fault_ledger.record("ENOSPC", what, "a full tmpfs under staging", traceback=traceback,
                            lost_or_corrupted=bool(problems))
        if problems or traceback:
            failures.append(f"{what}: {problems} {error_lines(r['err'])}")
    assert results[2]["code"] == 0, results[2]["err"]
    assert [r["code"] for r in results[3:]] == [0, 0], [error_lines(r["err"]) for r in results[3:]]
    assert not failures, "\n".join(failures)
    for name in (ROOT, DERIVED):
        assert intact(ws.get(name)) is None
    assert ws.get(ROOT).state().num_records == 10500


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full (a device every write to fails with ENOSPC)")
def test_a_full_output_device_is_one_line(tmp_path, fault_ledger):
    """Writes no command wraps — its output file, its stdout — on a really full device (``/dev/full``), through the
    real CLI in a child process: one line, no trace, not an "internal error"."""
    import sys

    ws_dir = str(tmp_path / "ws")
    Workspace.init(ws_dir).create(root_snapshot())
    block = tmp_path / "b.yaml"
    block.write_text("kind: MetadataBlock\nversion: 2\ncontent:\n  systemTime: 2050-01-01T12:00:00Z\n"
                     "  sequenceNumber: 0\n  event:\n    kind: SetInfo\n    description: foo\n")
    cases = [("odf block encode -o /dev/full", ["block", "encode", str(block), "-o", "/dev/full"]),
             ("odf list > /dev/full", ["-w", ws_dir, "list"]),
             ("odf log > /dev/full", ["-w", ws_dir, "log", ROOT])]
    failures = []
    with open("/dev/full", "w") as full:
        for what, argv in cases:
            p = subprocess.run([sys.executable, "-m", "odf_core.cli", *argv], stdout=full, stderr=subprocess.PIPE,
                               text=True, env={**os.environ, "ODF_LOG_DIR": str(tmp_path / "logs")})
            traceback = not is_one_clear_line(p.stderr) or "no space left on device" not in p.stderr
            fault_ledger.record("ENOSPC", "a full output device (/dev/full)", what, traceback=traceback)
            if p.returncode != 1 or traceback:
                failures.append(f"{what}: exit {p.returncode}, stderr {p.stderr.strip()!r}")
    assert not failures, "\n".join(failures)
