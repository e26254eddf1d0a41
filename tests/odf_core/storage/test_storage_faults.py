"""The crash-point hook itself, in real child processes (a firing hook must kill only the child)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from odf_core.storage import crash_env, was_killed
from odf_core.storage.faults import ENV_VAR

SCRIPT = """
from odf_core.storage.faults import crash_point
for step in ("a", "b", "a", "b", "b"):
    crash_point(step)
    print(step, flush=True)
"""


def run(spec: str | None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop(ENV_VAR, None)
    if spec is not None:
        env[ENV_VAR] = spec
    return subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=60)


@pytest.mark.parametrize(
    "spec, printed, killed",
    [
        (None, "ababb", False),
        ("", "ababb", False),
        ("other.point", "ababb", False),
        ("a", "", True),
        ("b", "a", True),
        ("a@2", "ab", True),
        ("b@3", "abab", True),
        ("b@4", "ababb", False),
        ("x, b@2 ,", "aba", True),
    ],
)
def test_crash_point_fires_exactly_where_named(spec: str | None, printed: str, killed: bool) -> None:
    proc = run(spec)
    assert "".join(proc.stdout.split()) == printed
    assert was_killed(proc.returncode) is killed
    assert proc.returncode == (-signal.SIGKILL if killed else 0)


def test_malformed_spec_is_a_clear_error() -> None:
    proc = run("a@0")
    assert proc.returncode == 1 and "ODF_CRASH_AT" in proc.stderr and "'a@0'" in proc.stderr


def test_crash_env() -> None:
    assert crash_env("p", base={"X": "1"}) == {"X": "1", ENV_VAR: "p"}
    assert crash_env("p", 3, base={})[ENV_VAR] == "p@3"
    assert was_killed(0) is False and was_killed(None) is False and was_killed(-9) is True
