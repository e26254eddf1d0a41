"""The ODF data schema (``DataSchema``, ``DataField``, ``DataType``) and ``ExtraAttributes``, added to the spec after
v0.34.1: the logical schema a current ``SetDataSchema`` and ``ReadStep.schema`` carry (field order = schema order)."""
from __future__ import annotations

import json
from typing import Any, Mapping

from odf_core.metadata.schema import W, Model, OdfEnum, item, lst, model, odf_type, odf_union, opt, req


def _canonical_json(values: Mapping[str, Any]) -> str:
    """The reference's form (a sorted map printed compactly): equal attributes give equal bytes."""
    return json.dumps(dict(values), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


@odf_type
@model
class ExtraAttributes(Model):
    """Extension attributes, each ``<domain>/<path>: <any JSON>`` (e.g. ``kamu.dev/archetype: Collection``).

    ``entries`` is the JSON text exactly as read from a block, so that a decoded block encodes back to its own bytes;
    attributes built here are printed canonically (:meth:`of`)."""

    entries: str = req(W.STR)

    def __post_init__(self) -> None:
        try:
            value = json.loads(self.entries)
        except (TypeError, ValueError) as e:
            raise ValueError(f"ExtraAttributes is not JSON: {e}") from None
        if not isinstance(value, dict):
            raise ValueError(f"ExtraAttributes must be a JSON object, got {type(value).__name__}")

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> "ExtraAttributes":
        return cls(entries=_canonical_json(values))

    @property
    def values(self) -> dict[str, Any]:
        return json.loads(self.entries)

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    @classmethod
    def yaml_in(cls, data: dict) -> dict:
        try:
            return {"entries": _canonical_json(data)}
        except ValueError:  # NaN/Infinity are not JSON
            return {"entries": data}

    def yaml_out(self, data: dict) -> Any:
        return self.values


class TimeUnit(OdfEnum):
    SECOND = "Second"
    MILLISECOND = "Millisecond"
    MICROSECOND = "Microsecond"
    NANOSECOND = "Nanosecond"


def _empty(kind: str) -> type:
    """A DataType variant without parameters."""
    cls = type(f"DataType{kind}", (Model,), {"__module__": __name__, "KIND": kind, "__annotations__": {}})
    return odf_type(model(cls))


DataTypeBool = _empty("Bool")
DataTypeDate = _empty("Date")
DataTypeFloat16 = _empty("Float16")
DataTypeFloat32 = _empty("Float32")
DataTypeFloat64 = _empty("Float64")
DataTypeInt8 = _empty("Int8")
DataTypeInt16 = _empty("Int16")
DataTypeInt32 = _empty("Int32")
DataTypeInt64 = _empty("Int64")
DataTypeUInt8 = _empty("UInt8")
DataTypeUInt16 = _empty("UInt16")
DataTypeUInt32 = _empty("UInt32")
DataTypeUInt64 = _empty("UInt64")
DataTypeNull = _empty("Null")
DataTypeString = _empty("String")


@odf_type
@model
class DataTypeBinary(Model):
    KIND = "Binary"
    fixed_length: int | None = opt(W.U64N)


@odf_type
@model
class DataTypeDecimal(Model):
    KIND = "Decimal"
    precision: int = req(W.U32)
    scale: int = req(W.I32)


@odf_type
@model
class DataTypeDuration(Model):
    KIND = "Duration"
    unit: TimeUnit | None = opt(W.ENUMN16, TimeUnit)


@odf_type
@model
class DataTypeList(Model):
    KIND = "List"
    item_type: Any = req(W.UNION, "DataType")
    fixed_length: int | None = opt(W.U64N)


@odf_type
@model
class DataTypeMap(Model):
    KIND = "Map"
    key_type: Any = req(W.UNION, "DataType")
    value_type: Any = req(W.UNION, "DataType")
    keys_sorted: bool | None = opt(W.BOOLN)


@odf_type
@model
class DataTypeOption(Model):
    KIND = "Option"
    inner: Any = req(W.UNION, "DataType")


@odf_type
@model
class DataTypeStruct(Model):
    KIND = "Struct"
    fields: tuple["DataField", ...] = lst(item(W.TABLE, "DataField"), required=True)


@odf_type
@model
class DataTypeTime(Model):
    KIND = "Time"
    unit: TimeUnit | None = opt(W.ENUMN16, TimeUnit)


@odf_type
@model
class DataTypeTimestamp(Model):
    KIND = "Timestamp"
    unit: TimeUnit | None = opt(W.ENUMN16, TimeUnit)
    timezone: str | None = opt(W.STR)


DATA_TYPE = odf_union(
    "DataType",
    DataTypeBinary,
    DataTypeBool,
    DataTypeDate,
    DataTypeDecimal,
    DataTypeDuration,
    DataTypeFloat16,
    DataTypeFloat32,
    DataTypeFloat64,
    DataTypeInt8,
    DataTypeInt16,
    DataTypeInt32,
    DataTypeInt64,
    DataTypeUInt8,
    DataTypeUInt16,
    DataTypeUInt32,
    DataTypeUInt64,
    DataTypeList,
    DataTypeMap,
    DataTypeNull,
    DataTypeOption,
    DataTypeStruct,
    DataTypeTime,
    DataTypeTimestamp,
    DataTypeString,
)
DataType = Any  # one of DATA_TYPE.variants


@odf_type
@model
class DataField(Model):
    name: str = req(W.STR)
    type: DataType = req(W.UNION, "DataType")
    extra: ExtraAttributes | None = opt(W.TABLE, "ExtraAttributes")


@odf_type
@model
class DataSchema(Model):
    fields: tuple[DataField, ...] = lst(item(W.TABLE, "DataField"), required=True)
    extra: ExtraAttributes | None = opt(W.TABLE, "ExtraAttributes")


def rename_legacy_schema(data: dict, legacy: str) -> dict:
    """Read a mapping that has a field renamed since v0.34.1: ``schema`` now names the ODF ``DataSchema`` and the
    v0.34.1 field is ``legacy`` (``ddlSchema``, ``rawArrowSchema``). Both forms are read: a ``schema`` mapping is the
    ``DataSchema``, any other ``schema`` value is the v0.34.1 field (a DDL list, base64 Arrow)."""
    out = dict(data)
    if isinstance(out.get("schema"), dict):
        out["dataSchema"] = out.pop("schema")
    if legacy in out and "schema" not in out:
        out["schema"] = out.pop(legacy)
    return out


def write_legacy_schema(data: dict, legacy: str) -> dict:
    """The YAML form of such a mapping: v0.34.1's (``schema`` = legacy field) unless a ``DataSchema`` is present, then
    the current reference's (``schema`` = DataSchema, legacy field under its new name)."""
    if "dataSchema" not in data:
        return data
    renames = {"schema": legacy, "dataSchema": "schema"}
    return {renames.get(k, k): v for k, v in data.items()}
