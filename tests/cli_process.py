"""Running ``odf`` commands in tests: in this process through ``odf_core.cli.main`` (argument parsing, the command,
its one-line errors and exit code, at no process start-up cost), or as the real console script in a child process —
what a user's shell runs, including long-running commands (``odf serve``) stopped by a signal."""
from __future__ import annotations

import contextlib
import io
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ODF = str(Path(sys.executable).parent / "odf")


def cli_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "ODF_PROGRESS": "never"}
    env.pop("ODF_ENGINE_URL", None)
    return {**env, **(extra or {})}


@dataclass
class OdfCli:
    """Runs ``odf`` in ``cwd`` (a test's tmp_path): in a child process when ``process`` (``env`` adds variables to
    its environment), else in this process."""

    cwd: Path
    env: dict[str, str]
    process: bool = True

    def run(self, *args: str, input: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        if self.process:
            return subprocess.run([ODF, *args], cwd=self.cwd, env=cli_env(self.env), input=input,
                                  capture_output=True, text=True, timeout=timeout)
        return self._in_process(list(args), input)

    def _in_process(self, argv: list[str], input: str | None) -> subprocess.CompletedProcess[str]:
        from odf_core.cli import main

        out, err, here = io.StringIO(), io.StringIO(), os.getcwd()
        saved = {k: os.environ.get(k) for k in ("ODF_PROGRESS", "ODF_ENGINE_URL")}
        os.environ["ODF_PROGRESS"] = "never"
        os.environ.pop("ODF_ENGINE_URL", None)
        os.chdir(self.cwd)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
                    _stdin(input):
                try:
                    code = main(argv)
                except SystemExit as e:  # argparse: usage errors, --help
                    code = e.code if isinstance(e.code, int) else 1
        finally:
            os.chdir(here)
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        return subprocess.CompletedProcess(["odf", *argv], code, out.getvalue(), err.getvalue())

    def ok(self, *args: str, **kwargs) -> str:
        """The command's stdout; fails the test (with both streams) unless it exits 0 without a traceback."""
        done = self.run(*args, **kwargs)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (args, done.stdout, done.stderr)
        return done.stdout

    def error(self, *args: str, **kwargs) -> str:
        """The one-line error of a command that must fail with exit code 1 (no traceback on the console)."""
        done = self.run(*args, **kwargs)
        assert done.returncode == 1, (args, done.returncode, done.stdout, done.stderr)
        errors = [line for line in done.stderr.splitlines() if line.startswith("odf: error: ")]
        assert "Traceback" not in done.stderr and len(errors) == 1, done.stderr
        return errors[0]

    def start(self, *args: str, ready: str, timeout: float = 60) -> tuple[subprocess.Popen[str], re.Match[str]]:
        """A long-running command, once a line of its stdout matches ``ready``: the process and the match."""
        proc = subprocess.Popen([ODF, *args], cwd=self.cwd, env=cli_env(self.env), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
        deadline = time.monotonic() + timeout
        assert proc.stdout is not None
        for line in proc.stdout:  # blocks on the next line; the command prints its address when it listens
            m = re.search(ready, line)
            if m:
                return proc, m
            assert time.monotonic() < deadline, f"odf {' '.join(args)}: no line matching {ready!r} in {timeout} s"
        stop(proc)
        raise AssertionError(f"odf {' '.join(args)} ended before printing {ready!r}: {proc.stderr.read()}")


@contextlib.contextmanager
def _stdin(text: str | None):
    saved = sys.stdin
    sys.stdin = io.StringIO(text or "")
    try:
        yield
    finally:
        sys.stdin = saved


def stop(proc: subprocess.Popen[str], sig: int = signal.SIGINT, timeout: float = 30) -> int:
    """Stop a command as Ctrl-C does; its exit code."""
    if proc.poll() is None:
        os.killpg(proc.pid, sig)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=timeout)
        raise
