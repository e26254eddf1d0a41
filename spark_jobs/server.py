"""The long-lived engine: one Spark driver serving every request over gRPC (``odf engine serve`` starts it with
spark-submit, so it runs wherever the one-shot jobs run: local, standalone, YARN, Kubernetes client mode).

Services and messages: :mod:`odf_core.engine.wire`. Each request runs in its own thread, Spark session and job
group; at most ``--max-concurrency`` run at once and as many more wait, beyond that a call is refused at once with
RESOURCE_EXHAUSTED ("engine busy"). A client that cancels or disconnects (an Airflow task killed) cancels its
request's Spark jobs, and the request's outputs are removed. SIGTERM stops accepting calls, lets running requests
finish for ``--drain-s`` seconds, cancels the rest, removes their outputs and stops Spark. Ready = accepting TCP.
With ``--idle-exit S`` the engine stops the same way once no request has run for S seconds (``ODF_ENGINE_URL=auto``:
:mod:`odf_core.engine.autostart`); a client touching the Unix socket file counts as use.

Security (docs/security.md): with ``--token-file`` every call of both services, Health too, must carry
``authorization: Bearer <token>`` (else UNAUTHENTICATED, before the request is even decoded); ``--tls-cert/--tls-key``
serve TLS, ``--tls-client-ca`` demands a client certificate; ``--socket`` serves on a Unix socket of mode 0600 only.
Every path a request names must lie under an allowed root (:mod:`odf_core.engine.confinement`; else
PERMISSION_DENIED, nothing read or written); a request running past ``--request-timeout`` is cancelled like a
client's cancel (DEADLINE_EXCEEDED). Requests larger than ``wire.MAX_REQUEST_BYTES`` are refused by gRPC.
"""
from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("odf.engine.server")


@dataclass
class Running:
    group: str
    what: str
    outputs: tuple[str, ...]
    cancelled: bool = False
    done: bool = False
    timed_out: bool = False
    started: float = field(default_factory=time.monotonic)


DEFAULT_REQUEST_TIMEOUT_S = 6 * 3600.0


def outputs_of(request: Any) -> tuple[str, ...]:
    """Files a request may leave behind; removed when it is cancelled or aborted (never after it answered)."""
    from odf_core.engine.protocol import IngestRequest, OdfTransformRequest
    from odf_core.metadata import RawQueryRequest, TransformRequest

    paths: list[str | None] = []
    if isinstance(request, IngestRequest):
        if request.read is not None:
            paths.append(request.read.output_path)
        if request.merge is not None:
            paths += [request.merge.output_path, request.merge.new_checkpoint_path]
        if request.keep_read_as:
            paths.append(os.path.join(request.work_dir, "read.parquet"))
    elif isinstance(request, (OdfTransformRequest, TransformRequest)):
        req = request.request if isinstance(request, OdfTransformRequest) else request
        paths += [req.new_data_path, req.new_checkpoint_path]
    elif isinstance(request, RawQueryRequest):
        paths.append(request.output_data_path)
    return tuple(p for p in paths if p)


def _jobs_note(spark: Any, group: str) -> str:
    """`` (N Spark jobs)``: how many jobs the request's job group ran (Spark's status store, one py4j call), for the
    request's log line; empty when Spark cannot say."""
    try:
        return f" ({len(spark.sparkContext.statusTracker().getJobIdsForGroup(group))} Spark jobs)"
    except Exception:  # noqa: BLE001 - a log detail: never fails the answered request
        return ""


def describe(request: Any) -> str:
    from odf_core.engine.protocol import IngestRequest, OdfTransformRequest

    if isinstance(request, IngestRequest):
        phases = "+".join(p for p, v in (("read", request.read), ("merge", request.merge)) if v is not None)
        return f"ingest {phases} of {request.dataset}"
    if isinstance(request, OdfTransformRequest):
        return f"transform of {request.request.dataset_alias}"
    return type(request).__name__


def token_check(token: str) -> Any:
    """A server interceptor: a call without the engine's bearer token is refused with UNAUTHENTICATED before its
    request is decoded or anything runs (both services, Health included)."""
    import grpc

    from odf_core.engine.credentials import token_matches

    class TokenCheck(grpc.ServerInterceptor):
        def intercept_service(self, continuation: Any, details: Any) -> Any:
            handler = continuation(details)
            if handler is None or token_matches(details.invocation_metadata, token):
                return handler
            log.warning("%s: refused a call without the engine's token", details.method)

            def deny(_request: Any, context: Any) -> Any:
                context.abort(grpc.StatusCode.UNAUTHENTICATED,
                              "missing or wrong engine token (authorization: Bearer <token>)")

            make = grpc.unary_stream_rpc_method_handler if handler.response_streaming \
                else grpc.unary_unary_rpc_method_handler
            return make(deny)  # no deserializer: the request's bytes are never decoded

    return TokenCheck()


class EngineServer:
    def __init__(self, spark: Any, host: str, port: int, max_concurrency: int, drain_s: float, *,
                 security: Any = None, roots: Any = None, socket_path: str | None = None,
                 request_timeout_s: float | None = DEFAULT_REQUEST_TIMEOUT_S) -> None:
        """``security``: a :class:`~odf_core.engine.credentials.ServerSecurity` (token, TLS); ``roots``: the
        :class:`~odf_core.engine.confinement.AllowedRoots` (default: working, temp and staging directories);
        ``socket_path``: serve on that Unix socket (mode 0600) instead of ``host:port``."""
        import grpc

        from odf_core.engine import wire
        from odf_core.engine.confinement import AllowedRoots
        from odf_core.engine.credentials import ServerSecurity
        from spark_jobs.ingest.kept import KeptReads

        self.spark, self.max_concurrency, self.drain_s = spark, max(1, max_concurrency), drain_s
        self.security = security or ServerSecurity()
        self.roots = roots or AllowedRoots.parse(None)
        self.request_timeout_s = request_timeout_s
        self.socket_path = socket_path
        self.kept = KeptReads()
        self.started = time.monotonic()
        self.last_used = self.started  # when the last request ended (the idle exit's clock)
        self._running: dict[str, Running] = {}
        self._waiting = 0
        self._lock = threading.Lock()
        self._slots = threading.Semaphore(self.max_concurrency)
        self._stopping = False
        workers = 2 * self.max_concurrency + 2  # running + waiting + two for health checks
        interceptors = [token_check(self.security.token)] if self.security.token else []
        self.server = grpc.server(ThreadPoolExecutor(max_workers=workers, thread_name_prefix="odf-engine"),
                                  interceptors=interceptors, options=wire.server_options(),
                                  maximum_concurrent_rpcs=workers)
        ser, de = wire.serializer, wire.deserializer
        self.server.add_generic_rpc_handlers((
            grpc.method_handlers_generic_handler(wire.SPEC_SERVICE, {
                "ExecuteTransform": grpc.unary_stream_rpc_method_handler(
                    self._spec_transform, request_deserializer=de("TransformRequest"),
                    response_serializer=ser("TransformResponse")),
                "ExecuteRawQuery": grpc.unary_stream_rpc_method_handler(
                    self._spec_raw_query, request_deserializer=de("RawQueryRequest"),
                    response_serializer=ser("RawQueryResponse")),
            }),
            grpc.method_handlers_generic_handler(wire.ODF_SERVICE, {
                "Execute": grpc.unary_unary_rpc_method_handler(
                    self._execute, request_deserializer=de("Envelope"), response_serializer=ser("Envelope")),
                "Health": grpc.unary_unary_rpc_method_handler(
                    self._health, request_deserializer=de("Envelope"), response_serializer=ser("Envelope")),
            }),
        ))
        if socket_path:
            self.port = self._bind_socket(socket_path)
        else:
            address = f"{host}:{port}"
            if self.security.tls:
                creds = grpc.ssl_server_credentials([(self.security.key, self.security.cert)],
                                                    root_certificates=self.security.client_ca,
                                                    require_client_auth=self.security.client_ca is not None)
                bound = self.server.add_secure_port(address, creds)
            else:
                bound = self.server.add_insecure_port(address)
            if bound == 0:
                raise OSError(f"cannot listen on {address}")
            self.port = bound

    def _bind_socket(self, path: str) -> int:
        """Listen on a Unix socket only its owner may open: created under umask 0177 (no moment with a wider mode),
        then set to 0600 explicitly. A stale socket left by a dead engine is replaced; a live one is not."""
        import socket
        import stat

        if os.path.lexists(path):
            if not stat.S_ISSOCK(os.lstat(path).st_mode):
                raise OSError(f"--socket {path}: exists and is not a socket")
            with socket.socket(socket.AF_UNIX) as probe:
                try:
                    probe.connect(path)
                except OSError:
                    os.remove(path)  # nobody listens: a dead engine's
                else:
                    raise OSError(f"--socket {path}: another engine is listening there")
        old = os.umask(0o177)  # process-wide for this moment: a file another thread creates now gets 0600, no wider
        try:
            bound = self.server.add_insecure_port(f"unix:{path}")
        finally:
            os.umask(old)
        if bound == 0 or not os.path.exists(path):
            raise OSError(f"cannot listen on the Unix socket {path}")
        os.chmod(path, 0o600)
        return 0

    @property
    def url(self) -> str:
        """What clients name: ``unix:///path``, ``grpcs://127.0.0.1:PORT`` or ``grpc://…``."""
        if self.socket_path:
            return f"unix://{os.path.abspath(self.socket_path)}"
        return f"{'grpcs' if self.security.tls else 'grpc'}://127.0.0.1:{self.port}"

    # -- handlers -------------------------------------------------------------------------------------------------

    def _admit(self, context: Any) -> None:
        import grpc

        with self._lock:
            if self._stopping:
                context.abort(grpc.StatusCode.UNAVAILABLE, "the engine is shutting down")
            busy = len(self._running) + self._waiting
            if busy >= 2 * self.max_concurrency:
                context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                              f"engine busy: {len(self._running)} request(s) running and {self._waiting} waiting "
                              f"(max-concurrency {self.max_concurrency})")
            self._waiting += 1

    def _confine(self, request: Any, context: Any) -> None:
        """Refuse (PERMISSION_DENIED) a request naming a path outside the allowed roots, before anything runs."""
        import grpc

        from odf_core.engine.confinement import PathRefused

        try:
            self.roots.check(request, describe(request))
        except PathRefused as e:
            log.warning("%s", e)
            context.abort(grpc.StatusCode.PERMISSION_DENIED, str(e))

    def _run(self, request: Any, context: Any, handler: Callable[[Any], Any]) -> Any:
        """Run one request in its own job group; cancelled with its call or past the request timeout, outputs
        removed when it does not answer."""
        import grpc

        from spark_jobs.session import cancel, job_group

        self._confine(request, context)
        self._admit(context)
        rid = uuid.uuid4().hex[:12]
        try:
            self._slots.acquire()
        finally:
            with self._lock:
                self._waiting -= 1
        what = describe(request)
        state = Running(f"odf-{rid}", what, outputs_of(request))
        with self._lock:
            self._running[rid] = state

        def keep_cancelling() -> None:
            """Spark cancels only the jobs running at that moment: a request cancelled between two jobs (while it
            plans, or reads a schema) would start its next job anyway, so the group is cancelled until it ends."""
            while not state.done:
                cancel(self.spark, state.group)
                time.sleep(0.2)

        def on_done() -> None:  # gRPC calls this when the call ends: answered, cancelled or the client went away
            if not state.done:
                state.cancelled = True
                threading.Thread(target=keep_cancelling, name=f"cancel-{rid}", daemon=True).start()

        def expire() -> None:  # the engine's own deadline: cancelled as a client's cancel is
            if not state.done:
                state.timed_out = True
                on_done()

        timer = None
        if self.request_timeout_s:
            timer = threading.Timer(self.request_timeout_s, expire)
            timer.daemon = True
            timer.start()
        timeout_message = (f"the request ran longer than the engine's --request-timeout of "
                           f"{self.request_timeout_s or 0:g} s and was cancelled; its outputs were removed")
        context.add_callback(on_done)
        try:
            if not context.is_active():
                state.cancelled = True
                raise RuntimeError("cancelled before it started")
            with job_group(self.spark, what, state.group):
                response = handler(request)
            if state.timed_out:
                context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, timeout_message)
            if state.cancelled or not context.is_active():
                state.cancelled = True
                context.abort(grpc.StatusCode.CANCELLED, "the request was cancelled")
            answer = getattr(response, "value", response)
            log.info("%s: answered %s in %.2f s%s", what, type(answer).__name__, time.monotonic() - state.started,
                     _jobs_note(self.spark, state.group))
            if "Error" in type(answer).__name__:  # the failure's own words in the server's log, not only its kind
                log.warning("%s: %s", what, (str(getattr(answer, "message", "")).strip().splitlines() or [""])[0])
            return response
        except Exception:
            if state.cancelled:
                self._remove_outputs(state)
                log.info("%s: %s after %.2f s, its outputs removed", what,
                         "timed out" if state.timed_out else "cancelled", time.monotonic() - state.started)
            if state.timed_out:
                context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, timeout_message)
            raise
        finally:
            if timer is not None:
                timer.cancel()
            state.done = True
            with self._lock:
                self._running.pop(rid, None)
                self.last_used = time.monotonic()
            self._slots.release()

    @staticmethod
    def _remove_outputs(state: Running) -> None:
        for p in state.outputs:
            for path in (p, *[f"{p}.tmp"]):
                try:
                    os.remove(path)
                except OSError:
                    pass

    def _execute(self, data: bytes, context: Any) -> bytes:
        from odf_core.engine.protocol import HealthRequest, decode_request, encode_response
        from spark_jobs.dispatch import handle

        request = decode_request(data)
        if isinstance(request, HealthRequest):
            return encode_response(self.health())
        return encode_response(self._run(request, context, lambda r: handle(self.spark, r, kept=self.kept)))

    def _health(self, data: bytes, context: Any) -> bytes:
        import grpc

        from odf_core.engine.protocol import encode_response

        if self._stopping:  # a client asking whether it may use this engine: no, it is going away
            context.abort(grpc.StatusCode.UNAVAILABLE, "the engine is shutting down")
        return encode_response(self.health())

    def _spec_transform(self, data: bytes, context: Any) -> Iterator[bytes]:
        from odf_core.metadata import TransformRequest, TransformResponseRoot
        from odf_core.metadata.flatbuffers_serde import decode_root, encode_root
        from spark_jobs.transform import execute_transform

        request = decode_root(data, TransformRequest, "TransformRequest")
        response = self._run(request, context, lambda r: execute_transform(self.spark, r))
        yield encode_root(TransformResponseRoot(value=response.response))

    def _spec_raw_query(self, data: bytes, context: Any) -> Iterator[bytes]:
        from odf_core.metadata import RawQueryRequest, RawQueryResponseRoot
        from odf_core.metadata.flatbuffers_serde import decode_root, encode_root
        from spark_jobs.queries import raw_query

        request = decode_root(data, RawQueryRequest, "RawQueryRequest")
        response = self._run(request, context, lambda r: raw_query(self.spark, r))
        yield encode_root(RawQueryResponseRoot(value=response))

    def health(self) -> Any:
        import pyspark

        from odf_core.engine.protocol import HealthResponse
        from spark_jobs.dispatch import engine_version

        with self._lock:
            running, queued = len(self._running), self._waiting
        return HealthResponse(engine_version=engine_version(), spark_version=pyspark.__version__,
                              master=self.spark.sparkContext.master, running=running, queued=queued,
                              max_concurrency=self.max_concurrency, uptime_s=int(time.monotonic() - self.started))

    # -- lifecycle --------------------------------------------------------------------------------------------------

    def start(self) -> None:
        self.server.start()

    def idle_s(self) -> float:
        """Seconds without use: since the last request ended, or since a client last touched the Unix socket file
        (``odf_core.engine.autostart`` does when it picks this engine, before its first call); 0 while one runs."""
        with self._lock:
            if self._running or self._waiting:
                return 0.0
            idle = time.monotonic() - self.last_used
        if self.socket_path:
            try:
                idle = min(idle, time.time() - os.stat(self.socket_path).st_mtime)
            except OSError:
                pass
        return max(idle, 0.0)

    def stop_if_idle(self, seconds: float) -> bool:
        """Refuse new calls from now on if the engine has been idle for ``seconds`` (checked and decided under the
        admission lock: a request is either admitted before and keeps the engine up, or refused as 'shutting
        down' without running)."""
        if self.idle_s() < seconds:
            return False
        with self._lock:
            if self._running or self._waiting:
                return False
            self._stopping = True
        return True

    def shutdown(self, grace_s: float | None = None) -> None:
        """Stop accepting calls; running requests get ``grace_s`` to finish, then their calls are cancelled (their
        Spark jobs too, and their outputs removed); returns when every request has ended."""
        with self._lock:
            self._stopping = True
        self.server.stop(self.drain_s if grace_s is None else grace_s).wait()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with self._lock:
                if not self._running:
                    break
                from spark_jobs.session import cancel

                for state in self._running.values():  # every round: a request may start another job meanwhile
                    state.cancelled = True
                    cancel(self.spark, state.group)
            time.sleep(0.05)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="spark-submit server.py")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=5544)
    p.add_argument("--max-concurrency", type=int, default=4)
    p.add_argument("--drain-s", type=float, default=30.0)
    p.add_argument("--pid-file")
    p.add_argument("--token-file")
    p.add_argument("--tls-cert")
    p.add_argument("--tls-key")
    p.add_argument("--tls-client-ca")
    p.add_argument("--socket")
    p.add_argument("--allow-path", action="append", default=[])
    p.add_argument("--request-timeout", type=float, default=DEFAULT_REQUEST_TIMEOUT_S)
    p.add_argument("--insecure", action="store_true")
    p.add_argument("--idle-exit", type=float, default=0.0)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr)
    from odf_core.engine.base import EngineError
    from odf_core.engine.confinement import AllowedRoots
    from odf_core.engine.credentials import ServerSecurity, listen_problem

    try:  # the engine checks its own settings too (server.py may be started without the launcher)
        security = ServerSecurity.load(token_file=args.token_file, tls_cert=args.tls_cert, tls_key=args.tls_key,
                                       tls_client_ca=args.tls_client_ca)
        roots = AllowedRoots.parse(args.allow_path)
    except EngineError as e:
        print(f"odf engine: error: {e}", file=sys.stderr)
        return 2
    problem = None if args.socket else listen_problem(args.host, security, insecure=args.insecure)
    if problem:
        print(f"odf engine: error: {problem}", file=sys.stderr)
        return 2
    from spark_jobs.session import create_session
    from spark_jobs.transform import plan_cache

    spark = create_session("odf-engine")
    server = EngineServer(spark, args.host, args.port, args.max_concurrency, args.drain_s, security=security,
                          roots=roots, socket_path=args.socket, request_timeout_s=args.request_timeout or None)
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        log.info("signal %d: draining (up to %g s)", signum, args.drain_s)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    server.start()
    if args.pid_file:
        with open(args.pid_file, "w") as f:
            f.write(str(os.getpid()))
    where = f"unix:{args.socket}" if args.socket else f"{args.host}:{server.port}"
    log.info("odf engine listening on %s (Spark %s, master %s, max-concurrency %d; %s, %s%s)", where,
             spark.version, spark.sparkContext.master, server.max_concurrency, "TLS" if security.tls else "no TLS",
             "token required" if security.token else "no token",
             ", client certificate required" if security.client_ca else "")
    log.info("allowed roots: %s", roots.describe())
    tick = min(1.0, args.idle_exit / 4) if args.idle_exit > 0 else 1.0
    while not stop.wait(tick):
        if args.idle_exit > 0 and server.stop_if_idle(args.idle_exit):
            log.info("no request for %g s: stopping (--idle-exit)", args.idle_exit)
            break
    server.shutdown()
    plan_cache.clear()  # its JVM objects are released while the gateway is still up
    spark.stop()
    log.info("odf engine stopped")
    return 0


if __name__ == "__main__":
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.exit(main())
