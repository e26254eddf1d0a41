"""Lineage of ODF tasks: provenance read from the metadata chain (``provenance``), OpenLineage names (``naming``),
facets and per-task lineage (``facets``, ``openlineage``: only imported when the OpenLineage provider asks)."""
