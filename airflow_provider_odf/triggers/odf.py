"""Triggers of the deferrable ODF sensors: async polling in the triggerer instead of a worker slot.

Each probe is a cheap, blocking call into ``odf_core`` (a conditional HTTP request, a directory listing, reading a
ref), so it runs in a thread; the event loop only sleeps between probes.
"""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, AsyncIterator

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_provider_odf.hooks.odf import OdfHook

if TYPE_CHECKING:
    from odf_core.workspace import Workspace

DEFAULT_POLL_S = 60.0


def current_head(ws: "Workspace", dataset: str) -> str | None:
    """The dataset's head block hash, or None while the dataset does not exist (e.g. before the first sync)."""
    from odf_core.errors import DatasetNotFound

    try:
        head = ws.get(dataset).chain.head()
    except DatasetNotFound:
        return None
    return str(head) if head is not None else None


def head_moved(head: str | None, after_head: str | None) -> bool:
    """Whether a dataset changed relative to a known head (None: any existing head counts as a change)."""
    return head is not None and head != after_head


def source_has_new_data(ws: "Workspace", dataset: str) -> bool:
    from odf_core.ingest.probe import has_new_data

    return has_new_data(ws, dataset)


class _PollingTrigger(BaseTrigger):
    def __init__(self, *, dataset: str, odf_conn_id: str = OdfHook.default_conn_name,
                 poll_interval: float = DEFAULT_POLL_S) -> None:
        super().__init__()
        self.dataset = dataset
        self.odf_conn_id = odf_conn_id
        self.poll_interval = float(poll_interval)

    def _kwargs(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "odf_conn_id": self.odf_conn_id, "poll_interval": self.poll_interval}

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return f"{type(self).__module__}.{type(self).__qualname__}", self._kwargs()

    async def _probe(self, ws: "Workspace") -> dict[str, Any] | None:
        raise NotImplementedError

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            ws = await OdfHook(self.odf_conn_id).aget_workspace()
            while True:
                event = await self._probe(ws)
                if event is not None:
                    yield TriggerEvent({"dataset": self.dataset, **event})
                    return
                self.log.info("%s: nothing yet, next check in %.0f s", self.dataset, self.poll_interval)
                await asyncio.sleep(self.poll_interval)
        except Exception as e:  # noqa: BLE001 - reported to the task, which fails with this message
            yield TriggerEvent({"dataset": self.dataset, "status": "error", "message": f"{type(e).__name__}: {e}"})


class OdfSourceTrigger(_PollingTrigger):
    """Fires when the polling source of a root dataset has data not yet ingested."""

    async def _probe(self, ws: "Workspace") -> dict[str, Any] | None:
        if await asyncio.to_thread(source_has_new_data, ws, self.dataset):
            return {"status": "new_data"}
        return None


class OdfDatasetTrigger(_PollingTrigger):
    """Fires when a dataset's head differs from ``after_head`` (None: as soon as the dataset has a head)."""

    def __init__(self, *, dataset: str, after_head: str | None = None, odf_conn_id: str = OdfHook.default_conn_name,
                 poll_interval: float = DEFAULT_POLL_S) -> None:
        super().__init__(dataset=dataset, odf_conn_id=odf_conn_id, poll_interval=poll_interval)
        self.after_head = after_head

    def _kwargs(self) -> dict[str, Any]:
        return {**super()._kwargs(), "after_head": self.after_head}

    async def _probe(self, ws: "Workspace") -> dict[str, Any] | None:
        head = await asyncio.to_thread(current_head, ws, self.dataset)
        if head_moved(head, self.after_head):
            return {"status": "changed", "head": head, "previous": self.after_head}
        return None
