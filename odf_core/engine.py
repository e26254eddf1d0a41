"""Running the Spark jobs of ``spark_jobs/``: with ``spark-submit`` in a process group, or in-process.

``spark-submit`` in client mode leaves its Python driver behind when only the launcher is killed, so every job runs
in its own process group and every kill path (timeout, ``kill()`` from Airflow's ``on_kill``) kills the whole group.
"""
from __future__ import annotations

import collections
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from odf_core.errors import OdfError

log = logging.getLogger("odf.engine")

DEFAULT_CONF = {
    "spark.sql.ansi.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MILLIS",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
}


class EngineError(OdfError):
    """The engine could not run (not installed, crashed, killed, timed out)."""


class EngineTimeout(EngineError):
    pass


def job_script(name: str) -> str:
    """Path of a job script shipped in the ``spark_jobs`` package (e.g. ``ingest``)."""
    import spark_jobs

    return str(Path(spark_jobs.__file__).parent / f"{name}.py")


def spark_version() -> str:
    import pyspark

    return pyspark.__version__


@dataclass
class JobResult:
    returncode: int
    duration_s: float
    output_tail: list[str]


@dataclass
class SparkEngine:
    master: str = "local[*]"
    conf: dict[str, str] = field(default_factory=dict)
    spark_submit: str = "spark-submit"
    timeout_s: float | None = None
    _proc: subprocess.Popen | None = field(default=None, repr=False)
    _session: object | None = field(default=None, repr=False)
    # kill() may come from another thread (Airflow's on_kill) while a job is starting: the lock makes it either see
    # the new process or stop the job from starting at all, never miss it.
    _killed: bool = field(default=False, repr=False, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def effective_conf(self) -> dict[str, str]:
        return {**DEFAULT_CONF, **self.conf}

    # -- spark-submit -------------------------------------------------------------------------------------------

    def _submit_binary(self) -> str:
        exe = self.spark_submit
        found = shutil.which(exe) or shutil.which(exe, path=str(Path(sys.executable).parent))
        if not found:
            raise EngineError(
                f"cannot start Spark: '{exe}' was not found on PATH (install pyspark in this environment or set the "
                "spark-submit binary in the Spark connection)"
            )
        return found

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        venv_bin = str(Path(sys.executable).parent)
        env["PATH"] = venv_bin + os.pathsep + env.get("PATH", "")
        env.setdefault("PYSPARK_PYTHON", sys.executable)
        env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        return env

    def run_job(self, script: str, args: list[str], *, timeout_s: float | None = None, what: str = "Spark job"
                ) -> JobResult:
        """Run ``spark-submit script args``; the job's output is logged line by line as it comes."""
        cmd = [self._submit_binary(), "--master", self.master]
        for k, v in self.effective_conf().items():
            cmd += ["--conf", f"{k}={v}"]
        cmd += [script, *args]
        timeout_s = timeout_s if timeout_s is not None else self.timeout_s
        log.info("starting %s: %s", what, " ".join(cmd))
        start = time.monotonic()
        with self._lock:
            if self._killed:
                raise EngineError(f"{what} was not started: the engine was killed")
            try:
                proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                        env=self._env(), start_new_session=True)
            except OSError as e:
                raise EngineError(f"cannot start Spark ({cmd[0]}): {e}") from None
            self._proc = proc
        tail: collections.deque[str] = collections.deque(maxlen=60)

        def pump():
            assert proc.stdout is not None
            for line in proc.stdout:
                line = line.rstrip()
                tail.append(line)
                log.info("[spark] %s", line)

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self._terminate(proc, 5.0)
            reader.join(timeout=5)
            raise EngineTimeout(f"{what} timed out after {timeout_s:g} s; its process group was killed") from None
        finally:
            self._proc = None
        reader.join(timeout=5)
        duration = time.monotonic() - start
        result = JobResult(proc.returncode, duration, list(tail))
        if proc.returncode != 0:
            text = "\n".join(tail)
            if "JAVA_HOME" in text or "java: not found" in text or "No Java" in text:
                raise EngineError(f"cannot start Spark: Java was not found ({tail[-1] if tail else ''})")
            if proc.returncode < 0:
                raise EngineError(f"{what} was killed by signal {-proc.returncode}")
            raise EngineError(f"{what} failed with exit code {proc.returncode}: " + " | ".join(list(tail)[-5:]))
        log.info("%s finished in %.1f s", what, duration)
        return result

    def kill(self, grace_s: float = 5.0) -> None:
        """Terminate the running job's whole process group (SIGTERM, then SIGKILL after ``grace_s``); no job starts
        on this engine afterwards."""
        with self._lock:
            self._killed = True
            proc = self._proc
        if proc is not None:
            self._terminate(proc, grace_s)

    @staticmethod
    def _terminate(proc: subprocess.Popen, grace_s: float) -> None:
        """SIGTERM the job's process group, SIGKILL it after ``grace_s``."""
        if proc.poll() is not None:
            return
        try:
            pgid = os.getpgid(proc.pid)
        except ProcessLookupError:
            return
        for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, grace_s)):
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                return
            try:
                proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        # the launcher may be gone while the driver still runs in the group: make sure nothing survives
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    # -- in-process ---------------------------------------------------------------------------------------------

    def session(self):
        """A SparkSession in this process (one JVM start for a whole ``odf pull``)."""
        if self._session is None:
            os.environ.update({k: v for k, v in self._env().items() if k in ("PATH", "PYSPARK_PYTHON",
                                                                              "PYSPARK_DRIVER_PYTHON")})
            try:
                from pyspark.sql import SparkSession
            except ImportError:
                raise EngineError("cannot start Spark: pyspark is not installed") from None
            builder = SparkSession.builder.master(self.master).appName("odf")
            for k, v in self.effective_conf().items():
                builder = builder.config(k, v)
            try:
                self._session = builder.getOrCreate()
                self._session.sparkContext.setLogLevel("ERROR")
            except Exception as e:  # JVM start failures surface as various exception types
                raise EngineError(f"cannot start Spark in-process: {str(e).splitlines()[0]}") from None
        return self._session

    @classmethod
    def with_session(cls, spark) -> "SparkEngine":
        """An engine reusing an existing session (tests, notebooks)."""
        eng = cls(master=spark.sparkContext.master)
        eng._session = spark
        return eng
