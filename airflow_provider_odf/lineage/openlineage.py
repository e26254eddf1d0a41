"""OpenLineage of ODF tasks: inputs and outputs named by :mod:`.naming`, facets read from the metadata chain.

The operators' ``get_openlineage_facets_on_complete/failure`` call these after ``execute`` with what the task did
(the block it committed, the verification it ran); everything else comes from the workspace. Lineage never fails a
task: when the workspace cannot be read (the very reason a task may have failed) the datasets are still named,
without facets.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable, Sequence

from airflow.providers.openlineage.extractors import OperatorLineage
from openlineage.client.event_v2 import InputDataset, OutputDataset
from openlineage.client.facet_v2 import (
    data_quality_assertions_dataset as dq,
    dataset_version_dataset,
    output_statistics_output_dataset,
    schema_dataset,
    sql_job,
    symlinks_dataset,
)

from airflow_provider_odf.lineage.facets import (
    OdfBlockOutputDatasetFacet,
    OdfDatasetFacet,
    OdfInputSliceInputDatasetFacet,
)
from airflow_provider_odf.lineage.naming import LineageName, dataset_name, location_name, source_name
from airflow_provider_odf.lineage.provenance import (
    BlockProvenance,
    DatasetIdentity,
    InputSlice,
    VerifyOutcome,
    block_provenance,
    identity,
    names_by_id,
)

if TYPE_CHECKING:
    from odf_core.workspace import Workspace

log = logging.getLogger(__name__)
DID_NAMESPACE = "odf"  # symlinks identifier namespace of a dataset's did:odf: id


def _interval(offsets: tuple[int, int] | None) -> dict[str, int] | None:
    return {"start": offsets[0], "end": offsets[1]} if offsets else None


def _dataset_facets(ident: DatasetIdentity, version: str | None) -> dict[str, Any]:
    facets: dict[str, Any] = {}
    if ident.dataset_id:
        facets["odf"] = OdfDatasetFacet(datasetId=ident.dataset_id, kind=ident.kind, head=ident.head)
        facets["symlinks"] = symlinks_dataset.SymlinksDatasetFacet(
            identifiers=[symlinks_dataset.Identifier(namespace=DID_NAMESPACE, name=ident.dataset_id, type="DATASET")])
    if version:
        facets["version"] = dataset_version_dataset.DatasetVersionDatasetFacet(datasetVersion=version)
    if ident.schema:
        facets["schema"] = schema_dataset.SchemaDatasetFacet(fields=[
            schema_dataset.SchemaDatasetFacetFields(name=c.name, type=c.type,
                                                    description=None if c.nullable else "not null")
            for c in ident.schema])
    return facets


def _block_facet(p: BlockProvenance, duplicates_dropped: int | None = None) -> OdfBlockOutputDatasetFacet:
    s = p.source_state
    return OdfBlockOutputDatasetFacet(
        duplicateKeyRowsDropped=duplicates_dropped,
        block=p.block, sequenceNumber=p.sequence_number, event=p.event, systemTime=p.system_time,
        prevBlock=p.prev_block, offsetInterval=_interval(p.offsets), records=p.records, logicalHash=p.logical_hash,
        watermark=p.watermark,
        sourceState={"sourceName": s.source, "kind": s.kind, "value": s.value} if s else None,
        checkpoint=p.checkpoint, engine=p.engine,
        queries=[{"alias": a, "query": q} for a, q in p.queries] or None,
        inputs=[{"datasetId": i.dataset_id, "name": i.dataset, "prevBlock": i.prev_block, "block": i.new_block,
                 "offsetInterval": _interval(i.offsets)} for i in p.inputs] or None,
    )


class Namer:
    """Names the datasets of one workspace (by its Asset namespace) and builds their OpenLineage datasets."""

    def __init__(self, ws: "Workspace | None", asset_namespace: str) -> None:
        self.ws = ws
        self.asset_namespace = asset_namespace

    def name(self, dataset: str) -> LineageName:
        return dataset_name(self.asset_namespace, dataset)

    def ident(self, dataset: str) -> DatasetIdentity | None:
        return _quiet(lambda: identity(self.ws.get(dataset)) if self.ws is not None else None)

    def output(self, dataset: str, block: BlockProvenance | None = None,
               duplicates_dropped: int | None = None) -> OutputDataset:
        n = self.name(dataset)
        ident = block.dataset if block is not None else self.ident(dataset)
        if ident is None:
            return OutputDataset(namespace=n.namespace, name=n.name)
        out_facets: dict[str, Any] = {}
        if block is not None:
            out_facets["odfBlock"] = _block_facet(block, duplicates_dropped)
            out_facets["outputStatistics"] = output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
                rowCount=block.records, size=block.size, fileCount=1 if block.size is not None else 0)
        return OutputDataset(namespace=n.namespace, name=n.name,
                             facets=_dataset_facets(ident, block.block if block else ident.head),
                             outputFacets=out_facets)

    def input(self, dataset: str, slice_: InputSlice | None = None, *,
              assertions: dq.DataQualityAssertionsDatasetFacet | None = None) -> InputDataset:
        n = self.name(dataset)
        ident = self.ident(dataset)
        in_facets: dict[str, Any] = {}
        if slice_ is not None:
            in_facets["odfInputSlice"] = OdfInputSliceInputDatasetFacet(
                block=slice_.new_block, prevBlock=slice_.prev_block, offsetInterval=_interval(slice_.offsets))
        if assertions is not None:
            in_facets["dataQualityAssertions"] = assertions
        if ident is None:
            return InputDataset(namespace=n.namespace, name=n.name, inputFacets=in_facets)
        version = slice_.new_block if slice_ is not None and slice_.new_block else ident.head
        return InputDataset(namespace=n.namespace, name=n.name, facets=_dataset_facets(ident, version),
                            inputFacets=in_facets)


def _quiet(fn: Callable[[], Any]) -> Any:
    """Lineage is best effort: what cannot be read is left out (logged), never raised into the task."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - the workspace may be the very thing that failed the task
        log.warning("OpenLineage: %s: %s", type(e).__name__, e)
        return None


def source_input(ws: "Workspace | None", dataset: str) -> list[InputDataset]:
    """The polling source of a root dataset as an input (empty for push-only roots)."""
    def find() -> list[InputDataset]:
        src = ws.get(dataset).state().polling_source if ws is not None else None
        if src is None:
            return []
        n = source_name(src.fetch)
        return [InputDataset(namespace=n.namespace, name=n.name)]

    return _quiet(find) or []


def path_input(path: str | None) -> list[InputDataset]:
    if not path or not str(path).strip():
        return []
    n = location_name(str(path))
    return [InputDataset(namespace=n.namespace, name=n.name)]


def ingest_step(ws: "Workspace | None", asset_namespace: str, dataset: str) -> OperatorLineage:
    """Fetch, prepare, read, merge: the source flows into the dataset (committed only by the commit task)."""
    namer = Namer(ws, asset_namespace)
    return OperatorLineage(inputs=source_input(ws, dataset), outputs=[namer.output(dataset)])


def committed(ws: "Workspace | None", asset_namespace: str, dataset: str, block: str | None, *,
              inputs: Sequence[InputDataset] = (), duplicates_dropped: int | None = None) -> OperatorLineage:
    """A task that committed ``block`` (None: nothing committed, e.g. a failure) to ``dataset``.

    Transformations name their input datasets (with the exact blocks read); roots name ``inputs`` (their source).
    ``duplicates_dropped``: an ingest's rows dropped for repeating a Ledger key inside the input (not in the block).
    """
    namer = Namer(ws, asset_namespace)
    prov = _quiet(lambda: block_provenance(ws, dataset, block)) if (block and ws is not None) else None
    job_facets: dict[str, Any] = {}
    if prov is not None and prov.event == "ExecuteTransform":
        ins = [namer.input(i.dataset, i) for i in prov.inputs if i.dataset]
        if prov.queries:
            job_facets["sql"] = sql_job.SQLJobFacet(query=";\n".join(q for _, q in prov.queries), dialect="spark")
    elif prov is None and ws is not None and _is_derivative(ws, dataset):
        ins = [namer.input(n) for n in _input_names(ws, dataset)]
    else:
        ins = list(inputs)
    return OperatorLineage(inputs=ins, outputs=[namer.output(dataset, prov, duplicates_dropped)],
                           job_facets=job_facets)


def _is_derivative(ws: "Workspace | None", dataset: str) -> bool:
    return bool(_quiet(lambda: ws.get(dataset).state().transform is not None) if ws is not None else False)


def _input_names(ws: "Workspace", dataset: str) -> list[str]:
    def find() -> list[str]:
        t = ws.get(dataset).state().transform
        names = names_by_id(ws)
        return [names[i.dataset_ref] for i in t.inputs if i.dataset_ref in names] if t else []

    return _quiet(find) or []


def verified(ws: "Workspace | None", asset_namespace: str, dataset: str,
             outcome: VerifyOutcome | None) -> OperatorLineage:
    """A verify task reads the dataset and asserts it: integrity (hashes, links, rules) or full (replays too)."""
    namer = Namer(ws, asset_namespace)
    assertions = None
    if outcome is not None:
        full = outcome.mode == "full"
        check = dq.Assertion(
            assertion="odf_reproducible" if full else "odf_integrity", success=outcome.ok, severity="error",
            name="verify " + outcome.mode, actual=outcome.summary,
            description="every transformation re-run from its recorded inputs gives the recorded logical hashes"
            if full else "hashes, links and chain rules of every block, data and checkpoint file")
        checks = [check]
        assertions = dq.DataQualityAssertionsDatasetFacet(assertions=checks)
    return OperatorLineage(inputs=[namer.input(dataset, assertions=assertions)])


def synced(ws: "Workspace | None", asset_namespace: str, folder: str, changed: Sequence[str]) -> OperatorLineage:
    """A sync task reads the snapshot folder and writes metadata blocks to the datasets it changed."""
    namer = Namer(ws, asset_namespace)
    return OperatorLineage(inputs=path_input(folder), outputs=[namer.output(d) for d in changed])
