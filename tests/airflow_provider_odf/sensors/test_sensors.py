"""Sensors: construction, probes against a real workspace, and the triggers they defer to."""
from __future__ import annotations

import pytest
from airflow.sdk import DAG

from odf_core.metadata import SetInfo

from airflow_provider_odf.errors import OdfTaskError
from airflow_provider_odf.sensors import OdfDatasetSensor, OdfSourceSensor
from airflow_provider_odf.triggers import OdfDatasetTrigger, OdfSourceTrigger

from ..conftest import conn_env


def test_construct_in_both_modes():
    with DAG("s", schedule=None, auto_register=False):
        src = OdfSourceSensor(task_id="src", dataset="com.example.cities", deferrable=True, poke_interval=5,
                              timeout=60, soft_fail=True)
        ds = OdfDatasetSensor(task_id="ds", dataset="com.example.cities", mode="reschedule")
    assert (src.deferrable, src.poke_interval, src.timeout, src.soft_fail) == (True, 5, 60, True)
    assert ds.deferrable is False and ds.mode == "reschedule"
    assert "after_head" in ds.template_fields


def test_triggers_carry_the_sensor_settings():
    src = OdfSourceSensor(task_id="src", dataset="a.b", odf_conn_id="lake", poke_interval=7)
    assert src._trigger({}).serialize() == (
        "airflow_provider_odf.triggers.odf.OdfSourceTrigger",
        {"dataset": "a.b", "odf_conn_id": "lake", "poll_interval": 7.0})
    ds = OdfDatasetSensor(task_id="ds", dataset="a.b", odf_conn_id="lake", after_head="f1620x", poke_interval=9)
    trigger = ds._trigger({})
    assert isinstance(trigger, OdfDatasetTrigger) and trigger.after_head == "f1620x"
    assert not isinstance(src._trigger({}), OdfDatasetTrigger) and isinstance(src._trigger({}), OdfSourceTrigger)


def test_dataset_sensor_pokes_the_real_head(monkeypatch, workspace):
    conn_env(monkeypatch, "odf_s", conn_type="odf", extra={"workspace": workspace.url})
    chain = workspace.get("com.example.trips").chain
    head = str(chain.head())
    sensor = OdfDatasetSensor(task_id="ds", dataset="com.example.trips", odf_conn_id="odf_s", after_head=head)
    assert not sensor.poke({}).is_done
    moved = str(chain.append_event(SetInfo(description="new")))
    result = sensor.poke({})
    assert result.is_done and result.xcom_value == moved


def test_deferred_error_event_fails_with_its_message():
    sensor = OdfSourceSensor(task_id="src", dataset="a.b")
    with pytest.raises(OdfTaskError, match="a.b: OdfConnectionError: odf connection 'x' is not defined"):
        sensor.execute_complete({}, {"status": "error", "message": "OdfConnectionError: odf connection 'x' is not defined"})
    assert OdfDatasetSensor(task_id="d", dataset="a.b").execute_complete({}, {"status": "changed", "head": "f1"}) == "f1"
