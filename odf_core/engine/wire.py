"""The gRPC wire of the engine: service and method names, and the one-field protobuf messages they carry.

Two services on one server:

* ``engine.Engine`` — the ODF engine protocol as the reference implementation speaks it (kamu-cli's
  ``engine.proto``): ``ExecuteRawQuery`` and ``ExecuteTransform``, server-streaming, each message
  ``{ bytes flatbuffer = 1; }`` holding the spec's FlatBuffers table (``RawQueryRequest``/``TransformRequest``, answered
  with ``RawQueryResponseRoot``/``TransformResponseRoot``). Either side can drive the other's engine.
* ``odf.engine.OdfEngine`` — what the spec leaves to the coordinator: ``Execute`` (any request of
  :mod:`odf_core.engine.protocol`, as an ``EngineRequestRoot``, answered with an ``EngineResponseRoot``) and
  ``Health``, unary, with the same one-field message shape.

The messages are built from a descriptor at run time with the protobuf library (no generated code to keep in step);
:data:`PROTO` is the same definition as ``.proto`` text, for anyone building a client in another language.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

SPEC_SERVICE = "engine.Engine"
ODF_SERVICE = "odf.engine.OdfEngine"
EXECUTE_TRANSFORM = f"/{SPEC_SERVICE}/ExecuteTransform"
EXECUTE_RAW_QUERY = f"/{SPEC_SERVICE}/ExecuteRawQuery"
EXECUTE = f"/{ODF_SERVICE}/Execute"
HEALTH = f"/{ODF_SERVICE}/Health"
DEFAULT_PORT = 5544
MAX_MESSAGE_BYTES = 256 << 20  # SQL results
MAX_REQUEST_BYTES = 16 << 20  # what the engine accepts: paths, queries and schemas, never data

_SPEC_MESSAGES = ("RawQueryRequest", "RawQueryResponse", "TransformRequest", "TransformResponse")

PROTO = """syntax = "proto3";
package engine;
service Engine {
  rpc ExecuteRawQuery(RawQueryRequest) returns (stream RawQueryResponse);
  rpc ExecuteTransform(TransformRequest) returns (stream TransformResponse);
}
message RawQueryRequest { bytes flatbuffer = 1; }
message RawQueryResponse { bytes flatbuffer = 1; }
message TransformRequest { bytes flatbuffer = 1; }
message TransformResponse { bytes flatbuffer = 1; }

// odf_engine.proto
syntax = "proto3";
package odf.engine;
service OdfEngine {
  rpc Execute(Envelope) returns (Envelope);  // EngineRequestRoot -> EngineResponseRoot (FlatBuffers)
  rpc Health(Envelope) returns (Envelope);   // HealthRequest -> HealthResponse, in the same envelopes
}
message Envelope { bytes flatbuffer = 1; }
"""


@cache
def _classes() -> dict[str, Any]:
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    pool = descriptor_pool.DescriptorPool()
    out: dict[str, Any] = {}
    for package, names in (("engine", _SPEC_MESSAGES), ("odf.engine", ("Envelope",))):
        fdp = descriptor_pb2.FileDescriptorProto(name=f"{package.replace('.', '_')}.proto", package=package,
                                                 syntax="proto3")
        for name in names:
            m = fdp.message_type.add(name=name)
            m.field.add(name="flatbuffer", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_BYTES,
                        label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
        pool.Add(fdp)
        for name in names:
            out[name] = message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{package}.{name}"))
    return out


def serializer(message: str) -> Callable[[bytes], bytes]:
    """FlatBuffers bytes -> the wire message ``message`` (a one-field protobuf)."""
    cls = _classes()[message]
    return lambda fb: cls(flatbuffer=fb).SerializeToString()


def deserializer(message: str) -> Callable[[bytes], bytes]:
    """The wire message ``message`` -> its FlatBuffers bytes."""
    cls = _classes()[message]
    return lambda data: cls.FromString(data).flatbuffer


def channel_options() -> list[tuple[str, int]]:
    """A client's: large answers (SQL results) come back; a request beyond the engine's limit fails here first."""
    return [("grpc.max_send_message_length", MAX_REQUEST_BYTES),
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)]


def server_options() -> list[tuple[str, int]]:
    """The engine's: a request larger than :data:`MAX_REQUEST_BYTES` is refused before it is read whole."""
    return [("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_receive_message_length", MAX_REQUEST_BYTES)]


URL_FORMS = "grpc://HOST:PORT, grpcs://HOST:PORT (TLS) or unix:///PATH"


@dataclass(frozen=True)
class EngineAddress:
    """Where a client dials: ``target`` as grpc takes it, and whether the channel is TLS."""

    target: str
    tls: bool

    @property
    def unix(self) -> bool:
        return self.target.startswith("unix:")


def parse_url(url: str) -> EngineAddress:
    """``grpc://HOST:PORT``, ``grpcs://HOST:PORT`` or ``unix:///PATH`` -> what grpc dials (a bare ``HOST:PORT`` is
    ``grpc://``)."""
    from odf_core.engine.base import EngineError

    text = url.strip()
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = "grpc", text
    if scheme == "unix":
        if not rest.startswith("/") or len(rest) < 2 or any(c.isspace() for c in rest):
            raise EngineError(f"engine URL {url!r}: expected unix:///ABSOLUTE/PATH")
        return EngineAddress(f"unix:{rest}", tls=False)
    rest = rest.rstrip("/")
    host, sep, port = rest.rpartition(":")
    if scheme not in ("grpc", "grpcs") or not sep or not host or not port.isdigit() or "/" in host \
            or any(c.isspace() for c in rest):
        raise EngineError(f"engine URL {url!r}: expected {URL_FORMS}")
    return EngineAddress(rest, tls=scheme == "grpcs")
