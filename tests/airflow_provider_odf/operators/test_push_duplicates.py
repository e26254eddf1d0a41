"""A push task whose Ledger input repeats a key (conformance D1): the count is in the task log (a WARNING with a
key) and in the OpenLineage block facet; ``duplicates="error"`` fails the task and commits nothing. Real workspace,
real spark-submit, as a worker runs it."""
from __future__ import annotations

import logging

import pytest

from airflow_provider_odf.operators import OdfPushIngestOperator

from ..conftest import conn_env
from .test_operators import _push_context

SNAPSHOT = """
kind: DatasetSnapshot
version: 1
content:
  name: people
  kind: Root
  metadata:
    - kind: AddPushSource
      sourceName: app
      read: {kind: NdJson, schema: ["id INT", "name STRING"]}
      merge: {kind: Ledger, primaryKey: [id]}
"""


@pytest.mark.spark
def test_a_push_task_reports_dropped_duplicates_or_refuses_them(monkeypatch, workspace, tmp_path, caplog):
    from odf_core.snapshots import add_snapshots, load_snapshot_files

    (tmp_path / "people.yaml").write_text(SNAPSHOT)
    add_snapshots(workspace, load_snapshot_files([tmp_path / "people.yaml"]))
    conn_env(monkeypatch, "odf_push", conn_type="odf", extra={
        "workspace": workspace.url,
        "engine_options": {"conf": {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"}}})
    data = tmp_path / "people.ndjson"
    data.write_text('{"id": 1, "name": "a"}\n{"id": 1, "name": "b"}\n{"id": 2, "name": "c"}\n'
                    '{"id": 2, "name": "d"}\n')

    strict = OdfPushIngestOperator(task_id="push", dataset="people", path=str(data), odf_conn_id="odf_push",
                                   duplicates="error")
    with pytest.raises(Exception, match=r"2 row\(s\) repeat the primary key \(id\) of an earlier row of the same "
                                        r'input, e.g. \{"id":1\}'):
        strict.execute(_push_context("manual__2026-05-01"))
    handle = workspace.get("people")
    assert handle.state().num_records == 0  # nothing committed

    op = OdfPushIngestOperator(task_id="push", dataset="people", path=str(data), odf_conn_id="odf_push")
    with caplog.at_level(logging.WARNING):
        result = op.execute(_push_context("manual__2026-05-02"))
    assert (result["records"], handle.state().num_records) == (2, 2)
    assert op.duplicates_dropped == 2
    # the task log: Airflow's handlers take the odf.* loggers' records (one line, not one per layer)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "duplicate" in
                r.getMessage() + r.name]
    assert warnings == ["dataset 'people': 2 row(s) of this input repeat the primary key (id) of an earlier row of it "
                        'and were dropped, the first per key kept, e.g. {"id":1}; --duplicates error refuses such '
                        "input"], caplog.text
    (out,) = op.get_openlineage_facets_on_complete(None).outputs
    assert out.outputFacets["odfBlock"].duplicateKeyRowsDropped == 2
