"""The OpenLineage block facet of an ingest carries the rows dropped for repeating a Ledger key inside the input
(conformance D1): the count is not in the block, so the operator hands it over (no Spark: ``chains.build``)."""
from __future__ import annotations

from airflow_provider_odf.operators import OdfCommitOperator

from .test_operator_lineage import as_json, check_custom_facets, graph  # noqa: F401 (graph: the fixture)


def test_commit_facet_carries_the_dropped_duplicates(graph):  # noqa: F811
    op = OdfCommitOperator(task_id="commit", dataset="t.src")
    op.committed_block = graph.root_block
    op.duplicates_dropped = 2
    (out,) = [as_json(d) for d in op.get_openlineage_facets_on_complete(None).outputs]
    assert out["outputFacets"]["odfBlock"]["duplicateKeyRowsDropped"] == 2
    check_custom_facets(out["outputFacets"])
    op.duplicates_dropped = None
    (out,) = [as_json(d) for d in op.get_openlineage_facets_on_complete(None).outputs]
    assert out["outputFacets"]["odfBlock"].get("duplicateKeyRowsDropped") is None
    check_custom_facets(out["outputFacets"])
