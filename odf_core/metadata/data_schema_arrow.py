"""The ODF ``DataSchema`` and Arrow schemas, both ways, with the reference implementation's type mapping.

A ``SetDataSchema`` written by the current reference carries only a ``DataSchema``; the engine and the chain rules
work with Arrow schemas (the bytes v0.34.1's ``SetDataSchema.schema`` holds), so :func:`arrow_schema_bytes` gives
every ``SetDataSchema`` its Arrow form: the raw schema when the block has one (its bytes, verbatim), else the
``DataSchema`` mapped to Arrow.

The mapping is the logical one the reference uses (``Option`` = nullable, ``Timestamp``/``Time``/``Duration`` in
milliseconds and UTC unless the type says otherwise, a decimal of precision over 38 is 256-bit). Arrow encodings in
``extra`` (``arrow.apache.org/bufferEncoding`` etc.) choose the physical Arrow type where the engine has one: 64-bit
offsets give ``large_*``, a date in milliseconds ``date64``, a decimal bit width its decimal; view encodings (which
Spark does not read) are the contiguous type of the same logical type. Going from Arrow to a ``DataSchema`` keeps
logical types only, as the reference does when it upgrades a legacy schema.
"""
from __future__ import annotations

import pyarrow as pa

from odf_core.errors import MetadataError
from odf_core.metadata.arrow_schema import encode_arrow_schema
from odf_core.metadata import data_schema as ds
from odf_core.metadata.data_schema import DataField, DataSchema, ExtraAttributes, TimeUnit

_UNIT = {TimeUnit.SECOND: "s", TimeUnit.MILLISECOND: "ms", TimeUnit.MICROSECOND: "us", TimeUnit.NANOSECOND: "ns"}
_ODF_UNIT = {v: k for k, v in _UNIT.items()}
_BUFFER = "arrow.apache.org/bufferEncoding"
_DATE = "arrow.apache.org/dateEncoding"
_DECIMAL = "arrow.apache.org/decimalEncoding"
_MAX_PRECISION_128, _MAX_PRECISION_256 = 38, 76

_SIMPLE = {
    ds.DataTypeBool: pa.bool_(),
    ds.DataTypeFloat16: pa.float16(),
    ds.DataTypeFloat32: pa.float32(),
    ds.DataTypeFloat64: pa.float64(),
    ds.DataTypeInt8: pa.int8(),
    ds.DataTypeInt16: pa.int16(),
    ds.DataTypeInt32: pa.int32(),
    ds.DataTypeInt64: pa.int64(),
    ds.DataTypeUInt8: pa.uint8(),
    ds.DataTypeUInt16: pa.uint16(),
    ds.DataTypeUInt32: pa.uint32(),
    ds.DataTypeUInt64: pa.uint64(),
    ds.DataTypeNull: pa.null(),
}


class UnsupportedSchema(MetadataError):
    pass


def _unit(unit: TimeUnit | None) -> str:
    return _UNIT[unit or TimeUnit.MILLISECOND]


def _arrow_type(t, extra: dict, where: str) -> tuple[pa.DataType, bool]:
    """(Arrow type, nullable) of a DataType; ``extra`` is the field's attributes (its Arrow encodings)."""
    if isinstance(t, ds.DataTypeOption):
        inner, nullable = _arrow_type(t.inner, extra, where)
        if nullable:
            raise UnsupportedSchema(f"{where}: nested Option types are not supported")
        return inner, True
    buffer = extra.get(_BUFFER) or {}
    wide = isinstance(buffer, dict) and buffer.get("offsetBitWidth") == 64
    if type(t) in _SIMPLE:
        return _SIMPLE[type(t)], False
    if isinstance(t, ds.DataTypeString):
        return (pa.large_string() if wide else pa.string()), False
    if isinstance(t, ds.DataTypeBinary):
        if t.fixed_length is not None:
            return pa.binary(t.fixed_length), False
        return (pa.large_binary() if wide else pa.binary()), False
    if isinstance(t, ds.DataTypeDate):
        unit = (extra.get(_DATE) or {}).get("unit") if isinstance(extra.get(_DATE), dict) else None
        return (pa.date64() if unit == "Millisecond" else pa.date32()), False
    if isinstance(t, ds.DataTypeDecimal):
        bits = (extra.get(_DECIMAL) or {}).get("bitWidth") if isinstance(extra.get(_DECIMAL), dict) else None
        if bits is None:
            if t.precision > _MAX_PRECISION_256:
                raise UnsupportedSchema(f"{where}: decimal precision {t.precision} is over Arrow's maximum of 76")
            bits = 128 if t.precision <= _MAX_PRECISION_128 else 256
        make = {32: pa.decimal32, 64: pa.decimal64, 128: pa.decimal128, 256: pa.decimal256}.get(bits)
        if make is None:
            raise UnsupportedSchema(f"{where}: decimal bit width {bits} is not one of 32, 64, 128, 256")
        try:
            return make(t.precision, t.scale), False
        except (ValueError, pa.ArrowInvalid) as e:
            raise UnsupportedSchema(f"{where}: {e}") from None
    if isinstance(t, ds.DataTypeDuration):
        return pa.duration(_unit(t.unit)), False
    if isinstance(t, ds.DataTypeTime):
        unit = _unit(t.unit)
        return (pa.time32(unit) if unit in ("s", "ms") else pa.time64(unit)), False
    if isinstance(t, ds.DataTypeTimestamp):
        return pa.timestamp(_unit(t.unit), tz=t.timezone if t.timezone is not None else "UTC"), False
    if isinstance(t, ds.DataTypeList):
        item, nullable = _arrow_type(t.item_type, {}, f"{where}[]")
        field = pa.field("item", item, nullable)
        if t.fixed_length is not None:
            return pa.list_(field, t.fixed_length), False
        return (pa.large_list(field) if wide else pa.list_(field)), False
    if isinstance(t, ds.DataTypeMap):
        key, key_nullable = _arrow_type(t.key_type, {}, f"{where}.key")
        value, value_nullable = _arrow_type(t.value_type, {}, f"{where}.value")
        return pa.map_(pa.field("keys", key, key_nullable), pa.field("values", value, value_nullable),
                       keys_sorted=bool(t.keys_sorted)), False
    if isinstance(t, ds.DataTypeStruct):
        return pa.struct([_arrow_field(f, f"{where}.{f.name}") for f in t.fields]), False
    raise UnsupportedSchema(f"{where}: unsupported data type {type(t).__name__}")


def _arrow_field(f: DataField, where: str) -> pa.Field:
    typ, nullable = _arrow_type(f.type, f.extra.values if f.extra else {}, where)
    return pa.field(f.name, typ, nullable)


def data_schema_to_arrow(schema: DataSchema) -> pa.Schema:
    """The Arrow schema of a ``DataSchema``; a type Arrow cannot hold raises :class:`UnsupportedSchema`."""
    return pa.schema([_arrow_field(f, f.name) for f in schema.fields])


def _odf_type(t: pa.DataType, where: str):
    for odf, arrow in _SIMPLE.items():
        if t == arrow:
            return odf()
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return ds.DataTypeString()
    if pa.types.is_fixed_size_binary(t):
        return ds.DataTypeBinary(fixed_length=t.byte_width)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return ds.DataTypeBinary()
    if pa.types.is_date(t):
        return ds.DataTypeDate()
    if pa.types.is_decimal(t):
        return ds.DataTypeDecimal(precision=t.precision, scale=t.scale)
    if pa.types.is_timestamp(t):
        return ds.DataTypeTimestamp(unit=_ODF_UNIT[t.unit], timezone=t.tz)
    if pa.types.is_time(t):
        return ds.DataTypeTime(unit=_ODF_UNIT[t.unit])
    if pa.types.is_duration(t):
        return ds.DataTypeDuration(unit=_ODF_UNIT[t.unit])
    if pa.types.is_map(t):
        return ds.DataTypeMap(key_type=_odf_field_type(t.key_field, where),
                              value_type=_odf_field_type(t.item_field, where),
                              keys_sorted=t.keys_sorted)
    if pa.types.is_fixed_size_list(t):
        return ds.DataTypeList(item_type=_odf_field_type(t.value_field, where), fixed_length=t.list_size)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t) or pa.types.is_large_list_view(t):
        return ds.DataTypeList(item_type=_odf_field_type(t.value_field, where))
    if pa.types.is_struct(t):
        return ds.DataTypeStruct(fields=tuple(_odf_field(t.field(i), where) for i in range(t.num_fields)))
    raise UnsupportedSchema(f"{where}: Arrow type {t} has no ODF data type")


def _odf_field_type(f: pa.Field, where: str):
    t = _odf_type(f.type, f"{where}.{f.name}")
    return ds.DataTypeOption(inner=t) if f.nullable else t


def _odf_field(f: pa.Field, where: str) -> DataField:
    return DataField(name=f.name, type=_odf_field_type(f, where))


def arrow_to_data_schema(schema: pa.Schema, extra: ExtraAttributes | None = None) -> DataSchema:
    """The ``DataSchema`` of an Arrow schema: logical types only (no encodings), nullable fields as ``Option``."""
    return DataSchema(fields=tuple(_odf_field(f, "") for f in schema), extra=extra)


def with_data_schema(event):
    """A ``SetDataSchema`` of raw Arrow only, given its ``DataSchema`` too (the form the current reference reads
    first; the raw schema stays for readers of v0.34.1). Other events, and schemas with an Arrow type that has no ODF
    data type, are returned as they are."""
    from odf_core.metadata.arrow_schema import decode_arrow_schema
    from odf_core.metadata.events import SetDataSchema

    if not isinstance(event, SetDataSchema) or event.schema is None or event.data_schema is not None:
        return event
    try:
        return event.replace(data_schema=arrow_to_data_schema(decode_arrow_schema(event.schema)))
    except UnsupportedSchema:
        return event


def arrow_schema_bytes(event) -> bytes | None:
    """The Arrow schema (bare FlatBuffer) a ``SetDataSchema`` sets: its raw schema verbatim, else its ``DataSchema``
    mapped to Arrow; None if it carries neither."""
    if event.schema is not None:
        return event.schema
    if event.data_schema is not None:
        return encode_arrow_schema(data_schema_to_arrow(event.data_schema))
    return None
