"""The identity of our Spark engine, recorded in ``Transform::Sql.version`` so results stay reproducible."""
from __future__ import annotations

import hashlib
from functools import cache
from importlib import metadata
from pathlib import Path


@cache
def engine_version() -> str:
    """``spark-<pyspark version>+jobs-<digest of the transform job's code>``, cheap (no JVM, no pyspark import)."""
    import spark_jobs

    code = (Path(spark_jobs.__file__).parent / "transform.py").read_bytes()
    try:
        spark = metadata.version("pyspark")
    except metadata.PackageNotFoundError:
        spark = "unknown"
    return f"spark-{spark}+jobs-{hashlib.sha3_256(code).hexdigest()[:16]}"
