"""The identity of our Spark engine, recorded in ``Transform::Sql.version`` so results stay reproducible."""
from __future__ import annotations

import hashlib
from functools import cache
from importlib import metadata
from pathlib import Path

#: The engine code a transformation's result depends on (relative to the ``spark_jobs`` package).
TRANSFORM_CODE = ("transform", "columns.py", "parquet_files.py", "session.py", "errors.py")


@cache
def engine_version() -> str:
    """``spark-<pyspark version>+jobs-<digest of the transform engine's code>``, cheap (no JVM, no pyspark import)."""
    import spark_jobs

    root = Path(spark_jobs.__file__).parent
    digest = hashlib.sha3_256()
    for entry in TRANSFORM_CODE:
        p = root / entry
        for f in sorted(p.rglob("*.py")) if p.is_dir() else [p]:
            digest.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
    try:
        spark = metadata.version("pyspark")
    except metadata.PackageNotFoundError:
        spark = "unknown"
    return f"spark-{spark}+jobs-{digest.hexdigest()[:16]}"
