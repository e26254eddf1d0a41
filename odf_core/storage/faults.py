"""Crash injection: named points where a test can make the current process die abruptly.

Durability code (object publication, ref compare-and-swap, chain append, ingestion commit) calls
``crash_point("<area>.<step>")`` between its steps. Normally that is a no-op costing one environment lookup.
A test starts a *child process* with ``ODF_CRASH_AT`` naming a point (see :func:`crash_env`); when the child reaches
that point it sends itself ``SIGKILL`` (no cleanup, no ``finally``, no flushing), then the test inspects what the
child left on disk. Use :func:`was_killed` on the child's return code to check the crash really happened.

``ODF_CRASH_AT`` holds one or more comma-separated items ``point`` or ``point@N`` (die the N-th time the point is
reached in this process, N >= 1; default 1). Example: ``ODF_CRASH_AT=chain.after_block_write@3``.

Note: SIGKILL simulates a process crash, not a power loss: data already handed to the kernel survives, so these
tests prove "no torn or dangling state after a crash at any step", not that every fsync is in the right place.
"""
from __future__ import annotations

import os
import signal
from collections import Counter

from odf_core.errors import OdfError

ENV_VAR = "ODF_CRASH_AT"

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
