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


class _Console:
    """File descriptors 1 and 2 of this process pointed at files for the whole batch — before Spark's JVM starts, so
    the JVM (a child process) writes there too — and read back per step: what a step printed is what the files grew
    by while it ran (steps run one after the other)."""

    def __init__(self) -> None:
        self.saved_out = os.dup(1)
        self.files = {fd: tempfile.TemporaryFile() for fd in (1, 2)}
        for fd, f in self.files.items():
            os.dup2(f.fileno(), fd)

    @contextlib.contextmanager
    def step(self):
        start = {fd: os.fstat(fd).st_size for fd in self.files}
        text: dict[int, str] = {}
        try:
            yield text
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, f in self.files.items():
                f.seek(start[fd])
                text[fd] = f.read().decode("utf-8", "replace")

    def write_result(self, data: str) -> None:
        os.write(self.saved_out, data.encode())


def _staged() -> list[str] | None:
    root = os.environ.get("ODF_STAGING_DIR")
    if not root:
        return None
    return sorted(os.path.relpath(os.path.join(d, n), root) for d, _, files in os.walk(root) for n in files)


def run_step(step: dict, console: _Console) -> dict:
    from odf_core.cli import main
    from odf_core.storage.faults import inject_enospc

    if "run" in step:
        p = subprocess.run(step["run"], capture_output=True, text=True)
        return {"code": p.returncode, "out": p.stdout, "err": p.stderr}
    plan = inject_enospc(step["enospc_at"]) if step.get("enospc_at") else contextlib.nullcontext()
    with console.step() as text:
        try:
            with plan:
                code = main(step["odf"])
        except SystemExit as e:  # argparse
            code = e.code if isinstance(e.code, int) else 2
    return {"code": code, "out": text[1], "err": text[2], "staged": _staged()}


def main() -> None:
    steps = json.load(sys.stdin)
    console = _Console()
    results = [run_step(s, console) for s in steps]
    console.write_result(json.dumps(results))


if __name__ == "__main__":
    main()
