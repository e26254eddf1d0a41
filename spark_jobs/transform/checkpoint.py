"""The transform checkpoint: one parquet file.

Stateful: one row per distinct output row (event time and data columns as in the output slice) plus ``__odf_count``
(int64 multiplicity), sorted by all columns. Stateless: just the empty ``__odf_count`` column. The field metadata of
``__odf_count`` holds ``{"__odf_checkpoint": JSON}`` with ``format`` = ``odf-spark-transform-checkpoint``, ``version``
= 1, ``planClass``, ``queryHash`` (SHA-256 of the canonical JSON of the queries) and, for stateful, ``inputs``:
``{queryAlias: {"datasetId", "lastOffset"}}``, used to check that the next request continues where this one ended.

Incremental stateful queries (:mod:`.incremental`) keep the same description, plus ``path`` = ``incremental`` and
the plan's ``fingerprint``, in the field metadata of ``__odf_table``, and their operators' states as tables
(:mod:`.incremental.state`). Version 5 keeps only operator states (their size follows the keys, not the output) and
the query (``transform``), so the output state can be evaluated again when a rebuild needs it, stores timestamps as
microseconds and sums of integers as longs; version 4 kept those sums as DECIMAL(38), version 3 stored timestamps as
millisecond timestamps (keys finer than a millisecond merged), version 2 also kept the output state as a table (all
are rebuilt once into version 5).
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from typing import Any, Mapping

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from odf_core.metadata import TransformRequest, TransformSql
from spark_jobs.errors import EngineFailure, user_message
from spark_jobs.parquet_files import local_path, write_single_parquet
from spark_jobs.transform.inputs import file_schema
from spark_jobs.transform.planning import STATEFUL, STATELESS

CHECKPOINT_FORMAT = "odf-spark-transform-checkpoint"
CHECKPOINT_VERSION = 1
COUNT = "__odf_count"
_META_KEY = "__odf_checkpoint"


@dataclass(frozen=True)
class Checkpoint:
    meta: Mapping[str, Any]
    state: DataFrame | None  # output rows + __odf_count (stateful checkpoints only)
    store: Any = None  # the state tables of an incremental checkpoint (an incremental.state.StateStore)

    @property
    def stateful(self) -> bool:
        return self.meta.get("planClass") == STATEFUL


def query_hash(transform: TransformSql) -> str:
    canon = json.dumps({"engine": transform.engine.lower(),
                        "queries": [{"alias": s.alias, "query": s.query} for s in transform.steps()]},
                       sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canon.encode()).hexdigest()


def read_checkpoint(session: SparkSession, path: str) -> Checkpoint:
    local = local_path(path)
    if not os.path.isfile(local):
        raise EngineFailure(f"the previous checkpoint {path!r} is missing")
    try:
        df = session.read.schema(file_schema(session, local)).parquet(local)
    except Exception as e:  # noqa: BLE001
        raise EngineFailure(f"the previous checkpoint {path!r} is not a parquet file: {user_message(e)}") from None
    from spark_jobs.transform.incremental.state import TABLE, StateStore, read_meta

    if TABLE in df.columns:
        try:
            meta = read_meta(df.schema)
        except ValueError:
            meta = None
        if not meta or meta.get("format") != CHECKPOINT_FORMAT or meta.get("version") not in (2, 3, 4, 5):
            raise EngineFailure(f"the previous checkpoint {path!r} has unreadable metadata")
        store = StateStore(session, path, meta.get("tables") or {}, df.schema)  # the schema read above
        return Checkpoint(meta, store.table("output"), store)
    if COUNT not in df.columns:
        raise EngineFailure(f"the previous checkpoint {path!r} is not a checkpoint of this engine (no {COUNT})")
    try:
        meta = json.loads(df.schema[COUNT].metadata.get(_META_KEY, ""))
    except ValueError:
        raise EngineFailure(f"the previous checkpoint {path!r} has unreadable metadata") from None
    if meta.get("format") != CHECKPOINT_FORMAT or meta.get("version") != CHECKPOINT_VERSION:
        raise EngineFailure(f"the previous checkpoint {path!r} is {meta.get('format')!r} version "
                            f"{meta.get('version')!r}, which this engine does not read")
    return Checkpoint(meta, df if meta.get("planClass") == STATEFUL else None)


def count_field(meta: Mapping[str, Any]) -> T.StructField:
    return T.StructField(COUNT, T.LongType(), True, {_META_KEY: json.dumps(meta, sort_keys=True,
                                                                            separators=(",", ":"))})


def stateful_meta(request: TransformRequest, ends: Mapping[str, int | None]) -> dict[str, Any]:
    return {"format": CHECKPOINT_FORMAT, "version": CHECKPOINT_VERSION, "planClass": STATEFUL,
            "queryHash": query_hash(request.transform),
            "inputs": {i.query_alias: {"datasetId": i.dataset_id.to_did_odf(), "lastOffset": ends[i.query_alias]}
                       for i in request.query_inputs if ends[i.query_alias] is not None}}


_STATELESS_CHECKPOINTS: dict[str, bytes] = {}


def write_stateless_checkpoint(session: SparkSession, request: TransformRequest) -> None:
    """The same bytes every time for one query: written by Spark once, then copied (no Spark job)."""
    qhash = query_hash(request.transform)
    meta = {"format": CHECKPOINT_FORMAT, "version": CHECKPOINT_VERSION, "planClass": STATELESS, "queryHash": qhash}
    target = local_path(request.new_checkpoint_path)
    os.makedirs(os.path.dirname(os.path.abspath(target)), exist_ok=True)
    cached = _STATELESS_CHECKPOINTS.get(qhash)
    if cached is None:
        empty = session.createDataFrame(session.sparkContext.emptyRDD(), T.StructType([count_field(meta)]))
        write_single_parquet(empty, target)
        with open(target, "rb") as f:
            _STATELESS_CHECKPOINTS[qhash] = f.read()
    else:
        with open(target, "wb") as f:
            f.write(cached)
