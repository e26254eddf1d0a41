"""A Spark standalone cluster for tests: one master and one worker started from the installed pyspark on loopback.

The master and the worker run in their own process group each (the worker's executors inherit it), so stopping the
cluster kills every JVM it started; :meth:`SparkCluster.leftovers` lists what ``ps`` still shows of them. Readiness
and exits are awaited on the processes' own output and on pidfds, never by sleeping.
"""
from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spark_class() -> str:
    return str(Path(sys.executable).parent / "spark-class")


def wait_gone(pids: list[int], timeout_s: float) -> list[int]:
    """Wait until the processes (not necessarily our children) have exited; returns those still alive."""
    fds = {}
    for pid in pids:
        try:
            fds[os.pidfd_open(pid)] = pid
        except ProcessLookupError:
            continue
    alive = set(fds.values())
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN)
    deadline = time.monotonic() + timeout_s
    try:
        while alive and time.monotonic() < deadline:
            for fd, _ in poller.poll(max(0.0, deadline - time.monotonic()) * 1000):
                poller.unregister(fd)
                alive.discard(fds[fd])
    finally:
        for fd in fds:
            os.close(fd)
    return sorted(alive)


def processes() -> list[tuple[int, int, str]]:
    """(pid, process group, command line) of every running process, as ``ps`` shows them (zombies, already dead and
    only waiting for their parent to reap them, are left out)."""
    out = subprocess.run(["ps", "-eo", "pid=,pgid=,stat=,args="], capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        pid, pgid, stat, *args = line.split(None, 3)
        if not stat.startswith("Z"):
            rows.append((int(pid), int(pgid), args[0] if args else ""))
    return rows


@dataclass
class _Daemon:
    """One JVM of the cluster; its output goes to a log file, and ``ready`` is set once ``marker`` was printed."""

    name: str
    proc: subprocess.Popen
    log: Path
    marker: str
    ready: threading.Event = field(default_factory=threading.Event)
    ended: threading.Event = field(default_factory=threading.Event)

    def pump(self) -> None:
        assert self.proc.stdout is not None
        with open(self.log, "w", encoding="utf-8") as f:
            for line in self.proc.stdout:
                f.write(line)
                f.flush()
                if self.marker in line:
                    self.ready.set()
        self.ended.set()
        self.ready.set()  # wake the waiter: the process ended before it was ready

    def wait_ready(self, timeout_s: float) -> None:
        if not self.ready.wait(timeout_s) or (self.ended.is_set() and self.proc.poll() is not None):
            tail = self.log.read_text(encoding="utf-8")[-3000:] if self.log.exists() else ""
            raise RuntimeError(f"Spark {self.name} did not start (exit code {self.proc.poll()}):\n{tail}")


@dataclass
class SparkCluster:
    master_url: str  # spark://127.0.0.1:PORT
    host: str
    port: int
    web_url: str
    work_dir: Path  # the worker's directory: one app-* folder per application that got executors
    daemons: list[_Daemon]

    def applications(self) -> list[str]:
        """Ids of the applications that ran executors on the worker, oldest first."""
        return sorted(p.name for p in self.work_dir.glob("app-*"))

    def executor_logs(self, app_id: str) -> list[str]:
        logs = sorted(self.work_dir.glob(f"{app_id}/*/stderr"))
        return [p.read_text(encoding="utf-8", errors="replace") for p in logs]

    def master_state(self) -> dict:
        with urllib.request.urlopen(f"{self.web_url}/json/", timeout=30) as r:
            return json.load(r)

    def assert_jobs_ended(self, app_ids: list[str], timeout_s: float = 60) -> None:
        """The drivers sent to this cluster (``--master <url>``) and the executors of ``app_ids`` have all ended."""
        mine = [pid for pid, _, args in processes()
                if f"--master {self.master_url}" in args or f"spark.master={self.master_url}" in args
                or any(f"--app-id {a}" in args for a in app_ids)]
        alive = wait_gone(mine, timeout_s)
        assert alive == [], [args for pid, _, args in processes() if pid in alive]

    def pids(self) -> list[int]:
        return [d.proc.pid for d in self.daemons]

    def leftovers(self) -> list[str]:
        """Processes still alive of the cluster's process groups (master, worker, executors)."""
        groups = set(self.pids())
        return [f"{pid} {args[:200]}" for pid, pgid, args in processes() if pgid in groups]

    def stop(self, timeout_s: float = 60) -> None:
        """SIGTERM every process group of the cluster, SIGKILL what is left after ``timeout_s``."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            members = [pid for pid, pgid, _ in processes() if pgid in set(self.pids())]
            for pgid in self.pids():
                try:
                    os.killpg(pgid, sig)
                except ProcessLookupError:
                    pass
            for d in self.daemons:
                try:
                    d.proc.wait(timeout=timeout_s)
                except subprocess.TimeoutExpired:
                    pass
            if not wait_gone(members, timeout_s):
                break
        for d in self.daemons:
            d.ended.wait(timeout_s)


def start_spark_cluster(base: Path, *, cores: int = 2, memory: str = "2g", timeout_s: float = 180) -> SparkCluster:
    """Start a master and a worker on 127.0.0.1 with their logs and the worker directory under ``base``."""
    port, web = free_port(), free_port()
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOG_DIR": str(base),
           "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")}
    work = base / "work"
    work.mkdir(parents=True, exist_ok=True)
    master_url = f"spark://127.0.0.1:{port}"
    commands = {
        "master": ([spark_class(), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port",
                    str(port), "--webui-port", str(web)], "I have been elected leader"),
        "worker": ([spark_class(), "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores",
                    str(cores), "--memory", memory, "--work-dir", str(work), "--webui-port", "0", master_url],
                   "Successfully registered with master"),
    }
    daemons: list[_Daemon] = []
    cluster = SparkCluster(master_url, "spark://127.0.0.1", port, f"http://127.0.0.1:{web}", work, daemons)
    try:
        for name, (cmd, marker) in commands.items():
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                                    cwd=base, start_new_session=True)
            daemon = _Daemon(name, proc, base / f"{name}.log", marker)
            daemons.append(daemon)
            threading.Thread(target=daemon.pump, daemon=True, name=f"spark-{name}-log").start()
            daemon.wait_ready(timeout_s)
    except BaseException:
        cluster.stop()
        raise
    return cluster
