"""One reader per ODF ``ReadStep`` kind, behind one function: :func:`read_input`.

Each reader turns one prepared file into a (lazy) DataFrame and a :class:`SourceInfo` that explains how to find the
first bad record when Spark's FAILFAST parse fails later (see :mod:`spark_jobs.ingest.diagnose`). A DDL ``schema``
coerces values for every format; values that do not fit are errors, not nulls.
"""
from __future__ import annotations

import codecs
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from typing import Any, Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from odf_core.engine.protocol import IngestInputFile
from odf_core.metadata.ddl import spark_ddl
from spark_jobs.columns import parse_ddl
from spark_jobs.errors import InputRejected


@dataclass
class SourceInfo:
    """What is needed to explain a parse failure of one file Spark read: where, how, and how records are counted."""

    display_path: str  # what the user knows the file by
    spark_path: str  # what Spark read (the file itself, or an NDJSON conversion of it)
    fmt: str  # "csv" | "json" | "other"
    options: dict[str, str] = field(default_factory=dict)
    schema: StructType | None = None
    encoding: str = "utf-8"
    numbering: str = "line"  # "line": physical line of display_path; "record": n-th record in it


class WorkDir:
    """A scratch directory for part files and converted inputs; removed when the request ends."""

    def __init__(self, parent: str | None):
        if parent:
            os.makedirs(parent, exist_ok=True)
        self.root = tempfile.mkdtemp(prefix=".odf-engine-", dir=parent)
        self._n = 0

    def path(self, name: str) -> str:
        self._n += 1
        return os.path.join(self.root, f"{self._n:03d}-{name}")

    def cleanup(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


Reader = Callable[[SparkSession, Any, IngestInputFile, WorkDir], "tuple[DataFrame, SourceInfo]"]
_READERS: dict[type, Reader] = {}


def reader(step_type: type) -> Callable[[Reader], Reader]:
    """Register the reader of one ReadStep kind."""

    def register(fn: Reader) -> Reader:
        _READERS[step_type] = fn
        return fn

    return register


def schema_of(step: Any) -> StructType | None:
    """The step's DDL schema (``schema: ["a INT", ...]``), parsed by Spark (double-quoted names made Spark's)."""
    cols = getattr(step, "schema", None)
    return parse_ddl(", ".join(spark_ddl(c) for c in cols), "readStep.schema") if cols else None


def encoding_of(name: str | None) -> str:
    if not name:
        return "utf-8"
    try:
        return codecs.lookup(name).name
    except LookupError:
        raise InputRejected(f"readStep.encoding: unknown encoding {name!r}") from None


def time_format_options(step: Any) -> dict[str, str]:
    opts = {}
    for attr, key in (("date_format", "dateFormat"), ("timestamp_format", "timestampFormat")):
        v = getattr(step, attr, None)
        if v and v.lower() != "rfc3339":  # rfc3339 = Spark's default ISO-8601 parsing
            opts[key] = v
    return opts


def check_encoding(inp: IngestInputFile, encoding: str, chunk_bytes: int = 16 << 20) -> None:
    """Text inputs must decode in their declared encoding: Spark would silently replace bad bytes with U+FFFD.
    One streaming pass with Python's codec (C speed); the error names the line of the first bad byte."""
    decoder = codecs.getincrementaldecoder(encoding)(errors="strict")
    newline = None if codecs.lookup(encoding).name.startswith(("utf-16", "utf-32")) else "\n".encode(encoding)
    line, consumed = 1, 0
    with open(inp.path, "rb") as f:
        while True:
            chunk = f.read(chunk_bytes)
            try:
                decoder.decode(chunk, final=not chunk)
            except UnicodeDecodeError as e:
                start = max(e.start, 0)
                bad = chunk[start:start + 4]
                if newline is None:
                    raise InputRejected(f"cannot read {inp.display_name}: byte {consumed + start}: bytes {bad!r} are "
                                        f"not valid {encoding} text (set the read step's encoding)",
                                        file=inp.display_name) from None
                line += chunk[:start].count(newline)
                raise InputRejected(f"cannot read {inp.display_name}: line {line}: bytes {bad!r} are not valid "
                                    f"{encoding} text (set the read step's encoding)", file=inp.display_name,
                                    line=line) from None
            if not chunk:
                return
            line += chunk.count(newline) if newline else 0
            consumed += len(chunk)


def read_input(spark: SparkSession, step: Any, inp: IngestInputFile, work: WorkDir) -> tuple[DataFrame, SourceInfo]:
    """Read one prepared file with its ODF read step (FAILFAST: malformed values raise when Spark runs)."""
    if not os.path.exists(inp.path):
        raise InputRejected(f"input file not found: {inp.display_name}", file=inp.display_name)
    _load_readers()
    fn = _READERS.get(type(step))
    if fn is None:
        raise InputRejected(f"read step {type(step).KIND} is not supported by the Spark engine")
    return fn(spark, step, inp, work)


def _load_readers() -> None:
    from spark_jobs.ingest.readers import csv, geojson, json, parquet, shapefile  # noqa: F401
