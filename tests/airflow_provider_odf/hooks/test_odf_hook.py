"""OdfHook: connections from AIRFLOW_CONN_* env vars (JSON form) → workspace + Spark engine, or a clear error."""
from __future__ import annotations

import asyncio

import pytest

from airflow_provider_odf.errors import OdfConnectionError
from airflow_provider_odf.hooks.odf import OdfHook, odf_settings

from ..conftest import conn_env


def odf_conn(monkeypatch, workspace_url: str, conn_id: str = "odf_test", **extra) -> None:
    conn_env(monkeypatch, conn_id, conn_type="odf", extra={"workspace": workspace_url, **extra})


def test_workspace_and_default_local_master(monkeypatch, workspace):
    odf_conn(monkeypatch, workspace.url)
    hook = OdfHook("odf_test")
    ws = hook.get_workspace()
    assert ws.url == workspace.url
    assert {str(h.name) for h in ws.list()} >= {"com.example.cities", "com.example.trips-by-city"}
    engine = hook.get_engine()
    assert (engine.master, engine.spark_submit, engine.timeout_s) == ("local[*]", "spark-submit", None)
    assert hook.get_conn().url == workspace.url
    assert hook.test_connection()[0] is True


def test_spark_connection_named_by_odf_connection(monkeypatch, workspace):
    conn_env(monkeypatch, "spark_cluster", conn_type="spark", host="spark://spark-master", port=7077,
             extra={"spark-binary": "spark3-submit", "conf": {"spark.executor.memory": "2g", "spark.x": "a"},
                    "queue": "etl"})
    odf_conn(monkeypatch, workspace.url, spark_conn_id="spark_cluster",
             engine_options={"conf": {"spark.x": "b", "spark.sql.shuffle.partitions": 8}, "timeout_s": 600})
    engine = OdfHook("odf_test").get_engine(timeout_s=300)
    assert engine.master == "spark://spark-master:7077"
    assert engine.spark_submit == "spark3-submit"
    # The odf connection's engine options refine the Spark connection's conf; the task timeout caps the job's.
    assert engine.conf == {"spark.executor.memory": "2g", "spark.x": "b", "spark.sql.shuffle.partitions": "8",
                           "spark.yarn.queue": "etl"}
    assert engine.timeout_s == 300
    assert OdfHook("odf_test").get_engine(timeout_s=None).timeout_s == 600


@pytest.mark.parametrize("host", ["local[2]", "yarn", "k8s://https://kube:6443", "local"])
def test_spark_masters_taken_verbatim(monkeypatch, host):
    conn_env(monkeypatch, "sp", conn_type="spark", host=host)
    odf_conn(monkeypatch, "/nonexistent", spark_conn_id="sp")  # resolving Spark never opens the workspace
    assert OdfHook("odf_test").get_engine().master == host


def test_spark_conn_id_argument_overrides_the_odf_connection(monkeypatch):
    conn_env(monkeypatch, "sp_a", conn_type="spark", host="local[1]")
    conn_env(monkeypatch, "sp_b", conn_type="spark", host="yarn")
    odf_conn(monkeypatch, "/nonexistent", spark_conn_id="sp_a")
    assert OdfHook("odf_test").get_engine().master == "local[1]"
    assert OdfHook("odf_test", spark_conn_id="sp_b").get_engine().master == "yarn"


def test_missing_odf_connection_names_it():
    with pytest.raises(OdfConnectionError, match="odf connection 'odf_nowhere' is not defined"):
        OdfHook("odf_nowhere").get_workspace()


def test_missing_spark_connection_is_an_error_not_yarn(monkeypatch):
    odf_conn(monkeypatch, "/nonexistent", spark_conn_id="spark_gone")
    with pytest.raises(OdfConnectionError, match=r"spark connection \(named by odf connection 'odf_test'\) "
                                                 r"'spark_gone' is not defined"):
        OdfHook("odf_test").get_engine()


@pytest.mark.parametrize("conn, message", [
    (dict(conn_type="spark", host=""), "spark connection 'sp' has an empty host"),
    (dict(conn_type="spark", host="  "), "spark connection 'sp' has an empty host"),
    (dict(conn_type="spark", host="myhost"), "'myhost' is not a Spark master"),
    (dict(conn_type="spark", host="yarn", extra={"deploy-mode": "cluster"}), "deploy-mode 'cluster'"),
    (dict(conn_type="spark", host="yarn", extra={"spark-binary": "/bin/rm"}), "spark-submit binary must be"),
    (dict(conn_type="spark", host="yarn", extra={"conf": {"a": {"b": 1}}}), r"conf.a must be a scalar"),
    (dict(conn_type="http", host="yarn"), "connection 'sp' has type 'http', expected a 'spark' connection"),
])
def test_unusable_spark_connection(monkeypatch, conn, message):
    conn_env(monkeypatch, "sp", **conn)
    odf_conn(monkeypatch, "/nonexistent", spark_conn_id="sp")
    with pytest.raises(OdfConnectionError, match=message):
        OdfHook("odf_test").get_engine()


@pytest.mark.parametrize("conn, message", [
    (dict(conn_type="odf", extra={}), "connection 'odf_test' names no workspace"),
    (dict(conn_type="odf", extra={"workspace": " "}), "names no workspace"),
    (dict(conn_type="generic", extra={"workspace": "/x"}), "has type 'generic', expected an 'odf' connection"),
    (dict(conn_type="odf", extra={"workspace": "/x", "engine_options": {"cores": 2}}),
     r"unknown engine_options \['cores'\]"),
    (dict(conn_type="odf", extra={"workspace": "/x", "engine_options": {"timeout_s": -1}}),
     "timeout_s must be a positive number"),
    (dict(conn_type="odf", extra={"workspace": "/x", "engine_options": "{not json"}),
     "engine_options is not valid JSON"),
    (dict(conn_type="odf", login="AKIA", password="secret", extra={"workspace": "/x"}),
     "login/password are object-store credentials"),
])
def test_unusable_odf_connection(monkeypatch, conn, message):
    conn_env(monkeypatch, "odf_test", **conn)
    with pytest.raises(OdfConnectionError, match=message):
        OdfHook("odf_test").get_engine()


def test_object_store_credentials_become_storage_options(monkeypatch):
    conn_env(monkeypatch, "odf_s3", conn_type="odf", login="AKIA", password="s3cr3t-key",
             extra={"workspace": "s3://bucket/ws", "storage_options": {"endpoint_url": "http://minio:9000"}})
    s = odf_settings(OdfHook.get_connection("odf_s3"))
    assert s.workspace == "s3://bucket/ws"
    assert s.storage_options == {"endpoint_url": "http://minio:9000", "key": "AKIA", "secret": "s3cr3t-key"}


def test_uninitialized_workspace_is_an_error_unless_created(monkeypatch, tmp_path):
    target = tmp_path / "fresh" / ".odf"
    odf_conn(monkeypatch, str(target))
    with pytest.raises(OdfConnectionError, match="no ODF workspace at"):
        OdfHook("odf_test").get_workspace()
    ok, message = OdfHook("odf_test").test_connection()
    assert not ok and "no ODF workspace" in message
    ws = OdfHook("odf_test").get_workspace(create=True)
    assert ws.list() == [] and (target / "workspace.version").is_file()
    assert OdfHook("odf_test").get_workspace().url == ws.url


def test_async_workspace_for_triggers(monkeypatch, workspace):
    odf_conn(monkeypatch, workspace.url)
    ws = asyncio.run(OdfHook("odf_test").aget_workspace())
    assert ws.get("com.example.cities").chain.head() == workspace.get("com.example.cities").chain.head()


def test_engine_url_gives_a_warm_engine_client(monkeypatch, workspace):
    from odf_core.engine.remote import RemoteEngine

    odf_conn(monkeypatch, workspace.url, engine_url=" grpc://odf-engine:5544 ", engine_options={"timeout_s": 900})
    engine = OdfHook("odf_test").get_engine(timeout_s=300)
    assert isinstance(engine, RemoteEngine) and engine.keeps_reads
    assert (engine.url, engine.timeout_s) == ("grpc://odf-engine:5544", 300)
    odf_conn(monkeypatch, workspace.url, engine_url="http://odf-engine:5544")
    with pytest.raises(OdfConnectionError, match="engine_url must look like grpc://HOST:PORT, got 'http://"):
        OdfHook("odf_test").get_engine()
