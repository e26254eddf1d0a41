"""Provenance read back from the chain, and the one naming rule of OpenLineage datasets (no Spark: blocks are
committed with ``commit_data`` as ingest and transform do)."""
from __future__ import annotations

import json
from urllib.parse import urlsplit

import pytest

from airflow_provider_odf.assets import asset_uri
from airflow_provider_odf.lineage.naming import asset_to_openlineage, dataset_name, location_name, source_name
from airflow_provider_odf.lineage.provenance import block_provenance
from odf_core.errors import OdfError

from .chains import WATERMARK, build


@pytest.fixture
def graph(tmp_path):
    return build(tmp_path)


def test_root_block_provenance_is_what_the_chain_records(graph):
    p = block_provenance(graph.ws, "t.src", graph.root_block)
    state = graph.ws.get("t.src").state()
    assert (p.block, p.dataset.head, p.event) == (graph.root_block, str(state.head), "AddData")
    assert p.dataset.dataset_id == state.dataset_id.to_did_odf() and p.dataset.kind == "Root"
    assert (p.offsets, p.records, p.watermark) == ((0, 4), 5, WATERMARK)
    assert (p.source_state.source, p.source_state.kind, p.source_state.value) == ("default/polling", "odf/etag",
                                                                                  '"v1"')
    block = graph.ws.get("t.src").chain.get_block(state.head)
    assert p.prev_block == str(block.prev_block_hash) and p.sequence_number == block.sequence_number
    assert p.size == block.event.new_data.size and p.inputs == ()


def test_transform_block_provenance_names_the_exact_input_blocks_and_the_query(graph):
    p = block_provenance(graph.ws, "t.derived", graph.derived_block)
    assert p.event == "ExecuteTransform" and (p.offsets, p.records) == ((0, 2), 3)
    (i,) = p.inputs
    assert (i.dataset, i.new_block, i.prev_block, i.offsets) == ("t.src", graph.root_block, None, (0, 4))
    assert i.dataset_id == graph.ws.get("t.src").state().dataset_id.to_did_odf()
    assert (p.engine, p.queries) == ("spark", ((None, "select event_time, v from src where v > 1"),))


def test_asset_extra_is_json_with_the_provenance(graph):
    extra = block_provenance(graph.ws, "t.derived", graph.derived_block).to_extra()
    assert json.loads(json.dumps(extra)) == extra
    assert extra["block"] == extra["head"] == graph.derived_block
    assert extra["offsets"] == [0, 2] and extra["watermark"] == WATERMARK
    assert extra["inputs"] == [{"dataset": "t.src", "dataset_id": extra["inputs"][0]["dataset_id"], "prev_block": None,
                                "block": graph.root_block, "offsets": [0, 4]}]
    root = block_provenance(graph.ws, "t.src", graph.root_block).to_extra()
    assert root["source_state"] == {"source": "default/polling", "kind": "odf/etag", "value": '"v1"'}
    assert "inputs" not in root


def test_a_block_that_is_not_data_or_not_in_the_chain_is_refused(graph):
    seed = [str(h) for h, _ in graph.ws.get("t.src").chain.iter_blocks()][-1]
    with pytest.raises(OdfError, match=r"t\.src.*Seed, not a data block"):
        block_provenance(graph.ws, "t.src", seed)
    with pytest.raises(OdfError, match="missing"):
        block_provenance(graph.ws, "t.src", graph.derived_block)


def test_dataset_names_are_the_asset_uri_split_at_the_namespace():
    n = dataset_name("Odf_Default", "Com.Example.Trips")
    assert (n.namespace, n.name) == ("odf://odf_default", "com.example.trips")
    assert f"{n.namespace}/{n.name}" == asset_uri("odf_default", "com.example.trips")
    with pytest.raises(ValueError):
        dataset_name("has space", "x")


def test_sources_are_named_without_credentials_or_query():
    n = location_name("https://user:secret@data.example.test:8443/exports/a.csv?token=abc#x")
    assert (n.namespace, n.name) == ("https://data.example.test:8443", "/exports/a.csv")
    assert location_name("/data/in/*.csv.gz") == location_name("file:///data/in/*.csv.gz")
    assert (location_name("/data/x.csv").namespace, location_name("/data/x.csv").name) == ("file", "/data/x.csv")
    assert location_name("s3://bucket/key/a.parquet").namespace == "s3://bucket"


def test_polling_sources_of_every_kind_have_a_name():
    from odf_core.metadata import FetchStepContainer, FetchStepFilesGlob, FetchStepUrl

    assert source_name(FetchStepUrl(url="http://h/p")).namespace == "http://h"
    assert source_name(FetchStepFilesGlob(path="/in/*.csv")).name == "/in/*.csv"
    c = source_name(FetchStepContainer(image="ghcr.io/x/y:1"))
    assert (c.namespace, c.name) == ("container", "ghcr.io/x/y:1")


def test_an_odf_asset_converts_to_the_name_operators_report():
    from airflow.sdk import Asset

    asset = Asset(uri=asset_uri("odf_default", "t.src"))
    ds = asset_to_openlineage(asset, None)
    n = dataset_name("odf_default", "t.src")
    assert (ds.namespace, ds.name) == (n.namespace, n.name)
    assert urlsplit(asset.uri).netloc == n.namespace.removeprefix("odf://")
