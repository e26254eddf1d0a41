"""The ODF-specific OpenLineage facets (custom facets in the OpenLineage sense; JSON Schemas in ``schemas/``).

Standard facets carry what they can (schema, version = head block hash, output statistics, data-quality
assertions, symlinks to the ``did:odf:`` id, SQL); these carry what only ODF has: the block a task committed with its
offsets, watermark and source state, and for transformations the exact input blocks and queries.
Imported only when OpenLineage asks an operator for its lineage (the provider is installed), never at DAG parse time.
"""
from __future__ import annotations

from typing import Any

import attr
from openlineage.client.facet_v2 import DatasetFacet, InputDatasetFacet, OutputDatasetFacet

# Where the JSON Schemas of airflow_provider_odf/lineage/schemas/ are published (``_schemaURL`` of each facet).
SCHEMA_BASE = "https://open-data-fabric.github.io/airflow-provider-odf/spec/facets/1-0-0"


def _schema(name: str) -> str:
    return f"{SCHEMA_BASE}/{name}.json#/$defs/{name}"


@attr.define
class OdfDatasetFacet(DatasetFacet):
    """An ODF dataset: its global id, kind and the head block the task saw or left."""

    datasetId: str
    kind: str
    head: str | None = attr.field(default=None)

    @staticmethod
    def _get_schema() -> str:
        return _schema("OdfDatasetFacet")


@attr.define
class OdfBlockOutputDatasetFacet(OutputDatasetFacet):
    """The block a task committed: ``AddData`` (ingest) or ``ExecuteTransform`` (transformation)."""

    block: str
    sequenceNumber: int
    event: str
    systemTime: str
    prevBlock: str | None = attr.field(default=None)
    offsetInterval: dict[str, int] | None = attr.field(default=None)
    records: int = attr.field(default=0)
    logicalHash: str | None = attr.field(default=None)
    watermark: str | None = attr.field(default=None)
    sourceState: dict[str, str] | None = attr.field(default=None)
    checkpoint: str | None = attr.field(default=None)
    engine: str | None = attr.field(default=None)
    queries: list[dict[str, Any]] | None = attr.field(default=None)
    inputs: list[dict[str, Any]] | None = attr.field(default=None)
    # an ingest's rows dropped for repeating the Ledger primary key of an earlier row of the same input (not recorded
    # in the block: conformance D1)
    duplicateKeyRowsDropped: int | None = attr.field(default=None)

    @staticmethod
    def _get_schema() -> str:
        return _schema("OdfBlockOutputDatasetFacet")


@attr.define
class OdfInputSliceInputDatasetFacet(InputDatasetFacet):
    """What a transformation read of an input: blocks after ``prevBlock`` up to ``block``."""

    block: str | None = attr.field(default=None)
    prevBlock: str | None = attr.field(default=None)
    offsetInterval: dict[str, int] | None = attr.field(default=None)

    @staticmethod
    def _get_schema() -> str:
        return _schema("OdfInputSliceInputDatasetFacet")
