"""``odf engine serve``: the long-lived engine, started through spark-submit and supervised in the foreground.

spark-submit runs in a session of its own so a Ctrl-C in the terminal reaches only this launcher; the launcher then
asks the engine's Python driver to drain (SIGTERM), waits for it, and exits with its exit code. Ready is announced
when the port accepts TCP (the spec's readiness rule).
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from odf_core.engine.base import EngineError
from odf_core.engine.local import spark_env
from odf_core.engine.spark_conf import DRIVER_CONF


def server_script() -> str:
    import spark_jobs

    return str(Path(spark_jobs.__file__).parent / "server.py")


def command(*, host: str, port: int, master: str, conf: dict[str, str], max_concurrency: int,
            spark_submit: str, pid_file: str, drain_s: float = 30.0) -> list[str]:
    import shutil

    exe = shutil.which(spark_submit) or shutil.which(spark_submit, path=str(Path(sys.executable).parent))
    if not exe:
        raise EngineError(f"cannot start the engine: '{spark_submit}' was not found on PATH")
    cmd = [exe, "--master", master]
    for k, v in {**DRIVER_CONF, **conf}.items():
        cmd += ["--conf", f"{k}={v}"]
    return cmd + [server_script(), "--host", host, "--port", str(port), "--max-concurrency", str(max_concurrency),
                  "--drain-s", str(drain_s), "--pid-file", pid_file]


def wait_ready(host: str, port: int, proc: subprocess.Popen, timeout_s: float = 120.0) -> bool:
    """True once the port accepts TCP; False if the engine process ended first or the time ran out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.2)
    return False


def serve(*, host: str, port: int, master: str, conf: dict[str, str], max_concurrency: int,
          spark_submit: str = "spark-submit", drain_s: float = 30.0) -> int:
    with tempfile.TemporaryDirectory(prefix="odf-engine-") as tmp:
        pid_file = os.path.join(tmp, "driver.pid")
        cmd = command(host=host, port=port, master=master, conf=conf, max_concurrency=max_concurrency,
                      spark_submit=spark_submit, pid_file=pid_file, drain_s=drain_s)
        # spark-submit runs the Python driver with its stderr merged into the JVM's stdout: the engine's log (one
        # line per request) would land on stdout, so everything the engine prints goes to our stderr
        proc = subprocess.Popen(cmd, env=spark_env(), start_new_session=True, stdout=sys.stderr)

        def stop(_signum: int, _frame: object) -> None:
            try:
                with open(pid_file) as f:
                    os.kill(int(f.read().strip()), signal.SIGTERM)  # the driver drains, then Spark stops
            except (OSError, ValueError):
                os.killpg(proc.pid, signal.SIGTERM)  # not up yet: stop it all

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        connect_host = "127.0.0.1" if host in ("0.0.0.0", "::") else host
        if wait_ready(connect_host, port, proc):
            print(f"odf engine ready at grpc://{connect_host}:{port} (Spark master {master}); stop with Ctrl-C",
                  file=sys.stderr, flush=True)
        code = proc.wait()
        return 0 if code in (0, -signal.SIGTERM) else code
