"""``./dev odf`` runs the venv's odf, and ``./dev`` says how to put odf on PATH."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def test_dev_odf_runs_the_venv_odf(tmp_path):
    """`./dev odf --help` in a checkout whose venv exists: the CLI's help, no venv rebuilt."""
    venv = Path(sys.executable).parent.parent
    if not (venv / ".installed").exists():
        pytest.skip("the test interpreter is not a ./dev venv")
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    shutil.copy(ROOT / "dev", checkout / "dev")
    shutil.copy(ROOT / "pyproject.toml", checkout / "pyproject.toml")
    os.utime(checkout / "pyproject.toml", (0, 0))  # older than the venv's marker: ./dev must not reinstall
    (checkout / ".venv").symlink_to(venv)
    proc = subprocess.run(["./dev", "odf", "--help"], cwd=checkout, capture_output=True, text=True, env=_env(),
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: odf ") and "sql" in proc.stdout
    usage = subprocess.run(["./dev", "nonsense"], cwd=checkout, capture_output=True, text=True, timeout=60)
    assert usage.returncode == 2 and "odf ARGS" in usage.stderr and "source .venv/bin/activate" in usage.stderr
