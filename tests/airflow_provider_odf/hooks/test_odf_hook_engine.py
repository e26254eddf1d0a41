"""The ``odf`` connection's warm-engine fields: URL forms, the password as the engine's token, TLS files; each
mistake one line naming the connection and the field. A real TLS engine called through the hook is in
``test_hook_calls_a_tls_engine_with_the_connections_token``."""
from __future__ import annotations

import pytest

from airflow_provider_odf.errors import OdfConnectionError
from airflow_provider_odf.hooks.odf import OdfHook
from odf_core.engine.credentials import CA_FILE_ENV, TOKEN_FILE_ENV

from ..conftest import conn_env


def odf_conn(monkeypatch, workspace: str, *, password: str | None = None, login: str | None = None,
             **extra) -> None:
    fields = {"conn_type": "odf", "extra": {"workspace": workspace, **extra}}
    if password:
        fields["password"] = password
    if login:
        fields["login"] = login
    conn_env(monkeypatch, "odf_eng", **fields)


@pytest.mark.parametrize("url", ["grpc://engine:5544", "grpcs://engine.example.com:5544", "unix:///run/odf.sock"])
def test_engine_url_forms_and_the_password_as_token(monkeypatch, url):
    monkeypatch.delenv(TOKEN_FILE_ENV, raising=False)
    odf_conn(monkeypatch, "/nonexistent", engine_url=url, password="tok-1")
    hook = OdfHook("odf_eng")
    engine = hook.get_engine()
    assert engine.url == url and engine.credentials.token == "tok-1"
    assert hook.settings().storage_options == {}  # the password is not taken for an object-store secret
    assert "tok-1" not in repr(hook.settings()) and "tok-1" not in repr(engine)


def test_tls_files_from_the_connection_and_the_environment(monkeypatch, tmp_path):
    ca, cert, key, token = (tmp_path / n for n in ("ca.pem", "client.pem", "client.key", "token"))
    for f in (ca, cert, key):
        f.write_text(f"-----BEGIN {f.name}-----\n")
    token.write_text("from-env\n")
    odf_conn(monkeypatch, "/nonexistent", engine_url="grpcs://e:5544", engine_ca=str(ca),
             engine_client_cert=str(cert), engine_client_key=str(key))
    monkeypatch.setenv(TOKEN_FILE_ENV, str(token))
    creds = OdfHook("odf_eng").get_engine().credentials
    assert (creds.token, creds.ca, creds.cert, creds.key) == ("from-env", ca.read_bytes(), cert.read_bytes(),
                                                              key.read_bytes())
    odf_conn(monkeypatch, "/nonexistent", engine_url="grpcs://e:5544", password="conn-token")
    monkeypatch.setenv(CA_FILE_ENV, str(ca))
    creds = OdfHook("odf_eng").get_engine().credentials
    assert (creds.token, creds.ca, creds.cert) == ("conn-token", ca.read_bytes(), None)


@pytest.mark.parametrize("extra, login, message", [
    ({"engine_url": "http://e:5544"}, None,
     "connection 'odf_eng': engine_url must look like grpc://HOST:PORT, got 'http://e:5544' (also accepted: "
     "grpcs://HOST:PORT for TLS, unix:///PATH)"),
    ({"engine_url": "unix://relative.sock"}, None, "engine_url must look like grpc://HOST:PORT, got 'unix://rel"),
    ({"engine_url": "grpc://e:5544"}, "key-id",
     "connection 'odf_eng': with engine_url set the password is the engine's token and login must be empty; give "
     "object-store credentials through aws_conn_id or storage_options"),
    ({"engine_url": "grpcs://e:5544", "engine_ca": "/nonexistent/ca.pem"}, None,
     "odf connection 'odf_eng': engine CA file /nonexistent/ca.pem: No such file or directory"),
    ({"engine_url": "grpcs://e:5544", "engine_ca": 5}, None, "connection 'odf_eng': engine_ca must be a file path"),
])
def test_engine_field_mistakes_are_one_line_naming_the_connection(monkeypatch, extra, login, message):
    monkeypatch.delenv(CA_FILE_ENV, raising=False)
    odf_conn(monkeypatch, "/nonexistent", login=login, password="p", **extra)
    with pytest.raises(OdfConnectionError) as e:
        OdfHook("odf_eng").get_engine()
    assert message in str(e.value) and "\n" not in str(e.value)


@pytest.mark.spark
def test_hook_calls_a_tls_engine_with_the_connections_token(monkeypatch, spark, tmp_path):
    from odf_core.engine import EngineError
    from odf_core.engine.credentials import ServerSecurity
    from spark_jobs.server import EngineServer

    from ...odf_core.engine.tls_support import make_pki

    pki = make_pki(tmp_path / "pki")
    srv = EngineServer(spark, "127.0.0.1", 0, max_concurrency=1, drain_s=1, security=ServerSecurity(
        token="airflow-token", cert=pki.server_cert.read_bytes(), key=pki.server_key.read_bytes()))
    srv.start()
    try:
        monkeypatch.delenv(TOKEN_FILE_ENV, raising=False)
        odf_conn(monkeypatch, "/nonexistent", engine_url=srv.url, engine_ca=str(pki.ca), password="airflow-token")
        assert OdfHook("odf_eng").get_engine().health().running == 0
        odf_conn(monkeypatch, "/nonexistent", engine_url=srv.url, engine_ca=str(pki.ca), password="wrong")
        with pytest.raises(EngineError, match="refused the call: missing or wrong engine token"):
            OdfHook("odf_eng").get_engine().health(timeout_s=10)
    finally:
        srv.shutdown(0)
