"""``PrepStep::Pipe``: run a command (no shell) with the file on stdin; its stdout is the new file.

Both ends are files, so nothing is held in memory.  The command runs in its own process group, which is killed on
timeout and after it exits (so no stray child keeps writing to the output).  stderr goes to a temporary file in the
step directory and its tail is quoted when the command fails.
"""
from __future__ import annotations

import logging
import os
import signal
import subprocess
import tempfile

from odf_core.ingest.errors import PrepareError
from odf_core.ingest.staging import part_file

_log = logging.getLogger("odf.ingest")
_TAIL_BYTES = 4096
_TAIL_LINES = 20


def run_pipe(command: tuple[str, ...], src: str, dest: str, *, cwd: str, timeout_s: float) -> int:
    if not command:
        raise PrepareError("Pipe: command is empty")
    shown = " ".join(command)
    with part_file(dest) as tmp:
        with open(src, "rb") as fin, open(tmp, "wb") as fout, tempfile.TemporaryFile(dir=cwd) as ferr:
            try:
                proc = subprocess.Popen(
                    list(command), stdin=fin, stdout=fout, stderr=ferr, cwd=cwd, start_new_session=True
                )
            except OSError as e:
                raise PrepareError(f"Pipe {shown!r} on {src}: cannot start: {e.strerror or e}") from None
            try:
                code = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                _kill_group(proc.pid)
                proc.wait()
                raise PrepareError(f"Pipe {shown!r} on {src}: timed out after {timeout_s:g} s and was killed") from None
            finally:
                _kill_group(proc.pid)
            if code != 0:
                raise PrepareError(f"Pipe {shown!r} on {src} exited with code {code}; stderr tail:\n{_tail(ferr)}")
        size = os.path.getsize(tmp)
    _log.info("Pipe %r: %s -> %s (%d bytes)", shown, src, dest, size)
    return size


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _tail(f) -> str:
    f.seek(0, os.SEEK_END)
    size = f.tell()
    f.seek(max(0, size - _TAIL_BYTES))
    lines = f.read().decode("utf-8", "replace").rstrip().splitlines()[-_TAIL_LINES:]
    return "\n".join(lines) or "<empty>"
