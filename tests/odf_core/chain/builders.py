"""Tiny real datasets for chain tests: a root dataset in a workspace and Parquet slices written with pyarrow."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from odf_core.metadata import (
    AddPushSource,
    DatasetKind,
    DatasetSnapshot,
    MergeStrategyAppend,
    ReadStepNdJson,
    Timestamp,
)
from odf_core.workspace import Workspace

T0 = Timestamp.parse("2024-01-01T00:00:00Z")


def root_snapshot(name: str = "root") -> DatasetSnapshot:
    return DatasetSnapshot(
        name=name,
        kind=DatasetKind.ROOT,
        metadata=(AddPushSource(source_name="default", read=ReadStepNdJson(schema=("v BIGINT",)),
                                merge=MergeStrategyAppend()),),
    )


def new_root(ws: Workspace, name: str = "root"):
    return ws.create(root_snapshot(name), system_time=T0)


def slice_table(start: int, n: int, *, system_ms: int = 1_704_067_200_000, event_ms0: int = 1_704_067_200_000,
                extra: dict | None = None) -> pa.Table:
    ts = pa.timestamp("ms", tz="UTC")
    cols = {
        "offset": pa.array(range(start, start + n), pa.int64()),
        "op": pa.array([0] * n, pa.int32()),
        "system_time": pa.array([system_ms] * n, ts),
        "event_time": pa.array([event_ms0 + i * 1000 for i in range(n)], ts),
        "v": pa.array([start + i for i in range(n)], pa.int64()),
    }
    for k, v in (extra or {}).items():
        cols[k] = v
    return pa.table(cols)


def write_slice(path, start: int, n: int, **kw) -> str:
    pq.write_table(slice_table(start, n, **kw), str(path))
    return str(path)
