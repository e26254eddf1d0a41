"""What the ODF pages show, from a real workspace (no Spark, no server): rows, chain, lineage graph, records, links."""
from __future__ import annotations

import re

import pytest

from airflow_provider_odf.links import OdfDatasetLink, dataset_page
from airflow_provider_odf.operators import OdfTransformOperator
from airflow_provider_odf.plugins import graph_svg
from airflow_provider_odf.plugins.views import (
    chain_entries,
    dataset_detail,
    describe_event,
    dataset_rows,
    lineage_graph,
    recent_records,
)
from odf_core.snapshots import add_snapshots, load_snapshot_files

from ..lineage.chains import WATERMARK, build

LEAF = """kind: DatasetSnapshot
version: 1
content:
  name: t.leaf
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs:
        - datasetRef: t.derived
        - datasetRef: t.src
      transform:
        kind: Sql
        engine: spark
        query: select * from `t.derived`
"""


@pytest.fixture
def graph(tmp_path):
    g = build(tmp_path)
    (tmp_path / "snaps" / "leaf.yaml").write_text(LEAF, encoding="utf-8")
    add_snapshots(g.ws, load_snapshot_files([tmp_path / "snaps" / "leaf.yaml"]))
    return g


def test_rows_have_kind_head_records_size_and_watermark(graph):
    rows = {r.name: r for r in dataset_rows(graph.ws)}
    assert list(rows) == ["t.derived", "t.leaf", "t.src"]
    src = rows["t.src"]
    assert (src.kind, src.head, src.records, src.watermark) == ("Root", graph.root_block, 5, WATERMARK)
    assert src.size == graph.ws.get("t.src").state().data_size > 0
    assert (rows["t.leaf"].records, rows["t.leaf"].watermark) == (0, None)


def test_chain_lists_blocks_newest_first_with_what_they_did(graph):
    entries, more = chain_entries(graph.ws, graph.ws.get("t.derived"), 50)
    assert not more
    assert [e.event for e in entries] == ["ExecuteTransform", "SetDataSchema", "SetTransform", "Seed"]
    assert entries[0].hash == graph.derived_block and entries[0].sequence_number == 3
    assert re.match(rf"offsets 0\.\.2 \(3 records\), t\.src 0\.\.4 @ {graph.root_block[-10:]}", entries[0].summary)
    assert entries[0].links == ("t.src",) and entries[2].links == ("t.src",)
    assert f"newBlockHash: {graph.root_block}" in entries[0].manifest
    entries, more = chain_entries(graph.ws, graph.ws.get("t.src"), 2)
    assert more and [e.event for e in entries] == ["AddData", "SetDataSchema"]
    assert 'source state odf/etag "v1"' in entries[0].summary


def test_lineage_graph_goes_up_and_down_with_longest_path_depths(graph):
    g = lineage_graph(graph.ws, "t.derived")
    assert g.depth == {"t.derived": 0, "t.src": -1, "t.leaf": 1}
    assert g.edges == {("t.src", "t.derived"), ("t.derived", "t.leaf")}
    g = lineage_graph(graph.ws, "t.src")
    # t.leaf reads t.src directly and through t.derived: it sits right of t.derived, never beside it
    assert g.depth == {"t.src": 0, "t.derived": 1, "t.leaf": 2}
    assert g.edges == {("t.src", "t.derived"), ("t.derived", "t.leaf"), ("t.src", "t.leaf")}
    assert g.kinds == {"t.src": "Root", "t.derived": "Derivative", "t.leaf": "Derivative"}


def test_graph_svg_links_every_node_and_draws_every_edge(graph):
    g = lineage_graph(graph.ws, "t.src")
    svg = graph_svg.render(g, lambda n: f"/odf/datasets/{n}?conn=c&x=<")
    assert re.findall(r'data-dataset="([^"]+)"', svg) == sorted(g.depth, key=lambda n: (g.depth[n], n))
    assert len(re.findall(r'<path class="edge"', svg)) == 3
    assert 'href="/odf/datasets/t.leaf?conn=c&amp;x=&lt;"' in svg  # escaped
    xs = {n: float(re.search(rf'data-dataset="{re.escape(n)}".*?<rect x="([\d.]+)"', svg).group(1)) for n in g.depth}
    assert xs["t.src"] < xs["t.derived"] < xs["t.leaf"]


def test_detail_and_recent_records(graph):
    d = dataset_detail(graph.ws.get("t.src"))
    assert d.source == "https://data.example.test:8443/exports/src.csv"  # no credentials, no query
    assert d.description == "A source of numbers." and [c.name for c in d.schema][-1] == "v"
    d = dataset_detail(graph.ws.get("t.derived"))
    assert d.queries == ((None, "select event_time, v from src where v > 1"),) and d.source is None
    recs = recent_records(graph.ws.get("t.src"), 2)
    assert recs.columns[-1] == "v" and [r[-1] for r in recs.rows] == ["3", "4"]
    assert recent_records(graph.ws.get("t.leaf"), 5).rows == []


def test_extra_link_points_at_the_dataset_page():
    assert dataset_page("a.b", "odf_default") == "/odf/datasets/a.b?conn=odf_default"
    assert dataset_page("a.b", "c", "lake", "https://af.example/") == "https://af.example/odf/datasets/a.b?conn=c&ns=lake"
    op = OdfTransformOperator(task_id="t", dataset="com.x", odf_conn_id="wh", asset_namespace="lake")
    (link,) = op.operator_extra_links
    assert isinstance(link, OdfDatasetLink)
    assert link.get_link(op, ti_key=None) == "/odf/datasets/com.x?conn=wh&ns=lake"


def test_a_schema_event_is_described_by_its_columns_whichever_form_it_carries():
    # a SetDataSchema may carry only the DataSchema (no raw Arrow schema): mypy found the page failing on it
    from odf_core.metadata import MetadataBlock, SetDataSchema, Timestamp
    from odf_core.metadata.data_schema import DataField, DataSchema, DataTypeString, DataTypeUInt64
    from odf_core.metadata.data_schema_arrow import arrow_schema_bytes

    data_schema = DataSchema(fields=(DataField(name="city", type=DataTypeString()),
                                     DataField(name="population", type=DataTypeUInt64())))

    def described(ev: SetDataSchema) -> tuple[str, tuple[str, ...]]:
        block = MetadataBlock(system_time=Timestamp.parse("2024-01-01T00:00:00Z"), sequence_number=1, event=ev)
        return describe_event(block, {})

    raw = arrow_schema_bytes(SetDataSchema(data_schema=data_schema))
    assert described(SetDataSchema(data_schema=data_schema)) == ("2 columns: city, population", ())
    assert described(SetDataSchema(schema=raw)) == ("2 columns: city, population", ())
    assert described(SetDataSchema()) == ("no schema", ())
