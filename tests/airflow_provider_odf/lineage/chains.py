"""A tiny real dataset graph with data, built without Spark: ``t.src`` (root, Url source) → ``t.derived``.

Blocks are committed with ``odf_core.commit.commit_data`` as ingest and transform do: an ``AddData`` with a source
state and watermark on the root, an ``ExecuteTransform`` that records which root blocks it read on the derivative.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from odf_core.commit import commit_data, describe_slice
from odf_core.metadata import ExecuteTransformInput, SourceState, Timestamp
from odf_core.snapshots import add_snapshots, load_snapshot_files
from odf_core.workspace import Workspace

from tests.odf_core.chain.builders import write_slice

ROOT = """kind: DatasetSnapshot
version: 1
content:
  name: t.src
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch:
        kind: Url
        url: https://user:secret@data.example.test:8443/exports/src.csv?token=abc
      read:
        kind: Csv
        header: true
        schema: ["v BIGINT"]
      merge:
        kind: Append
    - kind: SetInfo
      description: A source of numbers.
"""
DERIVED = """kind: DatasetSnapshot
version: 1
content:
  name: t.derived
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs:
        - datasetRef: t.src
          alias: src
      transform:
        kind: Sql
        engine: spark
        query: select event_time, v from src where v > 1
"""
WATERMARK = "2024-01-01T00:00:04Z"


@dataclass(frozen=True)
class Graph:
    ws: Workspace
    root_block: str
    derived_block: str


def build(tmp: Path, *, with_derived_data: bool = True) -> Graph:
    (tmp / "snaps").mkdir(parents=True, exist_ok=True)
    (tmp / "snaps" / "src.yaml").write_text(ROOT, encoding="utf-8")
    (tmp / "snaps" / "derived.yaml").write_text(DERIVED, encoding="utf-8")
    ws = Workspace.init(str(tmp / "ws"))
    add_snapshots(ws, load_snapshot_files([tmp / "snaps" / "src.yaml", tmp / "snaps" / "derived.yaml"]))
    src = ws.get("t.src")
    t = Timestamp.parse("2024-01-02T00:00:00Z")
    root_block = commit_data(
        src.chain, base_head=src.chain.head(),
        slice_file=describe_slice(write_slice(tmp / "s0.parquet", 0, 5), "offset", 0), checkpoint_path=None,
        system_time=t, new_watermark=Timestamp.parse(WATERMARK),
        source_state=SourceState(source_name="default/polling", kind="odf/etag", value='"v1"'))
    derived_block = ""
    if with_derived_data:
        der = ws.get("t.derived")
        did = src.state().dataset_id
        qi = ExecuteTransformInput(dataset_id=did, prev_block_hash=None, new_block_hash=root_block,
                                   prev_offset=None, new_offset=4)
        derived_block = str(commit_data(
            der.chain, base_head=der.chain.head(),
            slice_file=describe_slice(write_slice(tmp / "d0.parquet", 0, 3), "offset", 0), checkpoint_path=None,
            system_time=t, new_watermark=Timestamp.parse(WATERMARK), query_inputs=(qi,)))
    return Graph(ws, str(root_block), derived_block)
