"""The incremental path's checkpoint: every operator's state tables, the plan's fingerprint and the query, in one
parquet file (:mod:`.state`); whether a previous one can be updated, and loading its tables."""
from __future__ import annotations

import os
import tempfile
from typing import Any, Mapping

from pyspark.sql import DataFrame

from odf_core.metadata import TransformRequest
from spark_jobs.parquet_files import local_path
from spark_jobs.transform.checkpoint import stateful_meta
from spark_jobs.transform.incremental.operators import state_tables
from spark_jobs.transform.incremental.plan import IncrementalPlan
from spark_jobs.transform.incremental.state import StateStore, StateWriter
from spark_jobs.transform.incremental.step import Step

CHECKPOINT_VERSION = 5


def write_checkpoint(step: Step, request: TransformRequest, op_states: Mapping[str, DataFrame]) -> dict[str, int]:
    """The new checkpoint: each operator's states, the plan's fingerprint and the query (a rebuild evaluates it to
    get the output state). Written next to its target and renamed, so no reader sees half of it."""
    writer = StateWriter()
    for op in step.plan.ops:
        for name, stored, keys in state_tables(op):
            if name in op_states:
                writer.put(stored, op_states[name], keys)
    transform = request.transform
    meta = {**stateful_meta(request, step.ends), "version": CHECKPOINT_VERSION, "path": "incremental",
            "fingerprint": step.plan.fingerprint, "evictedThrough": step.evict,
            "transform": {"engine": transform.engine,
                          "queries": [{"alias": q.alias, "query": q.query} if q.alias else {"query": q.query}
                                      for q in transform.steps()]}}
    target = local_path(request.new_checkpoint_path)
    parent = os.path.dirname(os.path.abspath(target))
    os.makedirs(parent, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".checkpoint-", suffix=".parquet", dir=parent)
    os.close(fd)
    try:
        sizes = writer.write(step.session, tmp, meta)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return sizes


def reusable(prev_meta: Mapping[str, Any] | None, plan: IncrementalPlan, query_hash: str) -> str | None:
    """Why the previous checkpoint's states cannot be updated (None: they can)."""
    if prev_meta is None:
        return "first transaction"
    if prev_meta.get("path") != "incremental":
        return "the previous checkpoint has no operator state (written by the full path)"
    if prev_meta.get("version") != CHECKPOINT_VERSION:
        return (f"the previous checkpoint has the state layout of version {prev_meta.get('version')} (this engine "
                f"writes {CHECKPOINT_VERSION})")
    if prev_meta.get("queryHash") != query_hash:
        return "the query changed"
    if prev_meta.get("fingerprint") != plan.fingerprint:
        return "the plan, an input schema or the layout of an operator's state changed"
    return None


def eviction(prev_meta: Mapping[str, Any] | None, watermark: Any) -> tuple[int | None, int | None]:
    """(the watermark through which the previous states dropped closed windows, the one for the new states), in
    microseconds. Watermarks only grow; a step whose request carries none keeps the previous bound."""
    before = prev_meta.get("evictedThrough") if prev_meta is not None else None
    now = watermark.epoch_ns // 1000 if watermark is not None else None
    bounds = [b for b in (before, now) if b is not None]
    return before, (max(bounds) if bounds else None)


def load_states(store: StateStore, plan: IncrementalPlan) -> tuple[dict[str, DataFrame] | None, str | None]:
    """The previous checkpoint's state tables by their names in a step's states, or (None, the name in the
    checkpoint of a table it lacks)."""
    found = {}
    for op in plan.ops:
        for name, stored, _ in state_tables(op):
            df = store.table(stored)
            if df is None:
                return None, stored
            found[name] = df
    return found, None
