"""The warm engine against hostile clients: real EngineServers on loopback (and a Unix socket) served from the test's
Spark session, called by our client, by raw gRPC stubs and by the ``odf`` CLI.

What is refused: a call without the token or with a wrong one (both services, Health too); a request naming a path
outside the allowed roots (directly, through a symlink, or as an SQL table), before anything reads or writes; a TLS
client that does not trust the engine's CA or, under mutual TLS, has no certificate; a non-loopback listener without
TLS and a token (before Spark starts); a request larger than the engine accepts; a request running past the engine's
own timeout (cancelled, its outputs removed)."""
from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from odf_core.cli import main as odf_main
from odf_core.engine import EngineError, EngineTimeout, EngineUnavailable, remote_engine, wire
from odf_core.engine.confinement import AllowedRoots
from odf_core.engine.credentials import CA_FILE_ENV, ClientCredentials, ServerSecurity
from odf_core.engine.protocol import HealthRequest, SqlRequest, SqlTable, encode_request
from odf_core.metadata import RawQueryRequest, RawQueryResponseRoot, RawQueryResponseSuccess, TransformSql
from odf_core.metadata.flatbuffers_serde import decode_root, encode_root
from spark_jobs.server import EngineServer

from ...spark_jobs.transform_support import Event, InputSpec, MiniCoordinator, minutes
from ...spark_jobs.transform_support import typed_request as transform_request
from .engine_support import ingest_request, wait_until
from .tls_support import Pki, make_pki

pytestmark = pytest.mark.spark

TOKEN = "s3cr3t-engine-token"
COPY = TransformSql(engine="spark", query="SELECT * FROM input")


@pytest.fixture(scope="module")
def dirs(tmp_path_factory) -> dict[str, Path]:
    """``allowed``: the guarded engine's only root; ``outside``: next to it, where nothing may be written."""
    base = tmp_path_factory.mktemp("security")
    out = {n: base / n for n in ("allowed", "outside", "pki")}
    for d in out.values():
        d.mkdir()
    (out["pki"] / "token").write_text(TOKEN + "\n")
    (out["pki"] / "wrong-token").write_text("not-the-token\n")
    pq.write_table(pa.table({"secret": ["the engine user's file"]}), out["outside"] / "secret.parquet")
    pq.write_table(pa.table({"v": [1, 2, 3]}), out["allowed"] / "in.parquet")
    return out


@pytest.fixture(scope="module")
def pki(dirs) -> Pki:
    return make_pki(dirs["pki"] / "certs")


def _server(spark, **kw) -> EngineServer:
    srv = EngineServer(spark, "127.0.0.1", 0, max_concurrency=2, drain_s=5, **kw)
    srv.start()
    return srv


@pytest.fixture(scope="module")
def guarded(spark, dirs):
    """Plain gRPC on loopback with a token, confined to ``allowed``."""
    srv = _server(spark, security=ServerSecurity(token=TOKEN), roots=AllowedRoots.parse([str(dirs["allowed"])]))
    yield srv
    srv.shutdown(0)


@pytest.fixture(scope="module")
def tls(spark, pki):
    """TLS and a token, default roots (the temp directory holds the tests' workspaces)."""
    srv = _server(spark, security=ServerSecurity(token=TOKEN, cert=pki.server_cert.read_bytes(),
                                                 key=pki.server_key.read_bytes()))
    yield srv
    srv.shutdown(0)


def client(srv: EngineServer, token: str | None = TOKEN, **creds) -> object:
    return remote_engine(srv.url, credentials=ClientCredentials(token=token, **creds))


def raw_query(dirs, output: str, inputs: tuple[str, ...] | None = None) -> RawQueryRequest:
    return RawQueryRequest(input_data_paths=inputs or (str(dirs["allowed"] / "in.parquet"),), transform=COPY,
                           output_data_path=output)


def spec_raw_query_stub(srv: EngineServer, metadata=None):
    """The spec's ExecuteRawQuery as any gRPC client calls it (no client library of ours in between)."""
    channel = grpc.insecure_channel(f"127.0.0.1:{srv.port}")
    call = channel.unary_stream(wire.EXECUTE_RAW_QUERY, request_serializer=wire.serializer("RawQueryRequest"),
                                response_deserializer=wire.deserializer("RawQueryResponse"))
    return channel, lambda request: list(call(encode_root(request), metadata=metadata, timeout=120))


# -- authentication ---------------------------------------------------------------------------------------------


def test_calls_without_the_right_token_are_refused_on_both_services(guarded, dirs):
    target, target_dir = dirs["allowed"] / "unauthenticated.parquet", dirs["allowed"] / "insert-dir"
    for token in (None, "not-the-token"):
        with pytest.raises(EngineError, match="refused the call: missing or wrong engine token .*--engine-token-file"):
            client(guarded, token=token).health(timeout_s=10)  # Health too: it tells what runs and where
        with pytest.raises(EngineError, match="refused the call"):
            client(guarded, token=token).execute(raw_query(dirs, str(target)))
        with pytest.raises(EngineError, match="refused the call"):  # a command, were it not refused first
            client(guarded, token=token).execute(SqlRequest(
                query=f"INSERT OVERWRITE DIRECTORY '{target_dir}' USING parquet SELECT 1 AS x", tables=(), limit=1))
        metadata = None if token is None else (("authorization", f"Bearer {token}"),)
        channel, call = spec_raw_query_stub(guarded, metadata)
        with channel, pytest.raises(grpc.RpcError) as e:
            call(raw_query(dirs, str(target)))
        assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
    for method, message in ((wire.EXECUTE, "Envelope"), (wire.HEALTH, "Envelope")):
        with grpc.insecure_channel(f"127.0.0.1:{guarded.port}") as channel, pytest.raises(grpc.RpcError) as e:
            channel.unary_unary(method, request_serializer=wire.serializer(message))(
                encode_request(HealthRequest()), timeout=10)
        assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert not target.exists() and not target_dir.exists()
    # the token opens both services
    assert client(guarded).health().max_concurrency == 2
    channel, call = spec_raw_query_stub(guarded, (("authorization", f"Bearer {TOKEN}"),))
    with channel:
        final = decode_root(call(raw_query(dirs, str(target)))[-1], RawQueryResponseRoot).value
    assert isinstance(final, RawQueryResponseSuccess) and final.num_records == 3 and target.exists()


# -- confinement --------------------------------------------------------------------------------------------------


def _transform_request(base: Path):
    a = InputSpec("a", pa.schema([("k", pa.string()), ("x", pa.int64())]),
                  [Event(0, minutes(1), ("p", 1)), Event(0, minutes(2), ("q", 2))])
    coord = MiniCoordinator(None, base / "t", {"kind": "Sql", "engine": "spark",
                                               "query": "SELECT event_time, k, x * 10 AS x10 FROM a"}, [a])
    return transform_request(coord.request({"a": 2}))


def test_each_escape_request_is_refused_and_nothing_is_written(guarded, dirs):
    allowed, outside = dirs["allowed"], dirs["outside"]
    (allowed / "link").symlink_to(outside)
    engine = client(guarded)
    before = sorted(p.name for p in outside.iterdir())
    cases = {
        "raw query output": (raw_query(dirs, str(outside / "raw.parquet")), "output_data_path"),
        "raw query input": (raw_query(dirs, str(allowed / "x.parquet"), (str(outside / "secret.parquet"),)),
                            "input_data_paths[0]"),
        "ingest output": (ingest_request(allowed, "esc", out=outside), "merge.output_path"),
        "through a symlink": (raw_query(dirs, str(allowed / "link" / "via-link.parquet")), "output_data_path"),
        "glob": (raw_query(dirs, str(allowed / "g.parquet"), (f"{allowed}/{{in,../outside/secret}}.parquet",)),
                 "input_data_paths[0]"),
        "sql table": (SqlRequest(query="SELECT * FROM t", limit=10,
                                 tables=(SqlTable(name="t", data_paths=(str(outside / "secret.parquet"),)),)),
                      "tables[0].data_paths[0]"),
    }
    t = _transform_request(allowed)
    cases["transform output"] = (t.replace(request=t.request.replace(new_data_path=str(outside / "t.parquet"))),
                                 "request.new_data_path")
    for name, (request, field) in cases.items():
        with pytest.raises(EngineError) as e:
            engine.execute(request, what=name)
        message = str(e.value)
        assert message.startswith(f"{name}: the engine at {guarded.url} refused the request: ") and \
            f"{field} '" in message and "--allow-path DIR" in message and "\n" not in message, (name, message)
    assert "resolves to" in str(pytest.raises(EngineError, engine.execute, cases["through a symlink"][0]).value)
    assert sorted(p.name for p in outside.iterdir()) == before  # nothing written there, by any of them
    assert guarded.health().running == 0
    # the same kind of request inside the root runs
    ok = engine.execute(raw_query(dirs, str(allowed / "inside.parquet")))
    assert isinstance(ok.value, RawQueryResponseSuccess) and (allowed / "inside.parquet").exists()


def test_the_spec_service_refuses_an_escape_with_permission_denied(guarded, dirs):
    channel, call = spec_raw_query_stub(guarded, (("authorization", f"Bearer {TOKEN}"),))
    with channel, pytest.raises(grpc.RpcError) as e:
        call(raw_query(dirs, str(dirs["outside"] / "spec.parquet")))
    assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED and "output_data_path" in e.value.details()
    assert not (dirs["outside"] / "spec.parquet").exists()


# -- limits -------------------------------------------------------------------------------------------------------


def test_a_request_larger_than_the_engine_accepts_is_refused(guarded):
    huge = SqlRequest(query="SELECT 1 -- " + "x" * (wire.MAX_REQUEST_BYTES + 1024), tables=(), limit=1)
    with pytest.raises(EngineError, match="larger than the engine accepts") as e:
        client(guarded).execute(huge)
    assert "busy" not in str(e.value)
    # a client with no limit of its own meets the engine's
    opts = [("grpc.max_send_message_length", -1)]
    with grpc.insecure_channel(f"127.0.0.1:{guarded.port}", options=opts) as channel, \
            pytest.raises(grpc.RpcError) as e:
        channel.unary_unary(wire.EXECUTE, request_serializer=wire.serializer("Envelope"))(
            encode_request(huge), metadata=(("authorization", f"Bearer {TOKEN}"),), timeout=60)
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_a_request_past_the_engines_timeout_is_cancelled_and_its_outputs_removed(spark, tmp_path):
    srv = _server(spark, request_timeout_s=2.0)
    try:
        with pytest.raises(EngineTimeout, match="longer than the engine's --request-timeout of 2 s and was "
                                                "cancelled; its outputs were removed"):
            remote_engine(srv.url).execute(ingest_request(tmp_path, "slow", slow=True))
        # the request's Spark job is cancelled, not left to run its 400M rows in the shared session
        wait_until(lambda: not spark.sparkContext.statusTracker().getActiveJobsIds())
        wait_until(lambda: srv.health().running == 0)
        assert not (tmp_path / "slow.slice.parquet").exists() and not (tmp_path / "slow.ckpt.parquet").exists()
    finally:
        srv.shutdown(0)


# -- transport ----------------------------------------------------------------------------------------------------


def test_tls_round_trip_and_clients_that_do_not_trust_the_engine(tls, pki, tmp_path):
    assert tls.url.startswith("grpcs://127.0.0.1:")
    engine = client(tls, ca=pki.ca.read_bytes())
    assert engine.health().running == 0
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"v": [1, 2]}), src)
    answer = engine.execute(RawQueryRequest(input_data_paths=(str(src),), transform=COPY,
                                            output_data_path=str(tmp_path / "out.parquet")))
    assert answer.value.num_records == 2
    with pytest.raises(EngineUnavailable, match=f"no TLS connection to the engine at {tls.url} .*{CA_FILE_ENV}"):
        client(tls, ca=pki.other_ca.read_bytes()).health(timeout_s=10)
    with pytest.raises(EngineError, match="refused the call"):
        client(tls, token=None, ca=pki.ca.read_bytes()).health(timeout_s=10)
    with pytest.raises(EngineUnavailable):  # plain gRPC to a TLS port
        remote_engine(tls.url.replace("grpcs://", "grpc://"), credentials=ClientCredentials(token=TOKEN)).health(
            timeout_s=5)


def test_mutual_tls_requires_a_client_certificate(spark, pki):
    security = ServerSecurity.load(token_file=None, tls_cert=str(pki.server_cert), tls_key=str(pki.server_key),
                                   tls_client_ca=str(pki.ca))
    srv = _server(spark, security=security)
    try:
        ok = client(srv, token=None, ca=pki.ca.read_bytes(), cert=pki.client_cert.read_bytes(),
                    key=pki.client_key.read_bytes())
        assert ok.health().running == 0
        with pytest.raises(EngineUnavailable, match="ODF_ENGINE_CLIENT_CERT and ODF_ENGINE_CLIENT_KEY"):
            client(srv, token=None, ca=pki.ca.read_bytes()).health(timeout_s=10)
    finally:
        srv.shutdown(0)


def test_unix_socket_has_mode_0600_and_serves_requests(spark, tmp_path):
    path = tmp_path / "engine.sock"
    srv = _server(spark, socket_path=str(path))
    try:
        assert stat.S_ISSOCK(os.stat(path).st_mode) and stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert srv.url == f"unix://{path}"
        engine = remote_engine(srv.url)
        assert engine.health().running == 0
        result = engine.execute(ingest_request(tmp_path, "sock"))
        assert result.value.merge.num_records == 2
    finally:
        srv.shutdown(0)
    stale = _server(spark, socket_path=str(path))  # the socket a stopped engine left is taken over
    stale.shutdown(0)


def test_serve_refuses_a_non_loopback_address_without_tls_and_a_token_before_spark_starts(dirs, pki):
    # a spark-submit that leaves a mark: every refusal below must come before Spark is started
    started = dirs["pki"] / "spark-started"
    fake = dirs["pki"] / "fake-spark-submit"
    fake.write_text(f"#!/bin/sh\ntouch {started}\nexit 1\n")
    fake.chmod(0o755)

    def serve(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "odf_core.cli", "engine", "serve", "--port", "1",
                               "--spark-submit", str(fake), *args], capture_output=True, text=True, timeout=60)

    r = serve("--host", "0.0.0.0")
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr == ("odf: error: refusing to listen on 0.0.0.0, which is not a loopback address, without TLS "
                        "(--tls-cert and --tls-key) and a token (--token-file); pass --insecure to listen anyway\n")
    r = serve("--host", "0.0.0.0", "--token-file", str(dirs["pki"] / "token"))
    assert r.returncode == 2 and "without TLS (--tls-cert and --tls-key);" in r.stderr
    r = serve("--host", "0.0.0.0", "--tls-cert", str(pki.server_cert), "--tls-key", str(pki.server_key))
    assert r.returncode == 2 and "without a token (--token-file);" in r.stderr
    r = serve("--tls-cert", str(pki.server_cert))
    assert (r.returncode, r.stderr) == (2, "odf: error: --tls-cert and --tls-key go together: --tls-key is "
                                           "missing\n")
    r = serve("--token-file", str(dirs["pki"] / "missing"))
    assert r.returncode == 2 and r.stderr.startswith("odf: error: --token-file ") and "No such file" in r.stderr
    assert not started.exists()  # no JVM was started
    # the mark works: a serve that passes the checks does run the given spark-submit
    r = serve("--host", "127.0.0.1")
    assert r.returncode != 0 and started.exists(), r.stderr
    # every flag these messages name exists
    from odf_core.cli import build_parser
    from odf_core.engine.serve import Guard

    args = build_parser().parse_args(["engine", "serve", "--host", "0.0.0.0", "--insecure", "--tls-client-ca", "x",
                                      "--socket", "s", "--allow-path", "d", "--request-timeout", "5"])
    assert args.insecure and args.allow_path == ["d"] and args.request_timeout == 5
    Guard(insecure=True).check("0.0.0.0")


def test_cli_status_over_tls_with_a_token_file(tls, pki, dirs):
    env = {**os.environ, CA_FILE_ENV: str(pki.ca)}
    env.pop("ODF_ENGINE_TOKEN_FILE", None)

    def status(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "odf_core.cli", "engine", "status", "--engine", tls.url, *args],
                              capture_output=True, text=True, timeout=60, env=env)

    r = status("--engine-token-file", str(dirs["pki"] / "token"))
    assert r.returncode == 0 and r.stdout.startswith(f"{tls.url}: up "), r.stderr
    r = status()
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "refused the call" in r.stderr, r.stderr
    r = status("--engine-token-file", str(dirs["pki"] / "wrong-token"))
    assert r.returncode == 1 and "refused the call" in r.stderr


def test_a_derivative_pulled_through_a_tls_engine_with_a_token(tls, pki, dirs, tmp_path, monkeypatch, capsys):
    """The small graph's derivative (big-cities over cities) by ``odf pull --engine grpcs://…``."""
    from odf_core.workspace import Workspace

    from ...airflow_provider_odf.small_graph import (
        big_cities,
        write_dag_folder,
        write_served_files,
    )

    served = write_served_files(tmp_path / "served")
    graph = write_dag_folder(tmp_path / "dags", f"file://{served}", "", with_flaky=False)
    monkeypatch.setenv(CA_FILE_ENV, str(pki.ca))
    monkeypatch.delenv("ODF_ENGINE_URL", raising=False)
    ws = str(tmp_path / "ws")
    flags = ["--engine", tls.url, "--engine-token-file", str(dirs["pki"] / "token")]
    assert odf_main(["-w", ws, "init"]) == 0
    assert odf_main(["-w", ws, "add", "-r", str(tmp_path / "dags" / "datasets"), *flags]) == 0
    capsys.readouterr()
    # without the token the engine refuses the first Spark step: one line, the dataset unchanged
    assert odf_main(["-w", ws, "pull", graph.big_cities, "--recursive", "--engine", tls.url]) == 1
    err = capsys.readouterr().err
    assert "refused the call" in err and err.count("\n") == 1, err
    assert Workspace.open(ws).get(graph.cities).state().num_records == 0
    assert odf_main(["-w", ws, "pull", graph.big_cities, "--recursive", *flags]) == 0, capsys.readouterr().err
    assert Workspace.open(ws).get(graph.big_cities).state().num_records == len(big_cities())


@pytest.mark.slow
def test_odf_engine_serve_with_a_socket_a_token_and_roots_as_users_run_it(dirs, tmp_path):
    """The launcher passes the security flags on to the engine's own driver (spark-submit): readiness on the socket,
    the token and the roots enforced there, SIGTERM still a clean stop."""
    import signal

    sock, log, token = tmp_path / "e.sock", tmp_path / "engine.log", dirs["pki"] / "token"
    proc = subprocess.Popen([sys.executable, "-m", "odf_core.cli", "engine", "serve", "--master", "local[1]",
                             "--socket", str(sock), "--token-file", str(token), "--allow-path", str(tmp_path),
                             "--request-timeout", "600"], stdout=subprocess.DEVNULL, stderr=log.open("w"))
    try:
        deadline = time.monotonic() + 240
        while "odf engine ready" not in log.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
        assert f"odf engine ready at unix://{sock} " in log.read_text()
        assert stat.S_IMODE(os.stat(sock).st_mode) == 0o600
        env = {k: v for k, v in os.environ.items() if not k.startswith("ODF_ENGINE_")}

        def status(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run([sys.executable, "-m", "odf_core.cli", "engine", "status", "--engine",
                                   f"unix://{sock}", *args], capture_output=True, text=True, timeout=60, env=env)

        assert status("--engine-token-file", str(token)).returncode == 0
        assert "refused the call" in status().stderr
        engine = remote_engine(f"unix://{sock}", credentials=ClientCredentials(token=TOKEN))
        pq.write_table(pa.table({"v": [1]}), tmp_path / "in.parquet")
        with pytest.raises(EngineError, match="output_data_path .* outside the engine's allowed roots"):
            engine.execute(raw_query(dirs, str(dirs["outside"] / "via-serve.parquet"), (str(tmp_path / "in.parquet"),)))
        assert not (dirs["outside"] / "via-serve.parquet").exists()
        assert "allowed roots: " + str(tmp_path) in log.read_text()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(120) == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
