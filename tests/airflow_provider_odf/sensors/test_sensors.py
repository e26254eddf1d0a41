"""Sensors: pokes against a real workspace, and the deferrable path end to end — the sensor defers, the triggerer
re-creates its trigger from the serialized form, the trigger fires on a real change, the sensor resumes with it."""
from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from airflow.sdk._shared.module_loading import import_string
from airflow.sdk.exceptions import TaskDeferred

from odf_core.metadata import (
    DatasetKind,
    DatasetSnapshot,
    FetchStepFilesGlob,
    MergeStrategyAppend,
    ReadStepCsv,
    SetInfo,
    SetPollingSource,
)

from airflow_provider_odf.errors import OdfTaskError
from airflow_provider_odf.sensors import OdfDatasetSensor, OdfSourceSensor
from airflow_provider_odf.triggers import OdfDatasetTrigger, OdfSourceTrigger

from ..conftest import conn_env


@pytest.fixture
def odf_conn(monkeypatch, workspace):
    conn_env(monkeypatch, "odf_s", conn_type="odf", extra={"workspace": workspace.url})
    return workspace


def _deferred(sensor) -> TaskDeferred:
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute({})
    return deferred.value


def _as_the_triggerer_builds_it(trigger):
    classpath, kwargs = trigger.serialize()
    return import_string(classpath)(**kwargs)


async def _first_event_after(trigger, change) -> dict:
    """Run ``trigger`` until it has probed twice without firing, make ``change`` (in a thread), return its event."""
    probes, polled = [0], asyncio.Event()
    real_probe = trigger._probe

    async def counted(ws):
        event = await real_probe(ws)
        probes[0] += 1
        if probes[0] >= 2:
            polled.set()
        return event

    trigger._probe = counted
    events = trigger.run()
    first = asyncio.ensure_future(events.__anext__())
    await asyncio.wait_for(polled.wait(), 30)
    assert not first.done(), "the trigger fired before anything changed"
    await asyncio.to_thread(change)
    event = await asyncio.wait_for(first, 30)
    await events.aclose()
    return event.payload


def test_dataset_sensor_pokes_the_real_head(odf_conn):
    chain = odf_conn.get("com.example.trips").chain
    head = str(chain.head())
    sensor = OdfDatasetSensor(task_id="ds", dataset="com.example.trips", odf_conn_id="odf_s", after_head=head)
    assert not sensor.poke({}).is_done
    moved = str(chain.append_event(SetInfo(description="new")))
    result = sensor.poke({})
    assert result.is_done and result.xcom_value == moved


def test_after_head_is_templated(odf_conn):
    head = str(odf_conn.get("com.example.trips").chain.head())
    sensor = OdfDatasetSensor(task_id="ds", dataset="com.example.trips", odf_conn_id="odf_s",
                              after_head="{{ params.seen }}")
    sensor.render_template_fields({"params": {"seen": head}})
    assert sensor.after_head == head and not sensor.poke({}).is_done


def test_deferrable_dataset_sensor_defers_then_resumes_with_the_new_head(odf_conn):
    chain = odf_conn.get("com.example.trips").chain
    head = str(chain.head())
    sensor = OdfDatasetSensor(task_id="ds", dataset="com.example.trips", odf_conn_id="odf_s", after_head=head,
                              deferrable=True, poke_interval=0, timeout=60)
    deferred = _deferred(sensor)
    assert (deferred.method_name, deferred.timeout) == ("execute_complete", timedelta(seconds=60))
    trigger = _as_the_triggerer_builds_it(deferred.trigger)
    assert isinstance(trigger, OdfDatasetTrigger) and trigger.after_head == head
    moved = []
    payload = asyncio.run(_first_event_after(
        trigger, lambda: moved.append(str(chain.append_event(SetInfo(description="moved"))))))
    assert sensor.execute_complete({}, payload) == moved[0] != head


def test_a_sensor_whose_condition_already_holds_does_not_defer(odf_conn):
    head = str(odf_conn.get("com.example.trips").chain.head())
    for deferrable in (True, False):
        sensor = OdfDatasetSensor(task_id="ds", dataset="com.example.trips", odf_conn_id="odf_s",
                                  deferrable=deferrable, after_head="f1620" + "0" * 64, timeout=60)
        assert sensor.execute({}) == head


def test_deferrable_source_sensor_waits_for_a_new_file(odf_conn, tmp_path):
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    odf_conn.create(DatasetSnapshot(name="com.example.inbox", kind=DatasetKind.ROOT, metadata=(SetPollingSource(
        fetch=FetchStepFilesGlob(path=str(inbox / "*.csv")), read=ReadStepCsv(header=True),
        merge=MergeStrategyAppend()),)))
    sensor = OdfSourceSensor(task_id="src", dataset="com.example.inbox", odf_conn_id="odf_s", deferrable=True,
                             poke_interval=0, timeout=30)
    assert sensor.poke({}) is False
    trigger = _as_the_triggerer_builds_it(_deferred(sensor).trigger)
    assert isinstance(trigger, OdfSourceTrigger) and trigger.dataset == "com.example.inbox"
    payload = asyncio.run(_first_event_after(trigger, lambda: (inbox / "a-1.csv").write_text("v\n1\n")))
    assert payload == {"dataset": "com.example.inbox", "status": "new_data"}
    assert sensor.execute_complete({}, payload) is None and sensor.poke({}) is True


def test_deferred_error_event_fails_with_its_message():
    sensor = OdfSourceSensor(task_id="src", dataset="a.b")
    with pytest.raises(OdfTaskError, match="a.b: OdfConnectionError: odf connection 'x' is not defined"):
        sensor.execute_complete({}, {"status": "error",
                                     "message": "OdfConnectionError: odf connection 'x' is not defined"})
