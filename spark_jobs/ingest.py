"""Spark data plane of root-dataset ingestion: read prepared files, preprocess them, merge them into a data slice.

The coordinator (``odf_core``) plans an ingest transaction, writes a request file, runs
``spark-submit spark_jobs/ingest.py REQUEST.json`` (or calls :func:`run_request` in-process with its own
SparkSession), reads the response file, hashes the output and commits the block. This file is self-contained: it
imports only pyspark, the pyarrow/numpy that ``pyspark[sql]`` brings along (used on the driver to combine Spark's
part files into the single parquet file ODF needs) and the standard library, so it runs unchanged on any Spark
installation. All paths must be visible to the driver's file system (local disk or a shared mount).

Request (JSON)
--------------
ODF fragments use the ODF camelCase YAML form; ``kind`` and enum names are accepted as PascalCase, camelCase or
lowercase (RFC-013)::

    {"phases": ["read", "merge"],                 # either or both, in this order
     "dataset": "my.dataset",                     # optional, only used in messages
     "vocab": {"offsetColumn": "offset", "operationTypeColumn": "op",      # optional, ODF DatasetVocabulary;
               "systemTimeColumn": "system_time", "eventTimeColumn": "event_time"},  # may also sit in "merge"
     "read": {"inputs": [{"path": "/staging/x/prepared/0.csv",
                          "eventTime": "2024-01-01T00:00:00Z" | null,     # source time: fills a missing event time
                          "sourceName": "default"}],                       # optional, messages only
              "readStep": {...ODF ReadStep...},
              "preprocess": {...ODF Transform::Sql, engine spark...} | null,
              "outputPath": "/staging/x/read.parquet" | null},  # required if "merge" is not in phases; when both
                                                                # phases run and it is null the rows go straight
                                                                # into the merge (fastest)
     "merge": {"inputPath": "/staging/x/read.parquet",          # only when "read" is not in phases
               "strategy": {...ODF MergeStrategy...},
               "prevOffset": 41 | null,
               "systemTime": "2024-01-02T00:00:00Z",
               "prevCheckpointPath": "/ds/checkpoints/f16..." | null,  # written by the previous ingest (see below)
               "prevDataPaths": ["/ds/data/f16...", ...],         # read only when there is no usable checkpoint
               "prevSchemaDdl": "offset BIGINT, op INT, ..." | null,  # optional previous data schema, as Spark DDL
               "prevSchemaPath": "/ds/data/f16..." | null,           # ... or as any previous slice (footer only)
               "outputPath": "/staging/x/slice.parquet",
               "newCheckpointPath": "/staging/x/checkpoint.parquet"},
     "workDir": "/staging/x" | null,            # optional parent of the scratch directory (default: next to outputs)
     "responsePath": "/staging/x/response.json"}

Per input file the read step runs, then ``preprocess`` (over a temp view named ``input``; ``queries`` steps each
register a view named by ``alias``, the step without alias is the result), then the event time is filled in; the
per-file results are unioned by column name, in input order. The read output file holds these rows plus a hidden
boolean column ``__odf_event_time_from_source`` (true where the event time was filled in from the source time):
Snapshot needs it because a filled-in time must not count as a change of the row.

``run_request`` sets the three SQL settings below on the given session for the duration of the call and restores
them afterwards; one session must not run two requests at the same time (temp views, settings).

Response (JSON)
---------------
``{"status": "Success",
   "read": {"numRecords": n, "schema": ["event_time TIMESTAMP", "id BIGINT", ...]},
   "merge": {"numRecords": n, "offsetInterval": {"start": a, "end": b} | null, "maxEventTime": "...Z" | null,
             "checkpointWritten": bool}}``
or ``{"status": "InvalidInput", "message": "...", "file": "...", "line": n | "record": n}`` (file/line/record when
known) or ``{"status": "InternalError", "message": "...", "backtrace": "..."}``. ``main`` exits 0 whenever it
wrote a response, also for InvalidInput.

Output slice
------------
One parquet file: ``offset`` int64 (not null), ``op`` int32 (not null), ``system_time`` timestamp(ms, UTC)
(not null), ``event_time`` timestamp(ms, UTC) or date, then the data columns in their order; every top-level
timestamp column is timestamp(ms, UTC); names from the vocabulary. No rows -> no file. Offsets are consecutive from
``prevOffset + 1`` after sorting: Append/Ledger by event time (nulls first, ties keep input order), Snapshot by
primary key then op.

Checkpoint (one parquet file, written only when the slice has rows and the strategy keeps state)
-----------------------------------------------------------------------------------------------
Key-value metadata ``odf.spark-ingest.checkpoint`` = ``{"version": 1, "strategy": "Ledger"|"Snapshot",
"primaryKey": [...]}`` (plus Spark's own schema key, so reading it back needs no schema-inference job).
- Ledger: the primary-key columns, one row per key ever ingested (in first-seen order).
- Snapshot: the current state, i.e. the latest row per key whose last op was +A/+C: event-time column then the data
  columns, one row per key (row order is not part of the format: the Spark plan writes it by key, the driver plan in
  the order of the latest snapshot).
A checkpoint written for another strategy or key is not used; the state is then rebuilt from ``prevDataPaths``.

Formats: Csv, Json (``subPath``), NdJson, GeoJson, NdGeoJson (properties become columns, ``geometry`` a GeoJSON
string column), Parquet, EsriShapefile (zip, directory or .shp; point, multipoint, polyline and polygon shapes with
optional Z/M, geometry as a GeoJSON string; dbf C/N/F/D/L fields, blank values read as null). A DDL ``schema``
coerces values for every format; values that do not fit are errors, not nulls. Only top-level timestamp columns are
normalized (nested ones are written as Spark writes them).

How it stays fast: while the parsed input (plus the seen keys or the state) fits ``DRIVER_MERGE_BYTES`` (env
``ODF_INGEST_DRIVER_MERGE_BYTES``, default 512 MiB) and has no nested types, Spark parses in parallel and ships the
rows to the driver as Arrow (the "collect plan"); pyarrow then sorts them by event time only if they are not already
in order, decides which rows Ledger keeps (one hash pass over the keys, a counting pass for dense integer keys) or
what Snapshot emits (a hash join on the keys against the checkpointed state), and writes the slice and checkpoint
once, adding offsets and the system time. Beyond that limit Spark writes part files in parallel (and does the Ledger
and Snapshot work itself: in one partition up to ``SMALL_MERGE_BYTES``, no shuffles; else in parallel) and the
driver concatenates them with pyarrow in one streaming pass.
"""
from __future__ import annotations

import codecs
import csv
import fnmatch
import functools
import glob
import json
import operator
import os
import re
import shutil
import struct
import sys
import tempfile
import traceback
import uuid
import zipfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from typing import Any, Callable, Iterable, Iterator, Sequence
from urllib.parse import unquote

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

SPARK_SQL_CONF: dict[str, str] = {
    "spark.sql.ansi.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MILLIS",
}
CHECKPOINT_META_KEY = b"odf.spark-ingest.checkpoint"
SPARK_SCHEMA_META_KEY = b"org.apache.spark.sql.parquet.row.metadata"  # Spark's own schema, kept in our files
CHECKPOINT_VERSION = 1
_DUP_MARK = "ODF_DUPLICATE_PRIMARY_KEY:"
_CORRUPT = "__odf_corrupt_record"
_ROW_ID = "__odf_row_id"
_DEST = "__odf_dest"
_SEQ = "__odf_seq"
_ET_FILLED = "__odf_event_time_from_source"  # true where the event time came from the source, not the data
_HIDDEN = (_ROW_ID, _ET_FILLED)
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_ROW_GROUP_ROWS = 1 << 20
# Up to this much parquet input (new rows + state) the merge runs in one partition: no shuffles, no sampling job.
SMALL_MERGE_BYTES = 32 << 20
_BATCH_ROWS = 1 << 17


# ----------------------------------------------------------------------------------------------------------------
# Errors and responses
# ----------------------------------------------------------------------------------------------------------------


class InvalidInput(Exception):
    """Bad request, bad data or bad configuration: reported to the user, never a stack trace."""

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None,
                 record: int | None = None):
        super().__init__(message)
        self.message, self.file, self.line, self.record = message, file, line, record

    def to_response(self) -> dict[str, Any]:
        resp: dict[str, Any] = {"status": "InvalidInput", "message": self.message}
        if self.file is not None:
            resp["file"] = self.file
        if self.line is not None:
            resp["line"] = self.line
        if self.record is not None:
            resp["record"] = self.record
        return resp


def internal_error_response(exc: BaseException) -> dict[str, Any]:
    return {"status": "InternalError", "message": f"{type(exc).__name__}: {_first_line(str(exc))}",
            "backtrace": "".join(traceback.format_exception(exc))}


# ----------------------------------------------------------------------------------------------------------------
# Request model
# ----------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Vocab:
    offset: str = "offset"
    op: str = "op"
    system_time: str = "system_time"
    event_time: str = "event_time"

    @property
    def system_columns(self) -> tuple[str, str, str]:
        return (self.offset, self.op, self.system_time)


@dataclass(frozen=True)
class InputFile:
    path: str
    event_time_ms: int | None
    source_name: str = "default"


@dataclass(frozen=True)
class ReadStep:
    kind: str  # canonical PascalCase
    props: dict[str, Any]

    @property
    def schema_ddl(self) -> str | None:
        cols = self.props.get("schema")
        return ", ".join(cols) if cols else None


@dataclass(frozen=True)
class SqlTransform:
    steps: tuple[tuple[str | None, str], ...]  # (alias, query); exactly one step has no alias


@dataclass(frozen=True)
class ReadRequest:
    inputs: tuple[InputFile, ...]
    read_step: ReadStep
    preprocess: SqlTransform | None
    output_path: str | None


@dataclass(frozen=True)
class Strategy:
    kind: str  # Append | Ledger | Snapshot
    primary_key: tuple[str, ...] = ()
    compare_columns: tuple[str, ...] | None = None

    def describe(self) -> str:
        return f"{self.kind}(primaryKey={list(self.primary_key)})" if self.primary_key else self.kind


@dataclass(frozen=True)
class MergeRequest:
    input_path: str | None
    strategy: Strategy
    prev_offset: int | None
    system_time_ms: int
    prev_checkpoint_path: str | None
    prev_data_paths: tuple[str, ...]
    prev_schema_ddl: str | None
    prev_schema_path: str | None
    output_path: str
    new_checkpoint_path: str | None


@dataclass(frozen=True)
class IngestRequest:
    phases: tuple[str, ...]
    vocab: Vocab
    read: ReadRequest | None
    merge: MergeRequest | None
    response_path: str | None
    dataset: str | None
    work_dir: str | None


_READ_PROPS: dict[str, dict[str, type | tuple[type, ...]]] = {
    "Csv": {"schema": list, "separator": str, "encoding": str, "quote": str, "escape": str, "header": bool,
            "inferSchema": bool, "nullValue": str, "dateFormat": str, "timestampFormat": str},
    "Json": {"subPath": str, "schema": list, "dateFormat": str, "encoding": str, "timestampFormat": str},
    "NdJson": {"schema": list, "dateFormat": str, "encoding": str, "timestampFormat": str},
    "GeoJson": {"schema": list},
    "NdGeoJson": {"schema": list},
    "EsriShapefile": {"schema": list, "subPath": str},
    "Parquet": {"schema": list},
}
_STRATEGIES = ("Append", "Ledger", "Snapshot")


def match_enum(value: Any, canonical: Iterable[str], where: str) -> str:
    """RFC-013 name matching: PascalCase, camelCase or lowercase spellings of a canonical name."""
    for name in canonical:
        if value in (name, name[:1].lower() + name[1:], name.lower()):
            return name
    raise InvalidInput(f"{where}: unknown kind {value!r}; expected one of {', '.join(canonical)}")


def _obj(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidInput(f"{where}: expected an object, got {value!r}")
    return value


def _opt_str(d: dict[str, Any], key: str, where: str) -> str | None:
    v = d.get(key)
    if v is not None and not isinstance(v, str):
        raise InvalidInput(f"{where}.{key}: expected a string, got {v!r}")
    return v


def _req_str(d: dict[str, Any], key: str, where: str) -> str:
    v = _opt_str(d, key, where)
    if not v:
        raise InvalidInput(f"{where}.{key} is required")
    return v


def _str_list(v: Any, where: str, *, allow_empty: bool = True) -> tuple[str, ...]:
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v) or (not v and not allow_empty):
        raise InvalidInput(f"{where}: expected a {'non-empty ' if not allow_empty else ''}list of strings, got {v!r}")
    return tuple(v)


def parse_time_ms(text: Any, where: str) -> int:
    """RFC 3339 text -> milliseconds since the epoch (UTC); sub-millisecond digits are truncated."""
    if not isinstance(text, str):
        raise InvalidInput(f"{where}: expected an RFC 3339 timestamp, got {text!r}")
    try:
        dt = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidInput(f"{where}: not an RFC 3339 timestamp: {text!r}") from None
    if dt.tzinfo is None:
        raise InvalidInput(f"{where}: timestamp {text!r} has no time zone (use e.g. 'Z')")
    return (dt - _EPOCH) // timedelta(milliseconds=1)


def format_time_ms(ms: int) -> str:
    dt = _EPOCH + timedelta(milliseconds=ms)
    frac = f".{ms % 1000:03d}" if ms % 1000 else ""
    return dt.strftime("%Y-%m-%dT%H:%M:%S") + frac + "Z"


def parse_read_step(value: Any, where: str = "read.readStep") -> ReadStep:
    d = _obj(value, where)
    kind = match_enum(d.get("kind"), _READ_PROPS, where)
    props = {k: v for k, v in d.items() if k != "kind" and v is not None}
    allowed = _READ_PROPS[kind]
    for k, v in props.items():
        if k not in allowed:
            raise InvalidInput(f"{where}: property {k!r} is not valid for {kind} (valid: {', '.join(allowed)})")
        if not isinstance(v, allowed[k]):
            raise InvalidInput(f"{where}.{k}: expected {allowed[k].__name__}, got {v!r}")
    if "schema" in props:
        _str_list(props["schema"], f"{where}.schema")
    return ReadStep(kind, props)


def parse_transform(value: Any, dataset: str | None, where: str = "read.preprocess") -> SqlTransform:
    d = _obj(value, where)
    match_enum(d.get("kind"), ("Sql",), where)
    engine = _req_str(d, "engine", where)
    if engine.lower() != "spark":
        raise InvalidInput(f"engine {engine!r} is not supported by this Spark ingest"
                           f" (dataset {dataset or '<unnamed>'}); use engine 'spark' in the preprocess step")
    query, queries = d.get("query"), d.get("queries")
    if (query is None) == (queries is None):
        raise InvalidInput(f"{where}: exactly one of 'query' and 'queries' must be given")
    if query is not None:
        if not isinstance(query, str) or not query.strip():
            raise InvalidInput(f"{where}.query: expected a non-empty SQL string")
        return SqlTransform(((None, query),))
    if not isinstance(queries, list) or not queries:
        raise InvalidInput(f"{where}.queries: expected a non-empty list")
    steps = []
    for i, q in enumerate(queries):
        q = _obj(q, f"{where}.queries[{i}]")
        here = f"{where}.queries[{i}]"
        steps.append((_opt_str(q, "alias", here) or None, _req_str(q, "query", here)))
    if sum(1 for a, _ in steps if a is None) != 1:
        raise InvalidInput(f"{where}.queries: exactly one step must have no alias (it is the result)")
    return SqlTransform(tuple(steps))


def parse_strategy(value: Any, where: str = "merge.strategy") -> Strategy:
    d = _obj(value, where)
    kind = match_enum(d.get("kind"), _STRATEGIES, where)
    allowed = {"Append": set(), "Ledger": {"primaryKey"}, "Snapshot": {"primaryKey", "compareColumns"}}[kind]
    extra = set(d) - allowed - {"kind"}
    if extra:
        raise InvalidInput(f"{where}: property {sorted(extra)[0]!r} is not valid for {kind}")
    if kind == "Append":
        return Strategy(kind)
    pk = _str_list(d.get("primaryKey"), f"{where}.primaryKey", allow_empty=False)
    cmp = d.get("compareColumns")
    return Strategy(kind, pk, _str_list(cmp, f"{where}.compareColumns", allow_empty=False) if cmp is not None else None)


def parse_vocab(value: Any) -> Vocab:
    if value is None:
        return Vocab()
    d = _obj(value, "vocab")
    defaults = Vocab()
    return Vocab(offset=_opt_str(d, "offsetColumn", "vocab") or defaults.offset,
                 op=_opt_str(d, "operationTypeColumn", "vocab") or defaults.op,
                 system_time=_opt_str(d, "systemTimeColumn", "vocab") or defaults.system_time,
                 event_time=_opt_str(d, "eventTimeColumn", "vocab") or defaults.event_time)


def _local_path(p: str) -> str:
    return p[len("file://"):] if p.startswith("file://") else p


def parse_request(raw: Any) -> IngestRequest:
    d = _obj(raw, "request")
    phases = d.get("phases")
    if not isinstance(phases, list) or not phases or any(p not in ("read", "merge") for p in phases) \
            or len(set(phases)) != len(phases):
        raise InvalidInput(f"phases: expected a non-empty list of 'read' and/or 'merge', got {phases!r}")
    phases_t = tuple(p for p in ("read", "merge") if p in phases)
    dataset = _opt_str(d, "dataset", "request")
    merge_raw = d.get("merge")
    vocab = parse_vocab(d.get("vocab") if d.get("vocab") is not None
                        else (merge_raw or {}).get("vocab") if isinstance(merge_raw, dict) else None)
    read = merge = None
    if "read" in phases_t:
        r = _obj(d.get("read"), "read")
        inputs_raw = r.get("inputs")
        if not isinstance(inputs_raw, list) or not inputs_raw:
            raise InvalidInput("read.inputs: expected a non-empty list of input files")
        inputs = []
        for i, inp in enumerate(inputs_raw):
            inp = _obj(inp, f"read.inputs[{i}]")
            et = inp.get("eventTime")
            inputs.append(InputFile(_local_path(_req_str(inp, "path", f"read.inputs[{i}]")),
                                    parse_time_ms(et, f"read.inputs[{i}].eventTime") if et is not None else None,
                                    _opt_str(inp, "sourceName", f"read.inputs[{i}]") or "default"))
        pre = r.get("preprocess")
        out = _opt_str(r, "outputPath", "read")
        if out is None and "merge" not in phases_t:
            raise InvalidInput("read.outputPath is required when the merge phase does not run")
        read = ReadRequest(tuple(inputs), parse_read_step(r.get("readStep")),
                           parse_transform(pre, dataset) if pre is not None else None,
                           _local_path(out) if out else None)
    if "merge" in phases_t:
        m = _obj(merge_raw, "merge")
        input_path = None if "read" in phases_t else _local_path(_req_str(m, "inputPath", "merge"))
        prev_offset = m.get("prevOffset")
        if prev_offset is not None and (not isinstance(prev_offset, int) or isinstance(prev_offset, bool)
                                        or prev_offset < 0):
            raise InvalidInput(f"merge.prevOffset: expected a non-negative integer or null, got {prev_offset!r}")
        ddl, schema_path = _opt_str(m, "prevSchemaDdl", "merge"), _opt_str(m, "prevSchemaPath", "merge")
        if ddl and schema_path:
            raise InvalidInput("merge: give at most one of prevSchemaDdl and prevSchemaPath")
        strategy = parse_strategy(m.get("strategy"))
        ckpt_out = _opt_str(m, "newCheckpointPath", "merge")
        if strategy.kind != "Append" and not ckpt_out:
            raise InvalidInput(f"merge.newCheckpointPath is required for the {strategy.kind} strategy")
        prev_ckpt = _opt_str(m, "prevCheckpointPath", "merge")
        merge = MergeRequest(
            input_path=input_path, strategy=strategy, prev_offset=prev_offset,
            system_time_ms=parse_time_ms(m.get("systemTime"), "merge.systemTime"),
            prev_checkpoint_path=_local_path(prev_ckpt) if prev_ckpt else None,
            prev_data_paths=tuple(_local_path(p) for p in _str_list(m.get("prevDataPaths") or [],
                                                                    "merge.prevDataPaths")),
            prev_schema_ddl=ddl or None,
            prev_schema_path=_local_path(schema_path) if schema_path else None,
            output_path=_local_path(_req_str(m, "outputPath", "merge")),
            new_checkpoint_path=_local_path(ckpt_out) if ckpt_out else None)
    resp = _opt_str(d, "responsePath", "request")
    work = _opt_str(d, "workDir", "request")
    return IngestRequest(phases_t, vocab, read, merge, _local_path(resp) if resp else None, dataset,
                         _local_path(work) if work else None)


# ----------------------------------------------------------------------------------------------------------------
# Spark helpers
# ----------------------------------------------------------------------------------------------------------------


def _c(name: str):
    """A column reference that survives dots, spaces and backticks in the name."""
    return F.col("`" + name.replace("`", "``") + "`")


@functools.lru_cache(maxsize=4096)
def _ident(name: str) -> str:
    """A column name as DDL text, quoted only when Spark's DDL parser would not read it back unquoted."""
    quoted = "`" + name.replace("`", "``") + "`"
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        return quoted
    try:
        return name if StructType.fromDDL(f"{name} STRING").names == [name] else quoted
    except Exception:
        return quoted


def type_ddl(dt: DataType) -> str:
    if isinstance(dt, StructType):
        return "STRUCT<" + ", ".join(f"{_ident(f.name)}: {type_ddl(f.dataType)}" for f in dt.fields) + ">"
    if isinstance(dt, ArrayType):
        return f"ARRAY<{type_ddl(dt.elementType)}>"
    if isinstance(dt, MapType):
        return f"MAP<{type_ddl(dt.keyType)}, {type_ddl(dt.valueType)}>"
    return dt.simpleString().upper()


def schema_ddl_list(schema: StructType) -> list[str]:
    """Spark schema -> ODF-style list of DDL column strings."""
    return [f"{_ident(f.name)} {type_ddl(f.dataType)}" for f in schema.fields]


def parse_ddl(ddl: str, where: str) -> StructType:
    try:
        return StructType.fromDDL(ddl)
    except Exception as e:  # ParseException and friends
        raise InvalidInput(f"{where}: invalid DDL schema {ddl!r}: {_clean_spark_message(str(e))}") from None


@contextmanager
def spark_sql_conf(spark: SparkSession) -> Iterator[None]:
    """Apply the settings ODF ingest needs to a (possibly shared) session and restore the old values after."""
    old = {k: spark.conf.get(k, None) for k in SPARK_SQL_CONF}
    for k, v in SPARK_SQL_CONF.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


def create_spark_session(app_name: str = "odf-ingest") -> SparkSession:
    builder = SparkSession.builder.appName(app_name)
    for k, v in SPARK_SQL_CONF.items():
        builder = builder.config(k, v)
    return builder.getOrCreate()


def normalize_timestamps(df: DataFrame) -> DataFrame:
    """Every top-level timestamp column becomes TIMESTAMP (UTC) truncated to milliseconds, like the slices store it."""
    if not any(isinstance(f.dataType, (TimestampType, TimestampNTZType)) for f in df.schema.fields):
        return df
    cols = []
    for f in df.schema.fields:
        if isinstance(f.dataType, (TimestampType, TimestampNTZType)):
            cols.append(F.timestamp_millis(F.unix_millis(_c(f.name).cast("timestamp"))).alias(f.name))
        else:
            cols.append(_c(f.name))
    return df.select(*cols)


# ----------------------------------------------------------------------------------------------------------------
# Read phase: one DataFrame per input file
# ----------------------------------------------------------------------------------------------------------------


@dataclass
class SourceInfo:
    """What is needed to explain a parse failure of one file Spark read: where, how, and how records are counted."""
    display_path: str
    spark_path: str
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
        self.root = tempfile.mkdtemp(prefix=".odf-ingest-", dir=parent)
        self._n = 0

    def path(self, name: str) -> str:
        self._n += 1
        return os.path.join(self.root, f"{self._n:03d}-{name}")

    def cleanup(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def _schema_option(step: ReadStep) -> StructType | None:
    ddl = step.schema_ddl
    return parse_ddl(ddl, "readStep.schema") if ddl else None


def _time_format_options(step: ReadStep) -> dict[str, str]:
    opts = {}
    for key in ("dateFormat", "timestampFormat"):
        v = step.props.get(key)
        if v and v.lower() != "rfc3339":  # rfc3339 = Spark's default ISO-8601 parsing
            opts[key] = v
    return opts


def _check_exists(inp: InputFile) -> None:
    if not os.path.exists(inp.path):
        raise InvalidInput(f"input file not found: {inp.path}", file=inp.path)


def read_csv(spark: SparkSession, step: ReadStep, inp: InputFile) -> tuple[DataFrame, SourceInfo]:
    p = step.props
    encoding = _encoding(p.get("encoding"))  # validated here: Spark would only fail later, obscurely
    opts: dict[str, str] = {"mode": "FAILFAST", "header": str(bool(p.get("header", False))).lower()}
    if p.get("inferSchema"):
        opts["inferSchema"] = "true"
    if p.get("separator") == "":
        raise InvalidInput("readStep.separator must not be empty")
    for odf_name, spark_name in (("separator", "sep"), ("encoding", "encoding"), ("quote", "quote"),
                                 ("escape", "escape"), ("nullValue", "nullValue")):
        if odf_name in p:
            # An empty quote turns quoting off (Spark's convention); an empty escape means "no escape character".
            opts[spark_name] = "\u0000" if odf_name == "escape" and p[odf_name] == "" else p[odf_name]
    opts.update(_time_format_options(step))
    schema = _schema_option(step)
    reader = spark.read.options(**opts)
    if schema is not None:
        reader = reader.schema(schema)
    df = reader.csv(inp.path)
    return df, SourceInfo(inp.path, inp.path, "csv", opts, df.schema, encoding)


def _encoding(name: str | None) -> str:
    if not name:
        return "utf-8"
    try:
        return codecs.lookup(name).name
    except LookupError:
        raise InvalidInput(f"readStep.encoding: unknown encoding {name!r}") from None


def _read_ndjson_file(spark: SparkSession, path: str, schema: StructType | None, opts: dict[str, str],
                      key_order: Sequence[str] = ()) -> DataFrame:
    reader = spark.read.options(mode="FAILFAST", **opts)
    if schema is not None:
        return reader.schema(schema).json(path)
    df = reader.json(path)
    # Spark sorts inferred JSON fields by name; restore the order in which keys first appear in the data.
    ordered = [k for k in key_order if k in df.columns]
    ordered += [c for c in df.columns if c not in ordered]
    return df.select(*[_c(c) for c in ordered]) if ordered != df.columns else df


def _sample_key_order(path: str, encoding: str, max_lines: int = 1000) -> list[str]:
    order: dict[str, None] = {}
    try:
        with open(path, encoding=encoding, errors="replace") as f:
            for i, line in enumerate(f):
                if i >= max_lines:
                    break
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if isinstance(rec, dict):
                    order.update(dict.fromkeys(rec))
    except OSError:
        pass
    return list(order)


def read_ndjson(spark: SparkSession, step: ReadStep, inp: InputFile) -> tuple[DataFrame, SourceInfo]:
    enc = _encoding(step.props.get("encoding"))
    opts = dict(_time_format_options(step))
    if enc != "utf-8":
        opts.update(encoding=enc, lineSep="\n")
    schema = _schema_option(step)
    df = _read_ndjson_file(spark, inp.path, schema, opts,
                           () if schema is not None else _sample_key_order(inp.path, enc))
    return df, SourceInfo(inp.path, inp.path, "json", opts, df.schema, enc)


def _write_ndjson(path: str, lines: Iterable[str]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for line in lines:
            f.write(line)
            f.write("\n")


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _geo_schema(step: ReadStep) -> StructType | None:
    """The user's schema with the ``geometry`` column (a GeoJSON string) appended when it does not list it."""
    schema = _schema_option(step)
    if schema is None:
        return None
    if "geometry" in schema.names:
        if not isinstance(schema["geometry"].dataType, StringType):
            raise InvalidInput("readStep.schema: the geometry column holds GeoJSON text and must be STRING")
        return schema
    return StructType(schema.fields + [StructField("geometry", StringType())])


def _feature_record(feat: Any, where: str) -> tuple[dict[str, Any], str]:
    """A GeoJSON Feature -> (properties + geometry text, error or '')."""
    if not isinstance(feat, dict) or feat.get("type") != "Feature":
        return {}, f"{where} is not a GeoJSON Feature"
    props = feat.get("properties") or {}
    if not isinstance(props, dict):
        return {}, f"{where}: 'properties' is not an object"
    if "geometry" in props:
        return {}, f"{where}: a property named 'geometry' clashes with the geometry column"
    geom = feat.get("geometry")
    rec = dict(props)
    rec["geometry"] = _dump(geom) if geom is not None else None
    return rec, ""


def _load_json_document(path: str, encoding: str) -> Any:
    try:
        with open(path, encoding=encoding) as f:
            return json.load(f)
    except json.JSONDecodeError as e:
        raise InvalidInput(f"cannot read {path}: line {e.lineno} column {e.colno}: invalid JSON: {e.msg}",
                           file=path, line=e.lineno) from None
    except UnicodeDecodeError as e:
        raise InvalidInput(f"cannot read {path}: not valid {encoding} text: {e}", file=path) from None


def _records_to_ndjson(records: Iterable[dict[str, Any]], out_path: str, trailing: Sequence[str] = ()) -> list[str]:
    """Write records as NDJSON; returns the key order of first appearance (``trailing`` keys moved last)."""
    order: dict[str, None] = {}

    def lines() -> Iterator[str]:
        for rec in records:
            order.update(dict.fromkeys(rec))
            yield _dump(rec)

    _write_ndjson(out_path, lines())
    keys = [k for k in order if k not in trailing]
    return keys + [k for k in trailing if k in order]


def read_json(spark: SparkSession, step: ReadStep, inp: InputFile, work: WorkDir) -> tuple[DataFrame, SourceInfo]:
    enc = _encoding(step.props.get("encoding"))
    doc = _load_json_document(inp.path, enc)
    sub_path = step.props.get("subPath")
    node = doc
    if sub_path:
        for part in sub_path.split("."):
            if not isinstance(node, dict) or part not in node:
                raise InvalidInput(f"cannot read {inp.path}: subPath {sub_path!r} not found (no key {part!r})",
                                   file=inp.path)
            node = node[part]
    if not isinstance(node, list):
        where = f"subPath {sub_path!r}" if sub_path else "the root element"
        raise InvalidInput(f"cannot read {inp.path}: {where} is not an array of records", file=inp.path)

    def records() -> Iterator[dict[str, Any]]:
        for i, rec in enumerate(node, 1):
            if not isinstance(rec, dict):
                raise InvalidInput(f"cannot read {inp.path}: record {i} is not a JSON object", file=inp.path,
                                   record=i)
            yield rec

    tmp = work.path("records.ndjson")
    order = _records_to_ndjson(records(), tmp)
    schema = _schema_option(step)
    df = _read_ndjson_file(spark, tmp, schema, _time_format_options(step), order)
    return df, SourceInfo(inp.path, tmp, "json", _time_format_options(step), df.schema, "utf-8", "record")


def read_geojson(spark: SparkSession, step: ReadStep, inp: InputFile, work: WorkDir) -> tuple[DataFrame, SourceInfo]:
    doc = _load_json_document(inp.path, "utf-8")
    if not isinstance(doc, dict) or doc.get("type") != "FeatureCollection" or not isinstance(doc.get("features"),
                                                                                             list):
        raise InvalidInput(f"cannot read {inp.path}: expected a GeoJSON FeatureCollection with a 'features' array",
                           file=inp.path)

    def records() -> Iterator[dict[str, Any]]:
        for i, feat in enumerate(doc["features"], 1):
            rec, err = _feature_record(feat, f"feature {i}")
            if err:
                raise InvalidInput(f"cannot read {inp.path}: {err}", file=inp.path, record=i)
            yield rec

    tmp = work.path("features.ndjson")
    order = _records_to_ndjson(records(), tmp, trailing=("geometry",))
    df = _read_ndjson_file(spark, tmp, _geo_schema(step), {}, order)
    return df, SourceInfo(inp.path, tmp, "json", {}, df.schema, "utf-8", "record")


def read_ndgeojson(spark: SparkSession, step: ReadStep, inp: InputFile,
                   work: WorkDir) -> tuple[DataFrame, SourceInfo]:
    order: dict[str, None] = {}

    def lines() -> Iterator[str]:
        with open(inp.path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    yield ""  # keep line numbers aligned with the original file
                    continue
                try:
                    feat = json.loads(line)
                except ValueError as e:
                    raise InvalidInput(f"cannot read {inp.path}: line {n}: invalid JSON: {e}", file=inp.path,
                                       line=n) from None
                rec, err = _feature_record(feat, f"line {n}")
                if err:
                    raise InvalidInput(f"cannot read {inp.path}: {err}", file=inp.path, line=n)
                order.update(dict.fromkeys(rec))
                yield _dump(rec)

    tmp = work.path("features.ndjson")
    _write_ndjson(tmp, lines())
    keys = [k for k in order if k != "geometry"] + (["geometry"] if "geometry" in order else [])
    df = _read_ndjson_file(spark, tmp, _geo_schema(step), {}, keys)
    return df, SourceInfo(inp.path, tmp, "json", {}, df.schema, "utf-8", "line")


def read_parquet(spark: SparkSession, step: ReadStep, inp: InputFile) -> tuple[DataFrame, SourceInfo]:
    df = spark.read.parquet(inp.path)
    schema = _schema_option(step)
    if schema is not None:
        missing = [f.name for f in schema.fields if f.name not in df.columns]
        if missing:
            raise InvalidInput(f"cannot read {inp.path}: column(s) {missing} of the schema are not in the file"
                               f" (available: {df.columns})", file=inp.path)
        df = df.select(*[_c(f.name).cast(f.dataType).alias(f.name) for f in schema.fields])
    return df, SourceInfo(inp.path, inp.path, "other")


def read_shapefile(spark: SparkSession, step: ReadStep, inp: InputFile,
                   work: WorkDir) -> tuple[DataFrame, SourceInfo]:
    fields, records = open_shapefile(inp.path, step.props.get("subPath"))
    tmp = work.path("shapes.ndjson")
    _write_ndjson(tmp, (_dump(r) for r in records))
    schema = _geo_schema(step)
    if schema is None:
        schema = StructType([StructField(f.name, f.spark_type) for f in fields]
                            + [StructField("geometry", StringType())])
    df = _read_ndjson_file(spark, tmp, schema, {})
    return df, SourceInfo(inp.path, tmp, "json", {}, df.schema, "utf-8", "record")


def read_input(spark: SparkSession, step: ReadStep, inp: InputFile, work: WorkDir) -> tuple[DataFrame, SourceInfo]:
    """Read one prepared file with the ODF read step (FAILFAST: malformed values raise when Spark runs)."""
    _check_exists(inp)
    if step.kind == "Csv":
        return read_csv(spark, step, inp)
    if step.kind == "NdJson":
        return read_ndjson(spark, step, inp)
    if step.kind == "Json":
        return read_json(spark, step, inp, work)
    if step.kind == "GeoJson":
        return read_geojson(spark, step, inp, work)
    if step.kind == "NdGeoJson":
        return read_ndgeojson(spark, step, inp, work)
    if step.kind == "Parquet":
        return read_parquet(spark, step, inp)
    if step.kind == "EsriShapefile":
        return read_shapefile(spark, step, inp, work)
    raise InvalidInput(f"unsupported read step {step.kind}")  # unreachable: parse_read_step validates


def apply_preprocess(spark: SparkSession, df: DataFrame, transform: SqlTransform, file: str) -> DataFrame:
    """Run the SQL steps over a temp view ``input``; views are dropped afterwards (the plan keeps them)."""
    created = ["input"]
    df.createOrReplaceTempView("input")
    result = None
    try:
        for i, (alias, query) in enumerate(transform.steps, 1):
            try:
                out = spark.sql(query)
            except Exception as e:
                if not _is_user_sql_error(e):
                    raise
                raise InvalidInput(f"preprocess query {i} failed for {file}: {_clean_spark_message(str(e))}",
                                   file=file) from None
            if alias:
                out.createOrReplaceTempView(alias)
                created.append(alias)
            else:
                result = out
    finally:
        for view in created:
            spark.catalog.dropTempView(view)
    assert result is not None
    return result


def apply_event_time(df: DataFrame, column: str, fallback_ms: int | None, file: str) -> DataFrame:
    """Add the event-time column from the source time, or fill its nulls from it.

    The hidden column ``__odf_event_time_from_source`` remembers which values were filled in: Snapshot must not
    count a source time as a change of the row (the data itself had no event time there).
    """
    fallback = F.timestamp_millis(F.lit(fallback_ms)) if fallback_ms is not None else None
    if column not in df.columns:
        if fallback is None:
            raise InvalidInput(f"{file}: the data has no event-time column '{column}' and the source gave no event"
                               f" time (columns: {df.columns})", file=file)
        return df.select(fallback.alias(column), *[_c(c) for c in df.columns], F.lit(True).alias(_ET_FILLED))
    dt = df.schema[column].dataType
    if not isinstance(dt, (TimestampType, TimestampNTZType, DateType)):
        raise InvalidInput(f"{file}: event-time column '{column}' has type {type_ddl(dt)}; declare it as TIMESTAMP"
                           f" or DATE in the read schema or convert it in the preprocess query", file=file)
    if fallback is None:
        return df.withColumn(_ET_FILLED, F.lit(False))
    fill = F.to_date(fallback) if isinstance(dt, DateType) else fallback
    return (df.withColumn(_ET_FILLED, _c(column).isNull())
            .withColumn(column, F.coalesce(_c(column), fill)))


@dataclass
class ReadResult:
    df: DataFrame
    sources: list[SourceInfo]


def build_read_frame(spark: SparkSession, req: ReadRequest, vocab: Vocab, work: WorkDir) -> ReadResult:
    """All inputs read, preprocessed and event-timed (lazily), unioned by name in input order."""
    frames, sources = [], []
    for inp in req.inputs:
        df, src = read_input(spark, req.read_step, inp, work)
        sources.append(src)
        if req.preprocess is not None:
            df = apply_preprocess(spark, df, req.preprocess, inp.path)
        df = normalize_timestamps(df)
        frames.append(apply_event_time(df, vocab.event_time, inp.event_time_ms, inp.path))
    result = frames[0]
    for df, src in zip(frames[1:], sources[1:]):
        if sorted(df.columns) != sorted(result.columns):
            raise InvalidInput(f"{src.display_path} has columns {df.columns} but {sources[0].display_path} has"
                               f" {result.columns}; all inputs of one ingest must have the same columns",
                               file=src.display_path)
        result = result.unionByName(df)
    return ReadResult(result, sources)


# ----------------------------------------------------------------------------------------------------------------
# ESRI shapefile (pure Python; .shp + .dbf, optional .cpg)
# ----------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DbfField:
    name: str
    type: str
    length: int
    decimals: int

    @property
    def spark_type(self) -> DataType:
        if self.type in "NF":
            return LongType() if self.decimals == 0 and self.length <= 18 and self.type == "N" else DoubleType()
        if self.type == "D":
            return DateType()
        if self.type == "L":
            return BooleanType()
        return StringType()


def _shapefile_members(path: str, sub_path: str | None) -> tuple[str, Callable[[str], bytes | None]]:
    """Locate the .shp inside a zip, a directory or as the file itself; returns its name and a reader of siblings."""
    if os.path.isfile(path) and zipfile.is_zipfile(path):
        zf = zipfile.ZipFile(path)
        names = [n for n in zf.namelist() if not n.endswith("/")]
        lookup = {n.lower(): n for n in names}

        def read_member(name: str) -> bytes | None:
            real = lookup.get(name.lower())
            return zf.read(real) if real else None
    elif os.path.isdir(path):
        names = sorted(os.path.relpath(p, path) for p in glob.glob(os.path.join(path, "**", "*"), recursive=True)
                       if os.path.isfile(p))
        lookup = {n.lower(): n for n in names}

        def read_member(name: str) -> bytes | None:
            real = lookup.get(name.lower())
            if real is None:
                return None
            with open(os.path.join(path, real), "rb") as f:
                return f.read()
    elif path.lower().endswith(".shp"):
        base_dir, shp = os.path.split(path)
        return _shapefile_members(base_dir or ".", shp)
    else:
        raise InvalidInput(f"cannot read {path}: expected a zip archive, a directory or a .shp file", file=path)
    candidates = [n for n in names if n.lower().endswith(".shp")]
    if sub_path:
        candidates = [n for n in candidates if fnmatch.fnmatch(n, sub_path)]
    if len(candidates) != 1:
        what = "no .shp file" if not candidates else f"several .shp files {candidates}"
        raise InvalidInput(f"cannot read {path}: {what} match subPath {sub_path!r}" if sub_path else
                           f"cannot read {path}: {what} found; set subPath to choose one", file=path)
    return candidates[0], read_member


def _dbf_encoding(cpg: bytes | None) -> str | None:
    if not cpg:
        return None
    name = cpg.decode("ascii", "replace").strip()
    if name.isdigit():
        name = {"88591": "latin-1", "65001": "utf-8"}.get(name, "cp" + name)
    try:
        return codecs.lookup(name).name
    except LookupError:
        return None


def _dbf_text(raw: bytes, encoding: str | None) -> str:
    if encoding:
        return raw.decode(encoding, "replace")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def parse_dbf(data: bytes, encoding: str | None) -> tuple[list[DbfField], list[dict[str, Any] | None]]:
    """dBase III table -> fields and one dict per record (None for deleted records)."""
    if len(data) < 32:
        raise ValueError("dbf file too short")
    count, header_len, record_len = struct.unpack("<IHH", data[4:12])
    fields: list[DbfField] = []
    pos = 32
    while pos + 32 <= header_len and data[pos] != 0x0D:
        name = data[pos:pos + 11].split(b"\0")[0].decode("ascii", "replace").strip()
        fields.append(DbfField(name, chr(data[pos + 11]).upper(), data[pos + 16], data[pos + 17]))
        pos += 32
    records: list[dict[str, Any] | None] = []
    for i in range(count):
        off = header_len + i * record_len
        row = data[off:off + record_len]
        if len(row) < record_len:
            raise ValueError(f"dbf record {i + 1} is truncated")
        if row[:1] == b"*":
            records.append(None)
            continue
        rec, p = {}, 1
        for f in fields:
            rec[f.name] = _dbf_value(f, row[p:p + f.length], encoding)
            p += f.length
        records.append(rec)
    return fields, records


def _dbf_value(f: DbfField, raw: bytes, encoding: str | None) -> Any:
    text = _dbf_text(raw, encoding).strip().strip("\0")
    if not text:
        return None
    if f.type in "NF":
        if text.startswith("*"):
            return None
        if isinstance(f.spark_type, StringType):
            return text
        try:
            return int(text) if f.decimals == 0 and f.type == "N" and f.length <= 18 and "." not in text \
                else float(text)
        except ValueError:
            return float(text) if f.decimals == 0 else None
    if f.type == "D":
        return f"{text[0:4]}-{text[4:6]}-{text[6:8]}" if len(text) == 8 and text.isdigit() and text != "00000000" \
            else None
    if f.type == "L":
        return True if text in "TtYy" else False if text in "FfNn" else None
    return text


def _ring_area(ring: list[list[float]]) -> float:
    return sum(ring[i][0] * ring[i + 1][1] - ring[i + 1][0] * ring[i][1] for i in range(len(ring) - 1)) / 2


def _point_in_ring(pt: list[float], ring: list[list[float]]) -> bool:
    x, y, inside = pt[0], pt[1], False
    for i in range(len(ring) - 1):
        (x1, y1), (x2, y2) = ring[i][:2], ring[i + 1][:2]
        if (y1 > y) != (y2 > y) and x < (x2 - x1) * (y - y1) / (y2 - y1) + x1:
            inside = not inside
    return inside


def _polygon_geometry(rings: list[list[list[float]]]) -> dict[str, Any]:
    """Shapefile rings (outer clockwise, holes counter-clockwise) -> GeoJSON Polygon/MultiPolygon."""
    outers = [[r] for r in rings if _ring_area(r) < 0]
    holes = [r for r in rings if _ring_area(r) >= 0]
    if not outers:  # wrongly oriented file: treat every ring as a polygon of its own
        outers, holes = [[r] for r in rings], []
    for hole in holes:
        owner = next((p for p in outers if _point_in_ring(hole[0], p[0])), outers[-1])
        owner.append(hole)
    if len(outers) == 1:
        return {"type": "Polygon", "coordinates": outers[0]}
    return {"type": "MultiPolygon", "coordinates": outers}


def shape_to_geojson(content: bytes) -> dict[str, Any] | None:
    """One .shp record content -> GeoJSON geometry (None for the null shape). Z is kept, M dropped."""
    (st,) = struct.unpack("<i", content[:4])
    if st == 0:
        return None
    has_z = st in (11, 13, 15, 18)
    if st in (1, 11, 21):
        coords = list(struct.unpack("<2d", content[4:20]))
        if has_z:
            coords.append(struct.unpack("<d", content[20:28])[0])
        return {"type": "Point", "coordinates": coords}
    if st in (8, 18, 28):
        (n,) = struct.unpack("<i", content[36:40])
        xy = struct.unpack(f"<{2 * n}d", content[40:40 + 16 * n])
        pts = [[xy[2 * i], xy[2 * i + 1]] for i in range(n)]
        if has_z:
            z_off = 40 + 16 * n + 16
            for i, z in enumerate(struct.unpack(f"<{n}d", content[z_off:z_off + 8 * n])):
                pts[i].append(z)
        return {"type": "MultiPoint", "coordinates": pts}
    if st in (3, 13, 23, 5, 15, 25):
        n_parts, n_pts = struct.unpack("<2i", content[36:44])
        parts = list(struct.unpack(f"<{n_parts}i", content[44:44 + 4 * n_parts]))
        p = 44 + 4 * n_parts
        xy = struct.unpack(f"<{2 * n_pts}d", content[p:p + 16 * n_pts])
        pts = [[xy[2 * i], xy[2 * i + 1]] for i in range(n_pts)]
        if has_z:
            z_off = p + 16 * n_pts + 16
            for i, z in enumerate(struct.unpack(f"<{n_pts}d", content[z_off:z_off + 8 * n_pts])):
                pts[i].append(z)
        chunks = [pts[a:b] for a, b in zip(parts, parts[1:] + [n_pts])]
        if st in (3, 13, 23):
            return {"type": "LineString", "coordinates": chunks[0]} if len(chunks) == 1 else \
                {"type": "MultiLineString", "coordinates": chunks}
        return _polygon_geometry(chunks)
    raise ValueError(f"shape type {st} is not supported (supported: point, multipoint, polyline, polygon)")


def parse_shp(data: bytes) -> list[dict[str, Any] | None]:
    if len(data) < 100 or struct.unpack(">i", data[:4])[0] != 9994:
        raise ValueError("not an ESRI shapefile (.shp) main file")
    geoms, pos = [], 100
    while pos + 8 <= len(data):
        _, words = struct.unpack(">2i", data[pos:pos + 8])
        pos += 8
        geoms.append(shape_to_geojson(data[pos:pos + 2 * words]))
        pos += 2 * words
    return geoms


def open_shapefile(path: str, sub_path: str | None) -> tuple[list[DbfField], Iterator[dict[str, Any]]]:
    """Fields of the .dbf and records (attributes + ``geometry`` GeoJSON text) of the selected shapefile."""
    shp_name, read_member = _shapefile_members(path, sub_path)
    stem = shp_name[:-4]
    shp, dbf = read_member(shp_name), read_member(stem + ".dbf")
    if dbf is None:
        raise InvalidInput(f"cannot read {path}: {stem}.dbf is missing next to {shp_name}", file=path)
    try:
        fields, attrs = parse_dbf(dbf, _dbf_encoding(read_member(stem + ".cpg")))
        geoms = parse_shp(shp or b"")
    except (ValueError, struct.error) as e:
        raise InvalidInput(f"cannot read {path} ({shp_name}): {e}", file=path) from None
    if len(geoms) != len(attrs):
        raise InvalidInput(f"cannot read {path}: {shp_name} has {len(geoms)} shapes but {stem}.dbf has"
                           f" {len(attrs)} records", file=path)
    if any(f.name == "geometry" for f in fields):
        raise InvalidInput(f"cannot read {path}: a dbf field named 'geometry' clashes with the geometry column",
                           file=path)

    def records() -> Iterator[dict[str, Any]]:
        for geom, rec in zip(geoms, attrs):
            if rec is not None:
                out = dict(rec)
                out["geometry"] = _dump(geom) if geom is not None else None
                yield out

    return fields, records()


# ----------------------------------------------------------------------------------------------------------------
# Single-file parquet output (pyarrow on the driver)
# ----------------------------------------------------------------------------------------------------------------


def write_parts(df: DataFrame, directory: str) -> list[str]:
    """Let Spark write in parallel; the part files, in name order, hold the rows in the DataFrame's order."""
    df.write.mode("overwrite").parquet(directory)
    return list_parts(directory)


def list_parts(directory: str) -> list[str]:
    return sorted(glob.glob(os.path.join(directory, "part-*.parquet")))


def _spark_schema_json(file: str) -> dict[str, Any] | None:
    import pyarrow.parquet as pq
    try:
        meta = pq.read_schema(file).metadata or {}
        return json.loads(meta[SPARK_SCHEMA_META_KEY]) if SPARK_SCHEMA_META_KEY in meta else None
    except Exception:
        return None


def load_parquet(spark: SparkSession, path: str, sample_file: str | None = None) -> DataFrame:
    """``spark.read.parquet`` minus the schema-inference job when the file records its Spark schema (ours do)."""
    schema = _spark_schema_json(sample_file or path)
    reader = spark.read.schema(StructType.fromJson(schema)) if schema else spark.read
    return reader.parquet(path)


def _spark_fields_of_file(part_file: str) -> dict[str, Any]:
    """Spark's JSON field descriptions by column name, from a Spark-written file ({} when it has none)."""
    schema = _spark_schema_json(part_file)
    return {f["name"]: f for f in schema["fields"]} if schema else {}


def _spark_fields_of_schema(schema: StructType) -> dict[str, Any]:
    return {f["name"]: f for f in json.loads(schema.json())["fields"]}


def _spark_schema_meta(spark_fields: dict[str, Any], names: Sequence[str]) -> dict[bytes, bytes]:
    """Spark schema metadata for a file of the given columns, so Spark reads it back without an inference job."""
    if not all(n in spark_fields for n in names):
        return {}
    return {SPARK_SCHEMA_META_KEY: json.dumps({"type": "struct",
                                               "fields": [spark_fields[n] for n in names]}).encode()}


def _iter_tables(files: Sequence[str], columns: Sequence[str] | None = None):
    import pyarrow as pa
    import pyarrow.parquet as pq
    for path in files:
        pf = pq.ParquetFile(path)
        for batch in pf.iter_batches(batch_size=_BATCH_ROWS, columns=list(columns) if columns else None):
            yield pa.Table.from_batches([batch])


def _cast(column, arrow_type):
    return column if column.type == arrow_type else column.cast(arrow_type)


def _ms_utc(t):
    """Arrow type with every timestamp as timestamp(ms, UTC)."""
    import pyarrow as pa
    return pa.timestamp("ms", tz="UTC") if pa.types.is_timestamp(t) else t


class _BufferedParquetWriter:
    """Collects small tables into ~1M-row row groups and writes them atomically (temp file + rename)."""

    def __init__(self, path: str, schema, dictionary_columns: Sequence[str] = ()):
        import pyarrow as pa
        import pyarrow.parquet as pq
        self.path, self.schema = path, schema
        self.tmp = f"{path}.tmp-{uuid.uuid4().hex}"
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        # Dictionary-encode text and the given low-cardinality columns only: trying it on high-cardinality numbers
        # costs CPU for nothing (the writer falls back to plain encoding).
        dictionary = [f.name for f in schema if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)
                      or pa.types.is_binary(f.type) or f.name in dictionary_columns]
        self._writer = pq.ParquetWriter(self.tmp, schema, use_dictionary=dictionary)
        self._buf: list = []
        self._buf_rows = 0
        self.rows = 0

    def write(self, table) -> None:
        if table.num_rows == 0:
            return
        self._buf.append(table)
        self._buf_rows += table.num_rows
        self.rows += table.num_rows
        if self._buf_rows >= _ROW_GROUP_ROWS:
            self._flush()

    def _flush(self) -> None:
        import pyarrow as pa
        if self._buf:
            self._writer.write_table(pa.concat_tables(self._buf), row_group_size=_ROW_GROUP_ROWS)
            self._buf, self._buf_rows = [], 0

    def commit(self) -> None:
        self._flush()
        self._writer.close()
        os.replace(self.tmp, self.path)

    def abort(self) -> None:
        try:
            self._writer.close()
        finally:
            if os.path.exists(self.tmp):
                os.remove(self.tmp)


def combine_plain(part_files: Sequence[str], output_path: str) -> int:
    """Concatenate part files into one parquet file (written even when empty, to carry the schema)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    schema = pq.read_schema(part_files[0]).remove_metadata()
    schema = pa.schema([pa.field(f.name, _ms_utc(f.type)) for f in schema])
    writer = _BufferedParquetWriter(
        output_path, schema.with_metadata(_spark_schema_meta(_spark_fields_of_file(part_files[0]), schema.names)))
    try:
        for t in _iter_tables(part_files):
            writer.write(t.replace_schema_metadata(None).cast(schema).replace_schema_metadata(writer.schema.metadata))
        writer.commit()
    except BaseException:
        writer.abort()
        raise
    return writer.rows


def parts_sorted_by(part_files: Sequence[str], column: str) -> bool:
    """Whether the concatenated parts are ordered by ``column`` ascending with nulls first (cheap: one column)."""
    return _tables_sorted_by(_iter_tables(part_files, [column]), column)


def _tables_sorted_by(tables: Iterable[Any], column: str) -> bool:
    import pyarrow.compute as pc
    seen_value, last = False, None
    for t in tables:
        arr = t.column(0).combine_chunks()
        if len(arr) == 0:
            continue
        nulls = arr.null_count
        if nulls:
            if seen_value:
                return False
            first_valid = pc.index(pc.is_valid(arr), True).as_py()
            if first_valid == -1:
                continue
            if first_valid != nulls:
                return False
            arr = arr.slice(nulls)
        if last is not None and pc.less(arr[0], last).as_py():
            return False
        if len(arr) > 1 and not pc.all(pc.greater_equal(arr.slice(1), arr.slice(0, len(arr) - 1))).as_py():
            return False
        last, seen_value = arr[len(arr) - 1], True
    return True


@dataclass
class CheckpointPlan:
    """What the combine step writes as the new checkpoint (see the module docstring for the format)."""
    path: str
    strategy: Strategy
    prefix_files: tuple[str, ...] = ()  # Ledger: earlier keys, copied first
    prefix_tables: tuple[Any, ...] = ()  # Ledger: earlier keys already in memory (driver plan), copied first

    def metadata(self, spark_fields: dict[str, Any], names: Sequence[str]) -> dict[bytes, bytes]:
        return {CHECKPOINT_META_KEY: json.dumps({"version": CHECKPOINT_VERSION, "strategy": self.strategy.kind,
                                                 "primaryKey": list(self.strategy.primary_key)}).encode(),
                **_spark_schema_meta(spark_fields, names)}


@dataclass
class SliceStats:
    num_records: int
    max_event_time: Any
    checkpoint_written: bool


class SliceWriter:
    """Numbers ordered rows from ``offset_start``, stamps the system time and writes the ODF slice file.

    Offsets are added here, on the driver, because they depend on the global row order the callers already fixed.
    """

    def __init__(self, output_path: str, data_fields: Sequence[Any], *, vocab: Vocab, offset_start: int,
                 system_time_ms: int):
        import pyarrow as pa
        self.vocab, self.next_offset, self.max_et = vocab, offset_start, None
        self.ts_type = pa.timestamp("ms", tz="UTC")
        self.system_time_ms = system_time_ms
        self.schema = pa.schema(
            [pa.field(vocab.offset, pa.int64(), nullable=False), pa.field(vocab.op, pa.int32(), nullable=False),
             pa.field(vocab.system_time, self.ts_type, nullable=False)]
            + [pa.field(f.name, _ms_utc(f.type)) for f in data_fields])
        self.data_fields = list(self.schema)[3:]
        self._out = _BufferedParquetWriter(output_path, self.schema, (vocab.op, vocab.system_time))

    def write(self, data, op=None):
        """``data``: the event-time and data columns (by name); ``op``: int array or None for the constant 0."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc
        n = data.num_rows
        if n == 0:
            return None
        arrays = [pa.array(np.arange(self.next_offset, self.next_offset + n, dtype=np.int64)),
                  pa.repeat(pa.scalar(0, pa.int32()), n) if op is None else _cast(op, pa.int32()),
                  pa.repeat(pa.scalar(self.system_time_ms, self.ts_type), n)]
        arrays += [_cast(data.column(f.name), f.type) for f in self.data_fields]
        table = pa.Table.from_arrays(arrays, schema=self.schema)
        self._out.write(table)
        batch_max = pc.max(table.column(self.vocab.event_time)).as_py()
        if batch_max is not None and (self.max_et is None or batch_max > self.max_et):
            self.max_et = batch_max
        self.next_offset += n
        return table

    @property
    def rows(self) -> int:
        return self._out.rows

    def commit(self) -> None:
        self._out.commit()

    def abort(self) -> None:
        self._out.abort()


def _checkpoint_writer(plan: CheckpointPlan, out: SliceWriter,
                       spark_fields: dict[str, Any]) -> _BufferedParquetWriter:
    """Snapshot checkpoints hold the slice's event-time and data columns, Ledger ones its primary-key columns."""
    import pyarrow as pa
    if plan.strategy.kind == "Snapshot":
        schema = pa.schema(out.data_fields)
    else:
        schema = pa.schema([out.schema.field(k) for k in plan.strategy.primary_key])
    return _BufferedParquetWriter(plan.path, schema.with_metadata(plan.metadata(spark_fields, schema.names)))


def combine_slice(part_files: Sequence[str], output_path: str, *, vocab: Vocab, offset_start: int,
                  system_time_ms: int, checkpoint: CheckpointPlan | None, keep=None) -> SliceStats:
    """Turn Spark's ordered part files ``[dest] [op] event_time, data...`` into the ODF slice (and checkpoint).

    One streaming pass. Rows with ``__odf_dest == 1`` are Snapshot state rows for the checkpoint; ``keep`` (a numpy
    bool array over all rows of the parts, in order) drops rows the driver-side Ledger plan found already seen.
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    part_schema = pq.read_schema(part_files[0]).remove_metadata()
    has_dest = _DEST in part_schema.names
    has_op = vocab.op in part_schema.names  # Append parts leave the constant op 0 to this step
    data_fields = [f for f in part_schema if f.name not in (_DEST, vocab.op)]
    spark_fields = _spark_fields_of_file(part_files[0])
    out = ckpt = None
    try:
        out = SliceWriter(output_path, data_fields, vocab=vocab, offset_start=offset_start,
                          system_time_ms=system_time_ms)
        if checkpoint is not None:
            ckpt = _checkpoint_writer(checkpoint, out, spark_fields)
            for t in list(checkpoint.prefix_tables) + list(_iter_tables(checkpoint.prefix_files, ckpt.schema.names)):
                ckpt.write(t.select(ckpt.schema.names).replace_schema_metadata(None).cast(ckpt.schema))
        seen = 0
        for t in _iter_tables(part_files):
            if keep is not None:
                mask, seen = keep[seen:seen + t.num_rows], seen + t.num_rows
                if not mask.all():
                    t = t.filter(pa.array(mask))
            if has_dest:
                is_out = pc.equal(t.column(_DEST), 0)
                if ckpt is not None:
                    state = t.filter(pc.invert(is_out)).select(ckpt.schema.names)
                    ckpt.write(pa.Table.from_arrays(
                        [_cast(c, f.type) for c, f in zip(state.columns, ckpt.schema)], schema=ckpt.schema))
                t = t.filter(is_out)
            table = out.write(t, t.column(vocab.op) if has_op else None)
            if table is not None and ckpt is not None and checkpoint.strategy.kind == "Ledger":
                ckpt.write(table.select(list(checkpoint.strategy.primary_key)).cast(ckpt.schema))
        return _finish(out, ckpt)
    except BaseException:
        _abort(out, ckpt)
        raise


def _abort(*writers: SliceWriter | _BufferedParquetWriter | None) -> None:
    for w in writers:
        if w is not None:
            w.abort()


def _finish(out: SliceWriter, ckpt: _BufferedParquetWriter | None) -> SliceStats:
    """Commit both files, or neither when the slice is empty (no data -> no checkpoint change either)."""
    if out.rows == 0:
        out.abort()
        if ckpt is not None:
            ckpt.abort()
        return SliceStats(0, None, False)
    out.commit()
    if ckpt is not None:
        ckpt.commit()
    return SliceStats(out.rows, out.max_et, ckpt is not None)


# ----------------------------------------------------------------------------------------------------------------
# Merge phase
# ----------------------------------------------------------------------------------------------------------------


def _ddl_type_equal(a: DataType, b: DataType) -> bool:
    norm = lambda t: "timestamp" if isinstance(t, (TimestampType, TimestampNTZType)) else t.simpleString()  # noqa
    return norm(a) == norm(b)


def check_schema_evolution(prev: StructType, new: StructType, vocab: Vocab, what: str) -> None:
    """New columns may only be appended; removing, renaming, reordering or retyping a column is refused."""
    prev_fields = [f for f in prev.fields if f.name not in vocab.system_columns]
    problems = []
    prev_et = next((f for f in prev_fields if f.name == vocab.event_time), None)
    if prev_et is not None and vocab.event_time in new.names and \
            not _ddl_type_equal(prev_et.dataType, new[vocab.event_time].dataType):
        problems.append(f"event-time column '{vocab.event_time}' changed type from {type_ddl(prev_et.dataType)}"
                        f" to {type_ddl(new[vocab.event_time].dataType)}")
    old_data = [f for f in prev_fields if f.name != vocab.event_time]
    new_data = [f for f in new.fields if f.name != vocab.event_time]
    new_by_name = {f.name: f for f in new_data}
    for i, f in enumerate(old_data):
        if f.name not in new_by_name:
            problems.append(f"column '{f.name}' was removed or renamed")
        elif not _ddl_type_equal(f.dataType, new_by_name[f.name].dataType):
            problems.append(f"column '{f.name}' changed type from {type_ddl(f.dataType)} to"
                            f" {type_ddl(new_by_name[f.name].dataType)}")
        elif i >= len(new_data) or new_data[i].name != f.name:
            problems.append(f"column '{f.name}' moved from position {i + 1} to"
                            f" {[g.name for g in new_data].index(f.name) + 1}")
    if problems:
        raise InvalidInput(
            f"the new data does not match {what}: " + "; ".join(problems)
            + f". Previous columns: {schema_ddl_list(StructType(prev_fields))}; new columns:"
              f" {schema_ddl_list(new)}. Only adding columns at the end is allowed.")


def _read_prev_schema(spark: SparkSession, req: MergeRequest) -> tuple[StructType, str] | None:
    if req.prev_schema_ddl:
        return parse_ddl(req.prev_schema_ddl, "merge.prevSchemaDdl"), "the dataset schema (prevSchemaDdl)"
    if req.prev_schema_path:
        if not os.path.exists(req.prev_schema_path):
            raise InvalidInput(f"merge.prevSchemaPath: file not found: {req.prev_schema_path}")
        return load_parquet(spark, req.prev_schema_path).schema, f"the dataset schema ({req.prev_schema_path})"
    return None


def _read_checkpoint_meta(path: str) -> dict[str, Any] | None:
    import pyarrow.parquet as pq
    try:
        meta = pq.read_schema(path).metadata or {}
        return json.loads(meta[CHECKPOINT_META_KEY]) if CHECKPOINT_META_KEY in meta else None
    except Exception:
        return None


def _usable_checkpoint(req: MergeRequest) -> str | None:
    """The previous checkpoint if it was written by this job for the same strategy and key, else None."""
    path = req.prev_checkpoint_path
    if not path:
        return None
    if not os.path.isfile(path):
        raise InvalidInput(f"merge.prevCheckpointPath: file not found: {path}")
    meta = _read_checkpoint_meta(path)
    ok = meta is not None and meta.get("version") == CHECKPOINT_VERSION and \
        meta.get("strategy") == req.strategy.kind and meta.get("primaryKey") == list(req.strategy.primary_key)
    if ok:
        return path
    if not req.prev_data_paths:
        desc = f"{meta.get('strategy')}(primaryKey={meta.get('primaryKey')})" if meta else "another writer"
        raise InvalidInput(f"the previous checkpoint {path} was written by {desc} and cannot be used for"
                           f" {req.strategy.describe()}; pass prevDataPaths so the state can be rebuilt")
    return None


def _read_history(spark: SparkSession, req: MergeRequest) -> DataFrame:
    missing = [p for p in req.prev_data_paths if not os.path.exists(p)]
    if missing:
        raise InvalidInput(f"merge.prevDataPaths: file not found: {missing[0]}")
    return spark.read.option("mergeSchema", "true").parquet(*req.prev_data_paths)


def _require_columns(names: Sequence[str], available: Sequence[str], what: str) -> None:
    for name in names:
        if name not in available:
            raise InvalidInput(f"{what} column '{name}' is not in the data (available columns:"
                               f" {[c for c in available if c not in _HIDDEN]})")


def _null_safe_join_cond(left: Sequence, right: Sequence):
    return functools.reduce(operator.and_, [a.eqNullSafe(b) for a, b in zip(left, right)])


def _duplicate_key(df: DataFrame, pk: Sequence[str]) -> str | None:
    """JSON of one primary key that occurs more than once in ``df`` (nulls equal), or None.

    One hash aggregation over the key columns only: on a large input much cheaper than a window over every row,
    which sorts whole rows by key (see benchmarks/bench_ingest.py).
    """
    keys = [_c(k) for k in pk]
    found = (df.groupBy(*keys).agg(F.count(F.lit(1)).alias("__odf_n")).where(F.col("__odf_n") > 1)
             .select(F.to_json(F.struct(*keys)).alias("key")).limit(1).collect())
    return found[0]["key"] if found else None


def _duplicate_snapshot_key(key: str) -> InvalidInput:
    return InvalidInput(f"duplicate primary key {key} in the new snapshot: a snapshot must hold each key at most once")


@dataclass
class MergeInput:
    df: DataFrame  # event time + data columns, optionally __odf_row_id (input order) and __odf_event_time_...
    size_bytes: int | None = None  # parquet bytes behind df, when it is staged parquet (small merges: 1 partition)
    normalized: bool = False  # timestamps already TIMESTAMP(ms): the read phase did it
    source_bytes: int | None = None  # bytes of the files df is read from (decides the driver plan of Snapshot)
    rows_read: int | None = None  # set by the merge when it learns how many rows the input has


def _file_bytes(paths: Iterable[str]) -> int:
    return sum(os.path.getsize(p) for p in paths)


def _is_small(size_bytes: int | None) -> bool:
    """Small merges run in one partition: it satisfies every distribution Spark needs, so no exchange is planned."""
    return size_bytes is not None and size_bytes <= SMALL_MERGE_BYTES


def _one_partition(df: DataFrame | None, small: bool) -> DataFrame | None:
    return df.coalesce(1) if small and df is not None else df


def prepare_merge_input(df: DataFrame, vocab: Vocab, strategy: Strategy,
                        normalized: bool = False) -> tuple[DataFrame, list[str]]:
    """Validate system/key columns; returns df with columns [event_time, data...(, row id)] and the data names."""
    cols = [c for c in df.columns if c not in _HIDDEN]
    clash = [c for c in vocab.system_columns if c in cols]
    if clash:
        raise InvalidInput(f"the data must not contain the system column(s) {clash}; they are added by the ingest")
    if vocab.event_time not in cols:
        raise InvalidInput(f"the data has no event-time column '{vocab.event_time}' (columns: {cols})")
    et_type = df.schema[vocab.event_time].dataType
    if not isinstance(et_type, (TimestampType, TimestampNTZType, DateType)):
        raise InvalidInput(f"event-time column '{vocab.event_time}' has type {type_ddl(et_type)}; it must be"
                           f" TIMESTAMP or DATE")
    _require_columns(strategy.primary_key, cols, "primary key")
    _require_columns(strategy.compare_columns or (), cols, "compare")
    data = [vocab.event_time] + [c for c in cols if c != vocab.event_time]
    extra = [c for c in _HIDDEN if c in df.columns]
    df = df.select(*[_c(c) for c in data + extra])
    return (df if normalized else normalize_timestamps(df)), data


def write_in_event_time_order(spark: SparkSession, frame: DataFrame, vocab: Vocab, work: WorkDir,
                              name: str) -> list[str]:
    """Part files holding ``frame``'s rows sorted by event time (nulls first, ties in input order).

    Written as they come and re-sorted only when they are not already in order (checked on one column with pyarrow):
    data usually arrives in event-time order, and a global sort costs as much as the whole write.
    """
    parts = write_parts(frame, work.path(name))
    if parts_sorted_by(parts, vocab.event_time):
        return parts
    # Stable re-sort: ties keep the order of the part files and of the rows inside them.
    staged = load_parquet(spark, os.path.dirname(parts[0]), parts[0])
    resorted = (staged.select("*", F.col("_metadata.file_name").alias("__f"), F.col("_metadata.row_index").alias("__i"))
                .sort(_c(vocab.event_time).asc_nulls_first(), F.col("__f"), F.col("__i"))
                .drop("__f", "__i"))
    return write_parts(resorted, work.path(f"{name}-sorted"))


def merge_append(spark: SparkSession, inp: MergeInput, req: MergeRequest, vocab: Vocab, work: WorkDir,
                 cols: list[str]) -> list[str]:
    """Append: every row, in event-time order. The parts carry no op column: the constant 0 is added by the combine."""
    return write_in_event_time_order(spark, inp.df.select(*[_c(c) for c in cols]), vocab, work, "append")


@dataclass
class LedgerPlan:
    parts: list[str]
    checkpoint: CheckpointPlan
    keep: Any = None  # numpy bool per row of ``parts`` (driver plan); None: the parts hold only new rows


@dataclass
class SeenKeys:
    """Where the Ledger's keys seen so far are: our checkpoint, else every previous slice."""
    files: list[str]
    from_checkpoint: bool
    key_bytes: int  # in-memory size estimate of their key columns

    def read(self, pk: Sequence[str]):
        """The key columns of every file, as one Arrow table (None when nothing was seen yet)."""
        import pyarrow.parquet as pq
        return pa_concat([pq.read_table(f, columns=list(pk)) for f in self.files]) if self.files else None


def _seen_keys(req: MergeRequest, pk: Sequence[str]) -> SeenKeys:
    import pyarrow.parquet as pq
    ckpt_path = _usable_checkpoint(req)
    if ckpt_path:
        files, what = [ckpt_path], "checkpoint primary key"
    else:
        files, what = list(req.prev_data_paths), "primary key (previous data)"
        missing = [p for p in files if not os.path.exists(p)]
        if missing:
            raise InvalidInput(f"merge.prevDataPaths: file not found: {missing[0]}")
    for f in files:
        _require_columns(pk, pq.read_schema(f).names, what)
    return SeenKeys(files, bool(ckpt_path), sum(_uncompressed_bytes(f, pk) for f in files))


def _ledger_checkpoint(req: MergeRequest, distinct_seen) -> CheckpointPlan:
    """Ledger checkpoint written from memory: the seen keys (once each) first, then the keys of the new slice."""
    return CheckpointPlan(req.new_checkpoint_path or "", req.strategy,
                          prefix_tables=(distinct_seen,) if distinct_seen is not None else ())


def merge_ledger(spark: SparkSession, inp: MergeInput, req: MergeRequest, vocab: Vocab, work: WorkDir,
                 cols: list[str], seen: SeenKeys) -> LedgerPlan:
    """Ledger: rows whose key was never seen (first per key in event-time order), sorted by event time.

    The rows are written in event-time order first, as Append writes them; what remains is deciding which rows
    survive. When the keys (previous and new) fit ``DRIVER_MERGE_BYTES`` the driver decides it with one hash pass
    over the key columns (pyarrow) and the combine step drops the others; beyond that a Spark plan does it.
    """
    import pyarrow.parquet as pq
    pk = list(req.strategy.primary_key)
    parts = write_in_event_time_order(spark, inp.df.select(*[_c(c) for c in cols]), vocab, work, "ledger-input")
    inp.rows_read = _count_rows(parts)
    key_bytes = seen.key_bytes + sum(_uncompressed_bytes(p, pk) for p in parts)
    if _flat_types(inp.df.schema, pk) and key_bytes <= DRIVER_MERGE_BYTES:
        new_keys = pa_concat([pq.read_table(p, columns=pk) for p in parts])
        keep, distinct_seen = ledger_keep_mask(new_keys, seen.read(pk))
        return LedgerPlan(parts, _ledger_checkpoint(req, distinct_seen), keep)
    return _merge_ledger_spark(spark, parts, req, vocab, work, cols, seen.files, seen.from_checkpoint)


def _merge_ledger_spark(spark: SparkSession, parts: list[str], req: MergeRequest, vocab: Vocab, work: WorkDir,
                        cols: list[str], seen_files: list[str], from_checkpoint: bool) -> LedgerPlan:
    """The Spark plan of Ledger over the ordered parts: a row's position in them is its order."""
    pk = list(req.strategy.primary_key)
    staged = load_parquet(spark, os.path.dirname(parts[0]), parts[0])
    starts, total = [], 0
    for p in parts:
        starts += [F.lit(os.path.basename(p)), F.lit(total)]
        total += _count_rows([p])
    df = staged.withColumn(_ROW_ID, F.element_at(F.create_map(*starts), F.col("_metadata.file_name"))
                           + F.col("_metadata.row_index"))
    order = [F.col(_ROW_ID)]
    first = Window.partitionBy(*[_c(k) for k in pk]).orderBy(*order)
    prefix: tuple[str, ...] = ()
    seen = None
    if from_checkpoint:
        seen, prefix = load_parquet(spark, seen_files[0]), (seen_files[0],)
    elif seen_files:
        history = _read_history(spark, req)
        prefix = tuple(write_parts(history.select(*[_c(k) for k in pk]).distinct(), work.path("ledger-keys")))
        seen = load_parquet(spark, os.path.dirname(prefix[0]), prefix[0])
    small = _is_small(_file_bytes(parts) + _file_bytes(prefix))
    df, seen = _one_partition(df, small), _one_partition(seen, small)
    if small or _duplicate_key(df, pk) is not None:
        new = df.withColumn("__rn", F.row_number().over(first)).filter(F.col("__rn") == 1).drop("__rn")
    else:
        new = df  # parallel plan, no key repeats in the input: the per-key window would keep every row
    if seen is not None:
        seen = seen.select(*[_c(k).alias(f"__k{i}") for i, k in enumerate(pk)])
        cond = _null_safe_join_cond([_c(k) for k in pk], [F.col(f"__k{i}") for i in range(len(pk))])
        new = new.join(seen.hint("merge") if small else seen, cond, "left_anti")
    frame = (_one_partition(new.select(F.lit(0).cast("int").alias(vocab.op), *[_c(c) for c in cols],
                                       F.col(_ROW_ID)), small)
             .sort(*order).drop(_ROW_ID))
    out = write_parts(frame, work.path("ledger"))
    return LedgerPlan(out, CheckpointPlan(req.new_checkpoint_path or "", req.strategy, prefix))


def _load_snapshot_state(spark: SparkSession, req: MergeRequest,
                         vocab: Vocab) -> tuple[DataFrame | None, int, str | None]:
    """The state per key (event time + data columns), the parquet bytes it comes from, and the checkpoint path
    when it comes from our checkpoint (else it is rebuilt from the previous slices)."""
    ckpt_path = _usable_checkpoint(req)
    if ckpt_path:
        return load_parquet(spark, ckpt_path), _file_bytes([ckpt_path]), ckpt_path
    if not req.prev_data_paths:
        return None, 0, None
    history = _read_history(spark, req)
    pk = list(req.strategy.primary_key)
    _require_columns(pk + [vocab.offset, vocab.op], history.columns, "previous data")
    latest = Window.partitionBy(*[_c(k) for k in pk]).orderBy(_c(vocab.offset).desc())
    state = (history.withColumn("__rk", F.row_number().over(latest))
             .filter((F.col("__rk") == 1) & _c(vocab.op).isin(0, 3))
             .drop("__rk", *vocab.system_columns))
    return state, _file_bytes(req.prev_data_paths), None


def merge_snapshot(spark: SparkSession, inp: MergeInput, req: MergeRequest, vocab: Vocab, work: WorkDir,
                   cols: list[str], state: DataFrame | None, state_bytes: int) -> tuple[list[str], CheckpointPlan]:
    """Snapshot, Spark plan: CDC of the new snapshot against the state, slice rows and next-state rows in one sort."""
    pk = list(req.strategy.primary_key)
    if inp.size_bytes is None:  # not staged yet: the plan below scans the input more than once
        staged = _stage_parts(inp.df, work)
        inp.rows_read = _count_rows(staged)
        inp = MergeInput(load_parquet(spark, os.path.dirname(staged[0]), staged[0]), _file_bytes(staged), True)
    filled = F.col(_ET_FILLED) if _ET_FILLED in inp.df.columns else F.lit(False)
    new = inp.df.select(*[_c(c) for c in cols], filled.alias(_ET_FILLED))
    small = _is_small(None if inp.size_bytes is None else inp.size_bytes + state_bytes)
    new, state = _one_partition(new, small), _one_partition(state, small)
    if small:  # one partition: the check rides along in the merge's own pass
        key_json = F.to_json(F.struct(*[_c(k) for k in pk]))
        dup_count = F.count(F.lit(1)).over(Window.partitionBy(*[_c(k) for k in pk]))
        new = (new.withColumn("__cnt", dup_count)
               .filter(F.when(F.col("__cnt") > 1, F.raise_error(F.concat(F.lit(_DUP_MARK), key_json)))
                       .otherwise(F.lit(True)))
               .drop("__cnt"))
    else:  # parallel plan: a hash aggregation over the keys instead of a window sorting every row by key
        dup = _duplicate_key(new, pk)
        if dup is not None:
            raise _duplicate_snapshot_key(dup)
    types = {f.name: f.dataType for f in new.schema.fields}

    def row(get: Callable[[int, str], Any], op: int | None, dest: int, seq: int):
        return F.struct(F.lit(dest).cast("tinyint").alias(_DEST), F.lit(seq).cast("int").alias(_SEQ),
                        F.lit(op).cast("int").alias(vocab.op),
                        *[get(i, c).cast(types[c]).alias(c) for i, c in enumerate(cols)])

    if state is None:
        n_col = lambda i, c: _c(c)  # noqa: E731
        emitted = new.select(F.inline(F.array(row(n_col, 0, 0, 0), row(n_col, None, 1, 4))))
    else:
        old = state.select(*[(_c(c) if c in state.columns else F.lit(None).cast(types[c])).alias(f"__o{i}")
                             for i, c in enumerate(cols)], F.lit(True).alias("__o_present"))
        nn = new.select(*[_c(c).alias(f"__n{i}") for i, c in enumerate(cols)], F.lit(True).alias("__n_present"),
                        F.col(_ET_FILLED).alias("__n_filled"))
        idx = {c: i for i, c in enumerate(cols)}
        cond = _null_safe_join_cond([F.col(f"__o{idx[k]}") for k in pk], [F.col(f"__n{idx[k]}") for k in pk])
        j = old.join(nn, cond, "full_outer")
        compare = list(req.strategy.compare_columns) if req.strategy.compare_columns else \
            [c for c in cols if c not in pk]
        diffs = []
        for c in compare:
            o, n = F.col(f"__o{idx[c]}"), F.col(f"__n{idx[c]}")
            if c == vocab.event_time:  # only an event time given by the data itself counts as a change
                n = F.when(F.col("__n_filled"), F.lit(None)).otherwise(n)
                diffs.append(n.isNotNull() & ~o.eqNullSafe(n))
            else:
                diffs.append(~o.eqNullSafe(n))
        changed = functools.reduce(operator.or_, diffs) if diffs else F.lit(False)
        o_col = lambda i, c: F.col(f"__o{i}")  # noqa: E731
        n_col = lambda i, c: F.col(f"__n{i}")  # noqa: E731
        emitted = j.select(F.inline(
            F.when(F.col("__o_present").isNull(), F.array(row(n_col, 0, 0, 0), row(n_col, None, 1, 4)))
            .when(F.col("__n_present").isNull(), F.array(row(o_col, 1, 0, 1)))
            .when(changed, F.array(row(o_col, 2, 0, 2), row(n_col, 3, 0, 3), row(n_col, None, 1, 4)))
            .otherwise(F.array(row(o_col, None, 1, 4)))))
    frame = _one_partition(emitted, small).sort(*[_c(k).asc_nulls_first() for k in pk], F.col(_SEQ)).drop(_SEQ)
    parts = write_parts(frame, work.path("snapshot"))
    return parts, CheckpointPlan(req.new_checkpoint_path or "", req.strategy)


# ----------------------------------------------------------------------------------------------------------------
# Driver plans: keys (Ledger) and state (Snapshot) handled with pyarrow on the driver when they fit
# ----------------------------------------------------------------------------------------------------------------

# Up to this many bytes (uncompressed keys for Ledger; input + state files for Snapshot) the merge decision runs on
# the driver: one hash pass in pyarrow instead of Spark shuffles. Set ODF_INGEST_DRIVER_MERGE_BYTES to move the line
# (the driver then needs a few times this much memory); 0 always uses the Spark plans.
DRIVER_MERGE_BYTES = int(os.environ.get("ODF_INGEST_DRIVER_MERGE_BYTES", str(512 << 20)))
_FLAT_SPARK_TYPES = (BooleanType, ByteType, ShortType, IntegerType, LongType, FloatType, DoubleType, DecimalType,
                     StringType, BinaryType, DateType, TimestampType, TimestampNTZType)


def _flat_types(schema: StructType, names: Iterable[str]) -> bool:
    """Whether the columns have types pyarrow compares and sorts exactly as Spark does (no nested types)."""
    return all(isinstance(schema[n].dataType, _FLAT_SPARK_TYPES) for n in names)


def _uncompressed_bytes(path: str, names: Sequence[str]) -> int:
    """In-memory size estimate of some top-level columns of a parquet file, from its footer."""
    import pyarrow.parquet as pq
    md, wanted, total = pq.ParquetFile(path).metadata, set(names), 0
    for g in range(md.num_row_groups):
        group = md.row_group(g)
        for j in range(group.num_columns):
            col = group.column(j)
            if col.path_in_schema.split(".")[0] in wanted:
                total += col.total_uncompressed_size
    return total


def pa_concat(tables: Sequence[Any]):
    import pyarrow as pa
    first = tables[0].schema.remove_metadata()
    return pa.concat_tables([t.replace_schema_metadata(None).cast(first) for t in tables])


def key_codes(columns: Sequence[Any]):
    """A group number per row over the key columns (numpy int64), numbered in order of first appearance.

    Keys compare as Spark's ``<=>`` and GROUP BY do: nulls equal each other, NaN equals NaN, -0.0 equals 0.0.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    code = None
    for col in columns:
        col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        if pa.types.is_floating(col.type):
            col = pc.add(col, pa.scalar(0.0, col.type))  # -0.0 + 0.0 = 0.0
        enc = pc.dictionary_encode(col, null_encoding="encode")
        c = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        if code is None:
            code = c
        else:  # pair with the codes so far, then renumber densely (again in order of first appearance)
            code = pc.dictionary_encode(pa.array(code * len(enc.dictionary) + c)).indices.to_numpy().astype(np.int64)
    return code if code is not None else np.zeros(0, np.int64)


def first_occurrence(codes):
    """True where a row is the first of its group (codes numbered in order of first appearance)."""
    import numpy as np
    if len(codes) == 0:
        return np.zeros(0, bool)
    running_max = np.maximum.accumulate(codes)
    before = np.empty_like(running_max)
    before[0], before[1:] = -1, running_max[:-1]
    return codes > before


def ledger_keep_mask(new_keys, seen_keys):
    """Which new rows (in order) carry a key neither seen before nor earlier in the input; the seen keys once each."""
    import pyarrow as pa
    m = 0 if seen_keys is None else seen_keys.num_rows
    if seen_keys is not None:
        seen_keys = seen_keys.select(new_keys.column_names).replace_schema_metadata(None).cast(
            new_keys.schema.remove_metadata())
        cols = [pa.chunked_array(seen_keys.column(k).chunks + new_keys.column(k).chunks, new_keys.schema.field(k).type)
                for k in new_keys.column_names]
    else:
        cols = [new_keys.column(k) for k in new_keys.column_names]
    first = _first_of_dense_integers(cols)
    if first is None:
        first = first_occurrence(key_codes(cols))
    distinct_seen = None if seen_keys is None else seen_keys.filter(pa.array(first[:m]))
    return first[m:], distinct_seen


def _first_of_dense_integers(cols: Sequence[Any]):
    """``first_occurrence`` for one integer key column without nulls whose values span at most a few times its
    length (ids, sequence numbers): a counting pass finds the keys that occur once, which are first occurrences by
    definition, and only the rows of repeated keys go through the hash pass. None when the shortcut does not apply."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    if len(cols) != 1 or not pa.types.is_integer(cols[0].type):
        return None
    col = cols[0].combine_chunks() if isinstance(cols[0], pa.ChunkedArray) else cols[0]
    n = len(col)
    if n == 0 or col.null_count:
        return None
    bounds = pc.min_max(col)
    low, high = bounds["min"].as_py(), bounds["max"].as_py()
    if high - low > 4 * n + 1024:
        return None
    values = col.to_numpy().astype(np.int64) - low
    repeated = np.bincount(values)[values] > 1
    first = ~repeated
    if repeated.any():
        rows = np.nonzero(repeated)[0]
        first[rows] = first_occurrence(key_codes([col.take(pa.array(rows))]))
    return first


def _key_json(table, pk: Sequence[str], row: int) -> str:
    """The key of one row as Spark's ``to_json(struct(...))`` writes it (null fields left out)."""
    values = {}
    for k in pk:
        v = table.column(k)[row].as_py()
        if v is None:
            continue
        if isinstance(v, datetime):
            v = (v if v.tzinfo else v.replace(tzinfo=timezone.utc)).astimezone(timezone.utc)
            v = v.strftime("%Y-%m-%dT%H:%M:%S.") + f"{v.microsecond // 1000:03d}Z"
        elif isinstance(v, date):
            v = v.isoformat()
        elif isinstance(v, bytes):
            v = __import__("base64").b64encode(v).decode()
        values[k] = v
    return json.dumps(values, separators=(",", ":"), ensure_ascii=False, default=str)


def _distinct(a, b):
    """``a IS DISTINCT FROM b`` per row, as Spark: nulls equal each other, NaN equals NaN."""
    import pyarrow as pa
    import pyarrow.compute as pc
    same = pc.or_(pc.fill_null(pc.equal(a, b), False), pc.and_(pc.is_null(a), pc.is_null(b)))
    if pa.types.is_floating(a.type):
        same = pc.or_(same, pc.fill_null(pc.and_(pc.is_nan(a), pc.is_nan(b)), False))
    return pc.invert(same)


def _normalized_table(table, fields: Sequence[Any]):
    """``table`` with exactly ``fields`` (missing columns as nulls), timestamps as timestamp(ms, UTC)."""
    import pyarrow as pa
    n = table.num_rows
    return pa.Table.from_arrays(
        [_cast(table.column(f.name), f.type) if f.name in table.column_names else pa.nulls(n, f.type)
         for f in fields], schema=pa.schema(list(fields)))


def _spark_key_order(table, pk: Sequence[str], then: str):
    """Sort arguments ordering rows as Spark's ``ORDER BY pk ASC NULLS FIRST, then``: for floating-point keys NaN
    comes after every number (Arrow would place it with the nulls), so such keys sort by a rank column first."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    keys = []
    for k in pk:
        col = table.column(k)
        if pa.types.is_floating(col.type):
            rank = np.where(pc.is_nan(col).fill_null(False).to_numpy(zero_copy_only=False), 2, 1)
            rank[pc.is_null(col).to_numpy(zero_copy_only=False)] = 0
            table = table.append_column(f"__rank_{k}", pa.array(rank.astype(np.int8)))
            keys.append((f"__rank_{k}", "ascending"))
        keys.append((k, "ascending", "at_start"))
    return table, keys + [(then, "ascending")]


@dataclass
class SnapshotChanges:
    out: Any  # op + event time + data columns, sorted by key then op: the slice rows
    state: Any  # event time + data columns: the next state, one row per key, in the order of the new snapshot


def snapshot_changes(new, state, pk: Sequence[str], compare: Sequence[str], filled, op_name: str,
                     event_time: str) -> SnapshotChanges:
    """Change data capture of ``new`` (one row per key) against ``state`` (conformance §7), all in pyarrow.

    Both tables hold the same columns. ``filled`` marks new rows whose event time came from the source: such a time
    is not a change. Cost: one hash pass over the keys of both, a comparison of the rows present in both.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    n, m = new.num_rows, (state.num_rows if state is not None else 0)
    if state is None:
        state = new.slice(0, 0)
    codes = key_codes([pa.chunked_array(state.column(k).chunks + new.column(k).chunks, new.schema.field(k).type)
                       for k in pk])
    groups = int(codes.max()) + 1 if len(codes) else 0
    s_codes, n_codes = codes[:m], codes[m:]
    counts = np.bincount(n_codes, minlength=groups)
    repeated = counts[n_codes] > 1
    if repeated.any():
        raise _duplicate_snapshot_key(_key_json(new, pk, int(np.argmax(repeated))))
    in_state = np.full(groups, -1, np.int64)
    in_state[s_codes] = np.arange(m)
    in_new = np.zeros(groups, bool)
    in_new[n_codes] = True
    state_row = in_state[n_codes]  # per new row: its key's state row, or -1
    n_both = np.nonzero(state_row >= 0)[0]
    s_both = state_row[n_both]
    n_idx, s_idx = pa.array(n_both), pa.array(s_both)
    changed = pa.repeat(pa.scalar(False), len(n_both))
    for c in compare:
        old, cur = state.column(c).take(s_idx), new.column(c).take(n_idx)
        diff = _distinct(old, cur)
        if c == event_time:  # only an event time given by the data itself counts as a change
            diff = pc.and_(diff, pc.and_(pc.is_valid(cur), pc.invert(filled.take(n_idx))))
        changed = pc.or_(changed, diff)
    changed_np = changed.to_numpy(zero_copy_only=False).astype(bool)
    ch_n, ch_s = n_both[changed_np], s_both[changed_np]
    added = np.nonzero(state_row < 0)[0]
    removed = np.nonzero(~in_new[s_codes])[0]

    def rows(table, idx, ops, seq):
        picked = table.take(pa.array(idx, pa.int64()))
        return picked.append_column(op_name, pa.array(np.full(len(idx), ops, np.int32))) \
            .append_column("__seq", pa.array(np.full(len(idx), seq, np.int8)))

    out = pa.concat_tables([rows(new, added, 0, 0), rows(state, removed, 1, 1), rows(state, ch_s, 2, 2),
                            rows(new, ch_n, 3, 3)])
    out = out.take(pc.sort_indices(*_spark_key_order(out, pk, "__seq"))).drop_columns(["__seq"])
    keep_old = np.zeros(n, bool)
    keep_old[n_both[~changed_np]] = True
    pick = np.where(keep_old, state_row, m + np.arange(n, dtype=np.int64))
    next_state = pa.concat_tables([state, new]).take(pa.array(pick, pa.int64())) if m else new
    return SnapshotChanges(out, next_state)


def collect_arrow(df: DataFrame):
    """The rows of ``df`` on the driver as one Arrow table, in order (Spark ships Arrow batches, no row objects)."""
    return df.toArrow()


def _collect_input(inp: MergeInput, cols: list[str], with_filled: bool = False):
    """The parsed input on the driver as Arrow, timestamps as timestamp(ms, UTC); and the filled-event-time flags."""
    import pyarrow as pa
    extra = []
    if with_filled:
        extra = [(F.col(_ET_FILLED) if _ET_FILLED in inp.df.columns else F.lit(False)).alias(_ET_FILLED)]
    raw = collect_arrow(inp.df.select(*[_c(c) for c in cols], *extra))
    inp.rows_read = raw.num_rows
    fields = [pa.field(f.name, _ms_utc(f.type)) for f in raw.schema if f.name != _ET_FILLED]
    filled = raw.column(_ET_FILLED).combine_chunks() if with_filled else None
    return _normalized_table(raw, fields), filled


def _in_event_time_order(table, vocab: Vocab):
    """``table`` sorted by event time, nulls first, ties in input order (Arrow's sort is stable); as is if sorted."""
    import pyarrow.compute as pc
    if _tables_sorted_by([table.select([vocab.event_time])], vocab.event_time):
        return table
    return table.take(pc.sort_indices(table, sort_keys=[(vocab.event_time, "ascending", "at_start")]))


def write_slice(req: MergeRequest, vocab: Vocab, table, op=None, *, spark_fields: dict[str, Any],
                checkpoint: CheckpointPlan | None = None, state=None) -> SliceStats:
    """Write an in-memory slice (event time + data columns, in final order) and its checkpoint: the Snapshot
    ``state``, or for Ledger the earlier keys (``checkpoint.prefix_tables``) followed by the keys of this slice."""
    out = ckpt = None
    try:
        out = SliceWriter(req.output_path, list(table.schema), vocab=vocab, offset_start=_offset_start(req),
                          system_time_ms=req.system_time_ms)
        written = out.write(table, op)
        if checkpoint is not None and checkpoint.path:
            ckpt = _checkpoint_writer(checkpoint, out, spark_fields)
            if checkpoint.strategy.kind == "Snapshot":
                ckpt.write(state.cast(ckpt.schema))
            else:
                for t in list(checkpoint.prefix_tables) + ([written] if written is not None else []):
                    ckpt.write(t.select(ckpt.schema.names).replace_schema_metadata(None).cast(ckpt.schema))
        return _finish(out, ckpt)
    except BaseException:
        _abort(out, ckpt)
        raise


def collect_plan_fits(inp: MergeInput, schema: StructType, cols: Sequence[str], extra_bytes: int = 0) -> bool:
    """Whether the merge can hold the parsed input (and ``extra_bytes`` of keys or state) on the driver."""
    size = inp.source_bytes if inp.source_bytes is not None else inp.size_bytes
    return size is not None and size + extra_bytes <= DRIVER_MERGE_BYTES and _flat_types(schema, cols)


def append_on_driver(inp: MergeInput, req: MergeRequest, vocab: Vocab, cols: list[str]) -> SliceStats:
    """Append, driver plan: the parsed rows collected as Arrow and written once, as the slice (no part files)."""
    table, _ = _collect_input(inp, cols)
    return write_slice(req, vocab, _in_event_time_order(table, vocab), spark_fields={})


def ledger_on_driver(inp: MergeInput, req: MergeRequest, vocab: Vocab, cols: list[str],
                     seen: SeenKeys) -> SliceStats:
    """Ledger, driver plan: collected rows in event-time order, minus those whose key was seen (or seen earlier in
    the input), written once; the checkpoint is the seen keys plus the new ones."""
    import pyarrow as pa
    pk = list(req.strategy.primary_key)
    table = _in_event_time_order(_collect_input(inp, cols)[0], vocab)
    keep, distinct_seen = ledger_keep_mask(table.select(pk), seen.read(pk))
    if not keep.all():
        table = table.filter(pa.array(keep))
    return write_slice(req, vocab, table, spark_fields=_spark_fields_of_schema(inp.df.schema),
                       checkpoint=_ledger_checkpoint(req, distinct_seen))


def merge_snapshot_on_driver(inp: MergeInput, req: MergeRequest, vocab: Vocab, cols: list[str],
                             state_df: DataFrame | None, state_path: str | None) -> SliceStats:
    """Snapshot, driver plan: collect the parsed snapshot as Arrow (no staging write), diff it in pyarrow, write the
    slice and the next state directly."""
    pk = list(req.strategy.primary_key)
    new, filled = _collect_input(inp, cols, with_filled=True)
    fields = list(new.schema)
    if state_path is not None:
        import pyarrow.parquet as pq
        state = _normalized_table(pq.read_table(state_path), fields)
    elif state_df is not None:
        state = _normalized_table(collect_arrow(state_df), fields)
    else:
        state = None
    compare = list(req.strategy.compare_columns) if req.strategy.compare_columns else \
        [c for c in cols if c not in pk]
    changes = snapshot_changes(new, state, pk, compare, filled, vocab.op, vocab.event_time)
    return write_slice(req, vocab, changes.out.select(cols), changes.out.column(vocab.op),
                       spark_fields=_spark_fields_of_schema(inp.df.schema),
                       checkpoint=CheckpointPlan(req.new_checkpoint_path or "", req.strategy), state=changes.state)


def _offset_start(req: MergeRequest) -> int:
    return (req.prev_offset + 1) if req.prev_offset is not None else 0


def run_merge(spark: SparkSession, inp: MergeInput, req: MergeRequest, vocab: Vocab, work: WorkDir) -> dict[str, Any]:
    """Merge the new rows into a slice file (and checkpoint); returns the ``merge`` part of the response."""
    strategy = req.strategy
    df, cols = prepare_merge_input(inp.df, vocab, strategy, inp.normalized)
    inp.df, inp.normalized = df, True
    new_schema = StructType([df.schema[c] for c in cols])
    prev = _read_prev_schema(spark, req)
    if prev is not None:
        check_schema_evolution(prev[0], new_schema, vocab, prev[1])
    combine = functools.partial(combine_slice, output_path=req.output_path, vocab=vocab,
                                offset_start=_offset_start(req), system_time_ms=req.system_time_ms)
    if strategy.kind == "Append":
        if collect_plan_fits(inp, df.schema, cols):
            stats = append_on_driver(inp, req, vocab, cols)
        else:
            stats = combine(merge_append(spark, inp, req, vocab, work, cols), checkpoint=None)
    elif strategy.kind == "Ledger":
        seen = _seen_keys(req, strategy.primary_key)
        if collect_plan_fits(inp, df.schema, cols, seen.key_bytes):
            stats = ledger_on_driver(inp, req, vocab, cols, seen)
        else:
            ledger = merge_ledger(spark, inp, req, vocab, work, cols, seen)
            stats = combine(ledger.parts, checkpoint=ledger.checkpoint, keep=ledger.keep)
    else:
        state, state_bytes, state_path = _load_snapshot_state(spark, req, vocab)
        if state is not None:
            check_schema_evolution(state.schema, new_schema, vocab, "the state in the previous checkpoint")
        if collect_plan_fits(inp, df.schema, cols, state_bytes):
            stats = merge_snapshot_on_driver(inp, req, vocab, cols, state, state_path)
        else:
            parts, checkpoint = merge_snapshot(spark, inp, req, vocab, work, cols, state, state_bytes)
            stats = combine(parts, checkpoint=checkpoint)
    start = _offset_start(req)
    return {"numRecords": stats.num_records,
            "offsetInterval": {"start": start, "end": start + stats.num_records - 1} if stats.num_records else None,
            "maxEventTime": _format_event_time(stats.max_event_time),
            "checkpointWritten": stats.checkpoint_written}


def _format_event_time(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return format_time_ms((value - _EPOCH) // timedelta(milliseconds=1))
    if isinstance(value, date):
        return f"{value.isoformat()}T00:00:00Z"
    return str(value)


# ----------------------------------------------------------------------------------------------------------------
# Turning Spark failures into InvalidInput
# ----------------------------------------------------------------------------------------------------------------

_USER_SQLSTATE_CLASSES = ("22", "42", "KD", "P0")


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.strip().splitlines() if line.strip()), "")


def _clean_spark_message(text: str) -> str:
    """Keep the informative head of a Spark message: no SQLSTATE, hints, plans or JVM frames."""
    msg = text.strip()
    msg = re.sub(r"^An error occurred while calling [\w.]+\.\s*:\s*", "", msg)
    msg = re.sub(r"^[\w.$]+(Exception|Error):\s*", "", _first_line(msg)) if "\n" in msg else \
        re.sub(r"^[\w.$]+(Exception|Error):\s*", "", msg)
    for cut in (" SQLSTATE:", "Correct the value as per the syntax", "Use `try_cast`", "If necessary set",
                "== SQL", "== DataFrame"):
        pos = msg.find(cut)
        if pos > 0:
            msg = msg[:pos]
    return msg.strip().rstrip(";").strip()


def _exception_text(exc: BaseException) -> str:
    parts = [str(exc)]
    java = getattr(exc, "java_exception", None)
    if java is not None:
        try:
            parts.append(str(java.toString()))
        except Exception:
            pass
    return "\n".join(parts)


def _sqlstate(exc: BaseException, text: str) -> str | None:
    get = getattr(exc, "getSqlState", None)
    if get is not None:
        try:
            state = get()
            if state:
                return state
        except Exception:
            pass
    states = re.findall(r"SQLSTATE: (\w{5})", text)
    return states[-1] if states else None


def _is_user_sql_error(exc: BaseException) -> bool:
    state = _sqlstate(exc, _exception_text(exc))
    return bool(state) and state.startswith(_USER_SQLSTATE_CLASSES)


def _innermost_cause(text: str) -> str:
    causes = re.findall(r"Caused by: (?:[\w.$]+): (.*)", text)
    useful = [c for c in causes if "Malformed records are detected" not in c and "Encountered error while" not in c]
    return _clean_spark_message(useful[-1] if useful else (causes[-1] if causes else text))


def _find_line(path: str, raw: str, encoding: str) -> int | None:
    try:
        with open(path, encoding=encoding, errors="replace", newline="") as f:
            for n, line in enumerate(f, 1):
                if line.rstrip("\r\n") == raw:
                    return n
    except OSError:
        pass
    return None


def _first_corrupt_row(spark: SparkSession, src: SourceInfo):
    schema = StructType(list(src.schema.fields) + [StructField(_CORRUPT, StringType())])
    opts = dict(src.options, mode="PERMISSIVE", columnNameOfCorruptRecord=_CORRUPT)
    reader = spark.read.options(**opts).schema(schema)
    df = reader.csv(src.spark_path) if src.fmt == "csv" else reader.json(src.spark_path)
    rows = df.filter(F.col(_CORRUPT).isNotNull()).limit(1).collect()
    return rows[0] if rows else None


def _csv_detail(raw: str, row, src: SourceInfo) -> str | None:
    sep = src.options.get("sep", ",")
    quote = src.options.get("quote", '"')
    kwargs: dict[str, Any] = {"delimiter": sep} if len(sep) == 1 else {}
    if quote in ("", "\u0000"):
        kwargs["quoting"] = csv.QUOTE_NONE
    else:
        kwargs["quotechar"] = quote
    esc = src.options.get("escape", "\\")
    if esc and esc != "\u0000":
        kwargs["escapechar"] = esc
    try:
        tokens = next(csv.reader([raw], **kwargs)) if len(sep) == 1 else raw.split(sep)
    except (csv.Error, StopIteration):
        return None
    fields = src.schema.fields
    if len(tokens) != len(fields):
        return f"expected {len(fields)} columns, found {len(tokens)}"
    null_value = src.options.get("nullValue", "")
    for f, tok in zip(fields, tokens):
        if row[f.name] is None and tok != null_value and tok != "":
            return f"value {tok!r} of column '{f.name}' does not fit type {type_ddl(f.dataType)}"
    return None


def diagnose_parse_failure(spark: SparkSession, src: SourceInfo, cause: str) -> InvalidInput:
    """Re-read the failing file permissively to find the first bad record: its line/record number and value."""
    number, detail = None, None
    if src.fmt in ("csv", "json") and src.schema is not None:
        try:
            row = _first_corrupt_row(spark, src)
            if row is not None:
                raw = row[_CORRUPT]
                number = _find_line(src.spark_path, raw, src.encoding if src.spark_path == src.display_path
                                    else "utf-8")
                if src.fmt == "csv":
                    detail = _csv_detail(raw, row, src)
                else:
                    try:
                        json.loads(raw)
                    except ValueError as e:
                        detail = f"invalid JSON: {e}"
        except Exception:  # diagnosis is best effort; the cause alone is still a good message
            pass
    where = f"{src.numbering} {number}: " if number is not None else ""
    message = f"cannot read {src.display_path}: {where}{detail or cause}"
    kw = {src.numbering: number} if number is not None else {}
    return InvalidInput(message, file=src.display_path, **kw)


def explain_failure(spark: SparkSession, exc: BaseException, sources: Sequence[SourceInfo]) -> InvalidInput | None:
    """A Spark failure caused by the data or the user's SQL -> InvalidInput; anything else -> None (internal)."""
    text = _exception_text(exc)
    dup = re.search(re.escape(_DUP_MARK) + r"(.*?)(?: SQLSTATE|\n|$)", text)
    if dup:
        return _duplicate_snapshot_key(dup.group(1).strip())
    m = re.search(r"Encountered error while reading file (\S+?)\.?\s+SQLSTATE", text)
    if m:
        failing = os.path.normpath(unquote(re.sub(r"^file:(//)?", "", m.group(1))))
        for src in sources:
            if os.path.normpath(os.path.abspath(src.spark_path)) == failing:
                return diagnose_parse_failure(spark, src, _innermost_cause(text))
    state = _sqlstate(exc, text)
    if state and state.startswith(_USER_SQLSTATE_CLASSES):
        single = sources[0].display_path if len(sources) == 1 else None
        prefix = f"cannot read {single}: " if single else ""
        return InvalidInput(prefix + _innermost_cause(text), file=single)
    return None


# ----------------------------------------------------------------------------------------------------------------
# Orchestration
# ----------------------------------------------------------------------------------------------------------------


def _stage_parts(df: DataFrame, work: WorkDir) -> list[str]:
    return write_parts(df.withColumn(_ROW_ID, F.monotonically_increasing_id()), work.path("read-staged"))


def _input_bytes(inputs: Sequence[InputFile]) -> int:
    """Bytes of the prepared input files (directories summed): what the Snapshot driver plan will hold in memory."""
    total = 0
    for inp in inputs:
        path = _local_path(inp.path)
        if os.path.isdir(path):
            total += sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)
        elif os.path.exists(path):
            total += os.path.getsize(path)
    return total


def _count_rows(files: Sequence[str]) -> int:
    import pyarrow.parquet as pq
    return sum(pq.ParquetFile(f).metadata.num_rows for f in files)


def execute(spark: SparkSession, req: IngestRequest, work: WorkDir) -> dict[str, Any]:
    """Run the requested phases; raises InvalidInput for user errors."""
    response: dict[str, Any] = {"status": "Success"}
    sources: list[SourceInfo] = []
    try:
        merge_input: MergeInput | None = None
        if req.read is not None:
            read = build_read_frame(spark, req.read, req.vocab, work)
            sources = read.sources
            schema = schema_ddl_list(StructType([f for f in read.df.schema.fields if f.name not in _HIDDEN]))
            if req.read.output_path:
                n = combine_plain(write_parts(read.df, work.path("read")), req.read.output_path)
                response["read"] = {"numRecords": n, "schema": schema}
                if req.merge is not None:
                    size = _file_bytes([req.read.output_path])
                    merge_input = MergeInput(load_parquet(spark, req.read.output_path), size, source_bytes=size)
            else:
                # The rows go straight into the merge; it reports how many it read.
                response["read"] = {"numRecords": None, "schema": schema}
                merge_input = MergeInput(read.df, None, True, source_bytes=_input_bytes(req.read.inputs))
        if req.merge is not None:
            if merge_input is None:
                path = req.merge.input_path or ""
                if not os.path.exists(path):
                    raise InvalidInput(f"merge.inputPath: file not found: {path}")
                size = _file_bytes([path])
                merge_input = MergeInput(load_parquet(spark, path), size, source_bytes=size)
            response["merge"] = run_merge(spark, merge_input, req.merge, req.vocab, work)
            if response.get("read", {}).get("numRecords", 0) is None:
                rows = merge_input.rows_read
                response["read"]["numRecords"] = response["merge"]["numRecords"] if rows is None else rows
        return response
    except InvalidInput:
        raise
    except Exception as e:
        explained = explain_failure(spark, e, sources)
        if explained is not None:
            raise explained from e
        raise


def _work_parent(req: IngestRequest) -> str | None:
    if req.work_dir:
        return req.work_dir
    for p in (req.merge.output_path if req.merge else None, req.read.output_path if req.read else None,
              req.response_path):
        if p:
            return os.path.dirname(os.path.abspath(p))
    return None


def run_request(spark: SparkSession, request: dict[str, Any]) -> dict[str, Any]:
    """Execute one ingest request with the given session; always returns a response dict (never raises)."""
    try:
        req = parse_request(request)
        work = WorkDir(_work_parent(req))
        try:
            with spark_sql_conf(spark):
                return execute(spark, req, work)
        finally:
            work.cleanup()
    except InvalidInput as e:
        return e.to_response()
    except Exception as e:
        return internal_error_response(e)


def write_response(path: str, response: dict[str, Any]) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp-{uuid.uuid4().hex}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(response, f, indent=2)
    os.replace(tmp, path)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: spark-submit ingest.py REQUEST.json", file=sys.stderr)
        return 2
    try:
        with open(args[0], encoding="utf-8") as f:
            request = json.load(f)
        response_path = request["responsePath"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"cannot read the request {args[0]} (or its responsePath): {e}", file=sys.stderr)
        return 2
    spark = create_spark_session()
    try:
        spark.sparkContext.setLogLevel("WARN")
        response = run_request(spark, request)
    finally:
        spark.stop()
    try:
        write_response(response_path, response)
    except OSError as e:
        print(f"cannot write the response {response_path}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
