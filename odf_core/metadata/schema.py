"""Wire descriptions of model fields.

Each dataclass field of the model carries a :class:`Wire` spec in its metadata; the YAML and FlatBuffers codecs walk
these specs in field order (= schema order), so adding a type is declaring it once, never writing codec code.
"""
from __future__ import annotations

import dataclasses
import enum
import operator
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ClassVar, TypeVar

if sys.version_info >= (3, 11):
    from typing import dataclass_transform
else:  # pragma: no cover - Python 3.10
    from typing_extensions import dataclass_transform


_T = TypeVar("_T")
_S = TypeVar("_S", bound="Model")


class W(enum.Enum):
    """How a field is represented on the wire."""

    STR = "string"
    U64 = "uint64 (omitted when 0)"
    U64N = "uint64 (nullable)"
    U32 = "uint32 (omitted when 0)"
    I64 = "int64 (omitted when 0)"
    I32 = "int32 (omitted when 0)"
    BOOLN = "bool (nullable)"
    ENUM = "enum (omitted when first value)"
    ENUMN = "enum (nullable)"
    ENUMN16 = "int16 enum (nullable)"
    MULTIHASH = "multihash"
    DATASET_ID = "dataset id"
    BYTES = "bytes (base64 in YAML)"
    TIMESTAMP = "timestamp"
    TABLE = "table"
    UNION = "union"
    LIST = "list"


@dataclass(frozen=True)
class Wire:
    kind: W
    ref: Any = None  # table class name, union name, enum class, or the item Wire of a list
    wrapped: bool = False  # list items of a union wrapped in a one-field table (SetPollingSource.prepare)
    fmt: str | None = None  # extra YAML validation, e.g. "dataset-alias", "dataset-ref"


def req(kind: W, ref: Any = None, **kw) -> Any:
    return field(metadata={"wire": Wire(kind, ref, **kw)})


def opt(kind: W, ref: Any = None, **kw) -> Any:
    return field(default=None, metadata={"wire": Wire(kind, ref, **kw)})


def lst(item: Wire, *, required: bool = False, wrapped: bool = False) -> Any:
    w = Wire(W.LIST, item, wrapped=wrapped)
    return field(metadata={"wire": w}) if required else field(default=None, metadata={"wire": w})


def item(kind: W, ref: Any = None) -> Wire:
    return Wire(kind, ref)


class OdfEnum(str, enum.Enum):
    """String enum whose YAML form is the PascalCase name and whose binary form is its index."""

    @classmethod
    def index_of(cls, member: "OdfEnum") -> int:
        return list(cls).index(member)

    @classmethod
    def from_index(cls, i: int) -> "OdfEnum":
        return list(cls)[i]


@dataclass(frozen=True)
class UnionDef:
    """A schema union: variants in tag order (tag = position + 1)."""

    name: str
    variants: tuple[type[Model], ...]

    def tag_of(self, value: Any) -> int:
        return self.variants.index(type(value)) + 1

    def by_kind(self) -> dict[str, type[Model]]:
        return {v.KIND: v for v in self.variants}


TABLES: dict[str, type[Model]] = {}
UNIONS: dict[str, UnionDef] = {}


def odf_type(cls: type[_S]) -> type[_S]:
    """Register a model class; ``KIND`` is its variant name in a union (``kind: Url``), else its own name."""
    TABLES[cls.__name__] = cls
    if "KIND" not in cls.__dict__:
        cls.KIND = cls.__name__
    return cls


def odf_union(name: str, *variants: type[Model]) -> UnionDef:
    u = UnionDef(name, tuple(variants))
    UNIONS[name] = u
    return u


@dataclass(frozen=True)
class FieldInfo:
    name: str  # python attribute (snake_case)
    yaml_name: str  # camelCase
    wire: Wire
    required: bool
    slot: int  # first FlatBuffers slot (a union takes two)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


_FIELDS: dict[type, tuple[FieldInfo, ...]] = {}


def fields_of(cls: type) -> tuple[FieldInfo, ...]:
    """The wire fields of a model class in schema order, computed once per class (the codecs ask for every value)."""
    found = _FIELDS.get(cls)
    if found is None:
        found = _FIELDS[cls] = _fields_of(cls)
    return found


def _fields_of(cls: type) -> tuple[FieldInfo, ...]:
    out, slot = [], 0
    for f in dataclasses.fields(cls):
        wire = f.metadata.get("wire")
        if wire is None:
            continue
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        out.append(FieldInfo(f.name, _camel(f.name), wire, required, slot))
        slot += 2 if wire.kind is W.UNION else 1
    return tuple(out)


def slot_count(cls: type) -> int:
    fs = fields_of(cls)
    if not fs:
        return 0
    last = fs[-1]
    return last.slot + (2 if last.wire.kind is W.UNION else 1)


def table(name: str) -> type[Model]:
    return TABLES[name]


def union(name: str) -> UnionDef:
    return UNIONS[name]


class Model:
    """Base of all model dataclasses: frozen (its ``__setattr__``), keyword-only, registered by name.

    Equality, hashing and ``repr`` are defined here once, over the fields ``dataclasses`` would compare and show
    (the hash over the compared ones: no model field sets ``hash=``), instead of being generated for every model:
    ``dataclass`` compiles each method it generates with its own ``exec`` (~0.1 ms each), and the ~100 models'
    equality, hash, repr and signature docstring were ~45 ms of every command's start."""

    KIND: ClassVar[str]
    # set by @model on every subclass: the values its equality compares and its hash hashes, as one tuple
    _odf_compared: ClassVar[Callable[[Any], tuple[Any, ...]]]
    _odf_shown: ClassVar[tuple[str, ...]]
    if TYPE_CHECKING:  # set by @model on every subclass: what makes a Model a dataclass instance to type checkers
        __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self.__class__._odf_compared(self) == self.__class__._odf_compared(other)

    def __hash__(self) -> int:
        return hash(self.__class__._odf_compared(self))

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._odf_shown)
        return f"{self.__class__.__qualname__}({shown})"

    # Frozen here rather than by ``dataclass(frozen=True)``, which compiles a ``__setattr__`` and a ``__delattr__``
    # for every model (two more ``exec``s each: ~22 ms of a command's imports). The constructor sets each field once;
    # then every assignment is refused, as a frozen dataclass refuses it.
    def __setattr__(self, name: str, value: Any) -> None:
        values = self.__dict__  # fields are plain instance attributes: stored here as object.__setattr__ would
        if name in values or name not in self.__dataclass_fields__:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        values[name] = value

    def __delattr__(self, name: str) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")

    def replace(self: _S, **changes: Any) -> _S:
        return dataclasses.replace(self, **changes)

    # YAML hooks for types whose YAML form is not their field list (ExtraAttributes is a bare mapping; legacy fields
    # renamed since v0.34.1 keep being read under both names). Identity by default.
    @classmethod
    def yaml_in(cls, data: dict) -> dict:
        """The YAML mapping as the field list expects it."""
        return data

    def yaml_out(self, data: dict) -> Any:
        """The YAML form of the field list ``data`` (camelCase keys, schema order)."""
        return data


def _values_of(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """A function from an object to the tuple of its attributes ``names`` (attrgetter: one C call)."""
    if not names:
        return lambda _: ()
    if len(names) == 1:
        one = names[0]
        return lambda o: (getattr(o, one),)
    return operator.attrgetter(*names)


# ``req`` is a field specifier (no default: a required constructor argument); ``opt`` and ``lst`` fields stay plain
# defaults to the type checker, since their defaults are decided inside them, out of its sight.
@dataclass_transform(frozen_default=True, kw_only_default=True, field_specifiers=(field, req))
def model(cls: type[_T]) -> type[_T]:
    """Make ``cls`` a frozen, keyword-only dataclass; a function (not an alias of ``dataclass(...)``) so that type
    checkers see the generated fields and constructor."""
    if not issubclass(cls, Model):
        raise TypeError(f"@model {cls.__name__}: a model derives from Model (its equality, hash and repr)")
    if cls.__doc__ is None:  # dataclass would write the constructor's signature there (inspect.signature: slow)
        cls.__doc__ = cls.__name__
    made = dataclass(kw_only=True, eq=False, repr=False)(cls)  # frozen, equality, hash, repr: Model's
    fs = dataclasses.fields(made)
    made._odf_compared = staticmethod(_values_of(tuple(f.name for f in fs if f.compare)))
    made._odf_shown = tuple(f.name for f in fs if f.repr)
    return made
