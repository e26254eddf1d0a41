"""What each operator hands OpenLineage, on a real workspace named by a real ``odf`` connection (no Spark: the
blocks are committed by ``chains.build``; ``airflow dags test`` runs of the whole path are in test_dags_test_events).
"""
from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from openlineage.client.serde import Serde

import airflow_provider_odf.lineage as lineage_pkg
from airflow_provider_odf.operators import (
    OdfCommitOperator,
    OdfFetchOperator,
    OdfMergeOperator,
    OdfPushIngestOperator,
    OdfSyncOperator,
    OdfTransformOperator,
    OdfVerifyOperator,
)
from airflow_provider_odf.sensors.odf import OdfDatasetSensor, OdfSourceSensor

from ..conftest import conn_env
from .chains import DERIVED, ROOT, WATERMARK, build

SCHEMAS = Path(lineage_pkg.__file__).parent / "schemas"


@pytest.fixture
def graph(tmp_path, monkeypatch):
    g = build(tmp_path)
    conn_env(monkeypatch, "odf_default", conn_type="odf", extra={"workspace": g.ws.url})
    return g


def as_json(obj) -> dict:
    return json.loads(Serde.to_json(obj))


def check_custom_facets(facets: dict) -> None:
    """Every ODF facet matches its published JSON Schema (the facet's own part; the base is OpenLineage's)."""
    for facet in facets.values():
        url = facet["_schemaURL"]
        if "airflow-provider-odf" not in url:
            continue
        name = url.rsplit("/", 1)[-1]
        schema = json.loads((SCHEMAS / f"{name}.json").read_text())
        jsonschema.validate(facet, schema["$defs"][name]["allOf"][1])


def test_commit_output_names_the_dataset_and_carries_the_new_head(graph):
    op = OdfCommitOperator(task_id="commit", dataset="t.src")
    op.committed_block = graph.root_block
    lin = op.get_openlineage_facets_on_complete(None)
    (src,) = [as_json(d) for d in lin.inputs]
    assert (src["namespace"], src["name"]) == ("https://data.example.test:8443", "/exports/src.csv")
    (out,) = [as_json(d) for d in lin.outputs]
    head = str(graph.ws.get("t.src").chain.head())
    assert (out["namespace"], out["name"]) == ("odf://odf_default", "t.src")
    assert out["facets"]["version"]["datasetVersion"] == head == graph.root_block
    did = graph.ws.get("t.src").state().dataset_id.to_did_odf()
    assert out["facets"]["odf"] | {"_producer": None, "_schemaURL": None} == {
        "datasetId": did, "kind": "Root", "head": head, "_producer": None, "_schemaURL": None}
    assert out["facets"]["symlinks"]["identifiers"] == [{"namespace": "odf", "name": did, "type": "DATASET"}]
    assert [f["name"] for f in out["facets"]["schema"]["fields"]] == ["offset", "op", "system_time", "event_time", "v"]
    block = out["outputFacets"]["odfBlock"]
    assert (block["block"], block["event"], block["offsetInterval"], block["records"], block["watermark"]) == (
        head, "AddData", {"start": 0, "end": 4}, 5, WATERMARK)
    assert block["sourceState"] == {"sourceName": "default/polling", "kind": "odf/etag", "value": '"v1"'}
    stats = out["outputFacets"]["outputStatistics"]
    assert (stats["rowCount"], stats["fileCount"]) == (5, 1) and stats["size"] > 0
    check_custom_facets(out["facets"])
    check_custom_facets(out["outputFacets"])


def test_transform_lists_its_inputs_with_the_blocks_it_read_and_the_query(graph):
    op = OdfTransformOperator(task_id="transform", dataset="t.derived")
    op.committed_block = graph.derived_block
    lin = op.get_openlineage_facets_on_complete(None)
    (inp,) = [as_json(d) for d in lin.inputs]
    assert (inp["namespace"], inp["name"]) == ("odf://odf_default", "t.src")
    assert inp["facets"]["version"]["datasetVersion"] == graph.root_block
    assert inp["inputFacets"]["odfInputSlice"]["block"] == graph.root_block
    assert inp["inputFacets"]["odfInputSlice"]["offsetInterval"] == {"start": 0, "end": 4}
    (out,) = [as_json(d) for d in lin.outputs]
    assert out["outputFacets"]["odfBlock"]["inputs"][0]["block"] == graph.root_block
    assert out["outputFacets"]["odfBlock"]["queries"] == [{"query": "select event_time, v from src where v > 1"}]
    assert lin.job_facets["sql"].query == "select event_time, v from src where v > 1"
    check_custom_facets(inp["inputFacets"])
    check_custom_facets(out["outputFacets"])


def test_a_failed_transform_still_names_its_inputs_and_output(graph):
    op = OdfTransformOperator(task_id="transform", dataset="t.derived")  # committed nothing
    lin = op.get_openlineage_facets_on_failure(None)
    assert [(d.namespace, d.name) for d in lin.inputs] == [("odf://odf_default", "t.src")]
    (out,) = [as_json(d) for d in lin.outputs]
    assert out["name"] == "t.derived" and "odfBlock" not in out.get("outputFacets", {})


def test_ingest_steps_name_the_source_flowing_into_the_dataset(graph):
    for op in (OdfFetchOperator(task_id="fetch", dataset="t.src"), OdfMergeOperator(task_id="merge", dataset="t.src"),
               OdfSourceSensor(task_id="wait", dataset="t.src")):
        lin = op.get_openlineage_facets_on_complete(None)
        assert [(d.namespace, d.name) for d in lin.inputs] == [("https://data.example.test:8443", "/exports/src.csv")]
    lin = OdfFetchOperator(task_id="fetch", dataset="t.src").get_openlineage_facets_on_complete(None)
    assert [(d.namespace, d.name) for d in lin.outputs] == [("odf://odf_default", "t.src")]
    assert "odfBlock" not in as_json(lin.outputs[0]).get("outputFacets", {})


def test_push_names_the_pushed_path(graph, tmp_path):
    op = OdfPushIngestOperator(task_id="push", dataset="t.src", path=str(tmp_path / "in.ndjson"))
    lin = op.get_openlineage_facets_on_failure(None)
    assert [(d.namespace, d.name) for d in lin.inputs] == [("file", str(tmp_path / "in.ndjson"))]


def test_asset_namespace_names_datasets_everywhere(graph):
    op = OdfTransformOperator(task_id="transform", dataset="t.derived", asset_namespace="lake")
    op.committed_block = graph.derived_block
    lin = op.get_openlineage_facets_on_complete(None)
    assert {d.namespace for d in [*lin.inputs, *lin.outputs]} == {"odf://lake"}
    assert [a.uri for a in op.outlets] == ["odf://lake/t.derived"]
    sensor = OdfDatasetSensor(task_id="wait", dataset="t.src", asset_namespace="lake")
    (watched,) = sensor.get_openlineage_facets_on_complete(None).inputs
    assert (watched.namespace, watched.name) == ("odf://lake", "t.src")
    assert as_json(watched)["facets"]["version"]["datasetVersion"] == graph.root_block


def test_verify_reports_a_data_quality_assertion_that_passes_then_fails(graph):
    op = OdfVerifyOperator(task_id="verify", dataset="t.src")
    assert op.execute({})["ok"]
    (inp,) = [as_json(d) for d in op.get_openlineage_facets_on_complete(None).inputs]
    (check,) = inp["inputFacets"]["dataQualityAssertions"]["assertions"]
    assert (check["assertion"], check["success"]) == ("odf_integrity", True)
    assert check["actual"].startswith("ok: 5 blocks")

    (key,) = graph.ws.get("t.src").store.list("data")
    path = Path(graph.ws.get("t.src").store.local_path(key))
    t = pq.read_table(path)
    pq.write_table(t.set_column(4, "v", pa.array([9] * t.num_rows, pa.int64())), path)
    op = OdfVerifyOperator(task_id="verify", dataset="t.src")
    with pytest.raises(Exception, match="verification failed"):
        op.execute({})
    (inp,) = [as_json(d) for d in op.get_openlineage_facets_on_failure(None).inputs]
    (check,) = inp["inputFacets"]["dataQualityAssertions"]["assertions"]
    assert check["success"] is False and "integrity check failed" in check["actual"]


def test_sync_reports_the_folder_and_the_datasets_it_changed(graph, tmp_path):
    folder = tmp_path / "snaps"
    op = OdfSyncOperator(task_id="sync", folder=str(folder))
    op.changed = ["t.derived"]  # what execute records (heads before and after the sync)
    lin = op.get_openlineage_facets_on_complete(None)
    assert [(d.namespace, d.name) for d in lin.inputs] == [("file", str(folder))]
    assert [(d.namespace, d.name) for d in lin.outputs] == [("odf://odf_default", "t.derived")]
    assert ROOT and DERIVED  # the snapshots the folder holds


def test_lineage_without_a_reachable_workspace_still_names_the_datasets(monkeypatch):
    conn_env(monkeypatch, "odf_default", conn_type="odf", extra={"workspace": "/nonexistent/ws"})
    op = OdfCommitOperator(task_id="commit", dataset="t.src")
    lin = op.get_openlineage_facets_on_failure(None)
    assert lin.inputs == [] and [(d.namespace, d.name, d.facets) for d in lin.outputs] == [
        ("odf://odf_default", "t.src", {})]
