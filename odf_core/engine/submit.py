"""One ``spark-submit`` per request: what Airflow tasks use by default (the driver lives as long as the task).

``spark-submit`` in client mode leaves its Python driver behind when only the launcher is killed, so every job runs
in its own process group and every kill path (timeout, ``kill()`` from Airflow's ``on_kill``) kills the whole group.
The job reads the request from a file and writes the response to another (FlatBuffers, the same bytes a long-lived
engine receives over gRPC), so both paths run the same engine code.
"""
from __future__ import annotations

import collections
import logging
import os
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field

from odf_core.engine.base import Engine, EngineError, EngineTimeout, write_error_log
from odf_core.engine.local import spark_env
from odf_core.engine.protocol import EngineRequest, EngineResponse, decode_response, encode_request
from odf_core.engine import class_archive, spark_submit
from odf_core.errors import DecodeError

log = logging.getLogger("odf.engine")


def submit_script() -> str:
    """The job script shipped in the ``spark_jobs`` package."""
    return spark_submit.job_script("submit.py")


@dataclass
class SubmitEngine(Engine):
    master: str = "local[*]"
    conf: dict[str, str] = field(default_factory=dict)
    spark_submit: str = "spark-submit"
    timeout_s: float | None = None
    _proc: subprocess.Popen | None = field(default=None, repr=False)
    # kill() may come from another thread (Airflow's on_kill) while a job is starting: the lock makes it either see
    # the new process or stop the job from starting at all, never miss it.
    _killed: bool = field(default=False, repr=False, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def describe(self) -> str:
        return f"spark-submit --master {self.master}"

    def execute(self, request: EngineRequest, *, what: str = "engine request") -> EngineResponse:
        with tempfile.TemporaryDirectory(prefix="odf-submit-") as tmp:
            req_path, resp_path = os.path.join(tmp, "request.fb"), os.path.join(tmp, "response.fb")
            with open(req_path, "wb") as f:
                f.write(encode_request(request))
            self.run_job([req_path, resp_path], what=what)
            try:
                with open(resp_path, "rb") as f:
                    return decode_response(f.read())
            except (OSError, DecodeError) as e:
                raise EngineError(f"{what}: the Spark job wrote no readable response: {e}") from None

    def run_job(self, args: list[str], *, timeout_s: float | None = None, what: str = "Spark job",
                script: str | None = None) -> float:
        """Run ``spark-submit submit.py args`` (or another ``script``); the job's output is logged line by line."""
        archive = class_archive.for_driver()
        ok = False
        try:
            cmd = spark_submit.command(self.spark_submit, self.master, class_archive.with_options(self.conf, archive),
                                       script or submit_script(), args)
            duration = self._run(cmd, timeout_s, what)
            ok = True
            return duration
        finally:
            if archive is not None:
                archive.finish(ok)

    def _run(self, cmd: list[str], timeout_s: float | None, what: str) -> float:
        timeout_s = timeout_s if timeout_s is not None else self.timeout_s
        log.info("starting %s: %s", what, " ".join(cmd))
        start = time.monotonic()
        with self._lock:
            if self._killed:
                raise EngineError(f"{what} was not started: the engine was killed")
            try:
                proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                        env=spark_env(), start_new_session=True)
            except OSError as e:
                raise EngineError(f"cannot start Spark ({cmd[0]}): {e}") from None
            self._proc = proc
        output: collections.deque[str] = collections.deque(maxlen=2000)

        def pump() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                line = line.rstrip()
                output.append(line)
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
        if proc.returncode != 0:
            text = "\n".join(output)
            if "JAVA_HOME" in text or "java: not found" in text or "No Java" in text:
                raise EngineError(f"cannot start Spark: Java was not found ({output[-1] if output else ''})")
            if proc.returncode < 0:
                raise EngineError(f"{what} was killed by signal {-proc.returncode}")
            path = write_error_log(what, text)
            tail = next((line for line in reversed(output) if line.strip()), "")
            raise EngineError(f"{what} failed with exit code {proc.returncode}: {tail[:300]}"
                              + (f" (output in {path})" if path else ""))
        log.info("%s finished in %.1f s", what, duration)
        return duration

    def kill(self, grace_s: float = 5.0) -> None:
        """Terminate the running job's whole process group (SIGTERM, then SIGKILL after ``grace_s``)."""
        with self._lock:
            self._killed = True
            proc = self._proc
        if proc is not None:
            self._terminate(proc, grace_s)

    @staticmethod
    def _terminate(proc: subprocess.Popen, grace_s: float) -> None:
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
