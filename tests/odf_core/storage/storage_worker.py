"""Child-process side of the storage tests (run as ``python storage_worker.py <command> …``).

Real processes are needed to test what threads cannot show: cross-process compare-and-swap and SIGKILL at a
crash point (``ODF_CRASH_AT``). Each command prints one JSON line with its result.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

from odf_core.errors import RefConflict
from odf_core.identity import Multihash
from odf_core.storage import DatasetLayout, ObjectStore


WORKER = os.path.abspath(__file__)


def run_worker(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    """Parent side: run one command of this script in a fresh Python process."""
    return subprocess.run(
        [sys.executable, WORKER, *args], capture_output=True, text=True, timeout=timeout,
        env=env if env is not None else dict(os.environ),
    )


def content(seed: str, size: int) -> bytes:
    """Deterministic pseudo-random bytes, so parent and child agree on what a complete object is."""
    return hashlib.shake_256(seed.encode()).digest(size)


def block_key_for(data: bytes) -> str:
    return DatasetLayout.block_key(Multihash.sha3_256(data))


def _emit(result: object) -> None:
    print(json.dumps(result), flush=True)


def cmd_put_blocks(root: str, seeds: str, size: str) -> None:
    """put_if_absent of content-addressed blocks, one per comma-separated seed."""
    store = ObjectStore.open(root)
    out = []
    for seed in seeds.split(","):
        data = content(seed, int(size))
        out.append(store.put_if_absent(block_key_for(data), data))
    _emit(out)


def cmd_put_file(root: str, key: str, src: str, move: str) -> None:
    _emit(ObjectStore.open(root).put_file_if_absent(key, src, move=move == "move"))


def cmd_put(root: str, key: str, seeds: str, size: str) -> None:
    """Overwrite ``key`` with each seed's content in turn."""
    store = ObjectStore.open(root)
    for seed in seeds.split(","):
        store.put(key, content(seed, int(size)))
    _emit("ok")


def cmd_cas(root: str, ref: str, expected: str, new: str) -> None:
    ObjectStore.open(root).compare_and_swap_ref(ref, None if expected == "-" else expected, new)
    _emit("ok")


def cmd_race(root: str, worker: str, rounds: str) -> None:
    """Two phases, gated by the parent so all workers start together.

    Gate phase: read ``refs/gate`` (absent), report ready, wait for "go", then try to create it: exactly one
    worker can win. Counter phase: ``rounds`` successful increments of ``refs/head``, retrying on RefConflict.
    """
    store = ObjectStore.open(root)
    seen = store.get_ref("refs/gate")
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        raise SystemExit("no go signal")
    try:
        store.compare_and_swap_ref("refs/gate", seen, f"w{worker}")
        gate = {"won": True, "actual": None}
    except RefConflict as e:
        gate = {"won": False, "actual": e.actual}

    written, conflicts = [], 0
    while len(written) < int(rounds):
        old = store.get_ref("refs/head")
        new = str(int(old) + 1)
        try:
            store.compare_and_swap_ref("refs/head", old, new)
            written.append(int(new))
        except RefConflict:
            conflicts += 1
    _emit({"gate": gate, "written": written, "conflicts": conflicts})


COMMANDS = {
    "put-blocks": cmd_put_blocks,
    "put-file": cmd_put_file,
    "put": cmd_put,
    "cas": cmd_cas,
    "race": cmd_race,
}

if __name__ == "__main__":
    COMMANDS[sys.argv[1]](*sys.argv[2:])
