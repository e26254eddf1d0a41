"""The hooks of tests/conftest.py, run in a real pytest subprocess."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_container_tests_skipped_for_a_missing_podman_are_listed_loudly(tmp_path):
    # a PATH holding only the venv's python: podman cannot be found, as on a machine without it
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    env = {**os.environ, "PATH": str(bin_dir), "PYTHONPATH": str(REPO)}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--color=no",
                          "-o", "addopts=", "tests/odf_core/ingest/test_fetch_container.py"], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=300)
    out = run.stdout
    assert run.returncode == 0, out[-3000:] + run.stderr[-3000:]
    skipped = int(re.search(r"(\d+) skipped", out).group(1))
    assert skipped > 0 and "passed" not in out.splitlines()[-1]
    block = out[out.index(f"{skipped} CONTAINER TESTS DID NOT RUN"):]
    assert "podman is not installed" in block and "apt-get install -y podman" in block
    listed = [line.strip() for line in block.splitlines() if "::test_" in line]
    prefix = "tests/odf_core/ingest/test_fetch_container.py::"
    assert len(listed) == skipped and all(n.startswith(prefix) for n in listed)
    # it closes the run: only pytest's own one-line tally follows it
    assert out.rstrip().splitlines()[-1].startswith(f"{skipped} skipped")
    assert block.rstrip().splitlines()[-3].startswith("To test these paths:")


# -- tests/tiers.py: the markers say what each test does ------------------------------------------------------------

TIERED = '''
import subprocess, sys
import pytest

def run(*argv):
    subprocess.run([sys.executable, "-c", "pass", *argv], check=True)

def test_plain():
    run()

def test_uses_spark_unmarked(spark):
    pass

@pytest.mark.spark
def test_uses_spark_marked(spark):
    pass

def test_starts_a_jvm_unmarked():
    run("/opt/spark/bin/spark-submit")  # argv as the tiers plugin reads it; the child is a no-op python

@pytest.mark.spark
def test_starts_a_jvm_marked():
    run("/opt/spark/bin/spark-submit")

def test_starts_airflow_unmarked():
    run("-m", "airflow")

def test_fans_out_unmarked():
    for _ in range(7):
        run()

@pytest.mark.slow
@pytest.mark.fast_sample
def test_fans_out_marked_and_sampled():
    for _ in range(7):
        run()

@pytest.mark.e2e
def test_e2e_starts_airflow():
    run("-m", "airflow")
'''


def _tiered_run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "conftest.py").write_text('import pytest\npytest_plugins = ["tests.tiers"]\n\n'
                                          '@pytest.fixture\ndef spark():\n    return None\n')
    (tmp_path / "test_tiered.py").write_text(TIERED)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "--color=no",
                           "-W", "ignore::pytest.PytestUnknownMarkWarning", *args, "test_tiered.py"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)


def test_a_test_lacking_the_marker_of_what_it_does_fails(tmp_path):
    out = _tiered_run(tmp_path).stdout
    # -rA lists the passed calls, then the errors (a failed setup, or a teardown failed by the check): the last wins
    outcome = {name: status for status, name in re.findall(r"^(PASSED|FAILED|ERROR) test_tiered\.py::(\w+)", out,
                                                             re.M)}
    assert outcome == {"test_plain": "PASSED", "test_uses_spark_unmarked": "ERROR", "test_uses_spark_marked": "PASSED",
                       "test_starts_a_jvm_unmarked": "ERROR", "test_starts_a_jvm_marked": "PASSED",
                       "test_starts_airflow_unmarked": "ERROR", "test_fans_out_unmarked": "ERROR",
                       "test_fans_out_marked_and_sampled": "PASSED", "test_e2e_starts_airflow": "PASSED"}, out
    assert "uses fixture 'spark' without @pytest.mark.spark" in out
    assert "started a JVM without @pytest.mark.spark: " in out
    assert "started an Airflow process without @pytest.mark.airflow" in out
    assert "started 7 processes (more than 6) without @pytest.mark.slow" in out
    assert re.search(r"=+ tier full: 9 tests, \d+ s in tests, [\d.]+ min wall =+", out), out


def test_fast_selects_the_unmarked_tests_and_the_sample(tmp_path):
    out = _tiered_run(tmp_path, "--fast", "--collect-only").stdout
    collected = sorted(re.findall(r"^test_tiered\.py::(\w+)$", out, re.M))
    # the unmarked ones are collected by the markers they lack, and then fail (above)
    assert collected == ["test_fans_out_marked_and_sampled", "test_fans_out_unmarked", "test_plain",
                         "test_starts_a_jvm_unmarked", "test_starts_airflow_unmarked", "test_uses_spark_unmarked"], out
    assert "tier fast" in out
