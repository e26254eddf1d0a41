"""A dataset as the current reference (kamu-cli 0.265.0) leaves it, end to end through the ``odf`` CLI: a chain of
manifest version 2 and version 3 blocks, a ``SetDataSchema`` carrying only an ODF ``DataSchema`` (the reference's
form, committed as received bytes), an UpsertStream root and a derivative of it. It is pushed to a repository,
pulled into another workspace, verified (integrity and the derivative's reproduction) and ingested further there."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from odf_core.metadata import MetadataBlock, Timestamp, decode_block, encode_block
from odf_core.metadata.data_schema_arrow import arrow_to_data_schema
from odf_core.metadata.arrow_schema import decode_arrow_schema
from odf_core.metadata.events import SetDataSchema
from odf_core.metadata.manifests import BLOCK_VERSION_ENV
from odf_core.storage import DatasetLayout
from odf_core.workspace import Workspace

from .harness import Clock, OdfWorkspace

pytestmark = pytest.mark.spark

ROOT = """\
kind: DatasetSnapshot
version: 1
content:
  name: prices
  kind: Root
  metadata:
    - kind: AddPushSource
      sourceName: default
      read: {kind: Csv, header: true, schema: ["op INT", "event_time TIMESTAMP", "sku STRING", "price BIGINT"]}
      merge: {kind: UpsertStream, primaryKey: [sku]}
"""
DERIVATIVE = """\
kind: DatasetSnapshot
version: 1
content:
  name: prices-x10
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs: [{datasetRef: prices}]
      transform: {kind: Sql, engine: spark, query: "SELECT event_time, sku, price * 10 AS price10 FROM prices"}
"""


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(Timestamp, "now", classmethod(lambda cls: c.current))
    return c


def _versions(ws_dir: Path, name: str) -> list[int]:
    h = Workspace.open(str(ws_dir)).get(name)
    return [decode_block(h.store.get(DatasetLayout.block_key(bh))).manifest_version for bh, _ in h.chain.iter_blocks()]


def _rows(w: OdfWorkspace, name: str) -> list[tuple]:
    t = w.last_data(name)
    return list(zip(*[t.column(c).to_pylist() for c in ("op", "sku", "price")]))


def _append_reference_data_schema(ws_dir: Path, name: str) -> None:
    """The reference's SetDataSchema (a DataSchema, no raw Arrow) of the dataset's current schema, as v3 bytes."""
    h = Workspace.open(str(ws_dir)).get(name)
    st = h.chain.state()
    event = SetDataSchema(data_schema=arrow_to_data_schema(decode_arrow_schema(st.schema)))
    h.chain.append_bytes(encode_block(MetadataBlock(
        system_time=st.system_time, prev_block_hash=st.head, sequence_number=st.sequence_number + 1, event=event,
        manifest_version=3)))


def test_a_current_reference_chain_pulls_verifies_and_ingests_further(tmp_path: Path, clock: Clock, spark,
                                                                       monkeypatch) -> None:
    monkeypatch.delenv(BLOCK_VERSION_ENV, raising=False)
    a = OdfWorkspace(tmp_path / "a")
    a.ok("init")
    (tmp_path / "root.yaml").write_text(ROOT)
    (tmp_path / "derivative.yaml").write_text(DERIVATIVE)
    a.ok("add", str(tmp_path / "root.yaml"), str(tmp_path / "derivative.yaml"))
    csv = a.src / "in.csv"
    csv.write_text("op,event_time,sku,price\n0,2024-01-01T00:00:00Z,a,1\n0,2024-01-01T00:00:00Z,b,2\n")
    a.ok("ingest", "prices", str(csv))  # version 2 blocks, the raw Arrow schema
    _append_reference_data_schema(Path(a.ws), "prices")
    monkeypatch.setenv(BLOCK_VERSION_ENV, "3")  # from here on written as the current reference writes
    clock.set("2050-01-02T12:00:00Z")
    csv.write_text("op,event_time,sku,price\n0,2024-01-02T00:00:00Z,a,5\n1,2024-01-02T00:00:00Z,b,0\n")
    a.ok("ingest", "prices", str(csv))
    assert _rows(a, "prices") == [(2, "a", 1), (3, "a", 5), (1, "b", 2)]
    a.ok("pull", "prices-x10")
    versions = _versions(Path(a.ws), "prices")
    assert set(versions) == {2, 3} and versions[0] == 3 and versions[-1] == 2

    repo = f"file://{tmp_path}/repo"
    a.ok("push", "prices", "--to", f"{repo}/prices")
    a.ok("push", "prices-x10", "--to", f"{repo}/prices-x10")
    b = OdfWorkspace(tmp_path / "b")
    b.ok("init")
    b.ok("pull", f"{repo}/prices", "--as", "prices")
    b.ok("pull", f"{repo}/prices-x10", "--as", "prices-x10")
    for name in ("prices", "prices-x10"):
        assert a.blocks(name) == b.blocks(name)
        ha, hb = (Workspace.open(w.ws).get(name) for w in (a, b))
        for bh, _ in ha.chain.iter_blocks():  # byte for byte
            assert hb.store.get(DatasetLayout.block_key(bh)) == ha.store.get(DatasetLayout.block_key(bh))
    assert "integrity ok" in b.ok("verify", "prices").out.replace(":", "")
    out = b.ok("verify", "prices-x10").out
    assert "reproduction" in out, out
    schema_events = [blk["event"] for blk in b.blocks("prices") if blk["event"]["kind"] == "SetDataSchema"]
    assert "fields" in schema_events[0]["schema"]  # the newest is the reference's DataSchema form

    clock.set("2050-01-03T12:00:00Z")
    (b.src / "in.csv").write_text("op,event_time,sku,price\n0,2024-01-03T00:00:00Z,c,7\n0,2024-01-02T00:00:00Z,a,5\n")
    b.ok("ingest", "prices", str(b.src / "in.csv"))
    assert _rows(b, "prices") == [(0, "c", 7)]  # `a` is as it was (values and event time): no correction
    b.ok("pull", "prices-x10")
    assert "integrity ok" in b.ok("verify", "prices-x10").out.replace(":", "")
    assert yaml.safe_load(b.ok("log", "prices").out.split("\n---\n")[0].split("\n", 1)[1])["version"] == 3
