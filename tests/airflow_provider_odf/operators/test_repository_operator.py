"""The repository sync operator, the odf connection's S3 credentials from an ``aws`` connection and its probe of
conditional writes, and the odf-dags.yaml ``push_to`` option: real workspaces, a real S3 API (moto on loopback)."""
from __future__ import annotations

from pathlib import Path

import pytest

from airflow_provider_odf.dag_factory import dags_from_folder
from airflow_provider_odf.errors import OdfTaskError
from airflow_provider_odf.hooks.odf import OdfHook
from airflow_provider_odf.operators import OdfRepositorySyncOperator
from odf_core.chain.integrity import verify_integrity
from odf_core.workspace import Workspace

from tests.odf_core.chain.builders import new_root
from tests.odf_core.repository.datasets import chain_hashes, grow

from ..conftest import EXAMPLES, conn_env


def _aws_conn(monkeypatch, s3_server, conn_id: str = "aws_moto") -> None:
    """An 'aws' connection as the Amazon provider stores it; the process' own AWS_* variables are removed, so only
    the connection can reach the store."""
    conn_env(monkeypatch, conn_id, conn_type="aws", login="testing", password="testing",
             extra={"endpoint_url": s3_server.endpoint, "region_name": "us-east-1"})
    for var in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(var, raising=False)


def test_push_then_pull_through_the_operator_with_aws_connection(monkeypatch, s3_server, tmp_path: Path) -> None:
    bucket = s3_server.bucket()
    ws = Workspace.init(str(tmp_path / "ws"))
    h = new_root(ws, "root")
    grow(h, tmp_path, 2)
    _aws_conn(monkeypatch, s3_server)
    conn_env(monkeypatch, "odf_src", conn_type="odf", extra={"workspace": ws.url, "aws_conn_id": "aws_moto"})
    op = OdfRepositorySyncOperator(task_id="push", dataset="root", remote=f"s3://{bucket}/repo/root",
                                   odf_conn_id="odf_src")
    out = op.execute({})
    assert out["direction"] == "push" and out["blocks"] == 5 and out["head"] == str(h.chain.head())

    ws2 = Workspace.init(str(tmp_path / "ws2"))
    conn_env(monkeypatch, "odf_dst", conn_type="odf", extra={"workspace": ws2.url, "aws_conn_id": "aws_moto"})
    pull = OdfRepositorySyncOperator(task_id="pull", dataset="root", direction="pull",
                                     remote=f"s3://{bucket}/repo/root", odf_conn_id="odf_dst")
    assert pull.execute({})["blocks"] == 5
    assert chain_hashes(ws2.get("root")) == chain_hashes(h)
    grow(h, tmp_path, 1, tag="b")
    assert op.execute({})["blocks"] == 1
    again = OdfRepositorySyncOperator(task_id="pull2", dataset="root", direction="pull", odf_conn_id="odf_dst")
    assert again.execute({})["blocks"] == 1  # the remembered remote
    assert verify_integrity(ws2.get("root").store).ok

    grow(ws2.get("root"), tmp_path, 1, tag="z")
    grow(h, tmp_path, 1, tag="c")
    op.execute({})
    with pytest.raises(OdfTaskError, match="diverged"):
        again.execute({})


def test_connection_test_probes_conditional_writes_of_an_s3_workspace(monkeypatch, s3_server) -> None:
    url = f"s3://{s3_server.bucket()}/ws"
    Workspace.init(url)
    _aws_conn(monkeypatch, s3_server)
    conn_env(monkeypatch, "odf_s3", conn_type="odf", extra={"workspace": url, "aws_conn_id": "aws_moto"})
    ok, message = OdfHook("odf_s3").test_connection()
    assert ok, message
    assert "conditional writes honoured" in message and url in message
    conn_env(monkeypatch, "odf_s3_noaws", conn_type="odf", extra={"workspace": url})
    ok, message = OdfHook("odf_s3_noaws").test_connection()  # no endpoint, no credentials: a clear failure
    assert not ok and message


def test_push_to_option_adds_a_push_task_after_verify(tmp_path: Path) -> None:
    (tmp_path / "datasets").mkdir()
    for f in (EXAMPLES / "datasets").glob("*.yaml"):
        (tmp_path / "datasets" / f.name).write_text(f.read_text())
    (tmp_path / "odf-dags.yaml").write_text("defaults:\n  push_to: s3://bucket/repo\n")
    ns = {"__file__": str(tmp_path / "dags.py")}
    dags = dags_from_folder("datasets", ns)
    dag = dags["odf__com_example_cities"]
    task = dag.task_dict["push_to_repository"]
    assert isinstance(task, OdfRepositorySyncOperator)
    assert task.remote == "s3://bucket/repo/com.example.cities" and task.direction == "push"
    assert task.upstream_task_ids == {"verify"}
    (tmp_path / "odf-dags.yaml").write_text("defaults:\n  push_to: 'http://x/repo'\n")
    with pytest.raises(Exception, match="push_to"):
        dags_from_folder("datasets", {"__file__": str(tmp_path / "dags.py")})
