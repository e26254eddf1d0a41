"""`./dev lint` in CI: ruff and mypy with the project's configuration (pyproject.toml ``[tool.ruff]``, ``[tool.mypy]``),
run as ``./dev lint`` runs them."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_finds_nothing():
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", str(ROOT)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow  # a cold mypy run over odf_core and airflow_provider_odf: 40-60 s
def test_mypy_finds_nothing(tmp_path):
    # a fresh cache: a stale one from another checkout or build could hide an error
    done = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "mypy-cache")], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
