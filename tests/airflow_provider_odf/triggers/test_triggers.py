"""Triggers: serialization round trip (how the triggerer re-creates them) and real polling of a workspace."""
from __future__ import annotations

import asyncio

import pytest
from airflow.sdk._shared.module_loading import import_string

from odf_core.metadata import SetInfo
from odf_core.snapshots import load_snapshot_files

from airflow_provider_odf.triggers.odf import OdfDatasetTrigger, OdfSourceTrigger

from ..conftest import EXAMPLES, conn_env


@pytest.mark.parametrize("trigger", [
    OdfSourceTrigger(dataset="com.example.cities", odf_conn_id="lake", poll_interval=12.5),
    OdfDatasetTrigger(dataset="com.example.trips", odf_conn_id="lake", poll_interval=3,
                      after_head="f1620abc"),
    OdfDatasetTrigger(dataset="com.example.trips"),
])
def test_serialize_round_trip(trigger):
    classpath, kwargs = trigger.serialize()
    cls = import_string(classpath)
    assert cls is type(trigger)
    again = cls(**kwargs)
    assert again.serialize() == (classpath, kwargs)
    assert vars(again).keys() >= kwargs.keys() and all(getattr(again, k) == v for k, v in kwargs.items())


class Counting(OdfDatasetTrigger):
    """Signals after a number of probes, so a test can wait for polling without sleeping."""

    def __init__(self, *args, probes: int = 3, **kwargs):
        super().__init__(*args, **kwargs)
        self.count, self.wanted, self.polled = 0, probes, asyncio.Event()

    async def _probe(self, ws):
        event = await super()._probe(ws)
        self.count += 1
        if self.count >= self.wanted:
            self.polled.set()
        return event


async def first_event(trigger, *, before=None):
    """The trigger's first event; ``before`` runs once the trigger has polled a few times without firing."""
    events = trigger.run()
    task = asyncio.ensure_future(events.__anext__())
    if before is not None:
        await asyncio.wait_for(trigger.polled.wait(), 20)
        assert not task.done()
        await asyncio.to_thread(before)
    event = await asyncio.wait_for(task, 20)
    await events.aclose()
    return event.payload


@pytest.fixture
def odf_conn(monkeypatch, workspace):
    conn_env(monkeypatch, "odf_trig", conn_type="odf", extra={"workspace": workspace.url})
    return workspace


def test_dataset_trigger_fires_for_an_existing_head(odf_conn):
    head = str(odf_conn.get("com.example.cities").chain.head())
    payload = asyncio.run(first_event(OdfDatasetTrigger(dataset="com.example.cities", odf_conn_id="odf_trig")))
    assert payload == {"dataset": "com.example.cities", "status": "changed", "head": head, "previous": None}


def test_dataset_trigger_waits_until_the_head_moves(odf_conn):
    chain = odf_conn.get("com.example.cities").chain
    old = str(chain.head())
    trigger = Counting(dataset="com.example.cities", odf_conn_id="odf_trig", after_head=old, poll_interval=0)
    new = []
    payload = asyncio.run(first_event(trigger, before=lambda: new.append(str(chain.append_event(
        SetInfo(description="moved"))))))
    assert payload["status"] == "changed" and payload["previous"] == old
    assert payload["head"] == new[0] != old


def test_dataset_trigger_waits_for_a_dataset_to_appear(odf_conn):
    trigger = Counting(dataset="com.example.later", odf_conn_id="odf_trig", poll_interval=0)
    (_, snapshot), = [s for s in load_snapshot_files([EXAMPLES / "datasets" / "ratings.yaml"])]
    created = []

    def create():
        created.append(odf_conn.create(snapshot.replace(name="com.example.later")))

    payload = asyncio.run(first_event(trigger, before=create))
    assert payload["head"] == str(created[0].chain.head())


@pytest.mark.parametrize("cls", [OdfSourceTrigger, OdfDatasetTrigger])
def test_a_bad_connection_is_an_error_event_naming_it(cls):
    payload = asyncio.run(first_event(cls(dataset="com.example.cities", odf_conn_id="odf_absent")))
    assert payload["status"] == "error"
    assert "odf connection 'odf_absent' is not defined" in payload["message"]
