"""The ``spark-submit`` command line of an engine process: one per request (:mod:`.submit`) or a long-lived engine
(:mod:`.serve`). Both run a script of the ``spark_jobs`` package with the driver settings every engine needs."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

from odf_core.engine.base import EngineError
from odf_core.engine.spark_conf import DRIVER_CONF


def job_script(name: str) -> str:
    """A script of the ``spark_jobs`` package (``submit.py``: one request; ``server.py``: the long-lived engine)."""
    import spark_jobs

    return str(Path(spark_jobs.__file__).parent / name)


def find_spark_submit(binary: str) -> str:
    """The ``spark-submit`` binary: on PATH or beside this Python (pyspark installs it there)."""
    found = shutil.which(binary) or shutil.which(binary, path=str(Path(sys.executable).parent))
    if not found:
        raise EngineError(f"cannot start Spark: '{binary}' was not found on PATH (install pyspark in this environment, "
                          "or name the binary: --spark-submit, or the Spark connection's extra 'spark-submit')")
    return found


def command(binary: str, master: str, conf: dict[str, str], script: str, args: list[str]) -> list[str]:
    """``spark-submit --master M --conf k=v ... SCRIPT ARGS`` (the driver settings first, ``conf`` overriding)."""
    cmd = [find_spark_submit(binary), "--master", master]
    for k, v in {**DRIVER_CONF, **conf}.items():
        cmd += ["--conf", f"{k}={v}"]
    return cmd + [script, *args]
