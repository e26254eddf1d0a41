"""Compare-and-swap of a ref by several real processes at once on a local store: no lost update, ever."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from odf_core.storage import ObjectStore

from .storage_worker import WORKER

WORKERS = 6
ROUNDS = 50


def test_processes_racing_on_refs(tmp_path: Path) -> None:
    root = str(tmp_path / "store")
    store = ObjectStore.open(root)
    store.compare_and_swap_ref("refs/head", None, "0")

    procs = [
        subprocess.Popen(
            [sys.executable, WORKER, "race", root, str(i), str(ROUNDS)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for i in range(WORKERS)
    ]
    try:
        # Every worker has read refs/gate (absent) before any is allowed to write it.
        for p in procs:
            assert p.stdout.readline().strip() == "ready", p.stderr.read()
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        results = []
        for p in procs:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
            results.append(json.loads(out))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()

    # Gate phase: all expected "absent"; exactly one may win, the others see the winner's value.
    winners = [i for i, r in enumerate(results) if r["gate"]["won"]]
    assert len(winners) == 1
    assert store.get_ref("refs/gate") == f"w{winners[0]}"
    losers = [r["gate"]["actual"] for r in results if not r["gate"]["won"]]
    assert losers == [f"w{winners[0]}"] * (WORKERS - 1)

    # Counter phase: every increment lands exactly once.
    written = sorted(v for r in results for v in r["written"])
    assert written == list(range(1, WORKERS * ROUNDS + 1)), "a value was written twice: lost update"
    assert store.get_ref("refs/head") == str(WORKERS * ROUNDS)
    conflicts = sum(r["conflicts"] for r in results)
    assert conflicts > 0, "no worker ever lost a race; the processes did not overlap"
    print(f"\n{WORKERS} processes x {ROUNDS} swaps: {conflicts} RefConflict retries")
    assert store.remove_stale_temp(0) == []
