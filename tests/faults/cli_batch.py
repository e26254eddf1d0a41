"""Run several ``odf`` commands in one child process, each with its own captured stdout and stderr (file
descriptors 1 and 2, so whatever Spark's JVM or Python print is caught too): what a user would see on the console,
at the cost of one Spark start for the whole batch.

``python -m tests.faults.cli_batch < steps.json > results.json``; each step is
``{"odf": [argv…], "enospc_at": N}`` (``odf_core.cli.main(argv)``, its N-th storage write failing with ENOSPC) or
``{"run": [command…]}`` (e.g. a ``mount`` that frees a full disk). Each result holds the exit code, stdout, stderr and
the files left under ``$ODF_STAGING_DIR`` (when set) after the step.
"""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile


@contextlib.contextmanager
def _captured(fd: int):
    """Point file descriptor ``fd`` at a temp file for the block; yields a function returning what was written."""
    saved = os.dup(fd)
    with tempfile.TemporaryFile() as f:
        os.dup2(f.fileno(), fd)
        text: list[str] = []
        try:
            yield lambda: "".join(text)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved, fd)
            os.close(saved)
            f.seek(0)
            text.append(f.read().decode("utf-8", "replace"))


def _staged() -> list[str] | None:
    root = os.environ.get("ODF_STAGING_DIR")
    if not root:
        return None
    return sorted(os.path.relpath(os.path.join(d, n), root) for d, _, files in os.walk(root) for n in files)


def run_step(step: dict) -> dict:
    from odf_core.cli import main
    from odf_core.storage.faults import inject_enospc

    if "run" in step:
        p = subprocess.run(step["run"], capture_output=True, text=True)
        return {"code": p.returncode, "out": p.stdout, "err": p.stderr}
    plan = inject_enospc(step["enospc_at"]) if step.get("enospc_at") else contextlib.nullcontext()
    with _captured(1) as out, _captured(2) as err:
        try:
            with plan:
                code = main(step["odf"])
        except SystemExit as e:  # argparse
            code = e.code if isinstance(e.code, int) else 2
    return {"code": code, "out": out(), "err": err(), "staged": _staged()}


def main() -> None:
    steps = json.load(sys.stdin)
    results = [run_step(s) for s in steps]
    sys.stdout.write(json.dumps(results))


if __name__ == "__main__":
    main()
