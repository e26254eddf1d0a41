"""Planned datasets → Airflow DAG objects (construction only: operators hold names, nothing is opened).

Layouts:

* root with a polling source: ``odf__<name>`` on its schedule — [sensor →] fetch → prepare → read → merge →
  commit [→ verify] [→ push_to_repository]; commit emits the dataset's Asset (push_to: after each commit the
  dataset is pushed to a repository).
* root with push sources only (or no source yet): ``odf__<name>`` without schedule, triggered with
  ``{"path": ..., "source": ...}`` — push [→ verify]; push emits the Asset. (Nothing to poll: data arrives when
  someone pushes it, e.g. through the REST API.)
* derivative: ``odf__<name>`` scheduled on its inputs' Assets — transform [→ verify].
* ``odf__sync`` (sync_schedule): adds new snapshots to the workspace and evolves changed transforms.
* ``whole_graph: true``: one ``odf__graph`` DAG, sync first, then a TaskGroup per dataset wired by inputs
  (push-only roots keep their own DAG).
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from airflow.sdk import DAG, Asset, AssetAll, AssetAny, Param, TaskGroup, chain

from airflow_provider_odf.assets import odf_asset
from airflow_provider_odf.dag_factory.config import DagSettings, FolderSettings
from airflow_provider_odf.dag_factory.plan import GRAPH_DAG_ID, SYNC_DAG_ID, DatasetPlan
from airflow_provider_odf.errors import OdfDagDefinitionError
from airflow_provider_odf.operators.ingest import (
    OdfCommitOperator,
    OdfFetchOperator,
    OdfMergeOperator,
    OdfPrepareOperator,
    OdfPushIngestOperator,
    OdfReadOperator,
)
from airflow_provider_odf.operators.repository import OdfRepositorySyncOperator
from airflow_provider_odf.operators.transform import OdfSyncOperator, OdfTransformOperator, OdfVerifyOperator
from airflow_provider_odf.sensors.odf import OdfSourceSensor

START_DATE = datetime(2024, 1, 1, tzinfo=timezone.utc)
ROOT_ONLY = ("schedule", "sensor", "sensor_poke_interval", "sensor_timeout")


def _default_args(s: DagSettings) -> dict[str, Any]:
    args: dict[str, Any] = {"owner": s.owner, "retries": s.retries, "retry_delay": timedelta(seconds=s.retry_delay)}
    if s.pool:
        args["pool"] = s.pool
    return args


def _dag_kwargs(s: DagSettings, tags: list[str]) -> dict[str, Any]:
    # auto_register=False: only DAGs that built and validated reach the DAG file's globals (and so the DagBag).
    return dict(start_date=START_DATE, catchup=False, max_active_runs=1, default_args=_default_args(s),
                tags=list(dict.fromkeys(["odf", *tags, *s.tags])), auto_register=False)


def _doc(d: DatasetPlan) -> str:
    lines = [f"**ODF {d.kind} dataset `{d.name}`** from `{d.file}`."]
    if d.inputs:
        lines.append("Inputs: " + ", ".join(f"`{i}`" for i in d.inputs) + ".")
    if d.description:
        lines.append(d.description)
    return "\n\n".join(lines)


class Builder:
    """Builds the tasks of one dataset with the folder's connection and asset settings."""

    def __init__(self, settings: FolderSettings, folder: str) -> None:
        self.settings = settings
        self.folder = folder

    def _common(self, d: DatasetPlan, s: DagSettings) -> dict[str, Any]:
        # Task-level (not only default_args): in the graph DAG each group has its own dataset's settings.
        return dict(dataset=d.name, odf_conn_id=self.settings.odf_conn_id, spark_conn_id=s.spark_conn_id,
                    asset_namespace=self.settings.namespace,
                    execution_timeout=timedelta(seconds=s.execution_timeout) if s.execution_timeout else None,
                    **_default_args(s))

    def _asset(self, name: str) -> Asset:
        return odf_asset(self.settings.namespace, name)

    def _committing(self, d: DatasetPlan) -> dict[str, Any]:
        return dict(outlets=[self._asset(d.name)])

    def _verify(self, d: DatasetPlan, s: DagSettings) -> list[Any]:
        tasks: list[Any] = []
        if s.verify != "none":
            tasks.append(OdfVerifyOperator(task_id="verify", mode=s.verify, **self._common(d, s)))
        if s.push_to:  # after the commit and its verification: only verified heads leave the workspace
            tasks.append(OdfRepositorySyncOperator(task_id="push_to_repository", direction="push",
                                                   remote=f"{s.push_to}/{d.name}", **self._common(d, s)))
        return tasks

    def polling_tasks(self, d: DatasetPlan, s: DagSettings, *, sensor: bool) -> list[Any]:
        c = self._common(d, s)
        tasks: list[Any] = []
        if sensor and s.sensor != "none":
            tasks.append(OdfSourceSensor(
                task_id="wait_for_source", dataset=d.name, odf_conn_id=self.settings.odf_conn_id,
                asset_namespace=self.settings.namespace, **_default_args(s),
                deferrable=s.sensor == "deferrable", mode="reschedule" if s.sensor == "reschedule" else "poke",
                poke_interval=s.sensor_poke_interval, timeout=s.sensor_timeout, soft_fail=True))
        tasks += [
            OdfFetchOperator(task_id="fetch", fetch_options=dict(s.fetch_options) or None, **c),
            OdfPrepareOperator(task_id="prepare", **c),
            OdfReadOperator(task_id="read", **c),
            OdfMergeOperator(task_id="merge", **c),
            OdfCommitOperator(task_id="commit", **c, **self._committing(d)),
        ]
        return tasks + self._verify(d, s)

    def push_tasks(self, d: DatasetPlan, s: DagSettings) -> list[Any]:
        push = OdfPushIngestOperator(task_id="push", path="{{ params.path }}", source="{{ params.source }}",
                                     **self._common(d, s), **self._committing(d))
        return [push, *self._verify(d, s)]

    def transform_tasks(self, d: DatasetPlan, s: DagSettings, **kwargs: Any) -> list[Any]:
        transform = OdfTransformOperator(task_id="transform", **self._common(d, s), **self._committing(d), **kwargs)
        return [transform, *self._verify(d, s)]

    def sync_task(self, s: DagSettings) -> OdfSyncOperator:
        return OdfSyncOperator(task_id="sync", folder=self.folder, odf_conn_id=self.settings.odf_conn_id,
                               spark_conn_id=s.spark_conn_id, asset_namespace=self.settings.namespace)

    # -- DAGs ------------------------------------------------------------------------------------------------

    def check(self, d: DatasetPlan) -> None:
        """Settings that cannot apply to this dataset are errors, not silently ignored."""
        explicit = self.settings.explicit.get(d.key, frozenset())
        where = f"{self.settings.file}: datasets.{d.name}"
        if d.kind == "derivative" and (bad := sorted(explicit & set(ROOT_ONLY))):
            raise OdfDagDefinitionError(f"{where}.{bad[0]}: a derivative runs when its inputs change, not on a "
                                        "schedule or sensor (see asset_trigger)")
        if d.manual and (bad := sorted(explicit & set(ROOT_ONLY))):
            raise OdfDagDefinitionError(f"{where}.{bad[0]}: a root without a polling source runs when triggered "
                                        "with a path to push, not on a schedule or sensor")
        if (d.kind == "derivative" or d.manual) and "fetch_options" in explicit:
            raise OdfDagDefinitionError(f"{where}.fetch_options: only a polling source fetches (this dataset "
                                        f"{'transforms its inputs' if d.kind == 'derivative' else 'is pushed to'})")
        if d.kind == "root" and "asset_trigger" in explicit:
            raise OdfDagDefinitionError(f"{where}.asset_trigger: only derivatives are scheduled on assets")
        if self.settings.whole_graph and not d.manual and "schedule" in explicit:
            raise OdfDagDefinitionError(f"{where}.schedule: with whole_graph the graph DAG runs on defaults.schedule")

    def dataset_dag(self, d: DatasetPlan) -> DAG:
        s = self.settings.for_dataset(d.key)
        self.check(d)
        if d.kind == "derivative":
            assets = [self._asset(i) for i in d.inputs]
            schedule: Any = assets if len(assets) == 1 else (AssetAny(*assets) if s.asset_trigger == "any"
                                                            else AssetAll(*assets))
            with DAG(d.dag_id, schedule=schedule, description=d.description, doc_md=_doc(d),
                     **_dag_kwargs(s, ["derivative"])) as dag:
                chain(*self.transform_tasks(d, s))
        elif not d.manual:
            with DAG(d.dag_id, schedule=s.schedule, description=d.description, doc_md=_doc(d),
                     **_dag_kwargs(s, ["root"])) as dag:
                chain(*self.polling_tasks(d, s, sensor=True))
        else:
            params = {
                "path": Param(type="string", minLength=1, description="File, folder or URL to ingest"),
                "source": Param(None, type=["null", "string"], description="Push source name (default: the only one)"),
            }
            with DAG(d.dag_id, schedule=None, params=params, render_template_as_native_obj=True,
                     description=d.description, doc_md=_doc(d), **_dag_kwargs(s, ["root", "push"])) as dag:
                chain(*self.push_tasks(d, s))
        return dag

    def sync_dag(self) -> DAG:
        s = self.settings.defaults
        with DAG(SYNC_DAG_ID, schedule=self.settings.sync_schedule, doc_md=f"Sync the workspace with `{self.folder}`.",
                 description="Add new DatasetSnapshots to the workspace, evolve changed transforms",
                 **_dag_kwargs(s, ["sync"])) as dag:
            self.sync_task(s)
        return dag

    def graph_dag(self, datasets: list[DatasetPlan]) -> DAG:
        """All non-push datasets in one DAG: TaskGroups in dependency order, sync first."""
        s = self.settings.defaults
        with DAG(GRAPH_DAG_ID, schedule=s.schedule, doc_md=f"The whole dataset graph of `{self.folder}`.",
                 description="Sync, ingest and transform every dataset in dependency order",
                 **_dag_kwargs(s, ["graph"])) as dag:
            sync = self.sync_task(s)
            last: dict[str, Any] = {}
            for d in datasets:
                self.check(d)
                ds = self.settings.for_dataset(d.key)
                with TaskGroup(d.dag_id.removeprefix("odf__")):
                    if d.kind == "derivative":
                        # Runs unless an input failed; with nothing new the transform skips by itself.
                        tasks = self.transform_tasks(d, ds, trigger_rule="none_failed")
                    else:
                        tasks = self.polling_tasks(d, ds, sensor=False)
                    chain(*tasks)
                sync >> tasks[0]
                for i in d.input_keys:
                    if i in last:
                        last[i] >> tasks[0]
                last[d.key] = tasks[-1]
        return dag
