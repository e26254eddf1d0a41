"""The ingest checkpoint (format marker: :mod:`odf_core.ingest.checkpoint`): the merge state of Ledger (keys seen)
and Snapshot (current rows), one parquet file.

Key-value metadata ``odf.spark-ingest.checkpoint`` = ``{"version": 1, "strategy": "Ledger"|"Snapshot",
"primaryKey": [...]}`` (plus Spark's own schema key, so reading it back needs no schema-inference job).

- Ledger: the primary-key columns, one row per key ever ingested (in first-seen order).
- Snapshot: the current state, the latest row per key whose last op was +A/+C: event-time column then the data
  columns, one row per key (row order is not part of the format).

A checkpoint written for another strategy or key is not used; the state is then rebuilt from the previous slices.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Sequence

from odf_core.engine.protocol import MergePhase
from odf_core.engine.checkpoint_format import CHECKPOINT_META_KEY, meta_for, read_meta
from odf_core.metadata import MergeStrategyAppend, MergeStrategyLedger, MergeStrategySnapshot
from spark_jobs.errors import InputRejected
from spark_jobs.parquet_files import spark_schema_meta


def strategy_kind(strategy: Any) -> str:
    return type(strategy).KIND


def primary_key(strategy: Any) -> tuple[str, ...]:
    return tuple(getattr(strategy, "primary_key", ()) or ())


def describe(strategy: Any) -> str:
    pk = primary_key(strategy)
    return f"{strategy_kind(strategy)}(primaryKey={list(pk)})" if pk else strategy_kind(strategy)


@dataclass
class CheckpointPlan:
    """What the slice writers write as the new checkpoint."""

    path: str
    strategy: MergeStrategyAppend | MergeStrategyLedger | MergeStrategySnapshot
    prefix_files: tuple[str, ...] = ()  # Ledger: earlier keys, copied first
    prefix_tables: tuple[Any, ...] = ()  # Ledger: earlier keys already in memory, copied first

    @property
    def kind(self) -> str:
        return strategy_kind(self.strategy)

    def metadata(self, spark_fields: dict[str, Any], names: Sequence[str]) -> dict[bytes, bytes]:
        return {CHECKPOINT_META_KEY: json.dumps(meta_for(self.strategy)).encode(),
                **spark_schema_meta(spark_fields, names)}


def usable_checkpoint(merge: MergePhase) -> str | None:
    """The previous checkpoint if it was written by this engine for the same strategy and key, else None."""
    path = merge.prev_checkpoint_path
    if not path:
        return None
    if not os.path.isfile(path):
        raise InputRejected(f"the previous checkpoint {path} is missing")
    meta = read_meta(path)
    if meta == meta_for(merge.strategy):
        return path
    if not merge.prev_data_paths:
        desc = f"{meta.get('strategy')}(primaryKey={meta.get('primaryKey')})" if meta else "another writer"
        raise InputRejected(f"the previous checkpoint {path} was written by {desc} and cannot be used for"
                            f" {describe(merge.strategy)}, and no previous data was given to rebuild the state")
    return None
