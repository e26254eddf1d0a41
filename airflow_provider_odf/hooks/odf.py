"""``OdfHook``: the workspace and Spark engine named by an ``odf`` connection.

An ``odf`` connection holds the workspace URL (extra ``workspace``), object-store credentials (login/password) and
optionally names a standard ``spark`` connection (extra ``spark_conn_id``) for the master. Unlike the Spark
provider, a missing or empty Spark connection is an error naming it: silently falling back to ``yarn`` would send
jobs somewhere nobody configured. No Spark connection at all means ``local[*]``.

A warm engine (extra ``engine_url``: ``grpc://``, ``grpcs://``, ``unix://``, or ``auto``: the worker host's own engine,
started by the first task that needs it and shared by every task there; docs/spark.md) is called with the connection's
password as its token and, for ``grpcs://``, extras ``engine_ca`` (and ``engine_client_cert``/``engine_client_key`` for
mutual TLS) naming PEM files on the worker; unset ones fall back to the ``ODF_ENGINE_*`` variables (docs/security.md).
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseHook

from airflow_provider_odf.errors import OdfConnectionError

if TYPE_CHECKING:
    from odf_core.engine import Engine
    from odf_core.workspace import Workspace

DEFAULT_MASTER = "local[*]"
_MASTER = re.compile(r"^(local(\[(\*|\d+)(,\d+)?\])?|yarn|(spark|k8s|mesos)://\S+)$")
_SUBMIT_BINARIES = {"spark-submit", "spark2-submit", "spark3-submit"}
_ENGINE_OPTIONS = {"conf", "timeout_s", "spark_submit"}
# Credentials in login/password map onto these fsspec options, per URL scheme.
_CREDENTIAL_OPTIONS = {"s3": ("key", "secret"), "s3a": ("key", "secret"),
                       "az": ("account_name", "account_key"), "abfs": ("account_name", "account_key")}


@dataclass(frozen=True)
class SparkSettings:
    """Where and how Spark jobs run; ``conn_id`` is None for the built-in ``local[*]`` default."""

    master: str = DEFAULT_MASTER
    conf: dict[str, str] = field(default_factory=dict)
    spark_submit: str = "spark-submit"
    timeout_s: float | None = None
    conn_id: str | None = None


@dataclass(frozen=True)
class OdfSettings:
    """What an ``odf`` connection says."""

    conn_id: str
    workspace: str
    storage_options: dict[str, Any] = field(default_factory=dict)
    spark_conn_id: str | None = None
    engine_options: dict[str, Any] = field(default_factory=dict)
    engine_url: str | None = None  # a long-lived engine (``odf engine serve``): grpc://HOST:PORT
    aws_conn_id: str | None = None  # an ``aws`` connection: S3 credentials/endpoint of the workspace and remotes
    engine_token: str | None = field(default=None, repr=False)  # the connection's password when engine_url is set
    engine_tls_files: dict[str, str] = field(default_factory=dict)  # engine_ca/_client_cert/_client_key -> path


# -- pure parsing of Connection objects (no Airflow state) --------------------------------------------------------


def _extra(conn: Any) -> dict[str, Any]:
    try:
        extra = conn.extra_dejson
    except Exception as e:  # noqa: BLE001 - malformed JSON in the extra field
        raise OdfConnectionError(f"connection '{conn.conn_id}': extra is not valid JSON: {e}") from None
    if not isinstance(extra, dict):
        raise OdfConnectionError(f"connection '{conn.conn_id}': extra must be a JSON object, got {extra!r}")
    return extra


def _field(extra: dict[str, Any], conn_type: str, name: str) -> Any:
    """A declarative conn-field, stored plain or with the legacy ``extra__<type>__`` prefix."""
    if name in extra:
        return extra[name]
    return extra.get(f"extra__{conn_type}__{name}")


def _json_object(conn_id: str, name: str, value: Any) -> dict[str, Any]:
    if value in (None, ""):
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as e:
            raise OdfConnectionError(f"connection '{conn_id}': {name} is not valid JSON: {e}") from None
    if not isinstance(value, dict):
        raise OdfConnectionError(f"connection '{conn_id}': {name} must be a JSON object, got {value!r}")
    return value


def _conf(conn_id: str, where: str, value: Any) -> dict[str, str]:
    conf = _json_object(conn_id, where, value)
    for k, v in conf.items():
        if not isinstance(v, (str, int, float, bool)):
            raise OdfConnectionError(f"connection '{conn_id}': {where}.{k} must be a scalar, got {v!r}")
    return {str(k): (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in conf.items()}


def odf_settings(conn: Any) -> OdfSettings:
    """Read an ``odf`` connection; raises :class:`OdfConnectionError` naming it when it is unusable."""
    cid = conn.conn_id
    if conn.conn_type != "odf":
        raise OdfConnectionError(f"connection '{cid}' has type '{conn.conn_type}', expected an 'odf' connection")
    extra = _extra(conn)
    workspace = _field(extra, "odf", "workspace")
    if not isinstance(workspace, str) or not workspace.strip():
        raise OdfConnectionError(
            f"connection '{cid}' names no workspace: set extra 'workspace' to a local path or object-store URL"
        )
    workspace = workspace.strip()
    storage = _json_object(cid, "storage_options", _field(extra, "odf", "storage_options"))
    engine_url, engine_token, tls_files = _engine_fields(conn, extra)
    if conn.login or (conn.password and not engine_url):
        scheme = workspace.split("://", 1)[0].lower() if "://" in workspace else "file"
        if scheme not in _CREDENTIAL_OPTIONS:
            raise OdfConnectionError(
                f"connection '{cid}': login/password are object-store credentials, but workspace {workspace!r} "
                f"uses '{scheme}' (supported: {', '.join(sorted(_CREDENTIAL_OPTIONS))}); use storage_options instead"
            )
        key_opt, secret_opt = _CREDENTIAL_OPTIONS[scheme]
        if conn.login:
            storage[key_opt] = conn.login
        if conn.password and not engine_url:
            storage[secret_opt] = conn.password
    spark_conn_id = _field(extra, "odf", "spark_conn_id")
    if spark_conn_id is not None and not isinstance(spark_conn_id, str):
        raise OdfConnectionError(f"connection '{cid}': spark_conn_id must be a string, got {spark_conn_id!r}")
    engine = _json_object(cid, "engine_options", _field(extra, "odf", "engine_options"))
    unknown = set(engine) - _ENGINE_OPTIONS
    if unknown:
        raise OdfConnectionError(
            f"connection '{cid}': unknown engine_options {sorted(unknown)} (allowed: {sorted(_ENGINE_OPTIONS)})"
        )
    aws_conn_id = _field(extra, "odf", "aws_conn_id")
    if aws_conn_id is not None and not isinstance(aws_conn_id, str):
        raise OdfConnectionError(f"connection '{cid}': aws_conn_id must be a string, got {aws_conn_id!r}")
    return OdfSettings(cid, workspace, storage, (spark_conn_id or "").strip() or None, engine, engine_url,
                       (aws_conn_id or "").strip() or None, engine_token, tls_files)


_ENGINE_TLS_FIELDS = ("engine_ca", "engine_client_cert", "engine_client_key")


def _engine_fields(conn: Any, extra: dict[str, Any]) -> tuple[str | None, str | None, dict[str, str]]:
    """``engine_url`` (checked by the client's own URL parser), the token (the password, when an engine is named:
    login must then be empty) and the TLS file extras."""
    from odf_core.engine.autostart import is_auto
    from odf_core.engine.base import EngineError
    from odf_core.engine.wire import parse_url

    cid = conn.conn_id
    url = _field(extra, "odf", "engine_url")
    if url in (None, ""):
        return None, None, {}
    try:
        if not isinstance(url, str):
            raise EngineError(url)
        if not is_auto(url):  # auto: resolved when a task runs, on its worker (never at DAG parse time)
            parse_url(url)
    except EngineError:
        raise OdfConnectionError(f"connection '{cid}': engine_url must look like grpc://HOST:PORT, got {url!r} "
                                 "(also accepted: grpcs://HOST:PORT for TLS, unix:///PATH), or auto (the worker's own "
                                 "engine)") from None
    if conn.login:
        raise OdfConnectionError(f"connection '{cid}': with engine_url set the password is the engine's token and "
                                 "login must be empty; give object-store credentials through aws_conn_id or "
                                 "storage_options")
    files: dict[str, str] = {}
    for name in _ENGINE_TLS_FIELDS:
        value = _field(extra, "odf", name)
        if value in (None, ""):
            continue
        if not isinstance(value, str) or not value.strip():
            raise OdfConnectionError(f"connection '{cid}': {name} must be a file path, got {value!r}")
        files[name] = value.strip()
    return url.strip(), conn.password or None, files


def engine_credentials(settings: OdfSettings) -> Any:
    """The client credentials of the connection's engine: its password as the token, its TLS file extras, and the
    ``ODF_ENGINE_*`` variables for what it leaves unset. A missing file is an error naming the connection."""
    from odf_core.engine.base import EngineError
    from odf_core.engine.credentials import (
        CA_FILE_ENV,
        CLIENT_CERT_ENV,
        CLIENT_KEY_ENV,
        TOKEN_FILE_ENV,
        ClientCredentials,
    )

    f, env = settings.engine_tls_files, os.environ
    try:
        creds = ClientCredentials.load(
            token_file=None if settings.engine_token else env.get(TOKEN_FILE_ENV) or None,
            ca_file=f.get("engine_ca") or env.get(CA_FILE_ENV) or None,
            cert_file=f.get("engine_client_cert") or env.get(CLIENT_CERT_ENV) or None,
            key_file=f.get("engine_client_key") or env.get(CLIENT_KEY_ENV) or None)
    except EngineError as e:
        raise OdfConnectionError(f"odf connection '{settings.conn_id}': {e}") from None
    return replace(creds, token=settings.engine_token) if settings.engine_token else creds


def aws_storage_options(conn: Any) -> dict[str, Any]:
    """S3 options from an Airflow ``aws`` connection, read without the Amazon provider: login/password are the key
    id and secret; extra ``endpoint_url``, ``region_name`` and ``aws_session_token`` as the Amazon provider names
    them. Unset values stay unset (boto3 then falls back to the worker's ``AWS_*`` variables)."""
    extra = _extra(conn)
    options: dict[str, Any] = {}
    if conn.login:
        options["key"] = conn.login
    if conn.password:
        options["secret"] = conn.password
    endpoint = extra.get("endpoint_url") or (extra.get("service_config", {}).get("s3", {}) or {}).get("endpoint_url")
    for name, value in (("endpoint_url", endpoint), ("region", extra.get("region_name")),
                        ("token", extra.get("aws_session_token"))):
        if value:
            options[name] = value
    return options


def _submit_binary(conn_id: str, value: Any) -> str:
    if not isinstance(value, str) or os.path.basename(value) not in _SUBMIT_BINARIES:
        raise OdfConnectionError(
            f"connection '{conn_id}': spark-submit binary must be one of {sorted(_SUBMIT_BINARIES)} "
            f"(optionally with a directory), got {value!r}"
        )
    return value


def spark_settings(conn: Any) -> SparkSettings:
    """Read a standard ``spark`` connection (host = master); an empty master is an error, never ``yarn``."""
    cid = conn.conn_id
    if conn.conn_type != "spark":
        raise OdfConnectionError(f"connection '{cid}' has type '{conn.conn_type}', expected a 'spark' connection")
    host = (conn.host or "").strip()
    if not host:
        raise OdfConnectionError(
            f"spark connection '{cid}' has an empty host: set it to the master (local[*], spark://host, yarn, "
            "k8s://https://host)"
        )
    master = f"{host}:{conn.port}" if conn.port and host.startswith("spark://") else host
    if not _MASTER.match(master):
        raise OdfConnectionError(
            f"spark connection '{cid}': {master!r} is not a Spark master (local[*], spark://host:7077, yarn, "
            "k8s://https://host)"
        )
    extra = _extra(conn)
    deploy_mode = extra.get("deploy-mode") or "client"
    if deploy_mode != "client":
        raise OdfConnectionError(
            f"spark connection '{cid}': deploy-mode {deploy_mode!r} is not supported (ODF jobs report their results "
            "to the submitting process: use client)"
        )
    binary = extra.get("spark-submit") or extra.get("spark-binary") or "spark-submit"
    conf = _conf(cid, "conf", extra.get("conf"))
    if extra.get("queue"):
        conf.setdefault("spark.yarn.queue", str(extra["queue"]))
    if extra.get("namespace"):
        conf.setdefault("spark.kubernetes.namespace", str(extra["namespace"]))
    return SparkSettings(master=master, conf=conf, spark_submit=_submit_binary(cid, binary), conn_id=cid)


def merge_engine_options(spark: SparkSettings, odf: OdfSettings) -> SparkSettings:
    """The odf connection's engine options refine (never replace) the Spark connection's settings."""
    opts = odf.engine_options
    conf = {**spark.conf, **_conf(odf.conn_id, "engine_options.conf", opts.get("conf"))}
    timeout = opts.get("timeout_s")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
        raise OdfConnectionError(
            f"connection '{odf.conn_id}': engine_options.timeout_s must be a positive number, got {timeout!r}"
        )
    binary = spark.spark_submit
    if opts.get("spark_submit") is not None:
        binary = _submit_binary(odf.conn_id, opts["spark_submit"])
    return SparkSettings(spark.master, conf, binary, float(timeout) if timeout else None, spark.conn_id)


# -- the hook ------------------------------------------------------------------------------------------------------


class OdfHook(BaseHook):
    """Workspace and Spark engine of an ``odf`` connection.

    :param odf_conn_id: the ``odf`` connection.
    :param spark_conn_id: a ``spark`` connection that overrides the one the odf connection names.
    """

    conn_name_attr = "odf_conn_id"
    default_conn_name = "odf_default"
    conn_type = "odf"
    hook_name = "Open Data Fabric workspace"

    def __init__(self, odf_conn_id: str = default_conn_name, *, spark_conn_id: str | None = None) -> None:
        super().__init__()
        self.odf_conn_id = odf_conn_id
        self.spark_conn_id = spark_conn_id
        self._settings: OdfSettings | None = None

    # -- connections -----------------------------------------------------------------------------------------

    def _connection(self, conn_id: str, what: str) -> Any:
        try:
            return self.get_connection(conn_id)
        except Exception as e:  # noqa: BLE001 - AirflowNotFoundException and secrets-backend errors alike
            raise OdfConnectionError(f"{what} '{conn_id}' is not defined ({type(e).__name__}: {e})") from None

    async def _aconnection(self, conn_id: str, what: str) -> Any:
        try:
            return await self.aget_connection(conn_id)
        except Exception as e:  # noqa: BLE001 - as _connection
            raise OdfConnectionError(f"{what} '{conn_id}' is not defined ({type(e).__name__}: {e})") from None

    def settings(self) -> OdfSettings:
        if self._settings is None:
            settings = odf_settings(self._connection(self.odf_conn_id, "odf connection"))
            if settings.aws_conn_id and _is_s3(settings.workspace):
                aws = aws_storage_options(self._connection(settings.aws_conn_id, "aws connection"))
                settings = replace(settings, storage_options={**aws, **settings.storage_options})
            self._settings = settings
        return self._settings

    def s3_options(self) -> dict[str, Any]:
        """Credentials/endpoint for ``s3://`` remotes: the ``aws_conn_id`` connection's, else an S3 workspace's
        own options, else none (the worker's ``AWS_*`` variables)."""
        settings = self.settings()
        if settings.aws_conn_id:
            return aws_storage_options(self._connection(settings.aws_conn_id, "aws connection"))
        return dict(settings.storage_options) if _is_s3(settings.workspace) else {}

    def _spark_conn_id(self, settings: OdfSettings) -> tuple[str | None, str]:
        if self.spark_conn_id:
            return self.spark_conn_id, "spark connection"
        return settings.spark_conn_id, f"spark connection (named by odf connection '{settings.conn_id}')"

    def spark_settings(self) -> SparkSettings:
        odf = self.settings()
        conn_id, what = self._spark_conn_id(odf)
        spark = spark_settings(self._connection(conn_id, what)) if conn_id else SparkSettings()
        return merge_engine_options(spark, odf)

    # -- what operators use ----------------------------------------------------------------------------------

    def get_workspace(self, *, create: bool = False) -> "Workspace":
        """The workspace; ``create`` initializes a missing one (only the sync task does)."""
        return _open_workspace(self.settings(), create=create)

    async def aget_workspace(self) -> "Workspace":
        """Async variant for triggers (the connection lookup must not block the triggerer's event loop)."""
        if self._settings is None:
            self._settings = odf_settings(await self._aconnection(self.odf_conn_id, "odf connection"))
        import asyncio

        return await asyncio.to_thread(_open_workspace, self._settings, create=False)

    def get_engine(self, *, timeout_s: float | None = None) -> "Engine":
        """The engine for one task: the connection's long-lived engine (``engine_url``), else one spark-submit per
        step; ``timeout_s`` (the task's execution_timeout) caps the connection's own timeout."""
        from odf_core.engine import SubmitEngine, remote_engine
        from odf_core.engine.autostart import auto_engine, is_auto

        odf = self.settings()
        s = self.spark_settings()
        timeouts = [t for t in (s.timeout_s, timeout_s) if t]
        timeout = min(timeouts) if timeouts else None
        if odf.engine_url and is_auto(odf.engine_url):  # this worker host's own engine, started if none runs
            engine = auto_engine(timeout_s=timeout, credentials=engine_credentials(odf))
            self.log.info("engine auto: %s (connection '%s')", engine.url, odf.conn_id)
            return engine
        if odf.engine_url:
            self.log.info("engine %s (connection '%s'%s)", odf.engine_url, odf.conn_id,
                          ", with a token" if odf.engine_token else "")
            return remote_engine(odf.engine_url, timeout_s=timeout, credentials=engine_credentials(odf))
        self.log.info("Spark master %s (%s)", s.master, f"connection '{s.conn_id}'" if s.conn_id else "default")
        return SubmitEngine(master=s.master, conf=dict(s.conf), spark_submit=s.spark_submit, timeout_s=timeout)

    def get_conn(self) -> "Workspace":
        return self.get_workspace()

    def test_connection(self) -> tuple[bool, str]:
        """Reach the workspace and the Spark settings; on S3 also probe that the store honours conditional writes
        (without them concurrent commits could lose one another) and say so."""
        try:
            ws = self.get_workspace()
            self.spark_settings()
            message = f"workspace {ws.url}: {len(ws.list())} datasets"
            if _is_s3(ws.url):
                ok, how = ws.store.fs.probe_conditional_writes(ws.store.root)
                if not ok:
                    return False, (f"{message}; the store does NOT honour conditional writes ({how}): concurrent "
                                   "commits could be lost")
                message += f"; {how}"
            return True, message
        except Exception as e:  # noqa: BLE001 - the connection test reports any failure
            return False, str(e)


def _is_s3(url: str) -> bool:
    return url.lower().startswith(("s3://", "s3a://"))


def _open_workspace(settings: OdfSettings, *, create: bool) -> "Workspace":
    from odf_core.errors import OdfError
    from odf_core.storage import ObjectStore
    from odf_core.workspace import WORKSPACE_MARKER, Workspace

    try:
        store = ObjectStore.open(settings.workspace, **settings.storage_options)
    except OdfError as e:
        raise OdfConnectionError(f"odf connection '{settings.conn_id}': {e}") from None
    if not store.exists(WORKSPACE_MARKER):
        if not create:
            raise OdfConnectionError(
                f"odf connection '{settings.conn_id}': no ODF workspace at {store.url} "
                "(run 'odf init' there or let the odf__sync DAG create it)"
            )
        store.put(WORKSPACE_MARKER, b"1")  # what Workspace.init writes, here with the storage options
    return Workspace(store)
