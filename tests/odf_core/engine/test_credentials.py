"""Credential files and the listening rule of the warm engine (no Spark, no server: test_engine_security.py has
those)."""
from __future__ import annotations

import pytest

from odf_core.engine.base import EngineError
from odf_core.engine.credentials import CA_FILE_ENV, CLIENT_CERT_ENV, CLIENT_KEY_ENV, TOKEN_FILE_ENV, \
    ClientCredentials, ServeConfigError, ServerSecurity, is_loopback, listen_problem, token_matches


def test_client_credentials_from_the_environment_and_the_flag(tmp_path, monkeypatch):
    files = {}
    for env, name, text in ((TOKEN_FILE_ENV, "token", "env-token\nignored\n"), (CA_FILE_ENV, "ca", "CA"),
                            (CLIENT_CERT_ENV, "cert", "CERT"), (CLIENT_KEY_ENV, "key", "KEY")):
        files[name] = tmp_path / name
        files[name].write_text(text)
        monkeypatch.setenv(env, str(files[name]))
    creds = ClientCredentials.from_env()
    assert (creds.token, creds.ca, creds.cert, creds.key) == ("env-token", b"CA", b"CERT", b"KEY")
    flag = tmp_path / "flag-token"
    flag.write_text("  flag-token  \n")
    assert ClientCredentials.from_env(token_file=str(flag)).token == "flag-token"  # --engine-token-file wins
    monkeypatch.delenv(CLIENT_KEY_ENV)
    with pytest.raises(EngineError, match=f"a client certificate without its key \\(set both {CLIENT_CERT_ENV} "
                                          f"and {CLIENT_KEY_ENV}\\)"):
        ClientCredentials.from_env()
    monkeypatch.delenv(CLIENT_CERT_ENV)
    empty = tmp_path / "empty"
    empty.write_text(" \n")
    with pytest.raises(EngineError, match=f"engine token file {empty}: the file is empty"):
        ClientCredentials.from_env(token_file=str(empty))


def test_token_comparison():
    assert token_matches((("x-other", "1"), ("authorization", "Bearer t0k")), "t0k")
    assert not token_matches((("authorization", "Bearer t0k-longer"),), "t0k")
    assert not token_matches((("authorization", "t0k"),), "t0k")
    assert not token_matches(None, "t0k")


def test_listening_off_loopback_needs_tls_and_a_token():
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "10.0.0.5", "engine.example.com"))
    both = ServerSecurity(token="t", cert=b"c", key=b"k")
    assert listen_problem("0.0.0.0", both, insecure=False) is None
    assert listen_problem("127.0.0.1", ServerSecurity(), insecure=False) is None
    assert listen_problem("10.0.0.5", ServerSecurity(), insecure=True) is None
    assert "without a token (--token-file)" in listen_problem("::", ServerSecurity(cert=b"c", key=b"k"),
                                                             insecure=False)
    with pytest.raises(ServeConfigError, match="--tls-client-ca needs TLS: add --tls-cert and --tls-key"):
        ServerSecurity.load(tls_client_ca="/x")
