"""The engine in this process: one Spark session for a whole ``odf pull`` (one JVM start)."""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
            try:
                self._session = create_session("odf", self.master, {**DRIVER_CONF, **self.conf})
            except Exception as e:  # noqa: BLE001 - JVM start failures surface as various exception types
                raise EngineError(f"cannot start Spark in-process: {str(e).splitlines()[0]}") from None
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
