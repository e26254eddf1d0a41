"""What every ODF operator shares: the hook, a killable Spark engine, transaction ids, asset events, lineage.

Operators hold only names (dataset, connection ids) until ``execute``: building a DAG never opens a workspace,
imports Spark or OpenLineage, or touches the network. OpenLineage asks for lineage after ``execute``
(``get_openlineage_facets_on_complete/failure``); the operators then read it from the chain
(:mod:`airflow_provider_odf.lineage`, imported only then).
"""
from __future__ import annotations

import hashlib
import re
from functools import cached_property
from typing import TYPE_CHECKING, Any, Sequence

from airflow.sdk import BaseOperator

from airflow_provider_odf.assets import odf_asset
from airflow_provider_odf.hooks.odf import OdfHook
from airflow_provider_odf.links import OdfDatasetLink

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage
    from airflow.sdk import Asset, Context
    from odf_core.engine import Engine
    from odf_core.workspace import Workspace

DEFAULT_CONN = OdfHook.default_conn_name


def txn_id(dag_id: str, run_id: str, dataset: str, *more: str) -> str:
    """A transaction id fixed by (DAG, run, dataset): every try of every step of one run finds the same staging.
    ``more`` (e.g. a task id) tells apart several transactions of one run on one dataset."""
    digest = hashlib.sha256("\n".join((dag_id, run_id, dataset.lower(), *more)).encode()).hexdigest()[:16]
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", run_id).strip("-.")[:48]
    return f"af-{slug}-{digest}"


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (tuple, list)):
        return [_jsonable(v) for v in value]
    return str(value)


def result_summary(dataset: str, result: Any) -> dict[str, Any]:
    """The small JSON an asset event and the XCom carry about a commit (never data), from the step's result."""
    return {
        "dataset": dataset,
        "block": _jsonable(getattr(result, "block_hash", None)),
        "head": _jsonable(getattr(result, "head", None)),
        "offsets": _jsonable(getattr(result, "offset_interval", None)),
        "records": _jsonable(getattr(result, "num_records", None)),
        "watermark": _jsonable(getattr(result, "watermark", None)),
    }


def commit_summary(ws: "Workspace", dataset: str, result: Any, log: Any) -> dict[str, Any]:
    """The commit's provenance as the chain records it (block, previous block, offsets, watermark, source state,
    input blocks: :meth:`BlockProvenance.to_extra`), else — when the block cannot be read back — the step's result."""
    summary = result_summary(dataset, result)
    from odf_core.errors import OdfError

    from airflow_provider_odf.lineage.provenance import block_provenance

    try:
        return {**summary, **block_provenance(ws, dataset, str(result.block_hash)).to_extra()}
    except OdfError as e:
        log.warning("%s: the provenance of block %s cannot be read back (%s); the asset event carries the "
                    "commit's own summary", dataset, result.block_hash, e)
        return summary


class OdfBaseOperator(BaseOperator):
    """Base of the ODF operators.

    :param dataset: dataset name in the workspace.
    :param odf_conn_id: the ``odf`` connection (workspace + Spark settings).
    :param spark_conn_id: a ``spark`` connection overriding the one the odf connection names.
    :param asset_namespace: how Airflow names the workspace (default: ``odf_conn_id``): the namespace of the
        dataset's Asset URI ``odf://<namespace>/<dataset>`` and of its OpenLineage name.
    """

    template_fields: Sequence[str] = ("dataset",)
    ui_color = "#dbeafe"
    operator_extra_links = (OdfDatasetLink(),)

    def __init__(self, *, dataset: str, odf_conn_id: str = DEFAULT_CONN, spark_conn_id: str | None = None,
                 asset_namespace: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.dataset = dataset
        self.odf_conn_id = odf_conn_id
        self.spark_conn_id = spark_conn_id
        self.asset_namespace = asset_namespace
        self._engine: Engine | None = None

    @property
    def lineage_namespace(self) -> str:
        return self.asset_namespace or self.odf_conn_id

    @cached_property
    def hook(self) -> OdfHook:
        return OdfHook(self.odf_conn_id, spark_conn_id=self.spark_conn_id)

    def workspace(self) -> "Workspace":
        return self.hook.get_workspace()

    def engine(self) -> "Engine":
        """The task's engine, whose own timeout is the task's ``execution_timeout`` (Airflow's is the other guard)."""
        timeout = self.execution_timeout.total_seconds() if self.execution_timeout else None
        self._engine = self.hook.get_engine(timeout_s=timeout)
        return self._engine

    def on_kill(self) -> None:
        """Stop the running Spark work: the spark-submit job's whole process group, or the long-lived engine's
        request (Airflow calls this on timeout and on mark-failed)."""
        if self._engine is not None:
            self.log.info("Stopping the Spark work of %s", self.dataset)
            self._engine.kill()

    # -- OpenLineage ---------------------------------------------------------------------------------------------

    def _lineage_workspace(self) -> "Workspace | None":
        try:
            return self.workspace()
        except Exception as e:  # noqa: BLE001 - lineage of a task that failed to reach its workspace still names the datasets
            self.log.warning("OpenLineage: workspace of connection '%s' not readable: %s", self.odf_conn_id, e)
            return None

    def odf_lineage(self, ws: "Workspace | None", failed: bool) -> "OperatorLineage":
        """This task's lineage; ``failed``: the task failed (what it did not finish is left out)."""
        raise NotImplementedError

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> "OperatorLineage":
        return self.odf_lineage(self._lineage_workspace(), failed=False)

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> "OperatorLineage":
        return self.odf_lineage(self._lineage_workspace(), failed=True)


class OdfCommittingOperator(OdfBaseOperator):
    """An operator that appends blocks to a dataset and emits its Asset event with the new head.

    :param asset_namespace: namespace of the dataset's Asset URI (default: ``odf_conn_id``); the operator's outlet
        is ``odf://<namespace>/<dataset>`` unless ``outlets`` is given.
    """

    def __init__(self, *, dataset: str, odf_conn_id: str = DEFAULT_CONN, asset_namespace: str | None = None,
                 **kwargs: Any) -> None:
        if "outlets" not in kwargs and "{{" not in dataset:
            kwargs["outlets"] = [odf_asset(asset_namespace or odf_conn_id, dataset)]
        super().__init__(dataset=dataset, odf_conn_id=odf_conn_id, asset_namespace=asset_namespace, **kwargs)
        self.committed_block: str | None = None  # set by execute: what lineage reports

    def report_commit(self, context: "Context", result: Any) -> dict[str, Any]:
        """Log the committed block, attach its provenance to the Asset event and return it (the task's XCom)."""
        summary = commit_summary(self.workspace(), self.dataset, result, self.log)
        self.committed_block = summary["block"]
        self.log.info("%s: committed block %s, %s record(s), offsets %s, watermark %s; head is now %s", self.dataset,
                      summary["block"], summary["records"], summary["offsets"], summary["watermark"],
                      summary["head"])
        self.emit(context, summary)
        return summary

    def _own_asset(self) -> "Asset | None":
        from airflow.sdk import Asset

        uri = odf_asset(self.lineage_namespace, self.dataset).uri
        return next((a for a in self.outlets if isinstance(a, Asset) and a.uri == uri), None)

    def emit(self, context: "Context", summary: dict[str, Any]) -> None:
        """Attach the commit summary to this task's asset event (what ``yield Metadata(asset, ...)`` does)."""
        asset = self._own_asset()
        if asset is not None:
            context["outlet_events"][asset].extra.update(summary)
            self.log.info("Asset event %s: %s", asset.uri, summary)
