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
    assert len(listed) == skipped and all(n.startswith("tests/odf_core/ingest/test_fetch_container.py::") for n in listed)
    # it closes the run: only pytest's own one-line tally follows it
    assert out.rstrip().splitlines()[-1].startswith(f"{skipped} skipped")
    assert block.rstrip().splitlines()[-3].startswith("To test these paths:")
