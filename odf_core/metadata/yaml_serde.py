"""YAML form of metadata manifests (conformance §2).

Reading validates everything a JSON Schema would (types, required and unknown properties, enum values, formats)
and raises one :class:`~odf_core.errors.MetadataError` naming the file, the line, the property path and the
offending value (``FILE:LINE: PATH: problem (got VALUE)``).
"""
from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Iterator

from odf_core.errors import InvalidIdentifier, MetadataError
from odf_core.identity import DatasetID, Multihash
from odf_core.identity.names import DatasetAlias, DatasetRef
from odf_core.metadata.schema import TABLES, Model, W, OdfEnum, Wire, fields_of, table, union
from odf_core.metadata.timestamp import InvalidTimestamp, Timestamp

_U64_MAX = 2**64 - 1
_INT_RANGES = {
    W.U64: (0, _U64_MAX),
    W.U64N: (0, _U64_MAX),
    W.U32: (0, 2**32 - 1),
    W.I64: (-(2**63), 2**63 - 1),
    W.I32: (-(2**31), 2**31 - 1),
}

# ------------------------------------------------------------------------------------------------------------------
# Loader: JSON-compatible YAML; timestamps stay strings (they carry nanoseconds), duplicate keys are errors.
# PyYAML loads on first use (~20 ms): the chain, ingest and transforms use this module's plain-data half only.
# ------------------------------------------------------------------------------------------------------------------


@cache
def _yaml_classes() -> tuple[Any, Any]:
    """(loader, dumper) classes."""
    import yaml

    class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
        pass

    _Loader.yaml_implicit_resolvers = {
        k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:timestamp"]
        for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def _construct_mapping(loader, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
            seen.add(key)
        return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)

    _Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)

    class _Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
        pass

    def _str_representer(dumper, value: str):
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    _Dumper.add_representer(str, _str_representer)
    # Timestamps are strings to us: print them plain (unquoted), as the reference implementation does.
    _Dumper.yaml_implicit_resolvers = _Loader.yaml_implicit_resolvers
    return _Loader, _Dumper


# ------------------------------------------------------------------------------------------------------------------
# Model <- plain data
# ------------------------------------------------------------------------------------------------------------------


def _type_name(v: Any) -> str:
    return {dict: "mapping", list: "list", str: "string", bool: "boolean", int: "integer", float: "number"}.get(
        type(v), type(v).__name__
    )


def parse_enum(cls: type[OdfEnum], value: Any, path: str) -> OdfEnum:
    """RFC-013: PascalCase, camelCase or lowercase."""
    if isinstance(value, str):
        for m in cls:
            if value in (m.value, m.value[:1].lower() + m.value[1:], m.value.lower()):
                return m
    allowed = ", ".join(m.value for m in cls)
    raise MetadataError(f"invalid {cls.__name__} value, expected one of: {allowed}", path=path, value=value)


def _variant(u_name: str, data: Any, path: str) -> type:
    if isinstance(data, str):  # the short form of a variant without properties: ``type: String``
        data = {"kind": data}
    if not isinstance(data, dict):
        raise MetadataError(f"expected a mapping with 'kind' ({u_name})", path=path, value=data)
    if "kind" not in data:
        raise MetadataError(f"missing required property 'kind' of {u_name}", path=path)
    kind = data["kind"]
    u = union(u_name)
    if isinstance(kind, str):
        for cls in u.variants:
            k = cls.KIND
            if kind in (k, k[:1].lower() + k[1:], k.lower()):
                return cls
    allowed = ", ".join(c.KIND for c in u.variants)
    raise MetadataError(f"unknown {u_name} kind, expected one of: {allowed}", path=f"{path}.kind", value=kind)


def _value_from(w: Wire, v: Any, path: str) -> Any:
    k = w.kind
    if k is W.STR:
        if not isinstance(v, str):
            raise MetadataError(f"expected a string, got a {_type_name(v)}", path=path, value=v)
        try:
            if w.fmt == "dataset-alias":
                DatasetAlias.parse(v)
            elif w.fmt == "dataset-ref":
                DatasetRef.parse(v)
        except InvalidIdentifier as e:
            raise MetadataError(str(e), path=path, value=v) from None
        return v
    if k in (W.U64, W.U64N, W.U32, W.I64, W.I32):
        if not isinstance(v, int) or isinstance(v, bool):
            raise MetadataError(f"expected an integer, got a {_type_name(v)}", path=path, value=v)
        lo, hi = _INT_RANGES[k]
        if not lo <= v <= hi:
            raise MetadataError(f"integer out of range [{lo}, {hi}]", path=path, value=v)
        return v
    if k is W.BOOLN:
        if not isinstance(v, bool):
            raise MetadataError(f"expected a boolean, got a {_type_name(v)}", path=path, value=v)
        return v
    if k in (W.ENUM, W.ENUMN, W.ENUMN16):
        return parse_enum(w.ref, v, path)
    if k is W.MULTIHASH or k is W.DATASET_ID:
        try:
            return Multihash.parse(v) if k is W.MULTIHASH else DatasetID.parse(v)
        except InvalidIdentifier as e:
            raise MetadataError(str(e), path=path, value=v) from None
    if k is W.BYTES:
        if not isinstance(v, str):
            raise MetadataError("expected base64 text", path=path, value=v)
        try:
            return base64.b64decode(v.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError):
            raise MetadataError("invalid base64", path=path, value=v) from None
    if k is W.TIMESTAMP:
        try:
            return Timestamp.parse(v)
        except InvalidTimestamp as e:
            raise MetadataError(str(e), path=path, value=v) from None
    if k is W.TABLE:
        return from_data(table(w.ref), v, path)
    if k is W.UNION:
        cls = _variant(w.ref, v, path)
        return from_data(cls, {"kind": v} if isinstance(v, str) else v, path, union_kind=True)
    if k is W.LIST:
        if not isinstance(v, list):
            raise MetadataError(f"expected a list, got a {_type_name(v)}", path=path, value=v)
        return tuple(_value_from(w.ref, x, f"{path}[{i}]") for i, x in enumerate(v))
    raise AssertionError(k)


def from_data(cls: type[Model], data: Any, path: str = "", *, union_kind: bool = False) -> Any:
    """Build a model object from plain YAML/JSON data, validating as the JSON Schema would."""
    if not isinstance(data, dict):
        raise MetadataError(f"expected a mapping ({cls.KIND}), got a {_type_name(data)}", path=path, value=data)
    data = cls.yaml_in(data)
    fs = fields_of(cls)
    by_yaml = {f.yaml_name: f for f in fs}
    for key in data:
        if key == "kind" and union_kind:
            continue
        if key not in by_yaml:
            allowed = ", ".join(by_yaml) or "none"
            where = f"{path}.{key}" if path else str(key)
            raise MetadataError(f"unknown property of {cls.KIND} (allowed: {allowed})", path=where)
    kwargs = {}
    for f in fs:
        fpath = f"{path}.{f.yaml_name}" if path else f.yaml_name
        v = data.get(f.yaml_name)
        if v is None:
            if f.required:
                raise MetadataError(f"missing required property '{f.yaml_name}' of {cls.KIND}", path=fpath)
            continue
        kwargs[f.name] = _value_from(f.wire, v, fpath)
    return cls(**kwargs)


# ------------------------------------------------------------------------------------------------------------------
# Model -> plain data
# ------------------------------------------------------------------------------------------------------------------


def _value_to(w: Wire, v: Any) -> Any:
    k = w.kind
    if k in (W.ENUM, W.ENUMN, W.ENUMN16):
        return v.value
    if k is W.MULTIHASH:
        return v.to_multibase()
    if k is W.DATASET_ID:
        return v.to_did_odf()
    if k is W.BYTES:
        return base64.b64encode(v).decode("ascii")
    if k is W.TIMESTAMP:
        return v.isoformat()
    if k is W.TABLE:
        return to_data(v)
    if k is W.UNION:
        return {"kind": v.KIND, **to_data(v)}  # the long form, as the reference writes it
    if k is W.LIST:
        return [_value_to(w.ref, x) for x in v]
    return v


def to_data(obj: Any) -> dict:
    """Plain data in schema order with camelCase keys; absent properties omitted."""
    out = {}
    for f in fields_of(type(obj)):
        v = getattr(obj, f.name)
        if v is not None:
            out[f.yaml_name] = _value_to(f.wire, v)
    return obj.yaml_out(out)


# ------------------------------------------------------------------------------------------------------------------
# Manifests
# ------------------------------------------------------------------------------------------------------------------

MANIFEST_VERSIONS = {"DatasetSnapshot": 1, "MetadataBlock": 2}
"""The version each manifest kind is written in by default."""
_READ_VERSIONS = {"MetadataBlock": (2, 3)}
"""Kinds read in more than one version: a MetadataBlock keeps its version (it decides the block's binary layout)."""


@dataclass(frozen=True)
class YamlDoc:
    """One YAML document: its plain data and its node tree, which knows the line of every property path."""

    data: Any
    node: Any  # yaml.Node

    def line_of(self, path: str) -> int:
        """1-based line of ``path`` (``content.metadata[0].read.schema[1]``), or of its deepest existing ancestor
        (a missing property is reported where its mapping is). A mapping key's own line, not its value's."""
        import yaml

        node, line = self.node, self.node.start_mark.line
        for step in _PATH_STEP.findall(path):
            if isinstance(node, yaml.SequenceNode) and step.startswith("["):
                i = int(step[1:-1])
                if i >= len(node.value):
                    break
                node = node.value[i]
                line = node.start_mark.line
            elif isinstance(node, yaml.MappingNode) and not step.startswith("["):
                hit = next(((k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == step), None)
                if hit is None:
                    break
                line, node = hit[0].start_mark.line, hit[1]
            else:
                break
        return line + 1


_PATH_STEP = re.compile(r"\[\d+\]|[^.\[\]]+")


def _load_yaml_docs(text: str, file: str | None) -> list[YamlDoc]:
    import yaml

    loader = _yaml_classes()[0](text)
    docs = []
    try:
        while loader.check_node():
            node = loader.get_node()
            data = loader.construct_document(node)
            if data is not None:
                docs.append(YamlDoc(data, node))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        problem = getattr(e, "problem", None) or str(e)
        if mark is None:
            raise MetadataError(f"invalid YAML: {problem}", file=file) from None
        last = max(1, len(text.splitlines()))
        if mark.line + 1 > last:  # an unexpected end of the file: say so, on its last line
            raise MetadataError(f"invalid YAML (at the end of the file): {problem}", file=file, line=last) from None
        raise MetadataError(f"invalid YAML (column {mark.column + 1}): {problem}", file=file,
                            line=mark.line + 1) from None
    finally:
        loader.dispose()
    return docs


def manifest_from_data(data: Any, file: str | None = None, expected: str | None = None) -> Any:
    try:
        if not isinstance(data, dict):
            raise MetadataError("expected a manifest mapping with kind, version and content", value=data)
        for key in data:
            if key not in ("kind", "version", "content", "apiVersion"):
                raise MetadataError("unknown property of Manifest (allowed: kind, version, content)", path=str(key))
        kind = data.get("kind")
        if kind is None:
            raise MetadataError("missing required property 'kind' of Manifest", path="kind")
        if not isinstance(kind, str) or kind not in TABLES or kind not in (*MANIFEST_VERSIONS, *_ENGINE_OPS):
            raise MetadataError("unknown manifest kind", path="kind", value=kind)
        if expected and kind != expected:
            raise MetadataError(f"expected a {expected} manifest", path="kind", value=kind)
        version = data.get("version")
        accepted = _READ_VERSIONS.get(kind, (MANIFEST_VERSIONS.get(kind, 1),))
        if version not in accepted or isinstance(version, bool):
            want = " or ".join(map(str, accepted))
            raise MetadataError(f"unsupported {kind} version, expected {want}", path="version", value=version)
        if "content" not in data:
            raise MetadataError("missing required property 'content' of Manifest", path="content")
        obj = from_data(table(kind), data["content"], "content")
        return obj.replace(manifest_version=version) if kind == "MetadataBlock" else obj
    except MetadataError as e:
        raise (e.with_file(file) if file and not e.file else e) from None


_ENGINE_OPS = ("RawQueryRequest", "TransformRequest", "TransformResponseRoot", "RawQueryResponseRoot")


@dataclass(frozen=True)
class ManifestDoc:
    """One document of a manifest file: the model object, or the error that stops it (with its line)."""

    file: str | None
    yaml: YamlDoc
    value: Any = None
    error: MetadataError | None = None

    def line_of(self, path: str) -> int:
        return self.yaml.line_of(path)

    def error_at(self, problem: str, path: str, value: Any = ...) -> MetadataError:
        """A problem found after parsing (e.g. an invalid DDL schema), located like a parse error."""
        return MetadataError(problem, file=self.file, path=path, value=value, line=self.line_of(path))


def _manifest_doc(doc: YamlDoc, file: str | None, expected: str | None) -> ManifestDoc:
    try:
        return ManifestDoc(file, doc, value=manifest_from_data(doc.data, file, expected))
    except MetadataError as e:
        return ManifestDoc(file, doc, error=e.with_line(doc.line_of(e.path)))


def load_manifest_docs(text: str, file: str | None = None, expected: str | None = None) -> list[ManifestDoc]:
    """Every document of a YAML text, each parsed on its own: one bad document does not hide the others. Raises
    :class:`MetadataError` only when the text is not YAML at all."""
    return [_manifest_doc(d, file, expected) for d in _load_yaml_docs(text, file)]


def _ok(doc: ManifestDoc) -> Any:
    if doc.error is not None:
        raise doc.error
    return doc.value


def load_manifest(text: str, file: str | None = None, expected: str | None = None) -> Any:
    docs = load_manifest_docs(text, file, expected)
    if len(docs) != 1:
        raise MetadataError(f"expected exactly one YAML document, found {len(docs)}", file=file)
    return _ok(docs[0])


def load_manifests(text: str, file: str | None = None, expected: str | None = None) -> list[Any]:
    """All documents of a (possibly multi-document) YAML file; the first bad one raises."""
    return [_ok(d) for d in load_manifest_docs(text, file, expected)]


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise MetadataError(f"cannot read file: {e}", file=str(path)) from None


def read_manifest_file(path: str | Path, expected: str | None = None) -> Any:
    path = Path(path)
    return load_manifest(_read_text(path), str(path), expected)


def read_manifest_docs(path: str | Path, expected: str | None = None) -> list[ManifestDoc]:
    """Every document of a manifest file, each parsed on its own (see :func:`load_manifest_docs`)."""
    path = Path(path)
    return load_manifest_docs(_read_text(path), str(path), expected)


def iter_manifest_files(path: str | Path, expected: str | None = None) -> Iterator[Any]:
    yield from (_ok(d) for d in read_manifest_docs(path, expected))


def manifest_to_data(obj: Any) -> dict:
    kind = type(obj).__name__
    version = obj.manifest_version if kind == "MetadataBlock" else MANIFEST_VERSIONS.get(kind, 1)
    return {"kind": kind, "version": version, "content": to_data(obj)}


def dump_manifest(obj: Any) -> str:
    return dump_data(manifest_to_data(obj))


def dump_data(data: Any) -> str:
    import yaml

    return yaml.dump(data, Dumper=_yaml_classes()[1], sort_keys=False, allow_unicode=True, width=2**16)
