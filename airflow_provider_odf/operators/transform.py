"""Derivative datasets and workspace upkeep as Airflow tasks: Transform, Verify, Sync.

Asset events that woke a Transform are only hints (several may fold into one run, some may be missed): what to
process is always computed from the metadata chains of the inputs, so a run with nothing new simply skips.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, Sequence

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from airflow_provider_odf.errors import OdfTaskError
from airflow_provider_odf.hooks.odf import OdfHook
from airflow_provider_odf.operators.base import DEFAULT_CONN, OdfBaseOperator, OdfCommittingOperator, txn_id

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage
    from airflow.sdk import Context

    from airflow_provider_odf.lineage.provenance import VerifyOutcome
    from odf_core.chain.integrity import IntegrityReport
    from odf_core.transform.verify import VerifyReport
    from odf_core.workspace import Workspace

VerifyMode = Literal["integrity", "full"]


class OdfTransformOperator(OdfCommittingOperator):
    """Run the derivative's transform on the new input data with Spark, commit, emit the Asset event.

    ``execution_timeout`` bounds the Spark job too; on timeout or kill, ``on_kill`` kills its whole process group.
    """

    def execute(self, context: "Context") -> dict[str, Any]:
        from odf_core import transform

        tid = txn_id(context["dag"].dag_id, context["run_id"], self.dataset)
        self.log.info("%s: transforming new input data (transaction %s)", self.dataset, tid)
        try:
            result = transform.run(self.workspace(), self.dataset, engine=self.engine(), txn_id=tid)
        except transform.EngineUpgradeNeeded as e:  # retries cannot help: the operator's choice is needed
            raise AirflowFailException(str(e)) from None
        if result is None:
            empty = transform.input_without_data(self.workspace(), self.dataset)
            raise AirflowSkipException(f"{self.dataset}: input '{empty}' has no data yet, nothing to transform"
                                       if empty else f"{self.dataset}: the inputs have no new data, nothing to "
                                       "transform")
        return self.report_commit(context, result)

    def odf_lineage(self, ws: "Workspace | None", failed: bool) -> "OperatorLineage":
        """Inputs are the exact input blocks the committed block records (or, without one, the inputs by name)."""
        from airflow_provider_odf.lineage import openlineage as ol

        return ol.committed(ws, self.lineage_namespace, self.dataset, self.committed_block)


class OdfVerifyOperator(OdfBaseOperator):
    """Verify a dataset: ``integrity`` (hashes of blocks and files, cheap) or ``full`` (also replays transforms).

    A failed verification fails the task with the report's summary.
    """

    template_fields: Sequence[str] = ("dataset", "mode")

    def __init__(self, *, dataset: str, mode: VerifyMode = "integrity", **kwargs: Any) -> None:
        if mode not in ("integrity", "full"):
            raise ValueError(f"OdfVerifyOperator mode must be 'integrity' or 'full', got {mode!r}")
        super().__init__(dataset=dataset, **kwargs)
        self.mode = mode
        self.outcome: VerifyOutcome | None = None  # set by execute: the data-quality assertion lineage reports

    def execute(self, context: "Context") -> dict[str, Any]:
        from airflow_provider_odf.lineage.provenance import VerifyOutcome

        ws = self.workspace()
        self.log.info("%s: %s verification", self.dataset, self.mode)
        report: VerifyReport | IntegrityReport
        if self.mode == "full":
            from odf_core import transform

            report = transform.verify(ws, self.dataset, engine=self.engine())
        else:
            from odf_core.chain.integrity import verify_integrity

            report = verify_integrity(ws.get(self.dataset).store)
        summary = report.summary()
        self.outcome = VerifyOutcome(self.mode, report.ok, summary, report.blocks_checked)
        if not report.ok:
            raise OdfTaskError(f"{self.dataset}: verification failed: {summary}")
        self.log.info("%s: %s", self.dataset, summary)
        return {"dataset": self.dataset, "mode": self.mode, "ok": True}

    def odf_lineage(self, ws: "Workspace | None", failed: bool) -> "OperatorLineage":
        from airflow_provider_odf.lineage import openlineage as ol

        return ol.verified(ws, self.lineage_namespace, self.dataset, self.outcome)


class OdfSyncOperator(BaseOperator):
    """Bring the workspace in line with a folder of DatasetSnapshot files: add new datasets, append what changed in
    existing ones (sources, transform evolution validated by Spark, info, license ...). This is the only place
    snapshots reach the workspace (never DAG parsing); a missing workspace is created.

    A snapshot with a problem is left out and everything else is synced; the task then fails (without retries: the
    files have to change first) listing the problems, which the DAG factory also shows as failing DAGs.

    :param folder: folder of snapshot YAML files (as the workers see it).
    :param asset_namespace: how Airflow names the workspace (default: ``odf_conn_id``; see OdfBaseOperator).
    """

    template_fields: Sequence[str] = ("folder",)
    ui_color = "#fef3c7"

    def __init__(self, *, folder: str, odf_conn_id: str = DEFAULT_CONN, spark_conn_id: str | None = None,
                 asset_namespace: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.folder = folder
        self.odf_conn_id = odf_conn_id
        self.spark_conn_id = spark_conn_id
        self.asset_namespace = asset_namespace
        self._engine: Any = None
        self.changed: list[str] = []  # set by execute: datasets whose head moved (what lineage reports)

    def execute(self, context: "Context") -> list[str]:
        from odf_core.snapshots import sync_snapshots

        hook = OdfHook(self.odf_conn_id, spark_conn_id=self.spark_conn_id)
        ws = hook.get_workspace(create=True)
        timeout = self.execution_timeout.total_seconds() if self.execution_timeout else None
        self._engine = hook.get_engine(timeout_s=timeout)
        self.log.info("Syncing workspace %s with %s", ws.url, self.folder)
        before = _heads(ws)
        try:
            result = sync_snapshots(ws, self.folder, engine=self._engine)
        finally:
            after = _heads(ws)
            self.changed = [n for n, h in after.items() if before.get(n) != h]
        for m in result.messages:
            self.log.info("%s", m)
        if not result.messages:
            self.log.info("Workspace already matches %s", self.folder)
        if result.problems:
            for p in result.problems:
                self.log.error("Not synced: %s", p)
            raise AirflowFailException(f"{len(result.problems)} snapshot problem(s) in {self.folder} (everything "
                                       f"else is synced): {result.problems[0]}")
        return list(result.messages)

    def on_kill(self) -> None:
        if self._engine is not None:
            self._engine.kill()

    def _lineage(self) -> "OperatorLineage":
        from airflow_provider_odf.lineage import openlineage as ol

        try:
            ws = OdfHook(self.odf_conn_id).get_workspace()
        except Exception as e:  # noqa: BLE001 - lineage is best effort
            self.log.warning("OpenLineage: workspace of connection '%s' not readable: %s", self.odf_conn_id, e)
            ws = None
        return ol.synced(ws, self.asset_namespace or self.odf_conn_id, self.folder, self.changed)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> "OperatorLineage":
        return self._lineage()

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> "OperatorLineage":
        return self._lineage()


def _heads(ws: "Workspace") -> dict[str, str]:
    return {str(h.name): str(h.chain.head()) for h in ws.list()}
