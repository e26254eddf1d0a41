"""Who may talk to a warm engine, and over what: the bearer token and the TLS material of both sides.

The engine (``odf engine serve --token-file F --tls-cert F --tls-key F [--tls-client-ca F]``) and its clients
(``ODF_ENGINE_TOKEN_FILE``/``--engine-token-file``, ``ODF_ENGINE_CA_FILE``, ``ODF_ENGINE_CLIENT_CERT``/``_KEY``, or
the Airflow connection) read the same kinds of files here, so a missing or empty file is the same one-line error
whichever side reads it. Tokens travel as call metadata ``authorization: Bearer <token>``; the engine compares them
in constant time. No grpc import here: the launcher checks everything before it starts Spark.
"""
from __future__ import annotations

import hmac
import ipaddress
import os
from dataclasses import dataclass

from odf_core.engine.base import EngineError

TOKEN_FILE_ENV = "ODF_ENGINE_TOKEN_FILE"
CA_FILE_ENV = "ODF_ENGINE_CA_FILE"
CLIENT_CERT_ENV = "ODF_ENGINE_CLIENT_CERT"
CLIENT_KEY_ENV = "ODF_ENGINE_CLIENT_KEY"
AUTHORIZATION = "authorization"  # gRPC metadata keys are lower case


class ServeConfigError(EngineError):
    """``odf engine serve`` was given settings it cannot start with (exit code 2, before Spark starts)."""


def read_file(path: str, what: str) -> bytes:
    """The bytes of a credential file; a missing, unreadable or empty one is one line naming it and its role."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise EngineError(f"{what} {path}: {e.strerror or e}") from None
    if not data.strip():
        raise EngineError(f"{what} {path}: the file is empty")
    return data


def read_token(path: str, what: str = "engine token file") -> str:
    """The token is the file's first line, surrounding whitespace removed (a trailing newline is common)."""
    text = read_file(path, what).decode("utf-8", "replace").strip().splitlines()[0].strip()
    if not text:
        raise EngineError(f"{what} {path}: the file is empty")
    return text


def bearer(token: str) -> tuple[str, str]:
    return AUTHORIZATION, f"Bearer {token}"


def token_matches(metadata: tuple | list | None, token: str) -> bool:
    """Whether the call's metadata carries ``authorization: Bearer <token>`` (compared in constant time)."""
    expected = f"Bearer {token}".encode()
    for key, value in metadata or ():
        if key == AUTHORIZATION:
            given = value.encode() if isinstance(value, str) else bytes(value)
            return hmac.compare_digest(given, expected)
    return False


@dataclass(frozen=True)
class ClientCredentials:
    """What a client presents: a token (sent on every call) and, for ``grpcs://``, the CA that signed the engine's
    certificate and, for mutual TLS, its own certificate and key (PEM bytes)."""

    token: str | None = None
    ca: bytes | None = None
    cert: bytes | None = None
    key: bytes | None = None

    @classmethod
    def load(cls, *, token_file: str | None = None, ca_file: str | None = None, cert_file: str | None = None,
             key_file: str | None = None, where: str = "") -> ClientCredentials:
        """Read the named files; ``where`` prefixes each role (e.g. "connection 'odf_default' extra")."""
        if bool(cert_file) != bool(key_file):
            given, missing = ("certificate", "key") if cert_file else ("key", "certificate")
            raise EngineError(f"{where or 'engine client'}: a client {given} without its {missing} "
                              f"(set both {CLIENT_CERT_ENV} and {CLIENT_KEY_ENV})")
        pre = f"{where} " if where else ""
        return cls(token=read_token(token_file, f"{pre}engine token file") if token_file else None,
                   ca=read_file(ca_file, f"{pre}engine CA file") if ca_file else None,
                   cert=read_file(cert_file, f"{pre}engine client certificate") if cert_file else None,
                   key=read_file(key_file, f"{pre}engine client key") if key_file else None)

    @classmethod
    def from_env(cls, *, token_file: str | None = None) -> ClientCredentials:
        """The ``ODF_ENGINE_*`` variables; ``token_file`` (``--engine-token-file``) wins over the variable."""
        env = os.environ
        return cls.load(token_file=token_file or env.get(TOKEN_FILE_ENV) or None,
                        ca_file=env.get(CA_FILE_ENV) or None, cert_file=env.get(CLIENT_CERT_ENV) or None,
                        key_file=env.get(CLIENT_KEY_ENV) or None)


@dataclass(frozen=True)
class ServerSecurity:
    """What the engine demands of its callers: a token, TLS, and with ``client_ca`` a client certificate."""

    token: str | None = None
    cert: bytes | None = None
    key: bytes | None = None
    client_ca: bytes | None = None

    @property
    def tls(self) -> bool:
        return self.cert is not None

    @classmethod
    def load(cls, *, token_file: str | None = None, tls_cert: str | None = None, tls_key: str | None = None,
             tls_client_ca: str | None = None) -> ServerSecurity:
        if bool(tls_cert) != bool(tls_key):
            raise ServeConfigError("--tls-cert and --tls-key go together: " +
                                   ("--tls-key is missing" if tls_cert else "--tls-cert is missing"))
        if tls_client_ca and not tls_cert:
            raise ServeConfigError("--tls-client-ca needs TLS: add --tls-cert and --tls-key")
        try:
            return cls(token=read_token(token_file, "--token-file") if token_file else None,
                       cert=read_file(tls_cert, "--tls-cert") if tls_cert else None,
                       key=read_file(tls_key, "--tls-key") if tls_key else None,
                       client_ca=read_file(tls_client_ca, "--tls-client-ca") if tls_client_ca else None)
        except ServeConfigError:
            raise
        except EngineError as e:
            raise ServeConfigError(str(e)) from None


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 or ``localhost``; any other name or address may be reachable from other machines."""
    h = host.strip().strip("[]")
    if h.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


def listen_problem(host: str, security: ServerSecurity, *, insecure: bool) -> str | None:
    """Why the engine must not listen on ``host`` as configured (None: it may). Off loopback both TLS and a token
    are required, since anyone who reaches the port acts as the engine's OS user on the allowed paths."""
    if insecure or is_loopback(host):
        return None
    missing = [what for what, ok in (("TLS (--tls-cert and --tls-key)", security.tls),
                                     ("a token (--token-file)", security.token is not None)) if not ok]
    if not missing:
        return None
    return (f"refusing to listen on {host}, which is not a loopback address, without {' and '.join(missing)}; "
            "pass --insecure to listen anyway")
