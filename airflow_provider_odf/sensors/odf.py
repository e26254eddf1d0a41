"""Sensors: new data at a root dataset's source, or a dataset whose head moved.

With ``deferrable=True`` the waiting happens in the triggerer (see ``triggers.odf``), not in a worker slot. Give
``soft_fail=True`` to end a run as skipped when nothing arrives before ``timeout``.
"""
from __future__ import annotations

from datetime import timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any, Sequence

from airflow.sdk import BaseSensorOperator
from airflow.sdk.bases.sensor import PokeReturnValue

from airflow_provider_odf.errors import OdfTaskError
from airflow_provider_odf.hooks.odf import OdfHook
from airflow_provider_odf.links import OdfDatasetLink
from airflow_provider_odf.triggers.odf import (
    DEFAULT_POLL_S,
    OdfDatasetTrigger,
    OdfSourceTrigger,
    current_head,
    head_moved,
    source_has_new_data,
)

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage
    from airflow.sdk import Context

    from odf_core.workspace import Workspace


class _OdfSensor(BaseSensorOperator):
    """:param asset_namespace: how Airflow names the workspace (default: ``odf_conn_id``; see OdfBaseOperator)."""

    template_fields: Sequence[str] = ("dataset",)
    ui_color = "#e0e7ff"
    operator_extra_links = (OdfDatasetLink(),)

    def __init__(self, *, dataset: str, odf_conn_id: str = OdfHook.default_conn_name, deferrable: bool = False,
                 poke_interval: float = DEFAULT_POLL_S, asset_namespace: str | None = None, **kwargs: Any) -> None:
        super().__init__(poke_interval=poke_interval, **kwargs)
        self.dataset = dataset
        self.odf_conn_id = odf_conn_id
        self.deferrable = deferrable
        self.asset_namespace = asset_namespace

    def odf_lineage(self, ws: "Workspace | None") -> "OperatorLineage":
        raise NotImplementedError

    def _lineage(self) -> "OperatorLineage":
        try:
            ws = self.hook.get_workspace()
        except Exception as e:  # noqa: BLE001 - lineage is best effort
            self.log.warning("OpenLineage: workspace of connection '%s' not readable: %s", self.odf_conn_id, e)
            ws = None
        return self.odf_lineage(ws)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> "OperatorLineage":
        return self._lineage()

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> "OperatorLineage":
        return self._lineage()

    @cached_property
    def hook(self) -> OdfHook:
        return OdfHook(self.odf_conn_id)

    def _trigger(self, context: "Context") -> Any:
        raise NotImplementedError

    def execute(self, context: "Context") -> Any:
        if not self.deferrable:
            return super().execute(context)
        done = self.poke(context)
        if done:
            return done.xcom_value if isinstance(done, PokeReturnValue) else None
        self.defer(trigger=self._trigger(context), method_name="execute_complete",
                   timeout=timedelta(seconds=self.timeout))

    def execute_complete(self, context: "Context", event: dict[str, Any]) -> Any:
        if event.get("status") == "error":
            raise OdfTaskError(f"{self.dataset}: {event.get('message')}")
        self.log.info("%s: %s", self.dataset, event)
        return self._on_event(context, event)

    def _on_event(self, context: "Context", event: dict[str, Any]) -> Any:
        return None


class OdfSourceSensor(_OdfSensor):
    """Waits until the polling source of a root dataset has new data (cheap probe, nothing is downloaded)."""

    def poke(self, context: "Context") -> bool:
        new = source_has_new_data(self.hook.get_workspace(), self.dataset)
        self.log.info("%s: %s", self.dataset, "new data at the source" if new else "source unchanged")
        return new

    def _trigger(self, context: "Context") -> OdfSourceTrigger:
        return OdfSourceTrigger(dataset=self.dataset, odf_conn_id=self.odf_conn_id, poll_interval=self.poke_interval)

    def odf_lineage(self, ws: "Workspace | None") -> "OperatorLineage":
        """The source it probed (nothing is read into the dataset)."""
        from airflow.providers.openlineage.extractors import OperatorLineage

        from airflow_provider_odf.lineage import openlineage as ol

        return OperatorLineage(inputs=ol.source_input(ws, self.dataset))


class OdfDatasetSensor(_OdfSensor):
    """Waits until a dataset's head moves past ``after_head``; without it, past the head this task returned on its
    last successful run, or — on the first run — until the dataset has any head.

    Returns the new head (XCom), which is the next run's starting point.
    """

    template_fields: Sequence[str] = ("dataset", "after_head")

    def __init__(self, *, dataset: str, after_head: str | None = None, **kwargs: Any) -> None:
        super().__init__(dataset=dataset, **kwargs)
        self.after_head = after_head

    def _baseline(self, context: "Context") -> str | None:
        if self.after_head:
            return self.after_head
        return context["ti"].xcom_pull(task_ids=self.task_id, include_prior_dates=True)

    def poke(self, context: "Context") -> PokeReturnValue:
        baseline = self._baseline(context)
        head = current_head(self.hook.get_workspace(), self.dataset)
        if not head_moved(head, baseline):
            self.log.info("%s: head %s, waiting for it to move past %s", self.dataset, head, baseline)
            return PokeReturnValue(is_done=False)
        self.log.info("%s: head moved from %s to %s", self.dataset, baseline, head)
        return PokeReturnValue(is_done=True, xcom_value=head)

    def _trigger(self, context: "Context") -> OdfDatasetTrigger:
        return OdfDatasetTrigger(dataset=self.dataset, after_head=self._baseline(context),
                                 odf_conn_id=self.odf_conn_id, poll_interval=self.poke_interval)

    def _on_event(self, context: "Context", event: dict[str, Any]) -> Any:
        return event["head"]

    def odf_lineage(self, ws: "Workspace | None") -> "OperatorLineage":
        """The dataset it watched, at its current head."""
        from airflow.providers.openlineage.extractors import OperatorLineage

        from airflow_provider_odf.lineage import openlineage as ol

        namer = ol.Namer(ws, self.asset_namespace or self.odf_conn_id)
        return OperatorLineage(inputs=[namer.input(self.dataset)])
