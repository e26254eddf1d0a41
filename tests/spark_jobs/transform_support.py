"""Test harness for spark_jobs.transform: tiny input datasets written with pyarrow, a mini coordinator that drives
transactions (chaining checkpoints and offsets) with the spec's TransformRequest in its JSON form, and pure-Python
changelog reduction for references."""
from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import strategies as hst

from odf_core.engine.protocol import InputHistory, OdfTransformRequest, OdfTransformResponse
from odf_core.metadata import (
    Timestamp,
    TransformRequest,
    TransformResponseInternalError,
    TransformResponseInvalidQuery,
    TransformResponseSuccess,
)
from odf_core.metadata.yaml_serde import from_data
from spark_jobs import transform as tr
from spark_jobs.transform.inputs import OP_APPEND, OP_CORRECT_FROM, OP_CORRECT_TO

UTC = dt.timezone.utc
BASE = dt.datetime(2024, 1, 1, tzinfo=UTC)
SYSTEM_COLUMNS = ("offset", "op", "system_time")
TS = pa.timestamp("ms", tz="UTC")


def minutes(n: int) -> dt.datetime:
    return BASE + dt.timedelta(minutes=n)


@dataclass(frozen=True)
class Event:
    """One changelog row of an input: op plus event_time and data values."""

    op: int
    event_time: dt.datetime
    data: tuple[Any, ...]


@dataclass
class InputSpec:
    alias: str
    data_schema: pa.Schema  # data columns (without system columns and event_time)
    events: list[Event]
    dataset_id: str = ""
    vocab: tuple[str, str, str, str] = ("offset", "op", "system_time", "event_time")

    def arrow_schema(self) -> pa.Schema:
        off, op, st, et = self.vocab
        return pa.schema([pa.field(off, pa.int64(), nullable=False), pa.field(op, pa.int32()),
                          pa.field(st, TS), pa.field(et, TS), *self.data_schema])

    def vocab_json(self) -> dict[str, str]:
        return vocab_json(self.vocab)


def vocab_json(names: Sequence[str]) -> dict[str, str]:
    off, op, st, et = names
    return {"offsetColumn": off, "operationTypeColumn": op, "systemTimeColumn": st, "eventTimeColumn": et}


def write_slice(path: Path, spec: InputSpec, events: Sequence[Event], start: int, system_time: dt.datetime) -> None:
    off, op, st, et = spec.vocab
    cols: dict[str, list[Any]] = {off: [], op: [], st: [], et: []}
    for name in spec.data_schema.names:
        cols[name] = []
    for i, e in enumerate(events):
        cols[off].append(start + i)
        cols[op].append(e.op)
        cols[st].append(system_time)
        cols[et].append(e.event_time)
        for name, v in zip(spec.data_schema.names, e.data):
            cols[name].append(v)
    pq.write_table(pa.table(cols, schema=spec.arrow_schema()), path)


@dataclass(frozen=True)
class Txn:
    """One transaction of a split: new rows per input alias (0 or absent: none) and the inputs whose explicit
    watermark advances in it (with no new rows: a watermark-only transaction of that input)."""

    rows: Mapping[str, int]
    advance: frozenset[str] = frozenset()


def valid_cuts(events: Sequence[Event]) -> list[int]:
    """Positions where a slice may end: never between a -C and its +C."""
    return [i for i in range(1, len(events) + 1) if events[i - 1].op != OP_CORRECT_FROM]


def epoch_ms(v: Any) -> Any:
    if isinstance(v, dt.datetime):
        return round(v.timestamp() * 1000)  # naive (from Spark collect) is local time, as .timestamp() assumes
    return v


def norm_row(values: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(epoch_ms(v) for v in values)


def rfc3339(value: dt.datetime) -> str:
    return str(Timestamp.from_datetime(value))


@dataclass(frozen=True)
class Resp:
    """The engine's answer as these tests look at it."""

    raw: OdfTransformResponse

    @property
    def kind(self) -> str:
        return {TransformResponseSuccess: "Success", TransformResponseInvalidQuery: "InvalidQuery",
                TransformResponseInternalError: "InternalError"}[type(self.raw.response)]

    @property
    def message(self) -> str:
        return getattr(self.raw.response, "message", "")

    @property
    def new_offset_interval(self) -> Any:
        return getattr(self.raw.response, "new_offset_interval", None)

    @property
    def new_watermark(self) -> dt.datetime | None:
        wm = getattr(self.raw.response, "new_watermark", None)
        return wm.to_datetime() if wm is not None else None

    @property
    def diagnostics(self) -> dict[str, Any]:
        d = self.raw.diagnostics
        if d is None:
            return {}
        return {"planClass": d.plan_class, "reason": d.reason,
                "correctionKey": list(d.correction_key) if d.correction_key else None,
                "outputRows": d.output_rows, "warnings": list(d.warnings or ()), "path": d.path,
                "operators": [(o.operator, o.path) for o in d.operators or ()], "stateRows": d.state_rows,
                "sizing": d.sizing, "slice": d.slice,
                "history": d.history}


def typed_request(doc: Mapping[str, Any]) -> OdfTransformRequest:
    """The request manifest (spec JSON form, plus our ``extensions.inputs.<alias>.historyDataPaths``) -> typed."""
    request = from_data(TransformRequest, json.loads(json.dumps(doc["content"])))
    hist = (doc.get("extensions") or {}).get("inputs") or {}
    return OdfTransformRequest(request=request, histories=tuple(
        InputHistory(query_alias=alias, data_paths=tuple(h["historyDataPaths"])) for alias, h in hist.items()))


@dataclass
class ChainResult:
    responses: list[Resp] = field(default_factory=list)
    slices: list[pa.Table] = field(default_factory=list)  # output slices, in order
    requests: list[dict[str, Any]] = field(default_factory=list)
    checkpoints: list[str | None] = field(default_factory=list)

    def rows(self) -> list[dict[str, Any]]:
        return [r for t in self.slices for r in t.to_pylist()]


class MiniCoordinator:
    """Writes input slices per transaction and calls the engine like the real coordinator would."""

    def __init__(self, spark: Any, root: Path, transform: Mapping[str, Any], inputs: Sequence[InputSpec],
                 use_history: bool = True, watermarks: bool = False,
                 out_vocab: Sequence[str] = ("offset", "op", "system_time", "event_time")) -> None:
        self.spark = spark
        self.root = root
        self.transform = dict(transform)
        self.inputs = list(inputs)
        self.use_history = use_history
        self.watermarks = watermarks
        self.out_vocab = tuple(out_vocab)
        root.mkdir(parents=True, exist_ok=True)
        self.pos = {s.alias: 0 for s in inputs}
        self.history: dict[str, list[str]] = {s.alias: [] for s in inputs}
        self.advanced: dict[str, int] = {s.alias: 0 for s in inputs}
        self.schema_files: dict[str, str] = {}
        for s in inputs:
            p = root / f"{s.alias}.schema.parquet"
            pq.write_table(s.arrow_schema().empty_table(), p)
            self.schema_files[s.alias] = str(p)
        self.next_offset = 0
        self.checkpoint: str | None = None
        self.txn = 0
        self.result = ChainResult()

    def request(self, chunks: Mapping[str, int], advance: frozenset[str] = frozenset()) -> dict[str, Any]:
        """Build the next request doc, writing a slice for each input with chunks[alias] > 0 new rows; with
        ``watermarks`` an input's explicit watermark is its latest event time seen, plus an hour for each transaction
        that advanced it (``advance``)."""
        self.txn += 1
        system_time = minutes(100_000 + self.txn)
        qinputs = []
        ext: dict[str, Any] = {}
        for i, s in enumerate(self.inputs):
            n = chunks.get(s.alias, 0)
            start = self.pos[s.alias]
            entry: dict[str, Any] = {
                "datasetId": s.dataset_id or f"did:odf:fed01{i:064x}", "datasetAlias": s.alias,
                "queryAlias": s.alias, "vocab": s.vocab_json(),
                "dataPaths": [], "schemaFile": self.schema_files[s.alias], "explicitWatermarks": []}
            if n > 0:
                path = self.root / f"{s.alias}.{self.txn}.parquet"
                write_slice(path, s, s.events[start:start + n], start, system_time)
                self.history[s.alias].append(str(path))
                self.pos[s.alias] = start + n
                entry["offsetInterval"] = {"start": start, "end": start + n - 1}
                entry["dataPaths"] = [str(path)]
            if s.alias in advance:
                self.advanced[s.alias] += 1
            if self.watermarks and (self.pos[s.alias] > 0 or self.advanced[s.alias]):
                seen = s.events[:self.pos[s.alias]]
                mark = max((e.event_time for e in seen), default=BASE) + dt.timedelta(hours=self.advanced[s.alias])
                entry["explicitWatermarks"] = [{"systemTime": rfc3339(system_time), "eventTime": rfc3339(mark)}]
            qinputs.append(entry)
            if self.use_history:
                ext[s.alias] = {"historyDataPaths": list(self.history[s.alias])}
        content: dict[str, Any] = {
            "datasetId": "did:odf:fed01" + "ab" * 32, "datasetAlias": "out",
            "systemTime": rfc3339(system_time),
            "vocab": vocab_json(self.out_vocab),
            "transform": self.transform, "queryInputs": qinputs, "nextOffset": self.next_offset,
            "newCheckpointPath": str(self.root / f"ckpt.{self.txn}"), "newDataPath": str(self.root / f"out.{self.txn}"),
        }
        if self.checkpoint:
            content["prevCheckpointPath"] = self.checkpoint
        doc = {"kind": "TransformRequest", "version": 1, "content": content}
        if self.use_history:
            doc["extensions"] = {"inputs": ext}
        return doc

    def execute(self, doc: Mapping[str, Any]) -> Resp:
        return Resp(tr.execute_transform(self.spark, typed_request(doc)))

    def commit(self, doc: Mapping[str, Any], resp: Resp) -> None:
        """Accept a Success like the coordinator: advance offsets, keep the slice and checkpoint."""
        assert resp.kind == "Success", resp
        content = doc["content"]
        self.result.responses.append(resp)
        self.result.requests.append(dict(doc))
        if resp.new_offset_interval is not None:
            iv = resp.new_offset_interval
            assert iv.start == self.next_offset
            table = pq.read_table(content["newDataPath"])
            assert table.num_rows == iv.end - iv.start + 1
            self.result.slices.append(table)
            self.next_offset = iv.end + 1
        else:
            assert not Path(content["newDataPath"]).exists()
        ckpt = content["newCheckpointPath"]
        self.checkpoint = ckpt if Path(ckpt).exists() else self.checkpoint
        self.result.checkpoints.append(self.checkpoint)

    def step(self, txn: Mapping[str, int] | Txn) -> Resp:
        doc = self.request(txn.rows, txn.advance) if isinstance(txn, Txn) else self.request(txn)
        resp = self.execute(doc)
        self.commit(doc, resp)
        return resp


def run_split(spark: Any, root: Path, transform: Mapping[str, Any], inputs: Sequence[InputSpec],
              transactions: Sequence[Mapping[str, int] | Txn], **kw: Any) -> ChainResult:
    coord = MiniCoordinator(spark, root, transform, inputs, **kw)
    for chunks in transactions:
        coord.step(chunks)
    return coord.result


def splits(inputs: Sequence[InputSpec], max_txn: int = 4, min_steps: int = 1) -> hst.SearchStrategy[list[Txn]]:
    """Every way to cut the inputs into 1..max_txn transactions that consume all their events: a cut never falls
    between a -C and its +C; transactions may be empty for some or all inputs, hold one row, or only advance a
    watermark. ``min_steps``: at least that many transactions bring new rows of the first input (it needs that many
    events, a -C+C pair counting as one), so even Hypothesis's simplest split runs steps after one with rows."""
    aliases = [s.alias for s in inputs]

    @hst.composite
    def draw_split(draw: Any) -> list[Txn]:
        n = draw(hst.integers(min_steps, max(max_txn, min_steps)))
        sizes: dict[str, list[int]] = {}
        for i, s in enumerate(inputs):
            cuts = hst.sampled_from([0, *valid_cuts(s.events)])
            forced: list[int] = []
            if i == 0 and min_steps > 1:  # distinct cuts inside the changelog: min_steps non-empty transactions
                inner = hst.sampled_from([c for c in valid_cuts(s.events) if c < len(s.events)])
                forced = draw(hst.lists(inner, min_size=min_steps - 1, max_size=min_steps - 1, unique=True))
            rest = draw(hst.lists(cuts, min_size=n - 1 - len(forced), max_size=n - 1 - len(forced)))
            bounds = [0, *sorted(forced + rest), len(s.events)]
            sizes[s.alias] = [bounds[t + 1] - bounds[t] for t in range(n)]
        return [Txn({a: sizes[a][t] for a in aliases}, draw(hst.frozensets(hst.sampled_from(aliases))))
                for t in range(n)]

    return draw_split()


@dataclass
class PathLog:
    """The path the engine took at each step of each generated example of a property test (the responses'
    ``diagnostics.path``), with whether the step brought new rows. A property over random splits proves the
    incremental path only if some generated example stepped on it with rows after a step that had some: Hypothesis's
    first example is its simplest input (one transaction, if the strategy allows it)."""

    examples: list[list[tuple[str | None, bool]]] = field(default_factory=list)

    def record(self, result: ChainResult) -> None:
        self.examples.append([(r.diagnostics.get("path"), any(q.get("offsetInterval") for q in doc["content"]
                                                              ["queryInputs"]))
                              for r, doc in zip(result.responses, result.requests, strict=True)])

    def incremental_steps(self) -> int:
        """Steps on the incremental path with new rows that came after a step with rows (a state to update)."""
        n = 0
        for steps in self.examples:
            had_rows = False
            for path, rows in steps:
                n += had_rows and rows and path == "incremental"
                had_rows = had_rows or rows
        return n

    def assert_incremental(self, what: str) -> None:
        assert self.examples, f"{what}: no generated example ran"
        assert self.incremental_steps() > 0, \
            f"{what}: no generated example took an incremental step with new rows: {self.examples}"


def expected_watermark(request: Mapping[str, Any]) -> dt.datetime | None:
    """The output watermark of a transaction: the minimum of the inputs' latest explicit watermarks, none while
    any input has none."""
    marks = []
    for entry in request["content"]["queryInputs"]:
        if not entry["explicitWatermarks"]:
            return None
        marks.append(max(Timestamp.parse(w["eventTime"]).to_datetime() for w in entry["explicitWatermarks"]))
    return min(marks)


def reduce_output(rows: Sequence[Mapping[str, Any]]) -> Counter:
    """Apply an output changelog; asserts it is well-formed (removals match live rows, -C followed by +C)."""
    state: Counter = Counter()
    for i, r in enumerate(rows):
        assert r["offset"] == rows[0]["offset"] + i, "offsets must be consecutive"
        key = norm_row([v for k, v in r.items() if k not in SYSTEM_COLUMNS])
        op = r["op"]
        if op == OP_CORRECT_FROM:
            assert i + 1 < len(rows) and rows[i + 1]["op"] == OP_CORRECT_TO, f"-C at {i} not followed by +C"
        if op == OP_CORRECT_TO:
            assert i > 0 and rows[i - 1]["op"] == OP_CORRECT_FROM, f"+C at {i} not preceded by -C"
        if op in (OP_APPEND, OP_CORRECT_TO):
            state[key] += 1
        else:
            assert state[key] > 0, f"row {r} removes a row that is not live"
            state[key] -= 1
    return +state


def reduce_input(spec: InputSpec) -> list[tuple[int, Event]]:
    """(offset, event) of the live rows: a removal drops the oldest live equal row."""
    live: list[tuple[int, Event]] = []
    for off, e in enumerate(spec.events):
        if e.op in (OP_APPEND, OP_CORRECT_TO):
            live.append((off, e))
        else:
            idx = next(i for i, (_, ev) in enumerate(live) if (ev.event_time, ev.data) == (e.event_time, e.data))
            live.pop(idx)
    return live


def batch_reference(spark: Any, transform: Mapping[str, Any], inputs: Sequence[InputSpec],
                    changelog: Sequence[str] = ()) -> Counter:
    """The query run once by plain Spark over the reduced inputs (raw changelog for aliases in `changelog`)."""
    session = spark.newSession()
    session.conf.set("spark.sql.ansi.enabled", "true")
    session.conf.set("spark.sql.session.timeZone", "UTC")
    for s in inputs:
        rows = list(enumerate(s.events)) if s.alias in changelog else reduce_input(s)
        data = [(off, e.op, BASE, e.event_time, *e.data) for off, e in rows]
        session.createDataFrame(data, schema=spark_schema(s)).createOrReplaceTempView(f"`{s.alias}`")
    steps = transform.get("queries") or [{"query": transform["query"]}]
    out = None
    for st in steps:
        df = session.sql(st["query"])
        if st.get("alias"):
            df.createOrReplaceTempView(f"`{st['alias']}`")
        else:
            out = df
    assert out is not None
    cols = [c for c in out.columns]
    et = next(c for c in cols if c.lower() == "event_time")
    ordered = [et, *[c for c in cols if c != et]]
    return Counter(norm_row([r[c] for c in ordered]) for r in out.collect())


def spark_schema(spec: InputSpec) -> Any:
    """The Spark schema of an input's slices (built without a session)."""
    from pyspark.sql import types as T

    to_spark = {pa.int64(): T.LongType(), pa.int32(): T.IntegerType(), pa.string(): T.StringType(),
                pa.float64(): T.DoubleType(), pa.bool_(): T.BooleanType(), TS: T.TimestampType()}
    return T.StructType([T.StructField(f.name, to_spark[f.type], f.nullable) for f in spec.arrow_schema()])


def checkpoint_tables(path: str) -> tuple[dict[str, Any], dict[str, pa.Table]]:
    """An incremental (version 4 on) checkpoint read with pyarrow alone: its description and each named table
    (timestamps as the microseconds the state stores)."""
    import pyarrow.compute as pc

    table = pq.read_table(path)
    fields = json.loads(table.schema.metadata[b"org.apache.spark.sql.parquet.row.metadata"])["fields"]
    meta = json.loads(next(f for f in fields if f["name"] == "__odf_table")["metadata"]["__odf_checkpoint"])
    tables = {}
    for name, spec in meta["tables"].items():
        tid = spec["id"]
        rows = table.filter(pc.equal(table["__odf_table"], tid))
        tables[name] = pa.table({c: rows[f"t{tid}_{c}"] for c in spec["columns"]})
    return meta, tables
