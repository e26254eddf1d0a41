"""Which engine ran a transformation: what it computes (its semantics) apart from which bytes of code it is.

A derivative records ``Transform::Sql.version`` when its transform is set, e.g. ``spark-4.2.0+sem-1+jobs-4b42…``:

- ``spark-4.2.0``: the pyspark release; its major.minor is part of the semantics (a Spark upgrade can change results);
- ``sem-1``: :data:`SEMANTICS`, declared by the developers and bumped only when the output of some query can change
  (a new rounding of exact sums, a different NULL order, a changed function) — see docs/upgrading.md;
- ``jobs-…``: a digest of the transform engine's code, kept for provenance; it never blocks a run on its own.

A run goes ahead when the recorded and the running engine have the same :attr:`EngineVersion.semantics_key`; otherwise
the operator chooses, and the choice is a new ``SetTransform`` in the chain (``odf set-transform --upgrade-engine``).
Strings written before this policy (``spark-4.2.0+jobs-…``, no ``sem-``) count as semantics 1, the semantics of the
build that introduced it.

No JVM and no pyspark import here: the CLI and Airflow's parser call it cheaply.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

#: The engine's declared semantics. Bump it (and say why in docs/upgrading.md's table) when a query's output can change.
SEMANTICS = 1

#: The engine code a transformation's result depends on (relative to the ``spark_jobs`` package): the digest's input.
TRANSFORM_CODE = ("transform", "columns.py", "parquet_files.py", "session.py", "errors.py", "sql_gate.py",
                  "sql_steps.py")

_TEXT = re.compile(r"spark-(?P<spark>(?P<major>\d+)\.(?P<minor>\d+)[^+]*)"
                   r"(?:\+sem-(?P<sem>\d+))?(?:\+jobs-(?P<code>[0-9a-f]+))?")


@dataclass(frozen=True)
class EngineVersion:
    spark: str
    semantics: int
    code: str | None = None

    @property
    def semantics_key(self) -> str:
        """What the engine computes: ``spark-4.2/sem-1`` (Spark's major.minor and the declared semantics)."""
        major, minor = self.spark.split(".")[:2]
        return f"spark-{major}.{minor}/sem-{self.semantics}"

    def text(self) -> str:
        return f"spark-{self.spark}+sem-{self.semantics}" + (f"+jobs-{self.code}" if self.code else "")

    @staticmethod
    def parse(text: str | None) -> "EngineVersion | None":
        """The version recorded in a transform; None for a string of another engine (e.g. the reference's)."""
        m = _TEXT.fullmatch((text or "").strip())
        if m is None:
            return None
        return EngineVersion(m["spark"], int(m["sem"]) if m["sem"] else 1, m["code"])


@cache
def engine_version() -> str:
    """This installation's engine: ``spark-<pyspark version>+sem-<SEMANTICS>+jobs-<digest of the engine's code>``."""
    from importlib import metadata  # here: ~6 ms of imports that a command against a warm engine does not need

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
    return EngineVersion(spark, SEMANTICS, digest.hexdigest()[:16]).text()


def running_engine_version(engine: Any) -> str:
    """The version of the engine that will run a request: a long-lived engine says it in its health answer (it may
    be another build than this client); otherwise the engine runs this installation's code."""
    health = getattr(engine, "health", None)
    if callable(health):
        try:
            return str(health().engine_version)
        except Exception:  # noqa: BLE001 - an unreachable engine fails the request itself, with its own message
            pass
    return engine_version()


def same_semantics(recorded: str | None, running: str) -> bool:
    """Whether a transform recorded for ``recorded`` runs unchanged on ``running`` (no version recorded: yes)."""
    if not recorded:
        return True
    a, b = EngineVersion.parse(recorded), EngineVersion.parse(running)
    return a is not None and b is not None and a.semantics_key == b.semantics_key


def describe(version: str | None) -> str:
    """``spark-4.2/sem-1`` for our versions, the text itself for another engine's."""
    v = EngineVersion.parse(version)
    return v.semantics_key if v is not None else repr(version or "")
