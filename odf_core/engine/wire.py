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

from functools import cache
from typing import Any, Callable

SPEC_SERVICE = "engine.Engine"
ODF_SERVICE = "odf.engine.OdfEngine"
EXECUTE_TRANSFORM = f"/{SPEC_SERVICE}/ExecuteTransform"
EXECUTE_RAW_QUERY = f"/{SPEC_SERVICE}/ExecuteRawQuery"
EXECUTE = f"/{ODF_SERVICE}/Execute"
HEALTH = f"/{ODF_SERVICE}/Health"
DEFAULT_PORT = 5544
MAX_MESSAGE_BYTES = 256 << 20  # SQL results and large requests

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
    return [("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)]


def parse_url(url: str) -> str:
    """``grpc://HOST:PORT`` -> ``HOST:PORT`` (what grpc dials)."""
    from odf_core.engine.base import EngineError

    text = url.strip()
    if text.startswith("grpc://"):
        text = text[len("grpc://"):]
    text = text.rstrip("/")
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise EngineError(f"engine URL {url!r}: expected grpc://HOST:PORT")
    return text
