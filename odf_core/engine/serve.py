"""``odf engine serve``: the long-lived engine, started through spark-submit and supervised in the foreground.

spark-submit runs in a session of its own so a Ctrl-C in the terminal reaches only this launcher; the launcher then
asks the engine's Python driver to drain (SIGTERM), waits for it, and exits with its exit code. Ready is announced
when the port accepts TCP (the spec's readiness rule).

The security settings (:class:`Guard`: token, TLS, Unix socket, allowed roots, request timeout) are checked here
before Spark starts, so a refused setting costs no JVM; the engine checks them again itself.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

from odf_core.engine import class_archive
from odf_core.engine.base import EngineError
from odf_core.engine.credentials import ServeConfigError, ServerSecurity, listen_problem
from odf_core.engine.local import spark_env
from odf_core.engine import spark_submit as _spark_submit
from odf_core.engine.spark_submit import command as spark_submit_command


def server_script() -> str:
    return _spark_submit.job_script("server.py")


@dataclass(frozen=True)
class Guard:
    """``odf engine serve``'s security flags, passed on to the engine's driver as the same flags (files by path:
    no secret on a command line)."""

    token_file: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_client_ca: str | None = None
    socket_path: str | None = None
    allow_paths: tuple[str, ...] = field(default_factory=tuple)
    request_timeout_s: float | None = None
    insecure: bool = False

    def check(self, host: str) -> ServerSecurity:
        """The loaded security settings; :class:`ServeConfigError` (one line) when the engine must not start."""
        from odf_core.engine.confinement import AllowedRoots

        security = ServerSecurity.load(token_file=self.token_file, tls_cert=self.tls_cert, tls_key=self.tls_key,
                                       tls_client_ca=self.tls_client_ca)
        try:
            AllowedRoots.parse(self.allow_paths)
        except EngineError as e:
            raise ServeConfigError(str(e)) from None
        if self.socket_path and not os.path.isdir(os.path.dirname(os.path.abspath(self.socket_path))):
            raise ServeConfigError(f"--socket {self.socket_path}: its directory does not exist")
        problem = None if self.socket_path else listen_problem(host, security, insecure=self.insecure)
        if problem:
            raise ServeConfigError(problem)
        return security

    def argv(self) -> list[str]:
        out: list[str] = []
        for flag, value in (("--token-file", self.token_file), ("--tls-cert", self.tls_cert),
                            ("--tls-key", self.tls_key), ("--tls-client-ca", self.tls_client_ca),
                            ("--socket", self.socket_path)):
            if value:
                out += [flag, os.path.abspath(value)]
        for root in self.allow_paths:
            out += ["--allow-path", root if "://" in root else os.path.abspath(root)]
        if self.request_timeout_s is not None:
            out += ["--request-timeout", str(self.request_timeout_s)]
        return out + (["--insecure"] if self.insecure else [])


def command(*, host: str, port: int, master: str, conf: dict[str, str], max_concurrency: int,
            spark_submit: str, pid_file: str, drain_s: float = 30.0, guard: Guard = Guard(),
            idle_exit_s: float | None = None) -> list[str]:
    idle = ["--idle-exit", str(idle_exit_s)] if idle_exit_s else []
    return spark_submit_command(spark_submit, master, conf, server_script(), [
        "--host", host, "--port", str(port), "--max-concurrency", str(max_concurrency), "--drain-s", str(drain_s),
        "--pid-file", pid_file, *idle, *guard.argv()])


def wait_ready(host: str, port: int, proc: subprocess.Popen, timeout_s: float = 120.0,
               socket_path: str | None = None) -> bool:
    """True once the port (or the Unix socket) accepts connections; False if the engine process ended first or the
    time ran out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if socket_path:
                with socket.socket(socket.AF_UNIX) as s:
                    s.settimeout(0.5)
                    s.connect(socket_path)
            else:
                with socket.create_connection((host, port), timeout=0.5):
                    pass
            return True
        except OSError:
            time.sleep(0.2)
    return False


def serve(*, host: str, port: int, master: str, conf: dict[str, str], max_concurrency: int,
          spark_submit: str = "spark-submit", drain_s: float = 30.0, guard: Guard = Guard(),
          idle_exit_s: float | None = None, pid_file: str | None = None) -> int:
    """``idle_exit_s``: the engine stops after that long without a request; ``pid_file``: where the engine's driver
    (the process serving the calls, which SIGTERM drains) writes its pid once it listens."""
    security = guard.check(host)  # before any JVM: a refused setting is a quick one-line error
    if idle_exit_s is not None and idle_exit_s < 0:
        raise ServeConfigError(f"--idle-exit {idle_exit_s:g}: expected seconds >= 0 (0: never)")
    with tempfile.TemporaryDirectory(prefix="odf-engine-") as tmp:
        pid_file = os.path.abspath(pid_file) if pid_file else os.path.join(tmp, "driver.pid")
        if os.path.lexists(pid_file):  # an earlier engine's: the stop handler below must not signal its pid
            os.remove(pid_file)
        # the class archive fresh drivers wrote, if there is one: the engine (and an auto engine after each idle exit)
        # starts ~3 s sooner; it never writes one itself (see class_archive.for_driver)
        conf = class_archive.with_options(conf, class_archive.for_driver(write=False))
        cmd = command(host=host, port=port, master=master, conf=conf, max_concurrency=max_concurrency,
                      spark_submit=spark_submit, pid_file=pid_file, drain_s=drain_s, guard=guard,
                      idle_exit_s=idle_exit_s)
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
        if guard.socket_path:
            url = f"unix://{os.path.abspath(guard.socket_path)}"
        else:
            url = f"{'grpcs' if security.tls else 'grpc'}://{connect_host}:{port}"
        if wait_ready(connect_host, port, proc, socket_path=guard.socket_path):
            print(f"odf engine ready at {url} (Spark master {master}); stop with Ctrl-C",
                  file=sys.stderr, flush=True)
        code = proc.wait()
        return 0 if code in (0, -signal.SIGTERM) else code
