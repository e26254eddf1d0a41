"""The ingest checkpoint's format marker, known to the coordinator (which decides whether previous data must be
handed to the engine) and to the engine (which writes and reads the checkpoint: see ``spark_jobs.ingest.checkpoint``).

Key-value metadata ``odf.spark-ingest.checkpoint`` = ``{"version": 1, "strategy": "Ledger"|"Snapshot",
"primaryKey": [...]}`` on a parquet file.
"""
from __future__ import annotations

import json
from typing import Any

CHECKPOINT_META_KEY = b"odf.spark-ingest.checkpoint"
CHECKPOINT_VERSION = 1


def meta_for(strategy: Any) -> dict[str, Any]:
    return {"version": CHECKPOINT_VERSION, "strategy": type(strategy).KIND,
            "primaryKey": list(getattr(strategy, "primary_key", ()) or ())}


def read_meta(path: str) -> dict[str, Any] | None:
    import pyarrow.parquet as pq

    try:
        meta = pq.read_schema(path).metadata or {}
        return json.loads(meta[CHECKPOINT_META_KEY]) if CHECKPOINT_META_KEY in meta else None
    except Exception:  # noqa: BLE001 - not a checkpoint of ours
        return None


def serves(path: str, strategy: Any) -> bool:
    """Whether the checkpoint at ``path`` was written for this strategy and primary key."""
    return read_meta(path) == meta_for(strategy)
