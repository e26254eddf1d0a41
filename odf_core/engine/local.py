"""The engine in this process: one Spark session for a whole ``odf pull`` (one JVM start)."""
from __future__ import annotations

import atexit
import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from odf_core.engine import class_archive
from odf_core.engine.base import Engine, EngineError
from odf_core.engine.protocol import EngineRequest, EngineResponse
from odf_core.engine.spark_conf import DRIVER_CONF


def spark_env() -> dict[str, str]:
    """Environment for Spark's launcher and Python workers: this interpreter and its venv's ``bin`` (spark-submit)."""
    env = dict(os.environ)
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = venv_bin + os.pathsep + env.get("PATH", "")
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    return env


def driver_log_file() -> Path | None:
    """``<log dir>/spark-driver.log`` (every in-process driver appends to it; set aside as ``.log.1`` past 10 MB), or
    None when the directory cannot be made."""
    from odf_core.engine.base import log_dir, rotate_if_large

    target = log_dir() / "spark-driver.log"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    rotate_if_large(target)
    return target


def quiet_driver_log() -> dict[str, str]:
    """Spark's own log (start-up warnings included) to the driver log file instead of the console."""
    target = driver_log_file()
    if target is None:
        return {}  # nowhere to write it: Spark's default (the console) rather than no log at all
    config = Path(__file__).with_name("log4j2-driver.properties")
    return {"spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={config.as_uri()} -Dodf.spark.log={target}"}


@contextmanager
def jvm_stderr_to(path: Path | None) -> Iterator[None]:
    """The JVM that starts in this block inherits ``path`` as its stderr: what the JVM itself prints there (module
    warnings, a Java trace of a crash) lands in the log file, not on the user's console."""
    if path is None:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(path, "ab") as f:
            os.dup2(f.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _no_jvm_yet() -> bool:
    """Whether the session about to be made starts a JVM (none runs in this process: a test's, a notebook's)."""
    from pyspark import SparkContext

    return getattr(SparkContext, "_gateway", None) is None


def _write_archive(session: Any, archive: class_archive.ArchiveUse) -> None:
    """At the command's exit: stop the JVM and wait for it (it writes the class archive as it exits), then put the
    archive in place. pyspark's JVM exits when its stdin closes (it would at this process's exit anyway)."""
    ok = False
    try:
        session.stop()
        proc = getattr(type(session.sparkContext)._gateway, "proc", None)
        if proc is not None and proc.stdin is not None:
            proc.stdin.close()
            ok = proc.wait(timeout=120) == 0
    except Exception:  # noqa: BLE001 - an archive is an optimisation: never fail a command's exit over it
        ok = False
    archive.finish(ok)


@dataclass
class LocalEngine(Engine):
    master: str = "local[*]"
    conf: dict[str, str] = field(default_factory=dict)
    _session: Any = field(default=None, repr=False)

    def session(self) -> Any:
        if self._session is None:
            os.environ.update({k: v for k, v in spark_env().items()
                               if k in ("PATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")})
            try:
                from spark_jobs.session import create_session
            except ImportError:
                raise EngineError("cannot start Spark: pyspark is not installed") from None
            archive = class_archive.for_driver() if _no_jvm_yet() else None
            conf = class_archive.with_options({**DRIVER_CONF, **quiet_driver_log(), **self.conf}, archive)
            try:
                with jvm_stderr_to(driver_log_file()):
                    self._session = create_session("odf", self.master, conf)
            except Exception as e:  # noqa: BLE001 - JVM start failures surface as various exception types
                if archive is not None:
                    archive.finish(False)
                raise EngineError(f"cannot start Spark in-process: {str(e).splitlines()[0]}") from None
            if archive is not None and archive.writing is not None:
                atexit.register(_write_archive, self._session, archive)
            # This console is the user's: a failed task (bad input, a full disk) must not put Spark's ERROR log with
            # its Java stack trace there; the error comes back as one line naming the log file that holds the trace.
            self._session.sparkContext.setLogLevel("OFF")
        return self._session

    @classmethod
    def with_session(cls, spark: Any) -> "LocalEngine":
        """An engine reusing an existing session (tests, notebooks)."""
        eng = cls(master=spark.sparkContext.master)
        eng._session = spark
        return eng

    def execute(self, request: EngineRequest, *, what: str = "engine request") -> EngineResponse:
        from spark_jobs.dispatch import handle

        return handle(self.session(), request)

    def describe(self) -> str:
        return f"in-process Spark ({self.master})"
