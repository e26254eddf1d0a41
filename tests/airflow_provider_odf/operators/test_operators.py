"""Operators: they construct from names only, wire transactions and assets, verify for real and kill Spark jobs.

Ingest/transform execution through ``dag.test()`` is covered once ``odf_core.ingest.transaction`` and
``odf_core.transform`` exist.
"""
from __future__ import annotations

import os
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
from airflow.sdk import DAG, Asset, TaskGroup

from airflow_provider_odf.errors import OdfTaskError
from airflow_provider_odf.operators import (
    OdfCommitOperator,
    OdfFetchOperator,
    OdfMergeOperator,
    OdfPrepareOperator,
    OdfPushIngestOperator,
    OdfReadOperator,
    OdfSyncOperator,
    OdfTransformOperator,
    OdfVerifyOperator,
    txn_id,
)
from airflow_provider_odf.operators.base import result_summary

from ..conftest import conn_env


def test_all_operators_construct_in_a_dag_without_touching_anything():
    with DAG("construct", schedule=None, auto_register=False) as dag:
        for cls in (OdfFetchOperator, OdfPrepareOperator, OdfReadOperator, OdfMergeOperator, OdfCommitOperator,
                    OdfTransformOperator, OdfVerifyOperator):
            cls(task_id=cls.__name__, dataset="com.example.cities", odf_conn_id="nowhere")
        OdfPushIngestOperator(task_id="push", dataset="com.example.ratings", path="{{ params.path }}")
        OdfSyncOperator(task_id="sync", folder="/snapshots")
    assert len(dag.tasks) == 9
    assert all("dataset" in t.template_fields for t in dag.tasks if t.task_id != "sync")


def test_committing_operators_declare_their_dataset_asset():
    commit = OdfCommitOperator(task_id="c", dataset="Com.Example.Cities", odf_conn_id="odf_default")
    assert [a.uri for a in commit.outlets] == ["odf://odf_default/com.example.cities"]
    transform = OdfTransformOperator(task_id="t", dataset="x.y", odf_conn_id="lake", asset_namespace="prod")
    assert [a.uri for a in transform.outlets] == ["odf://prod/x.y"]
    assert transform._own_asset().uri == "odf://prod/x.y"
    custom = OdfTransformOperator(task_id="u", dataset="x.y", outlets=[Asset("s3://elsewhere/x")])
    assert [a.uri for a in custom.outlets] == ["s3://elsewhere/x"] and custom._own_asset() is None
    templated = OdfPushIngestOperator(task_id="p", dataset="{{ params.ds }}", path="p")
    assert templated.outlets == []


def test_transaction_ids_are_stable_per_run_and_dataset():
    a = txn_id("odf__cities", "scheduled__2026-01-01T00:00:00+00:00", "Com.Example.Cities")
    assert a == txn_id("odf__cities", "scheduled__2026-01-01T00:00:00+00:00", "com.example.cities")
    assert a.startswith("af-scheduled__2026-01-01T00-00-00-00-00-")
    others = {txn_id("odf__cities", "manual__2026-01-01", "com.example.cities"),
              txn_id("odf__graph", "scheduled__2026-01-01T00:00:00+00:00", "com.example.cities"),
              txn_id("odf__cities", "scheduled__2026-01-01T00:00:00+00:00", "com.example.trips")}
    assert a not in others and len(others) == 3
    long = txn_id("d", "x" * 500 + "/../..", "n")
    assert len(long) < 80 and "/" not in long


def test_steps_find_the_fetch_task_of_their_group():
    with DAG("g", schedule=None, auto_register=False):
        plain = OdfPrepareOperator(task_id="prepare", dataset="d")
        explicit = OdfReadOperator(task_id="read", dataset="d", txn_from="my_fetch")
        with TaskGroup("cities"):
            grouped = OdfCommitOperator(task_id="commit", dataset="d")
    assert plain._fetch_task_id() == "fetch"
    assert explicit._fetch_task_id() == "my_fetch"
    assert grouped._fetch_task_id() == "cities.fetch"


def test_result_summary_is_small_json():
    class Result:
        block_hash, head, offset_interval, num_records, watermark = "f1620a", "f1620a", (10, 19), 10, object()

    s = result_summary("d", Result())
    assert s["offsets"] == [10, 19] and s["records"] == 10 and isinstance(s["watermark"], str)


def test_verify_mode_is_checked():
    with pytest.raises(ValueError, match="'integrity' or 'full'"):
        OdfVerifyOperator(task_id="v", dataset="d", mode="quick")


def test_integrity_verification_passes_then_catches_corruption(monkeypatch, workspace):
    conn_env(monkeypatch, "odf_v", conn_type="odf", extra={"workspace": workspace.url})
    op = OdfVerifyOperator(task_id="v", dataset="com.example.cities", odf_conn_id="odf_v")
    assert op.execute({}) == {"dataset": "com.example.cities", "mode": "integrity", "ok": True}
    blocks = sorted(Path(workspace.get("com.example.cities").store.local_path("blocks")).iterdir())
    raw = bytearray(blocks[0].read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    blocks[0].write_bytes(bytes(raw))
    with pytest.raises(OdfTaskError, match="com.example.cities: verification failed"):
        op.execute({})


FAKE_SUBMIT = """#!/bin/sh
# Stands in for spark-submit: a driver process in the same group, its pid announced through the FIFO (last arg).
for a; do last=$a; done
sleep 300 &
echo $! > "$last"
wait
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in state


def test_on_kill_kills_the_whole_spark_process_group(monkeypatch, tmp_path):
    submit = tmp_path / "bin" / "spark-submit"
    submit.parent.mkdir()
    submit.write_text(FAKE_SUBMIT)
    submit.chmod(0o755)
    conn_env(monkeypatch, "sp_fake", conn_type="spark", host="local[1]", extra={"spark-binary": str(submit)})
    conn_env(monkeypatch, "odf_k", conn_type="odf", extra={"workspace": str(tmp_path), "spark_conn_id": "sp_fake"})
    op = OdfTransformOperator(task_id="t", dataset="d", odf_conn_id="odf_k", execution_timeout=timedelta(minutes=7))
    engine = op.engine()
    assert (engine.spark_submit, engine.timeout_s) == (str(submit), 420)
    fifo = tmp_path / "pid"
    os.mkfifo(fifo)
    errors: list[BaseException] = []

    def run():
        try:
            engine.run_job([str(fifo)])
        except BaseException as e:  # noqa: BLE001 - handed to the test thread, which re-raises it
            errors.append(e)

    job = threading.Thread(target=run)
    job.start()
    with open(fifo) as f:  # blocks until the fake driver started
        driver = int(f.read().strip())
    assert _alive(driver)
    op.on_kill()
    job.join(30)
    assert not job.is_alive() and errors and "killed by signal" in str(errors[0])
    deadline = time.monotonic() + 10  # the group's SIGKILL is sent; the driver may take a moment to be gone
    while _alive(driver) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _alive(driver)


def test_a_kill_while_the_spark_job_is_starting_is_not_lost(monkeypatch, tmp_path):
    """on_kill can come (from Airflow's thread) before the job's process exists: the job must then never start."""
    from odf_core.engine import EngineError

    submit = tmp_path / "spark-submit"
    submit.write_text("#!/bin/sh\ntouch \"$0.ran\"\n")
    submit.chmod(0o755)
    conn_env(monkeypatch, "sp_k", conn_type="spark", host="local[1]", extra={"spark-binary": str(submit)})
    conn_env(monkeypatch, "odf_k2", conn_type="odf", extra={"workspace": str(tmp_path), "spark_conn_id": "sp_k"})
    op = OdfTransformOperator(task_id="t", dataset="d", odf_conn_id="odf_k2")
    engine = op.engine()
    op.on_kill()
    with pytest.raises(EngineError, match="was not started: the engine was killed"):
        engine.run_job([])
    assert not (tmp_path / "spark-submit.ran").exists()


def _push_context(run_id: str, task_id: str = "push", map_index: int = -1, try_number: int = 1):
    """What a push task's ``execute`` reads of Airflow's context (a real run gives the same fields)."""
    from collections import defaultdict
    from datetime import datetime, timezone
    from types import SimpleNamespace

    return {"dag": SimpleNamespace(dag_id="odf__ratings"), "run_id": run_id,
            "ti": SimpleNamespace(task_id=task_id, map_index=map_index, try_number=try_number),
            "dag_run": SimpleNamespace(run_after=datetime(2026, 5, 1, 12, tzinfo=timezone.utc)),
            "outlet_events": defaultdict(lambda: SimpleNamespace(extra={}))}


def test_push_keys_are_fixed_per_task_instance_whatever_the_try():
    from airflow_provider_odf.operators.ingest import first_try_bound, push_key
    from odf_core.metadata import Timestamp

    key = push_key(_push_context("manual__2026-05-01"), "com.example.ratings")
    assert key == push_key(_push_context("manual__2026-05-01", try_number=3), "Com.Example.Ratings")
    others = {push_key(_push_context("manual__2026-05-02"), "com.example.ratings"),
              push_key(_push_context("manual__2026-05-01", task_id="push_b"), "com.example.ratings"),
              push_key(_push_context("manual__2026-05-01", map_index=0), "com.example.ratings"),
              push_key(_push_context("manual__2026-05-01", map_index=1), "com.example.ratings"),
              txn_id("odf__ratings", "manual__2026-05-01", "com.example.ratings")}  # the fetch's transaction id
    assert key not in others and len(others) == 5
    assert first_try_bound(_push_context("r")) == Timestamp.parse("2026-05-01T11:00:00Z")  # run_after - 1 h
    assert first_try_bound({"dag_run": None}) is None


@pytest.mark.slow
@pytest.mark.spark  # its retry runs the ingest through spark-submit
def test_a_retried_push_task_ingests_once_after_the_head_moved(monkeypatch, workspace, tmp_path):
    """Try 1 commits; the head moves on; try 2 (on another worker: no staging) finds try 1's block."""
    import shutil

    from odf_core.ingest import transaction as tx
    from odf_core.metadata import SetInfo

    conn_env(monkeypatch, "odf_push", conn_type="odf", extra={
        "workspace": workspace.url,
        "engine_options": {"conf": {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"}}})
    first = tmp_path / "first.ndjson"
    first.write_text('{"event_time": "2026-05-01T10:00:00Z", "city": "Oslo", "rating": 4}\n'
                     '{"event_time": "2026-05-01T11:00:00Z", "city": "Riga", "rating": 5}\n')
    op = OdfPushIngestOperator(task_id="push", dataset="com.example.ratings", path=str(first), odf_conn_id="odf_push")

    try1 = op.execute(_push_context("manual__2026-05-01"))  # spark-submit, like a worker does
    handle = workspace.get("com.example.ratings")
    handle.chain.append_event(SetInfo(description="moved on"))
    shutil.rmtree(tx.staging_root(workspace))
    context = _push_context("manual__2026-05-01", try_number=2)
    try2 = op.execute(context)

    assert try2["block"] == try1["block"] and try2["head"] == str(handle.chain.head()) != try1["head"]
    assert (try2["records"], try2["offsets"]) == (2, [0, 1])
    assert (handle.state().num_records, handle.state().data_blocks) == (2, 1)  # nothing twice
    assert next(iter(context["outlet_events"].values())).extra["block"] == try1["block"]  # the retry still wakes


def test_a_transform_set_for_other_engine_semantics_fails_once_naming_the_upgrade_command(monkeypatch, workspace):
    """After an upgrade that changed the engine's semantics the Transform task fails without retries, with one line
    naming the command that records the choice (docs/upgrading.md); nothing runs (no engine is started)."""
    from types import SimpleNamespace

    from airflow.sdk.exceptions import AirflowFailException

    import odf_core.engine.version as version

    conn_env(monkeypatch, "odf_u", conn_type="odf", extra={"workspace": workspace.url})
    monkeypatch.setattr(version, "SEMANTICS", version.SEMANTICS + 1)
    version.engine_version.cache_clear()
    try:
        op = OdfTransformOperator(task_id="t", dataset="com.example.busy-cities", odf_conn_id="odf_u")
        head = workspace.get("com.example.busy-cities").chain.head()
        with pytest.raises(AirflowFailException) as e:
            op.execute({"dag": SimpleNamespace(dag_id="d"), "run_id": "r1"})
    finally:
        version.engine_version.cache_clear()
    assert str(e.value).endswith(
        f"run: odf --workspace {workspace.url} set-transform --upgrade-engine com.example.busy-cities")
    assert "\n" not in str(e.value) and workspace.get("com.example.busy-cities").chain.head() == head
