"""Fault injection: named crash points where a test can make the current process die abruptly, and writes that fail
as if the disk were full.

Durability code (object publication, ref compare-and-swap, chain append, ingestion commit) calls
``crash_point("<area>.<step>")`` between its steps. Normally that is a no-op costing one environment lookup.
A test starts a *child process* with ``ODF_CRASH_AT`` naming a point (see :func:`crash_env`); when the child reaches
that point it sends itself ``SIGKILL`` (no cleanup, no ``finally``, no flushing), then the test inspects what the
child left on disk. Use :func:`was_killed` on the child's return code to check the crash really happened.

``ODF_CRASH_AT`` holds one or more comma-separated items ``point`` or ``point@N`` (die the N-th time the point is
reached in this process, N >= 1; default 1). Example: ``ODF_CRASH_AT=chain.after_block_write@3``.

Note: SIGKILL simulates a process crash, not a power loss: data already handed to the kernel survives, so these
tests prove "no torn or dangling state after a crash at any step", not that every fsync is in the right place.

``ODF_CRASH_TRACE=<file>`` appends the name of every crash point reached to that file (one per line, no crash), so a
test can enumerate the points an operation passes, with how often, and then kill it at each one.

Full disks: every write of the storage layer and of the staging helpers calls :func:`write_fault` just before the
system call that can fail with ``ENOSPC`` (filling a temp file, linking or renaming it into place, creating a
directory). ``ODF_ENOSPC_AT=N[,M…]`` (child processes) or :func:`inject_enospc` (this process) make the N-th such
write raise ``OSError(ENOSPC)``, like a disk that filled up right then; :func:`count_writes` counts them, so a test can
fail every write of an operation in turn.
"""
from __future__ import annotations

import errno
import os
import signal
from collections import Counter
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field

from odf_core.errors import OdfError

ENV_VAR = "ODF_CRASH_AT"
TRACE_ENV_VAR = "ODF_CRASH_TRACE"
ENOSPC_ENV_VAR = "ODF_ENOSPC_AT"

_hits: Counter[str] = Counter()


def _parse(spec: str) -> dict[str, int]:
    points: dict[str, int] = {}
    for item in spec.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, nth = item.partition("@")
        if sep:
            if not nth.isdigit() or int(nth) < 1:
                raise OdfError(f"{ENV_VAR}: invalid item {item!r}: expected 'point' or 'point@N' with N >= 1")
            points[name] = int(nth)
        else:
            points[name] = 1
    return points


def crash_point(name: str) -> None:
    """Kill this process with SIGKILL if ``ODF_CRASH_AT`` names ``name`` (and this is the N-th hit); else no-op."""
    trace = os.environ.get(TRACE_ENV_VAR)
    if trace:
        with open(trace, "a", encoding="utf-8") as f:
            f.write(name + "\n")
    spec = os.environ.get(ENV_VAR)
    if not spec:
        return
    nth = _parse(spec).get(name)
    if nth is None:
        return
    _hits[name] += 1
    if _hits[name] == nth:
        os.kill(os.getpid(), signal.SIGKILL)


def crash_env(point: str, nth: int = 1, base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for a child process that must die at ``point`` (its ``nth`` hit)."""
    env = dict(os.environ if base is None else base)
    env[ENV_VAR] = point if nth == 1 else f"{point}@{nth}"
    return env


def was_killed(returncode: int | None) -> bool:
    """True when a child's return code (subprocess / multiprocessing convention) means it died of SIGKILL."""
    return returncode == -signal.SIGKILL


def read_trace(path: str) -> list[tuple[str, int]]:
    """The crash points an ``ODF_CRASH_TRACE`` run reached, in order, each with its hit number: ``(point, nth)``."""
    seen: Counter[str] = Counter()
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            name = line.strip()
            if name:
                seen[name] += 1
                out.append((name, seen[name]))
    return out


# -- full disks --------------------------------------------------------------------------------------------------


@dataclass
class WritePlan:
    """Writes seen so far in this process, and which of them fail (1-based; empty: none, only count)."""

    fail_at: frozenset[int] = frozenset()
    only: str | None = None  # count only writes whose path contains this
    count: int = 0
    paths: list[str] = field(default_factory=list)  # every write's path, in order
    failed: list[str] = field(default_factory=list)  # the paths whose write was made to fail


_plan: WritePlan | None = None  # set by inject_enospc / count_writes in this process
_env_plan: WritePlan | None = None  # parsed once from ODF_ENOSPC_AT


def _from_env() -> WritePlan | None:
    global _env_plan
    spec = os.environ.get(ENOSPC_ENV_VAR)
    if not spec:
        return None
    if _env_plan is None:
        items = [i.strip() for i in spec.split(",") if i.strip()]
        if not all(i.isdigit() and int(i) >= 1 for i in items):
            raise OdfError(f"{ENOSPC_ENV_VAR}: invalid value {spec!r}: expected write numbers N >= 1, comma-separated")
        _env_plan = WritePlan(frozenset(int(i) for i in items))
    return _env_plan


def write_fault(path: str) -> None:
    """Called just before a write that a full disk would fail; raises ``OSError(ENOSPC)`` when a plan says so."""
    plan = _plan if _plan is not None else _from_env()
    if plan is None or (plan.only is not None and plan.only not in path):
        return
    plan.count += 1
    plan.paths.append(path)
    if plan.count in plan.fail_at:
        plan.failed.append(path)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)


@contextmanager
def inject_enospc(*nth: int, only: str | None = None) -> Iterator[WritePlan]:
    """Within the block, the ``nth`` writes of this process (counted from the block's start; with ``only``, counting
    just the writes whose path contains it) fail with ENOSPC."""
    global _plan
    previous, _plan = _plan, WritePlan(frozenset(nth), only)
    try:
        yield _plan
    finally:
        _plan = previous


def count_writes(only: str | None = None) -> AbstractContextManager[WritePlan]:
    """Count (and record the paths of) the writes made within the block; none fails."""
    return inject_enospc(only=only)
