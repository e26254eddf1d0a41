"""A client of a long-lived engine (``odf engine serve``): every request is one gRPC call.

No JVM in the client: an ``odf`` command or an Airflow task costs its own Python work plus the engine's work on an
already warm Spark driver. The engine reads and writes the same paths the coordinator names, so both must see the
same files (one machine, or a shared mount).

``grpcs://`` dials TLS (the engine's CA from :class:`~odf_core.engine.credentials.ClientCredentials`, and a client
certificate when the engine demands one), ``unix:///PATH`` a local socket; a token goes with every call as
``authorization: Bearer …``. What the engine refuses (token, path outside its roots, size, its own deadline) comes
back as one line naming the engine and what to change.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from odf_core.engine import wire
from odf_core.engine.base import Engine, EngineBusy, EngineError, EngineTimeout, EngineUnavailable
from odf_core.engine.credentials import CA_FILE_ENV, CLIENT_CERT_ENV, CLIENT_KEY_ENV, TOKEN_FILE_ENV, \
    ClientCredentials, bearer
from odf_core.engine.protocol import (
    EngineRequest,
    EngineResponse,
    HealthRequest,
    HealthResponse,
    decode_response,
    encode_request,
)
from odf_core.errors import DecodeError


@dataclass
class RemoteEngine(Engine):
    url: str
    timeout_s: float | None = None
    keeps_reads: bool = True
    credentials: ClientCredentials = field(default_factory=ClientCredentials, repr=False)
    _channel: Any = field(default=None, repr=False)
    _call: Any = field(default=None, repr=False)
    _killed: bool = field(default=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def describe(self) -> str:
        return f"engine {self.url}"

    def _stub(self, method: str) -> Any:
        import grpc

        if self._channel is None:
            address, creds = wire.parse_url(self.url), self.credentials
            if address.tls:
                tls = grpc.ssl_channel_credentials(root_certificates=creds.ca, private_key=creds.key,
                                                   certificate_chain=creds.cert)
                self._channel = grpc.secure_channel(address.target, tls, options=wire.channel_options())
            else:
                self._channel = grpc.insecure_channel(address.target, options=wire.channel_options())
        return self._channel.unary_unary(method, request_serializer=wire.serializer("Envelope"),
                                         response_deserializer=wire.deserializer("Envelope"))

    def _metadata(self) -> tuple[tuple[str, str], ...] | None:
        return (bearer(self.credentials.token),) if self.credentials.token else None

    def _call_engine(self, method: str, payload: bytes, what: str, timeout_s: float | None) -> bytes:
        import grpc

        with self._lock:
            if self._killed:
                raise EngineError(f"{what} was not started: the task was killed")
            future = self._stub(method).future(payload, timeout=timeout_s, metadata=self._metadata())
            self._call = future
        try:
            return future.result()
        except grpc.FutureCancelledError:
            raise EngineError(f"{what} was cancelled (the task was killed); the engine stops its Spark jobs") from None
        except grpc.RpcError as e:
            raise self._error(e, what, timeout_s) from None
        finally:
            self._call = None

    def _error(self, e: Any, what: str, timeout_s: float | None) -> EngineError:
        import grpc

        code, details = e.code(), (e.details() or "").strip()
        details = (details.splitlines() or [""])[0]
        if code == grpc.StatusCode.UNAUTHENTICATED:
            return EngineError(f"{what}: the engine at {self.url} refused the call: {details}; give it the engine's "
                               f"token with --engine-token-file or {TOKEN_FILE_ENV}")
        if code == grpc.StatusCode.PERMISSION_DENIED:
            return EngineError(f"{what}: the engine at {self.url} refused the request: {details}")
        if code == grpc.StatusCode.UNAVAILABLE and wire.parse_url(self.url).tls and \
                "connection refused" not in details.lower():  # a failed handshake reads "Socket closed" or so
            return EngineUnavailable(f"{what}: no TLS connection to the engine at {self.url} ({details}); check "
                                     f"{CA_FILE_ENV} (the CA of the engine's certificate) and, when the engine "
                                     f"demands client certificates, {CLIENT_CERT_ENV} and {CLIENT_KEY_ENV}")
        if code == grpc.StatusCode.RESOURCE_EXHAUSTED and "larger than max" in details.lower():
            return EngineError(f"{what}: the request is larger than the engine accepts ({details})")
        if code == grpc.StatusCode.DEADLINE_EXCEEDED and "--request-timeout" in details:
            return EngineTimeout(f"{what}: {details} (engine at {self.url})")
        if code == grpc.StatusCode.UNAVAILABLE:
            return EngineUnavailable(f"{what}: no engine answers at {self.url} ({details}); start one with "
                                     "'odf engine serve' or check the address")
        if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
            return EngineBusy(f"{what}: the engine at {self.url} is busy ({details}); try again later or raise its "
                              "--max-concurrency")
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            after = f" after {timeout_s:g} s" if timeout_s else ""
            return EngineTimeout(f"{what} timed out{after} on the engine at {self.url}; the request was cancelled "
                                 "there")
        if code == grpc.StatusCode.CANCELLED:
            return EngineError(f"{what} was cancelled ({details or 'by the client'})")
        return EngineError(f"{what}: the engine at {self.url} failed: {code.name}: {details}")

    def execute(self, request: EngineRequest, *, what: str = "engine request") -> EngineResponse:
        data = self._call_engine(wire.EXECUTE, encode_request(request), what, self.timeout_s)
        try:
            return decode_response(data)
        except DecodeError as e:
            raise EngineError(f"{what}: unreadable answer from the engine at {self.url}: {e}") from None

    def health(self, timeout_s: float = 10.0) -> HealthResponse:
        data = self._call_engine(wire.HEALTH, encode_request(HealthRequest()), "engine health check", timeout_s)
        response = decode_response(data)
        if not isinstance(response, HealthResponse):
            raise EngineError(f"engine health check: unexpected answer {type(response).__name__}")
        return response

    def kill(self) -> None:
        """Cancel the running call: the engine stops the request's Spark jobs and discards its output."""
        with self._lock:
            self._killed = True
            call = self._call
        if call is not None:
            call.cancel()

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None
