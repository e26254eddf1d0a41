"""Spark engine for ODF derivative datasets whose results do not depend on how inputs are batched.

Run as ``spark-submit spark_jobs/transform.py [--validate] REQUEST.json RESPONSE.json`` or import and call
:func:`execute_transform` / :func:`validate_query` with an existing ``SparkSession``. Only pyspark and the
standard library are imported, so the file can be shipped to ``spark-submit`` on its own.

Request file (JSON; the spec's manifest form of ``TransformRequest``, camelCase as in its JSON schema)::

    {"kind": "TransformRequest", "version": 1,
     "content": {
        "datasetId": "did:odf:f...", "datasetAlias": "...", "systemTime": "2024-01-01T00:00:00Z",
        "vocab": {"offsetColumn", "operationTypeColumn", "systemTimeColumn", "eventTimeColumn"},
        "transform": {"kind": "Sql", "engine": "spark", "queries": [{"alias": "step1", "query": "..."},
                                                                    {"query": "... the output ..."}]},
        "queryInputs": [{"datasetId", "datasetAlias", "queryAlias", "vocab",
                         "offsetInterval": {"start", "end"}   (absent: no new data for this input),
                         "dataPaths": [parquet files of the new slices],
                         "schemaFile": parquet file (possibly empty) carrying the input's schema,
                         "explicitWatermarks": [{"systemTime", "eventTime"}]}],
        "nextOffset": n, "prevCheckpointPath": path (optional), "newCheckpointPath": path, "newDataPath": path},
     "extensions": {"inputs": {"<queryAlias>": {"historyDataPaths": [every slice of the input up to and
                                                  including the new ones, in offset order]}}}}

``extensions`` is ours (the spec type forbids extra properties) and is only read by the stateful path. When it
is missing, a stateful run accepts ``dataPaths`` as the whole history only if the input starts at offset 0.
``transform.query`` (single query) is accepted as a shorthand for ``queries: [{query}]``.

Response file::

    {"kind": "TransformResponseRoot", "version": 1,
     "content": {"value": {"kind": "Success", "newOffsetInterval": {"start", "end"} (absent: no rows),
                           "newWatermark": "...Z" (absent if any input has no explicit watermark)}
                 | {"kind": "InvalidQuery", "message": "..."}
                 | {"kind": "InternalError", "message": "...", "backtrace": "..."}},
     "extensions": {"planClass": "stateless" | "stateful", "reason", "inputModes", "correctionKey",
                    "outputRows", "rowsByOp", "timingsMs", "warnings"}}

``--validate`` reads the same request (only ``transform``, ``vocab`` and each input's ``queryAlias``,
``vocab`` and ``schemaFile`` are used) and answers ``{"kind": "ValidateQueryResponseRoot", "version": 1,
"content": {"value": {"kind": "Success", "schema": "<Spark JSON schema of the output slice>"} | InvalidQuery |
InternalError}, "extensions": {"planClass", ...}}``. The exit code is 0 whenever a response file was written.

Semantics (the promise): the output changelog, reduced to its current rows (op 0 +A and 3 +C add a row,
op 1 -R and 2 -C remove one equal row), equals the query evaluated once over all input data, however the
inputs were split into transactions. Each input is a temp view named by its ``queryAlias``; aliased steps
become temp views; the one step without alias is the output. The analysed/optimised Catalyst plan decides:

* **stateless** (only projections, filters, unions, generators such as ``explode``, sorts over the inputs):
  the query runs over the new rows only (offsets inside ``offsetInterval``), O(new data). The op of the input
  row an output row came from is carried through the plan (hidden columns added by rewriting the plan), so a
  retraction upstream becomes a retraction downstream and a -C/+C pair stays a pair (a pair whose two output
  rows are equal is dropped; a half pair becomes -R or +A). If the query outputs the op column itself it is
  kept as produced. If it reads an input's op column, that input is seen as its raw changelog and every
  output row derived from it is an append.
* **stateful** (aggregates, windows, joins, distinct, limits, subqueries, constant sources...): the query runs
  over each input's *reduced state* as of the new offsets (``historyDataPaths`` with offsets <= end; a -R/-C
  removes the oldest equal live row, so a row keeps the offset/system_time of the append that created it),
  or over the raw changelog for inputs whose op column the query reads. The new output state is diffed
  against the previous one (from the checkpoint) as multisets over all output columns: removed rows become
  -R, added rows +A; when the output has a natural key (all GROUP BY expressions of a top-level aggregate
  appear as output columns, or a global aggregate) a removed and an added row with the same key become a
  -C immediately followed by its +C.

Non-deterministic expressions (``rand``, ``uuid``, ``shuffle``, ``current_timestamp``, ``now``,
``current_date``, ``monotonically_increasing_id``, ``input_file_name``, ``reflect``...), TABLESAMPLE,
non-query statements and reads of anything but the inputs are rejected with InvalidQuery, as are outputs that
contain the offset or system_time column, lack a timestamp/date event_time, or use the reserved ``__odf_``
prefix. Spark analysis/parse errors and data errors raised by the query under ANSI mode (SQLSTATE class 22)
are InvalidQuery naming the failing step.

Output slice: ONE parquet file at ``newDataPath`` (none when there are no rows) with columns
``offset`` (int64, consecutive from ``nextOffset``), ``op`` (int32), ``system_time`` (request time,
timestamp ms UTC), ``event_time``, then the query's other columns in query order (names from the output
vocab; top-level timestamps truncated to ms UTC, timestamp_ntz read as UTC). Canonical row order, so that a
re-run reproduces the same logical hash:

* stateless: by input position in ``queryInputs``, input offset (a +C sorts with its -C), rank of the row
  among the rows produced from the same input row, -C before +C, then all output columns ascending
  (nulls first);
* stateful: all -R rows, then the -C/+C pairs, then the +A rows; inside each block by the key columns
  (if any), the pair rank, -C before +C, then all output columns ascending (nulls first).

Checkpoint (``newCheckpointPath``, always written): ONE parquet file. Stateful: one row per distinct output
row (event_time and data columns as in the output slice) plus ``__odf_count`` (int64 multiplicity), sorted
by all columns. Stateless: just the empty ``__odf_count`` column. The field metadata of ``__odf_count``
holds ``{"__odf_checkpoint": JSON}`` with ``format`` = ``odf-spark-transform-checkpoint``, ``version`` = 1,
``planClass``, ``queryHash`` (SHA-256 of the canonical JSON of the queries) and, for stateful, ``inputs``:
``{queryAlias: {"datasetId", "lastOffset"}}`` used to check that the next request continues where this one
ended. A stateful run whose previous checkpoint is a stateless one starts from an empty output state.

Limits: a stateful transaction costs O(history). Ties in a window's ORDER BY, LIMIT without ORDER BY and the
element order of ``collect_list`` are non-deterministic in Spark itself and are not detected. Map/variant
columns cannot be diffed or reduced (InvalidQuery for stateful queries). After a query change the stateful
path diffs against the old query's state (its rows are retracted, the new ones appended); the output may only
gain columns. Output and checkpoint paths must be local (``file:`` or plain paths).
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import shutil
import sys
import time
import traceback
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark import SparkContext
from pyspark.errors.exceptions.captured import CapturedException
from pyspark.sql import Column, DataFrame, Observation, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

SPARK_SETTINGS: dict[str, str] = {
    "spark.sql.ansi.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MILLIS",
    # Queries may only read the inputs: no `parquet.`/path/`` tables.
    "spark.sql.runSQLOnFiles": "false",
}

OP_APPEND, OP_RETRACT, OP_CORRECT_FROM, OP_CORRECT_TO = 0, 1, 2, 3

CHECKPOINT_FORMAT = "odf-spark-transform-checkpoint"
CHECKPOINT_VERSION = 1
RESERVED_PREFIX = "__odf_"
_COUNT = "__odf_count"
_CHECKPOINT_META_KEY = "__odf_checkpoint"
_INPUT_MARKER = "__odf_input"  # field metadata on each input's op column: the input's index
_SRC, _SRC_OFFSET, _SRC_OP = "__odf_src", "__odf_src_offset", "__odf_src_op"

STATELESS, STATEFUL = "stateless", "stateful"

# Catalyst nodes that keep a stateless plan row-wise; all but Project/Union/Generate pass rows through.
_ROW_WISE_PASS_THROUGH = frozenset(
    {"Filter", "Sort", "Repartition", "RepartitionByExpression", "RebalancePartitions", "SubqueryAlias", "View",
     "ResolvedHint"}
)
_ROW_WISE = _ROW_WISE_PASS_THROUGH | {"Project", "Union", "Generate"}
# Leaves a query may use besides the inputs (constants).
_CONSTANT_LEAVES = frozenset({"LocalRelation", "OneRowRelation", "Range", "CTERelationRef", "ResolvedInlineTable"})
_INPUT_LEAF_CLASSES = frozenset({"LogicalRelation", "LogicalRDD"})
# Expressions Spark calls deterministic although their value depends on when/where the query runs.
_CLOCK_EXPRESSIONS = frozenset(
    {"CurrentTimestamp", "Now", "CurrentDate", "LocalTimestamp", "CurrentTime", "CurrentBatchTimestamp",
     "CurrentUser", "CurrentTimestampNTZ"}
)


# --------------------------------------------------------------------------------------------------------------
# Errors


class TransformError(Exception):
    """Base of the errors raised here (the script cannot import odf_core, so no OdfError)."""


class InvalidQueryError(TransformError):
    """The query (or its output) breaks the engine contract: answered with InvalidQuery."""


class RequestError(TransformError):
    """The request file is malformed: a coordinator bug, answered with InternalError."""


class CheckpointError(TransformError):
    """The previous checkpoint is unreadable or does not continue this request: InternalError."""


# --------------------------------------------------------------------------------------------------------------
# Request / response model


@dataclass(frozen=True)
class Vocab:
    offset: str = "offset"
    op: str = "op"
    system_time: str = "system_time"
    event_time: str = "event_time"


@dataclass(frozen=True)
class OffsetInterval:
    start: int
    end: int


@dataclass(frozen=True)
class Watermark:
    system_time: dt.datetime
    event_time: dt.datetime


@dataclass(frozen=True)
class QueryStep:
    query: str
    alias: str | None = None


@dataclass(frozen=True)
class SqlTransform:
    engine: str
    queries: tuple[QueryStep, ...]
    temporal_tables: tuple[Mapping[str, Any], ...] = ()
    version: str | None = None


@dataclass(frozen=True)
class TransformInput:
    dataset_id: str
    dataset_alias: str
    query_alias: str
    vocab: Vocab
    offset_interval: OffsetInterval | None
    data_paths: tuple[str, ...]
    schema_file: str
    explicit_watermarks: tuple[Watermark, ...] = ()
    history_data_paths: tuple[str, ...] | None = None  # from extensions; stateful path only


@dataclass(frozen=True)
class TransformRequest:
    dataset_id: str
    dataset_alias: str
    system_time: dt.datetime
    vocab: Vocab
    transform: SqlTransform
    query_inputs: tuple[TransformInput, ...]
    next_offset: int
    new_checkpoint_path: str
    new_data_path: str
    prev_checkpoint_path: str | None = None


@dataclass(frozen=True)
class Success:
    new_offset_interval: OffsetInterval | None
    new_watermark: dt.datetime | None
    diagnostics: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class InvalidQuery:
    message: str
    diagnostics: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class InternalError:
    message: str
    backtrace: str | None = None
    diagnostics: Mapping[str, Any] = field(default_factory=dict)


TransformResponse = Success | InvalidQuery | InternalError


# --------------------------------------------------------------------------------------------------------------
# Parsing the request

_TS_RE = re.compile(r"^(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})$")


def parse_timestamp(text: str, where: str = "timestamp") -> dt.datetime:
    """RFC 3339 -> aware UTC datetime (fraction truncated to microseconds)."""
    m = _TS_RE.match(text) if isinstance(text, str) else None
    if not m:
        raise RequestError(f"{where}: not an RFC 3339 timestamp: {text!r}")
    date, clock, frac, zone = m.groups()
    frac = (frac or "")[:6].ljust(6, "0")
    zone = "+00:00" if zone in ("Z", "z") else zone
    try:
        value = dt.datetime.fromisoformat(f"{date}T{clock}.{frac}{zone}")
    except ValueError as e:
        raise RequestError(f"{where}: invalid timestamp {text!r}: {e}") from None
    return value.astimezone(dt.timezone.utc)


def format_timestamp(value: dt.datetime) -> str:
    """Aware datetime -> RFC 3339 UTC with 'Z' and only the fraction digits needed."""
    value = value.astimezone(dt.timezone.utc)
    text = value.strftime("%Y-%m-%dT%H:%M:%S")
    if value.microsecond:
        text += f".{value.microsecond:06d}".rstrip("0")
    return text + "Z"


def _field(obj: Mapping[str, Any], key: str, where: str, kind: type | tuple[type, ...], required: bool = True) -> Any:
    if not isinstance(obj, Mapping):
        raise RequestError(f"{where}: expected an object, got {type(obj).__name__}")
    if key not in obj or obj[key] is None:
        if required:
            raise RequestError(f"{where}.{key}: required field is missing")
        return None
    value = obj[key]
    if kind is int and isinstance(value, bool) or not isinstance(value, kind):
        raise RequestError(f"{where}.{key}: expected {getattr(kind, '__name__', kind)}, got {value!r}")
    return value


def _parse_vocab(obj: Any, where: str) -> Vocab:
    if obj is None:
        return Vocab()
    d = Vocab()
    return Vocab(
        offset=_field(obj, "offsetColumn", where, str, False) or d.offset,
        op=_field(obj, "operationTypeColumn", where, str, False) or d.op,
        system_time=_field(obj, "systemTimeColumn", where, str, False) or d.system_time,
        event_time=_field(obj, "eventTimeColumn", where, str, False) or d.event_time,
    )


def parse_transform(obj: Any, where: str = "transform") -> SqlTransform:
    """Parse a Transform union value. Engine/temporal-table checks happen later (they are InvalidQuery)."""
    kind = _field(obj, "kind", where, str)
    if kind not in ("Sql", "sql", "SQL"):
        raise InvalidQueryError(f"{where}.kind: unsupported transform kind {kind!r}, only 'Sql' is supported")
    engine = _field(obj, "engine", where, str)
    queries = _field(obj, "queries", where, list, False)
    single = _field(obj, "query", where, str, False)
    if queries is None and single is None:
        raise InvalidQueryError(f"{where}: neither 'queries' nor 'query' is given")
    if queries is not None and single is not None:
        raise InvalidQueryError(f"{where}: give either 'queries' or 'query', not both")
    steps = []
    if single is not None:
        steps.append(QueryStep(query=single))
    else:
        for i, q in enumerate(queries):
            steps.append(QueryStep(query=_field(q, "query", f"{where}.queries[{i}]", str),
                                   alias=_field(q, "alias", f"{where}.queries[{i}]", str, False)))
    temporal = _field(obj, "temporalTables", where, list, False) or []
    return SqlTransform(engine=engine, queries=tuple(steps), temporal_tables=tuple(temporal),
                        version=_field(obj, "version", where, str, False))


def _parse_input(obj: Any, where: str, history: Mapping[str, Any]) -> TransformInput:
    interval_obj = _field(obj, "offsetInterval", where, Mapping, False)
    interval = None
    if interval_obj is not None:
        interval = OffsetInterval(_field(interval_obj, "start", f"{where}.offsetInterval", int),
                                  _field(interval_obj, "end", f"{where}.offsetInterval", int))
        if interval.start < 0 or interval.end < interval.start:
            raise RequestError(f"{where}.offsetInterval: invalid interval [{interval.start}, {interval.end}]")
    paths = _field(obj, "dataPaths", where, list)
    for i, p in enumerate(paths):
        if not isinstance(p, str):
            raise RequestError(f"{where}.dataPaths[{i}]: expected a path string, got {p!r}")
    marks = []
    for i, w in enumerate(_field(obj, "explicitWatermarks", where, list, False) or []):
        wp = f"{where}.explicitWatermarks[{i}]"
        marks.append(Watermark(parse_timestamp(_field(w, "systemTime", wp, str), f"{wp}.systemTime"),
                               parse_timestamp(_field(w, "eventTime", wp, str), f"{wp}.eventTime")))
    alias = _field(obj, "queryAlias", where, str)
    hist = None
    ext = history.get(alias)
    if ext is not None:
        hp = _field(ext, "historyDataPaths", f"extensions.inputs.{alias}", list)
        if not all(isinstance(p, str) for p in hp):
            raise RequestError(f"extensions.inputs.{alias}.historyDataPaths: expected path strings")
        hist = tuple(hp)
    return TransformInput(
        dataset_id=_field(obj, "datasetId", where, str),
        dataset_alias=_field(obj, "datasetAlias", where, str),
        query_alias=alias,
        vocab=_parse_vocab(_field(obj, "vocab", where, Mapping, False), f"{where}.vocab"),
        offset_interval=interval,
        data_paths=tuple(paths),
        schema_file=_field(obj, "schemaFile", where, str),
        explicit_watermarks=tuple(marks),
        history_data_paths=hist,
    )


def parse_request(doc: Any) -> TransformRequest:
    """Parse the request manifest (see module docstring). Raises RequestError / InvalidQueryError."""
    if _field(doc, "kind", "request", str) != "TransformRequest":
        raise RequestError(f"request.kind: expected 'TransformRequest', got {doc.get('kind')!r}")
    content = _field(doc, "content", "request", Mapping)
    ext = _field(doc, "extensions", "request", Mapping, False) or {}
    history = _field(ext, "inputs", "extensions", Mapping, False) or {}
    w = "content"
    inputs = tuple(_parse_input(o, f"{w}.queryInputs[{i}]", history)
                   for i, o in enumerate(_field(content, "queryInputs", w, list)))
    seen: set[str] = set()
    for inp in inputs:
        if inp.query_alias.lower() in seen:
            raise RequestError(f"{w}.queryInputs: duplicate queryAlias {inp.query_alias!r}")
        seen.add(inp.query_alias.lower())
    next_offset = _field(content, "nextOffset", w, int)
    if next_offset < 0:
        raise RequestError(f"{w}.nextOffset: must be >= 0, got {next_offset}")
    return TransformRequest(
        dataset_id=_field(content, "datasetId", w, str),
        dataset_alias=_field(content, "datasetAlias", w, str),
        system_time=parse_timestamp(_field(content, "systemTime", w, str), f"{w}.systemTime"),
        vocab=_parse_vocab(_field(content, "vocab", w, Mapping, False), f"{w}.vocab"),
        transform=parse_transform(_field(content, "transform", w, Mapping), f"{w}.transform"),
        query_inputs=inputs,
        next_offset=next_offset,
        prev_checkpoint_path=_field(content, "prevCheckpointPath", w, str, False),
        new_checkpoint_path=_field(content, "newCheckpointPath", w, str),
        new_data_path=_field(content, "newDataPath", w, str),
    )


def response_to_json(resp: TransformResponse, root_kind: str = "TransformResponseRoot",
                     extra_success: Mapping[str, Any] | None = None) -> dict[str, Any]:
    if isinstance(resp, Success):
        value: dict[str, Any] = {"kind": "Success"}
        if resp.new_offset_interval is not None:
            value["newOffsetInterval"] = {"start": resp.new_offset_interval.start, "end": resp.new_offset_interval.end}
        if resp.new_watermark is not None:
            value["newWatermark"] = format_timestamp(resp.new_watermark)
        value.update(extra_success or {})
    elif isinstance(resp, InvalidQuery):
        value = {"kind": "InvalidQuery", "message": resp.message}
    else:
        value = {"kind": "InternalError", "message": resp.message}
        if resp.backtrace:
            value["backtrace"] = resp.backtrace
    doc: dict[str, Any] = {"kind": root_kind, "version": 1, "content": {"value": value}}
    if resp.diagnostics:
        doc["extensions"] = dict(resp.diagnostics)
    return doc


# --------------------------------------------------------------------------------------------------------------
# Small Spark helpers


def _q(name: str) -> str:
    """Back-quote an identifier (aliases such as `com.example.trips` contain dots)."""
    return "`" + name.replace("`", "``") + "`"


def _c(name: str) -> Column:
    return F.col(_q(name))


def _session(spark: SparkSession) -> SparkSession:
    """A child session: own temp views and settings, shared SparkContext; the caller's session is untouched."""
    s = spark.newSession()
    for k, v in SPARK_SETTINGS.items():
        s.conf.set(k, v)
    return s


def _orderable(t: T.DataType) -> bool:
    if isinstance(t, T.MapType) or type(t).__name__ == "VariantType":
        return False
    if isinstance(t, T.ArrayType):
        return _orderable(t.elementType)
    if isinstance(t, T.StructType):
        return all(_orderable(f.dataType) for f in t.fields)
    return True


def _local_path(path: str) -> str:
    if path.startswith("file://"):
        return path[len("file://"):]
    if path.startswith("file:"):
        return path[len("file:"):]
    if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", path):
        raise RequestError(f"only local paths are supported for outputs, got {path!r}")
    return path


def _write_single_parquet(df: DataFrame, path: str, sort: Sequence[Column] = ()) -> None:
    """Write `df` as exactly one parquet file at `path` (Spark writes directories; move the part file)."""
    target = _local_path(path)
    parent = os.path.dirname(os.path.abspath(target))
    os.makedirs(parent, exist_ok=True)
    tmp = os.path.join(parent, f".{os.path.basename(target)}.{uuid.uuid4().hex}.tmp")
    try:
        out = df.coalesce(1)
        if sort:
            out = out.sortWithinPartitions(*sort)
        out.write.mode("overwrite").parquet(tmp)
        parts = sorted(f for f in os.listdir(tmp) if f.startswith("part-") and f.endswith(".parquet"))
        if len(parts) != 1:
            raise TransformError(f"expected one parquet part file in {tmp}, found {parts}")
        os.replace(os.path.join(tmp, parts[0]), target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _error_text(e: BaseException) -> str:
    """Spark's message without the plan dump and JVM stack trace."""
    lines = []
    for line in str(e).strip().splitlines():
        if line.startswith(("'", "+-", ":-", ":  ", "JVM stacktrace")) or line.startswith("\tat "):
            break
        lines.append(line.rstrip())
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines[:15]) or type(e).__name__


def _is_query_error(e: BaseException) -> bool:
    """Analysis errors and ANSI data errors (SQLSTATE class 22/42) are the query's fault."""
    if not isinstance(e, CapturedException):
        return False
    try:
        state = e.getSqlState() or ""
    except Exception:  # pragma: no cover - defensive: older exception shapes
        state = ""
    return state.startswith(("22", "42"))


# --------------------------------------------------------------------------------------------------------------
# Catalyst plan access through py4j


class _Catalyst:
    """Thin typed wrapper over the JVM Catalyst objects of one session."""

    def __init__(self, session: SparkSession) -> None:
        self.session = session
        self.jvm = session._jvm
        self.jss = session._jsparkSession

    @staticmethod
    def items(seq: Any) -> list[Any]:
        return [seq.apply(i) for i in range(seq.size())]

    def seq(self, values: Sequence[Any]) -> Any:
        lst = self.jvm.java.util.ArrayList()
        for v in values:
            lst.add(v)
        return self.jvm.scala.jdk.javaapi.CollectionConverters.asScala(lst).toList()

    @staticmethod
    def cls(obj: Any) -> str:
        return obj.getClass().getSimpleName()

    def parse_query(self, sql: str) -> DataFrame:
        """Parse with the query-only grammar (no DDL, SET, INSERT...) and analyse."""
        plan = self.jss.sessionState().sqlParser().parseQuery(sql)
        return self.dataframe(plan)

    def dataframe(self, plan: Any) -> DataFrame:
        return DataFrame(self.jvm.org.apache.spark.sql.classic.Dataset.ofRows(self.jss, plan), self.session)

    def project(self, exprs: Sequence[Any], child: Any) -> Any:
        return self.jvm.org.apache.spark.sql.catalyst.plans.logical.Project(self.seq(exprs), child)

    def walk(self, plan: Any) -> Iterator[Any]:
        """All plan nodes, including subquery plans hidden in expressions."""
        stack = [plan]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(self.items(node.children()))
            stack.extend(self.items(node.subqueries()))

    @staticmethod
    def marker(attr: Any) -> int | None:
        md = attr.metadata()
        return int(md.getLong(_INPUT_MARKER)) if md.contains(_INPUT_MARKER) else None

    def input_index(self, node: Any) -> int | None:
        """Index of the transform input a leaf reads (our marker on its op column), else None."""
        if self.cls(node) not in _INPUT_LEAF_CLASSES:
            return None
        for a in self.items(node.output()):
            m = self.marker(a)
            if m is not None:
                return m
        return None


# --------------------------------------------------------------------------------------------------------------
# Inputs


def _marked_schema(schema: T.StructType, vocab: Vocab, index: int, where: str) -> T.StructType:
    """Input schema with offset int64 / op int32 and our marker on the op column."""
    names = {f.name for f in schema.fields}
    for col in (vocab.offset, vocab.op, vocab.event_time):
        if col not in names:
            raise RequestError(f"{where}: input schema has no column {col!r} (columns: {sorted(names)})")
    fields = []
    for f in schema.fields:
        if f.name == vocab.op:
            f = T.StructField(f.name, T.IntegerType(), f.nullable, {_INPUT_MARKER: index})
        elif f.name == vocab.offset:
            f = T.StructField(f.name, T.LongType(), f.nullable, f.metadata)
        fields.append(f)
    return T.StructType(fields)


_SCHEMA_CACHE: dict[tuple[str, int, int], T.StructType] = {}


def _file_schema(session: SparkSession, path: str) -> T.StructType:
    """Schema of one parquet file (with field metadata), cached by path/size/mtime: inference runs a job."""
    st = os.stat(_local_path(path))
    key = (os.path.abspath(_local_path(path)), st.st_size, st.st_mtime_ns)
    if key not in _SCHEMA_CACHE:
        if len(_SCHEMA_CACHE) > 256:
            _SCHEMA_CACHE.clear()
        _SCHEMA_CACHE[key] = session.read.parquet(path).schema
    return _SCHEMA_CACHE[key]


def _remember_schema(path: str, schema: T.StructType) -> None:
    st = os.stat(_local_path(path))
    _SCHEMA_CACHE[(os.path.abspath(_local_path(path)), st.st_size, st.st_mtime_ns)] = schema


def _input_schema(session: SparkSession, inp: TransformInput, index: int) -> T.StructType:
    where = f"queryInputs[{index}] ({inp.query_alias})"
    source = inp.schema_file
    if not source or not os.path.exists(_local_path(source)):
        candidates = list(inp.data_paths) or list(inp.history_data_paths or ())
        if not candidates:
            raise RequestError(f"{where}.schemaFile: file not found: {source!r}")
        source = candidates[0]
    try:
        schema = _file_schema(session, source)
    except CapturedException as e:
        raise RequestError(f"{where}: cannot read schema from {source!r}: {_error_text(e)}") from None
    return _marked_schema(schema, inp.vocab, index, where)


def _read_rows(session: SparkSession, schema: T.StructType, paths: Sequence[str]) -> DataFrame:
    """Rows of the given slices; an empty input is a LogicalRDD so the optimiser cannot fold it away."""
    if not paths:
        return session.createDataFrame(session.sparkContext.emptyRDD(), schema)
    return session.read.schema(schema).parquet(*paths)


def _slice_rows(session: SparkSession, inp: TransformInput, schema: T.StructType) -> DataFrame:
    """The new rows of one input: offsets inside its offsetInterval."""
    if inp.offset_interval is None:
        return _read_rows(session, schema, ())
    if not inp.data_paths:
        raise RequestError(f"input {inp.query_alias!r} has an offsetInterval but no dataPaths")
    iv = inp.offset_interval
    off = _c(inp.vocab.offset)
    return _read_rows(session, schema, inp.data_paths).where((off >= F.lit(iv.start)) & (off <= F.lit(iv.end)))


def reduce_changelog(rows: DataFrame, vocab: Vocab) -> DataFrame:
    """Current rows of a changelog: each -R/-C removes the oldest live row with equal data columns.

    Rows are equal when all columns but offset/op/system_time are equal (nulls equal). With a valid changelog
    the survivors of a group of equal rows are its last (appends - removals) appends in offset order.
    """
    data = [c for c in rows.columns if c not in (vocab.offset, vocab.op, vocab.system_time)]
    bad = [f.name for f in rows.schema.fields if f.name in data and not _orderable(f.dataType)]
    if bad:
        raise InvalidQueryError(f"stateful queries cannot reduce inputs with map/variant columns: {bad}")
    op = _c(vocab.op)
    is_add = F.when(op.isin(OP_APPEND, OP_CORRECT_TO), 1).otherwise(0)
    is_rem = F.when(op.isin(OP_RETRACT, OP_CORRECT_FROM), 1).otherwise(0)
    w = Window.partitionBy(*[_c(c) for c in data]).orderBy(_c(vocab.offset))
    removed = F.sum(is_rem).over(w.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing))
    adds_so_far = F.sum(is_add).over(w.rowsBetween(Window.unboundedPreceding, Window.currentRow))
    return (
        rows.withColumn("__odf_removed", removed)
        .withColumn("__odf_adds", adds_so_far)
        .where((is_add == 1) & (F.col("__odf_adds") > F.col("__odf_removed")))
        .drop("__odf_removed", "__odf_adds")
    )


def _history_rows(session: SparkSession, inp: TransformInput, schema: T.StructType, end: int | None,
                  changelog: bool) -> DataFrame:
    paths = inp.history_data_paths
    if paths is None:
        starts_at_zero = inp.offset_interval is None or inp.offset_interval.start == 0
        if not starts_at_zero:
            raise RequestError(
                f"input {inp.query_alias!r}: a stateful query needs extensions.inputs.{inp.query_alias}"
                ".historyDataPaths (all slices up to the new ones)")
        paths = inp.data_paths if inp.offset_interval is not None else ()
    rows = _read_rows(session, schema, paths)
    if end is not None:
        rows = rows.where(_c(inp.vocab.offset) <= F.lit(end))
    return rows if changelog else reduce_changelog(rows, inp.vocab)


def _output_watermark(inputs: Sequence[TransformInput]) -> dt.datetime | None:
    """Minimum over inputs of their latest explicit watermark; absent if any input has none."""
    if not inputs:
        return None
    latest = []
    for inp in inputs:
        if not inp.explicit_watermarks:
            return None
        latest.append(max(w.event_time for w in inp.explicit_watermarks))
    return min(latest)


# --------------------------------------------------------------------------------------------------------------
# Running the SQL steps and inspecting the plan


def _check_transform(transform: SqlTransform) -> None:
    if transform.engine.lower() != "spark":
        raise InvalidQueryError(f"transform.engine is {transform.engine!r}; this engine only runs 'spark' queries")
    if transform.temporal_tables:
        raise InvalidQueryError(
            "transform.temporalTables is a Flink-specific extension and is not supported by the Spark engine; "
            "use a join over the input's reduced state instead")
    outputs = [i for i, s in enumerate(transform.queries) if s.alias is None]
    if len(outputs) != 1:
        raise InvalidQueryError(
            f"exactly one query step must have no alias (the output), found {len(outputs)} of {len(transform.queries)}")


def _step_label(i: int, step: QueryStep) -> str:
    return f"query step {i} (alias {step.alias!r})" if step.alias else f"query step {i} (output)"


def _run_steps(session: SparkSession, transform: SqlTransform, views: Mapping[str, DataFrame]) -> DataFrame:
    """Register inputs and aliased steps as temp views; return the output step's DataFrame."""
    cat = _Catalyst(session)
    for alias, df in views.items():
        df.createOrReplaceTempView(_q(alias))
    taken = {a.lower() for a in views}
    output: DataFrame | None = None
    for i, step in enumerate(transform.queries):
        label = _step_label(i, step)
        if step.alias is not None:
            if step.alias.lower() in taken:
                raise InvalidQueryError(f"{label}: alias {step.alias!r} is already used by an input or another step")
            taken.add(step.alias.lower())
        sql = step.query.strip().rstrip(";").strip()
        try:
            df = cat.parse_query(sql)
        except CapturedException as e:
            if _is_query_error(e):
                raise InvalidQueryError(f"{label} failed: {_error_text(e)}") from None
            raise
        if step.alias is None:
            output = df
        else:
            df.createOrReplaceTempView(_q(step.alias))
    assert output is not None  # guaranteed by _check_transform
    return output


def _nondeterministic_in(cat: _Catalyst, expr: Any) -> str | None:
    """Name of a function that makes `expr` non-deterministic (subquery plans are walked separately)."""
    name = cat.cls(expr)
    if name in _CLOCK_EXPRESSIONS:
        return str(expr.prettyName())
    children = cat.items(expr.children())
    for child in children:
        found = _nondeterministic_in(cat, child)
        if found:
            return found
    if "Subquery" in name or name in ("Exists", "ListQuery") or expr.deterministic():
        return None
    if any(not c.deterministic() for c in children):
        return None  # inherited from a subquery below
    return str(expr.prettyName())


def _check_purity(cat: _Catalyst, analyzed: Any) -> None:
    """Reject non-deterministic functions, sampling and reads of anything but the inputs."""
    for node in cat.walk(analyzed):
        name = cat.cls(node)
        if name == "Sample":
            raise InvalidQueryError("TABLESAMPLE is not deterministic and is not allowed in transformations")
        if node.children().size() == 0 and name not in _CONSTANT_LEAVES and cat.input_index(node) is None:
            raise InvalidQueryError(f"the query reads a source other than its inputs ({node.nodeName()})")
        for expr in cat.items(node.expressions()):
            bad = _nondeterministic_in(cat, expr)
            if bad:
                raise InvalidQueryError(
                    f"non-deterministic function {bad}() is not allowed: a transformation must give the same "
                    "result every time it runs")


def _classify(cat: _Catalyst, optimized: Any) -> tuple[str, str]:
    """(plan class, reason): stateless iff every node is row-wise and every leaf is an input."""
    for node in cat.walk(optimized):
        name = cat.cls(node)
        if node.subqueries().size() > 0:
            return STATEFUL, f"subquery in {name}"
        if cat.input_index(node) is not None:
            continue
        if name not in _ROW_WISE:
            return STATEFUL, name
    return STATELESS, ""


def _inputs_reading_op(cat: _Catalyst, optimized: Any) -> frozenset[int]:
    """Inputs whose op column the (column-pruned) plan really uses."""
    found: set[int] = set()
    for node in cat.walk(optimized):
        if cat.input_index(node) is not None:
            continue
        for attr in cat.items(node.references().toSeq()):
            m = cat.marker(attr)
            if m is not None:
                found.add(m)
    return frozenset(found)


def _natural_key(cat: _Catalyst, optimized: Any) -> tuple[str, ...] | None:
    """Output columns carrying all grouping expressions of a top-level aggregate, else None."""
    out = cat.items(optimized.output())
    names = [a.name() for a in out]
    ids: list[int | None] = [a.exprId().id() for a in out]
    node = optimized
    while True:
        name = cat.cls(node)
        if name in ("Filter", "Sort", "SubqueryAlias", "View", "Repartition", "RepartitionByExpression"):
            node = node.children().apply(0)
            continue
        if name == "Project":
            mapping: dict[int, int] = {}
            for e in cat.items(node.projectList()):
                if cat.cls(e) == "AttributeReference":
                    mapping[e.exprId().id()] = e.exprId().id()
                elif cat.cls(e) == "Alias" and cat.cls(e.child()) == "AttributeReference":
                    mapping[e.exprId().id()] = e.child().exprId().id()
            ids = [mapping.get(i) if i is not None else None for i in ids]
            node = node.children().apply(0)
            continue
        if name != "Aggregate":
            return None
        groups = cat.items(node.groupingExpressions())
        covered: dict[int, int] = {}  # output attribute id -> grouping index
        for e in cat.items(node.aggregateExpressions()):
            target = e.child() if cat.cls(e) == "Alias" else e
            for gi, g in enumerate(groups):
                if target.semanticEquals(g):
                    covered[e.exprId().id()] = gi
                    break
        key = [n for n, i in zip(names, ids) if i is not None and i in covered]
        got = {covered[i] for i in ids if i is not None and i in covered}
        if len(got) != len(groups):
            return None
        return tuple(key)


@dataclass(frozen=True)
class OutputLayout:
    """Where the system columns are in the query output."""

    columns: tuple[str, ...]  # query output columns, in order
    event_time: str  # actual name in the query output
    op: str | None  # actual name of an op column the query produced
    data: tuple[str, ...]  # the other columns


def _layout(schema: T.StructType, vocab: Vocab, plan_class: str) -> OutputLayout:
    names = [f.name for f in schema.fields]
    lower = [n.lower() for n in names]
    dup = sorted({n for n in lower if lower.count(n) > 1})
    if dup:
        raise InvalidQueryError(f"the query output has duplicate column names: {dup}")
    reserved = [n for n in names if n.lower().startswith(RESERVED_PREFIX)]
    if reserved:
        raise InvalidQueryError(f"column names starting with {RESERVED_PREFIX!r} are reserved: {reserved}")
    for sys_col in (vocab.offset, vocab.system_time):
        if sys_col.lower() in lower:
            raise InvalidQueryError(
                f"the query output must not contain the system column {sys_col!r}: the engine assigns it "
                "(select the data columns explicitly)")
    if vocab.event_time.lower() not in lower:
        raise InvalidQueryError(f"the query output has no {vocab.event_time!r} column (columns: {names})")
    et = schema.fields[lower.index(vocab.event_time.lower())]
    if not isinstance(et.dataType, (T.TimestampType, T.TimestampNTZType, T.DateType)):
        raise InvalidQueryError(
            f"the output column {et.name!r} must be a timestamp or date, got {et.dataType.simpleString()}")
    op_name = None
    if vocab.op.lower() in lower:
        op_field = schema.fields[lower.index(vocab.op.lower())]
        if plan_class == STATEFUL:
            raise InvalidQueryError(
                f"the query outputs the {vocab.op!r} column but is not row-wise (it is {plan_class}); "
                "only projections/filters/unions can pass the operation type through")
        if not isinstance(op_field.dataType, (T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
            raise InvalidQueryError(f"the output column {op_field.name!r} must be an integer operation type")
        op_name = op_field.name
    data = tuple(n for n in names if n not in (et.name, op_name))
    return OutputLayout(tuple(names), et.name, op_name, data)


@dataclass(frozen=True)
class PlanInfo:
    plan_class: str
    reason: str
    op_read: frozenset[int]  # indices of inputs whose op column the query reads
    key: tuple[str, ...] | None  # natural key of a stateful output
    layout: OutputLayout


def _inspect(session: SparkSession, out: DataFrame, vocab: Vocab) -> PlanInfo:
    cat = _Catalyst(session)
    qe = out._jdf.queryExecution()
    _check_purity(cat, qe.analyzed())
    try:
        optimized = qe.optimizedPlan()
    except CapturedException as e:  # constant folding evaluates e.g. 1/0 here
        if _is_query_error(e):
            raise InvalidQueryError(f"the query fails: {_error_text(e)}") from None
        raise
    plan_class, reason = _classify(cat, optimized)
    layout = _layout(out.schema, vocab, plan_class)
    key = _natural_key(cat, optimized) if plan_class == STATEFUL else None
    return PlanInfo(plan_class, reason, _inputs_reading_op(cat, optimized), key, layout)


# --------------------------------------------------------------------------------------------------------------
# Output assembly


def _normalized(name: str, dtype: T.DataType) -> Column:
    """Timestamps as ms UTC (what the slice stores), so states compare equal after a round trip."""
    col = _c(name)
    if isinstance(dtype, T.TimestampNTZType):
        col = col.cast(T.TimestampType())
    if isinstance(dtype, (T.TimestampType, T.TimestampNTZType)):
        col = F.date_trunc("millisecond", col)
    return col


def _plain_alias(col: Column, name: str) -> Column:
    """Alias with explicitly empty metadata (drops our input marker from the written schema).

    pyspark's ``alias(metadata={})`` would inherit the child's metadata, hence the direct JVM call.
    """
    jvm = SparkContext._jvm
    assert jvm is not None, "no active SparkContext"
    return Column(getattr(col._jc, "as")(name, jvm.org.apache.spark.sql.types.Metadata.empty()))


def _sort_columns(df: DataFrame, names: Sequence[str]) -> list[Column]:
    types = {f.name: f.dataType for f in df.schema.fields}
    return [_c(n).asc_nulls_first() for n in names if _orderable(types[n])]


def _finalize(df: DataFrame, op: Column, order: Sequence[Column], layout: OutputLayout, vocab: Vocab,
              request: TransformRequest) -> DataFrame:
    """Assign offsets in `order` and lay the columns out as a data slice."""
    types = {f.name: f.dataType for f in df.schema.fields}
    rank = F.row_number().over(Window.orderBy(*order))
    return df.select(
        _plain_alias((F.lit(request.next_offset - 1) + rank).cast(T.LongType()), vocab.offset),
        _plain_alias(op.cast(T.IntegerType()), vocab.op),
        _plain_alias(F.lit(request.system_time).cast(T.TimestampType()), vocab.system_time),
        _plain_alias(_normalized(layout.event_time, types[layout.event_time]), vocab.event_time),
        *[_plain_alias(_normalized(n, types[n]), n) for n in layout.data],
    )


def _write_output(final: DataFrame, request: TransformRequest) -> tuple[OffsetInterval | None, dict[str, int]]:
    """Write the slice (no file when empty); row counts per op come from an observation of the write."""
    op = _c(request.vocab.op)
    obs = Observation()
    observed = final.observe(obs, F.count(F.lit(1)).alias("rows"),
                             *[F.sum(F.when(op == k, 1).otherwise(0)).alias(str(k)) for k in range(4)])
    _write_single_parquet(observed, request.new_data_path, sort=[_c(request.vocab.offset)])
    metrics = obs.get
    total = int(metrics["rows"])
    counts = {str(k): int(metrics[str(k)] or 0) for k in range(4) if metrics[str(k)]}
    if total == 0:
        os.remove(_local_path(request.new_data_path))
        return None, counts
    return OffsetInterval(request.next_offset, request.next_offset + total - 1), counts


# --------------------------------------------------------------------------------------------------------------
# Stateless path


class _SourceColumns:
    """Rewrites a row-wise optimised plan so every output row also carries (input index, offset, op)."""

    def __init__(self, cat: _Catalyst, vocabs: Sequence[Vocab]) -> None:
        self.cat = cat
        self.vocabs = vocabs

    def _aliases(self, index: int) -> list[Any]:
        tmpl = self.cat.session.range(1).select(
            F.lit(index).alias(_SRC), F.col("id").alias(_SRC_OFFSET), F.col("id").cast("int").alias(_SRC_OP))
        return self.cat.items(tmpl._jdf.queryExecution().analyzed().projectList())

    def rewrite(self, node: Any) -> Any:
        """Returns a plan whose output is the node's output followed by the three source columns."""
        cat = self.cat
        index = cat.input_index(node)
        if index is not None:
            out = cat.items(node.output())
            vocab = self.vocabs[index]
            off = next(a for a in out if a.name() == vocab.offset)
            op = next(a for a in out if cat.marker(a) is not None)
            src, soff, sop = self._aliases(index)
            return cat.project(out + [src.newInstance(), soff.withNewChildren(cat.seq([off])).newInstance(),
                                      sop.withNewChildren(cat.seq([op])).newInstance()], node)
        name = cat.cls(node)
        kids = [self.rewrite(c) for c in cat.items(node.children())]
        if name == "Project":
            hidden = cat.items(kids[0].output())[-3:]
            return cat.project(cat.items(node.projectList()) + hidden, kids[0])
        if name == "Union":
            return node.withNewChildren(cat.seq(kids))
        if name in _ROW_WISE_PASS_THROUGH or name == "Generate":
            hidden = cat.items(kids[0].output())[-3:]
            return cat.project(cat.items(node.output()) + hidden, node.withNewChildren(cat.seq(kids)))
        raise TransformError(f"cannot carry source columns through {name}")


def _run_stateless(session: SparkSession, request: TransformRequest, out: DataFrame, info: PlanInfo
                   ) -> tuple[OffsetInterval | None, dict[str, int]]:
    """Run the row-wise query over the new rows only, each output row keeping its source row's op."""
    cat = _Catalyst(session)
    optimized = out._jdf.queryExecution().optimizedPlan()
    rewritten = _SourceColumns(cat, [i.vocab for i in request.query_inputs]).rewrite(optimized)
    df = cat.dataframe(rewritten)
    layout = info.layout
    src, soff = F.col(_SRC), F.col(_SRC_OFFSET)
    values = _sort_columns(df, layout.columns)
    if layout.op is not None:
        # The query produced the op column: keep it, order by source row.
        order = [src, soff, *values]
        return _write_output(_finalize(df, _c(layout.op), order, layout, request.vocab, request), request)
    # Op of the source row, or append for inputs seen as raw changelog (the query reads their op).
    raw_inputs = sorted(info.op_read)
    eff = F.when(src.isin(*raw_inputs), F.lit(OP_APPEND)).otherwise(F.col(_SRC_OP)) if raw_inputs else F.col(_SRC_OP)
    df, op, order = _pair_corrections(df.withColumn("__odf_eff", eff), layout, values)
    return _write_output(_finalize(df, op, order, layout, request.vocab, request), request)


def _pair_corrections(df: DataFrame, layout: OutputLayout, values: list[Column]
                      ) -> tuple[DataFrame, Column, list[Column]]:
    """Op and order of stateless output rows given the effective op of their source row (``__odf_eff``).

    The k-th row (by value) produced from a -C source row at offset n pairs with the k-th row produced from
    the +C at n+1: both present -> -C/+C (dropped if equal), alone -> -R or +A.
    """
    src, soff, eff = F.col(_SRC), F.col(_SRC_OFFSET), F.col("__odf_eff")
    side = F.when(eff == OP_CORRECT_TO, 1).otherwise(0)
    df = df.withColumn("__odf_pair", F.when(eff == OP_CORRECT_TO, soff - 1).otherwise(soff))
    pair = F.col("__odf_pair")
    # One partition: the slice is written as one file anyway, and every window below (and the global
    # offset numbering) then runs without any shuffle; the new slices are few files.
    df = df.coalesce(1)
    df = df.withColumn("__odf_rank", F.row_number().over(Window.partitionBy(src, pair, side).orderBy(*values)))
    w = Window.partitionBy(src, pair, F.col("__odf_rank"))
    df = (df.withColumn("__odf_from", F.sum(F.when(eff == OP_CORRECT_FROM, 1).otherwise(0)).over(w))
          .withColumn("__odf_to", F.sum(F.when(eff == OP_CORRECT_TO, 1).otherwise(0)).over(w)))
    has_from, has_to = F.col("__odf_from") > 0, F.col("__odf_to") > 0
    if len(values) == len(layout.columns):  # all comparable: drop corrections that change nothing visible
        distinct = F.size(F.collect_set(F.struct(*[_c(n) for n in layout.columns])).over(w))
        df = df.withColumn("__odf_distinct", distinct)
        noop = (eff.isin(OP_CORRECT_FROM, OP_CORRECT_TO) & (F.col("__odf_from") == 1) & (F.col("__odf_to") == 1)
                & (F.col("__odf_distinct") == 1))
        df = df.where(~noop)
    op = (F.when(eff == OP_CORRECT_FROM, F.when(has_to, OP_CORRECT_FROM).otherwise(OP_RETRACT))
          .when(eff == OP_CORRECT_TO, F.when(has_from, OP_CORRECT_TO).otherwise(OP_APPEND))
          .otherwise(eff))
    return df, op, [src, pair, F.col("__odf_rank"), side, *values]


# --------------------------------------------------------------------------------------------------------------
# Checkpoints


@dataclass(frozen=True)
class Checkpoint:
    meta: Mapping[str, Any]
    state: DataFrame | None  # output rows + __odf_count (stateful checkpoints only)


def query_hash(transform: SqlTransform) -> str:
    canon = json.dumps({"engine": transform.engine.lower(),
                        "queries": [{"alias": s.alias, "query": s.query} for s in transform.queries]},
                       sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canon.encode()).hexdigest()


def read_checkpoint(session: SparkSession, path: str) -> Checkpoint:
    local = _local_path(path)
    if not os.path.isfile(local):
        raise CheckpointError(f"prevCheckpointPath: file not found: {path!r}")
    try:
        df = session.read.schema(_file_schema(session, local)).parquet(local)
    except CapturedException as e:
        raise CheckpointError(f"prevCheckpointPath {path!r} is not a parquet file: {_error_text(e)}") from None
    if _COUNT not in df.columns:
        raise CheckpointError(f"prevCheckpointPath {path!r} is not a checkpoint of this engine (no {_COUNT})")
    try:
        meta = json.loads(df.schema[_COUNT].metadata.get(_CHECKPOINT_META_KEY, ""))
    except ValueError:
        raise CheckpointError(f"prevCheckpointPath {path!r}: unreadable checkpoint metadata") from None
    if meta.get("format") != CHECKPOINT_FORMAT or meta.get("version") != CHECKPOINT_VERSION:
        raise CheckpointError(f"prevCheckpointPath {path!r}: unsupported checkpoint {meta.get('format')!r} "
                              f"version {meta.get('version')!r}")
    return Checkpoint(meta, df if meta.get("planClass") == STATEFUL else None)


def _checkpoint_field(meta: Mapping[str, Any]) -> T.StructField:
    return T.StructField(_COUNT, T.LongType(), True,
                         {_CHECKPOINT_META_KEY: json.dumps(meta, sort_keys=True, separators=(",", ":"))})


_STATELESS_CHECKPOINTS: dict[str, bytes] = {}


def _write_stateless_checkpoint(session: SparkSession, request: TransformRequest) -> None:
    meta = {"format": CHECKPOINT_FORMAT, "version": CHECKPOINT_VERSION, "planClass": STATELESS,
            "queryHash": query_hash(request.transform)}
    target = _local_path(request.new_checkpoint_path)
    os.makedirs(os.path.dirname(os.path.abspath(target)), exist_ok=True)
    cached = _STATELESS_CHECKPOINTS.get(query_hash(request.transform))
    if cached is None:
        empty = session.createDataFrame(session.sparkContext.emptyRDD(), T.StructType([_checkpoint_field(meta)]))
        _write_single_parquet(empty, target)
        with open(target, "rb") as f:
            _STATELESS_CHECKPOINTS[query_hash(request.transform)] = f.read()
    else:  # same bytes every time: skip a Spark job
        with open(target, "wb") as f:
            f.write(cached)


# --------------------------------------------------------------------------------------------------------------
# Stateful path


def _input_ends(request: TransformRequest, prev: Checkpoint | None) -> dict[str, int | None]:
    """Last offset of each input to include; checks the request continues the checkpoint."""
    stored = (prev.meta.get("inputs") or {}) if prev is not None else {}
    ends: dict[str, int | None] = {}
    for inp in request.query_inputs:
        s = stored.get(inp.query_alias)
        last = s.get("lastOffset") if isinstance(s, Mapping) and s.get("datasetId") == inp.dataset_id else None
        iv = inp.offset_interval
        if iv is not None:
            expected = 0 if last is None else last + 1
            if last is not None and iv.start != expected:
                raise CheckpointError(
                    f"input {inp.query_alias!r}: the previous checkpoint covers offsets up to {last} but the "
                    f"request starts at {iv.start} (expected {expected}): wrong prevCheckpointPath?")
            ends[inp.query_alias] = iv.end
        else:
            ends[inp.query_alias] = last
    return ends


def _align_old_state(old: DataFrame, new_schema: T.StructType, names: Sequence[str]) -> DataFrame:
    """Previous state in the new output's columns; added columns are null, removed/retyped ones an error."""
    old_types = {f.name: f.dataType for f in old.schema.fields if f.name != _COUNT}
    new_types = {f.name: f.dataType for f in new_schema.fields}
    gone = sorted(set(old_types) - set(new_types))
    if gone:
        raise InvalidQueryError(f"the output no longer has columns {gone} that the previous output state has")
    cols = []
    for n in names:
        if n not in old_types:
            cols.append(F.lit(None).cast(new_types[n]).alias(n))
        elif old_types[n].simpleString() != new_types[n].simpleString():  # ignore nested nullability
            raise InvalidQueryError(f"output column {n!r} changed type from {old_types[n].simpleString()} to "
                                    f"{new_types[n].simpleString()}")
        else:
            cols.append(_c(n))
    return old.select(*cols, F.col(_COUNT))


def _diff(old: DataFrame, new: DataFrame, names: Sequence[str], key: tuple[str, ...] | None
          ) -> tuple[DataFrame, Column, list[Column]]:
    """Rows that changed between two counted states, with their op and canonical order."""
    cols = [_c(n) for n in names]
    both = old.select(*cols, (-F.col(_COUNT)).alias("__odf_d")).unionByName(
        new.select(*cols, F.col(_COUNT).alias("__odf_d")))
    both = both.coalesce(1)  # two single files: grouping, windows and numbering run without a shuffle
    delta = both.groupBy(*cols).agg(F.sum("__odf_d").alias("__odf_d")).where(F.col("__odf_d") != 0)
    rows = delta.select(
        *cols,
        F.when(F.col("__odf_d") < 0, 0).otherwise(1).alias("__odf_side"),
        F.explode(F.sequence(F.lit(1).cast("long"), F.abs(F.col("__odf_d")))).alias("__odf_copy"),
    )
    side = F.col("__odf_side")
    values = _sort_columns(rows, names)
    if key is None:
        op = F.when(side == 0, OP_RETRACT).otherwise(OP_APPEND)
        return rows, op, [side, *values]
    kcols = [_c(k) for k in key] or [F.lit(0)]
    rows = rows.withColumn("__odf_rank", F.row_number().over(Window.partitionBy(*kcols, side).orderBy(*values)))
    w = Window.partitionBy(*kcols, F.col("__odf_rank"))
    rows = (rows.withColumn("__odf_has_old", F.max(F.when(side == 0, 1).otherwise(0)).over(w))
            .withColumn("__odf_has_new", F.max(F.when(side == 1, 1).otherwise(0)).over(w)))
    op = (F.when(side == 0, F.when(F.col("__odf_has_new") == 1, OP_CORRECT_FROM).otherwise(OP_RETRACT))
          .otherwise(F.when(F.col("__odf_has_old") == 1, OP_CORRECT_TO).otherwise(OP_APPEND)))
    block = F.when(op == OP_RETRACT, 0).when(op == OP_APPEND, 2).otherwise(1)
    order = [block, *[_c(k).asc_nulls_first() for k in key], F.col("__odf_rank"), side, *values]
    return rows, op, order


def _previous_checkpoint(session: SparkSession, request: TransformRequest, diag: dict[str, Any]) -> Checkpoint | None:
    prev = read_checkpoint(session, request.prev_checkpoint_path) if request.prev_checkpoint_path else None
    if prev is None and request.next_offset > 0:
        raise CheckpointError(
            f"a stateful query needs the previous checkpoint: nextOffset is {request.next_offset} but "
            "prevCheckpointPath is absent")
    if prev is not None and prev.state is None:
        diag.setdefault("warnings", []).append(
            "previous checkpoint is stateless: the stateful output starts from an empty state")
    return prev


def _write_state(session: SparkSession, request: TransformRequest, info: PlanInfo, schemas: Sequence[T.StructType],
                 ends: Mapping[str, int | None], diag: dict[str, Any]) -> tuple[OutputLayout, T.StructType]:
    """Evaluate the query over the inputs' state and write it, counted, as the new checkpoint."""
    views, modes = {}, {}
    for idx, (inp, schema) in enumerate(zip(request.query_inputs, schemas)):
        changelog = idx in info.op_read
        modes[inp.query_alias] = "changelog" if changelog else "reduced"
        views[inp.query_alias] = _history_rows(session, inp, schema, ends[inp.query_alias], changelog)
    diag["inputModes"] = modes
    out = _run_steps(session, request.transform, views)
    query_layout = _layout(out.schema, request.vocab, STATEFUL)
    types = {f.name: f.dataType for f in out.schema.fields}
    bad = [n for n in query_layout.columns if not _orderable(types[n])]
    if bad:
        raise InvalidQueryError(f"stateful query outputs cannot contain map/variant columns: {bad}")
    names = [query_layout.event_time, *query_layout.data]
    counted = (out.select(*[_normalized(n, types[n]).alias(n) for n in names])
               .groupBy(*[_c(n) for n in names]).agg(F.count(F.lit(1)).alias(_COUNT)))
    meta = {"format": CHECKPOINT_FORMAT, "version": CHECKPOINT_VERSION, "planClass": STATEFUL,
            "queryHash": query_hash(request.transform),
            "inputs": {i.query_alias: {"datasetId": i.dataset_id, "lastOffset": ends[i.query_alias]}
                       for i in request.query_inputs if ends[i.query_alias] is not None}}
    counted = counted.select(*[_plain_alias(_c(n), n) for n in names],
                             F.col(_COUNT).alias(_COUNT, metadata=_checkpoint_field(meta).metadata))
    _write_single_parquet(counted, request.new_checkpoint_path, sort=_sort_columns(counted, names))
    _remember_schema(request.new_checkpoint_path, counted.schema)  # the next transaction reads it back
    return OutputLayout(tuple(names), query_layout.event_time, None, query_layout.data), counted.schema


def _run_stateful(session: SparkSession, request: TransformRequest, info: PlanInfo, diag: dict[str, Any],
                  schemas: Sequence[T.StructType], timings: dict[str, float]
                  ) -> tuple[OffsetInterval | None, dict[str, int]]:
    qhash = query_hash(request.transform)
    prev = _previous_checkpoint(session, request, diag)
    ends = _input_ends(request, prev)
    unchanged = prev is not None and prev.state is not None and prev.meta.get("queryHash") == qhash
    if unchanged and all(i.offset_interval is None for i in request.query_inputs):
        shutil.copyfile(_local_path(request.prev_checkpoint_path or ""), _local_path(request.new_checkpoint_path))
        diag["shortCircuit"] = "no new input data"
        return None, {}
    t0 = time.monotonic()
    layout, schema = _write_state(session, request, info, schemas, ends, diag)
    timings["evaluateAndCheckpoint"] = time.monotonic() - t0
    new_state = session.read.schema(schema).parquet(_local_path(request.new_checkpoint_path))
    if prev is not None and prev.state is not None:
        old_state = _align_old_state(prev.state, schema, layout.columns)
        if not unchanged:
            diag.setdefault("warnings", []).append("query changed: diffing against the previous query's state")
    else:
        old_state = session.createDataFrame(session.sparkContext.emptyRDD(), schema)
    rows, op, order = _diff(old_state, new_state, layout.columns, info.key)
    diag["correctionKey"] = list(info.key) if info.key is not None else None
    return _write_output(_finalize(rows, op, order, layout, request.vocab, request), request)


# --------------------------------------------------------------------------------------------------------------
# Public entry points


def _prepare(session: SparkSession, transform: SqlTransform, views: Mapping[str, DataFrame], vocab: Vocab
             ) -> tuple[DataFrame, PlanInfo]:
    _check_transform(transform)
    out = _run_steps(session, transform, views)
    return out, _inspect(session, out, vocab)


def _output_schema(out: DataFrame, layout: OutputLayout, vocab: Vocab) -> T.StructType:
    types = {f.name: f for f in out.schema.fields}

    def norm(name: str, as_name: str) -> T.StructField:
        f = types[name]
        t = T.TimestampType() if isinstance(f.dataType, T.TimestampNTZType) else f.dataType
        return T.StructField(as_name, t, f.nullable)

    return T.StructType([
        T.StructField(vocab.offset, T.LongType(), False),
        T.StructField(vocab.op, T.IntegerType(), True),
        T.StructField(vocab.system_time, T.TimestampType(), False),
        norm(layout.event_time, vocab.event_time),
        *[norm(n, n) for n in layout.data],
    ])


def validate_query(spark: SparkSession, transform: SqlTransform | Mapping[str, Any],
                   input_schemas: Mapping[str, T.StructType], vocab: Vocab | None = None,
                   input_vocabs: Mapping[str, Vocab] | None = None) -> T.StructType:
    """Check a query against the inputs' schemas; return the output slice schema or raise InvalidQueryError."""
    schema, _ = _validate(spark, transform, input_schemas, vocab, input_vocabs)
    return schema


def _validate(spark: SparkSession, transform: SqlTransform | Mapping[str, Any],
              input_schemas: Mapping[str, T.StructType], vocab: Vocab | None,
              input_vocabs: Mapping[str, Vocab] | None) -> tuple[T.StructType, PlanInfo]:
    vocab = vocab or Vocab()
    if not isinstance(transform, SqlTransform):
        transform = parse_transform(transform)
    session = _session(spark)
    views = {}
    for idx, (alias, schema) in enumerate(input_schemas.items()):
        in_vocab = (input_vocabs or {}).get(alias, Vocab())
        marked = _marked_schema(schema, in_vocab, idx, f"input {alias!r}")
        views[alias] = _read_rows(session, marked, ())
    out, info = _prepare(session, transform, views, vocab)
    return _output_schema(out, info.layout, vocab), info


def execute_transform(spark: SparkSession, request: TransformRequest) -> TransformResponse:
    """Run one transaction; never raises for query/request problems (they become responses)."""
    diag: dict[str, Any] = {}
    timings: dict[str, float] = {}
    started = time.monotonic()
    try:
        result = _execute(spark, request, diag, timings)
        timings["total"] = time.monotonic() - started
        diag["timingsMs"] = {k: round(v * 1000, 1) for k, v in timings.items()}
        return Success(result[0], _output_watermark(request.query_inputs), diag)
    except InvalidQueryError as e:
        return InvalidQuery(str(e), diag)
    except (RequestError, CheckpointError) as e:
        return InternalError(str(e), None, diag)
    except CapturedException as e:
        if _is_query_error(e):
            return InvalidQuery(f"the query failed on the input data: {_error_text(e)}", diag)
        return InternalError(_error_text(e), traceback.format_exc(), diag)
    except Exception as e:  # noqa: BLE001 - the engine must always answer
        return InternalError(f"{type(e).__name__}: {e}", traceback.format_exc(), diag)


def _execute(spark: SparkSession, request: TransformRequest, diag: dict[str, Any], timings: dict[str, float]
             ) -> tuple[OffsetInterval | None, dict[str, int]]:
    t0 = time.monotonic()
    session = _session(spark)
    schemas = [_input_schema(session, inp, i) for i, inp in enumerate(request.query_inputs)]
    views = {inp.query_alias: _slice_rows(session, inp, schema) for inp, schema in zip(request.query_inputs, schemas)}
    out, info = _prepare(session, request.transform, views, request.vocab)
    timings["plan"] = time.monotonic() - t0
    diag["planClass"] = info.plan_class
    if info.reason:
        diag["reason"] = info.reason
    diag["opReadInputs"] = [request.query_inputs[i].query_alias for i in sorted(info.op_read)]
    t1 = time.monotonic()
    if info.plan_class == STATELESS:
        diag["inputModes"] = {i.query_alias: "changelog" if n in info.op_read else "newSlice"
                              for n, i in enumerate(request.query_inputs)}
        if all(i.offset_interval is None for i in request.query_inputs):
            interval, counts = None, {}
        else:
            interval, counts = _run_stateless(session, request, out, info)
        _write_stateless_checkpoint(session, request)
    else:
        interval, counts = _run_stateful(session, request, info, diag, schemas, timings)
    if interval is None and os.path.exists(_local_path(request.new_data_path)):
        os.remove(_local_path(request.new_data_path))  # left by an earlier attempt of this transaction
    timings["execute"] = time.monotonic() - t1
    diag["outputRows"] = sum(counts.values())
    diag["rowsByOp"] = counts
    return interval, counts


def _write_json(path: str, doc: Mapping[str, Any]) -> None:
    tmp = f"{path}.{uuid.uuid4().hex}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)


def _load_json(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise RequestError(f"cannot read request file {path!r}: {e}") from None
    except ValueError as e:
        raise RequestError(f"request file {path!r} is not valid JSON: {e}") from None


def run_transform_file(spark: SparkSession, request_path: str, response_path: str) -> TransformResponse:
    """Read a request file, run it, write the response file; returns the response."""
    try:
        request = parse_request(_load_json(request_path))
    except InvalidQueryError as e:
        resp: TransformResponse = InvalidQuery(str(e))
    except RequestError as e:
        resp = InternalError(str(e))
    else:
        resp = execute_transform(spark, request)
    _write_json(response_path, response_to_json(resp))
    return resp


def run_validate_file(spark: SparkSession, request_path: str, response_path: str) -> TransformResponse:
    """--validate: answer with the output slice schema (Spark JSON) or InvalidQuery."""
    extra: dict[str, Any] = {}
    try:
        doc = _load_json(request_path)
        content = _field(doc, "content", "request", Mapping)
        transform = parse_transform(_field(content, "transform", "content", Mapping), "content.transform")
        vocab = _parse_vocab(_field(content, "vocab", "content", Mapping, False), "content.vocab")
        session = _session(spark)
        schemas: dict[str, T.StructType] = {}
        vocabs: dict[str, Vocab] = {}
        for i, o in enumerate(_field(content, "queryInputs", "content", list)):
            where = f"content.queryInputs[{i}]"
            alias = _field(o, "queryAlias", where, str)
            path = _field(o, "schemaFile", where, str)
            if not os.path.exists(_local_path(path)):
                raise RequestError(f"{where}.schemaFile: file not found: {path!r}")
            schemas[alias] = _file_schema(session, path)
            vocabs[alias] = _parse_vocab(_field(o, "vocab", where, Mapping, False), f"{where}.vocab")
        schema, info = _validate(spark, transform, schemas, vocab, vocabs)
        extra = {"schema": schema.json()}
        resp: TransformResponse = Success(None, None, {"planClass": info.plan_class, "reason": info.reason})
    except InvalidQueryError as e:
        resp = InvalidQuery(str(e))
    except RequestError as e:
        resp = InternalError(str(e))
    except CapturedException as e:
        resp = InvalidQuery(_error_text(e)) if _is_query_error(e) else InternalError(_error_text(e),
                                                                                        traceback.format_exc())
    except Exception as e:  # noqa: BLE001
        resp = InternalError(f"{type(e).__name__}: {e}", traceback.format_exc())
    _write_json(response_path, response_to_json(resp, "ValidateQueryResponseRoot", extra))
    return resp


USAGE = "usage: spark-submit transform.py [--validate] REQUEST.json RESPONSE.json"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    validate = bool(args) and args[0] == "--validate"
    if validate:
        args = args[1:]
    if len(args) != 2:
        print(USAGE, file=sys.stderr)
        return 2
    builder = SparkSession.builder.appName("odf-spark-transform")
    for k, v in SPARK_SETTINGS.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    try:
        runner = run_validate_file if validate else run_transform_file
        resp = runner(spark, args[0], args[1])
        print(f"odf-spark-transform: {type(resp).__name__}", file=sys.stderr)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
