"""A client of a long-lived engine (``odf engine serve``): every request is one gRPC call.

No JVM in the client: an ``odf`` command or an Airflow task costs its own Python work plus the engine's work on an
already warm Spark driver. The engine reads and writes the same paths the coordinator names, so both must see the
same files (one machine, or a shared mount).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from odf_core.engine import wire
from odf_core.engine.base import Engine, EngineBusy, EngineError, EngineTimeout, EngineUnavailable
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
    _channel: Any = field(default=None, repr=False)
    _call: Any = field(default=None, repr=False)
    _killed: bool = field(default=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def describe(self) -> str:
        return f"engine {self.url}"

    def _stub(self, method: str) -> Any:
        import grpc

        if self._channel is None:
            self._channel = grpc.insecure_channel(wire.parse_url(self.url), options=wire.channel_options())
        return self._channel.unary_unary(method, request_serializer=wire.serializer("Envelope"),
                                         response_deserializer=wire.deserializer("Envelope"))

    def _call_engine(self, method: str, payload: bytes, what: str, timeout_s: float | None) -> bytes:
        import grpc

        with self._lock:
            if self._killed:
                raise EngineError(f"{what} was not started: the task was killed")
            future = self._stub(method).future(payload, timeout=timeout_s)
            self._call = future
        try:
            return future.result()
        except grpc.FutureCancelledError:
            raise EngineError(f"{what} was cancelled (the task was killed); the engine stops its Spark jobs") from None
        except grpc.RpcError as e:
            raise self._error(e, what) from None
        finally:
            self._call = None

    def _error(self, e: Any, what: str) -> EngineError:
        import grpc

        code, details = e.code(), (e.details() or "").strip()
        if code == grpc.StatusCode.UNAVAILABLE:
            return EngineUnavailable(f"{what}: no engine answers at {self.url} ({details}); start one with "
                                     "'odf engine serve' or check the address")
        if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
            return EngineBusy(f"{what}: the engine at {self.url} is busy ({details}); try again later or raise its "
                              "--max-concurrency")
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return EngineTimeout(f"{what} timed out after {self.timeout_s:g} s on the engine at {self.url}; the "
                                 "request was cancelled there")
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
