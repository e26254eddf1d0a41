"""Which files a warm engine may touch: every path a request names must lie under one of the engine's allowed roots.

A warm engine reads and writes the paths its clients name, as its own OS user. Without a limit any client could
read any file the engine can (``input_data_paths``) or overwrite one (``output_data_path``). So the engine resolves
each path of a request (:func:`paths_of`, driven by :data:`PATH_FIELDS`: the one list of the protocol's path fields)
after symlinks (``os.path.realpath``) and refuses the request, before anything runs, when one lies outside
``--allow-path`` (local directories, or ``s3://bucket/prefix`` for object-store URLs). With no ``--allow-path`` the
roots are the engine's working directory, the system temp directory and the ingest staging directory.

Paths holding glob characters are refused too: Spark's readers expand them (``{a,../../x}``, a ``*`` matching a
symlink), so what a glob names cannot be checked beforehand. Engine requests name files, never patterns.
"""
from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from odf_core.engine.base import EngineError
from odf_core.metadata.schema import TABLES, UNIONS, Model, W, Wire, fields_of

#: Every field of a request type that names a file or directory the engine reads or writes: (table, field). A test
#: walks the request types and fails on a path-like field missing here.
PATH_FIELDS: frozenset[tuple[str, str]] = frozenset({
    # ingest (odf_core.engine.protocol)
    ("IngestRequest", "work_dir"),
    ("IngestInputFile", "path"),
    ("ReadPhase", "output_path"),
    ("MergePhase", "output_path"),
    ("MergePhase", "new_checkpoint_path"),
    ("MergePhase", "prev_checkpoint_path"),
    ("MergePhase", "prev_data_paths"),
    ("MergePhase", "input_path"),
    # transform: the spec's request and our histories
    ("TransformRequest", "prev_checkpoint_path"),
    ("TransformRequest", "new_checkpoint_path"),
    ("TransformRequest", "new_data_path"),
    ("TransformRequestInput", "data_paths"),
    ("TransformRequestInput", "schema_file"),
    ("InputHistory", "data_paths"),
    # query validation, ad-hoc SQL, the spec's raw query
    ("ValidateInput", "schema_file"),
    ("SqlTable", "data_paths"),
    ("RawQueryRequest", "input_data_paths"),
    ("RawQueryRequest", "output_data_path"),
})

#: The request types an engine accepts (both gRPC services): the roots of the walk.
REQUEST_UNION = "EngineRequest"
GLOB_CHARACTERS = frozenset("*?[]{}\\")
_SCHEMES = {"s3a": "s3", "s3n": "s3"}  # one bucket, whichever Hadoop connector names it


class PathRefused(EngineError):
    """A request names a path outside the engine's allowed roots; nothing of it ran."""


def _walk(value: Any, where: str) -> Iterator[tuple[str, str]]:
    if not isinstance(value, Model):
        return
    name = type(value).__name__
    for f in fields_of(type(value)):
        v = getattr(value, f.name)
        here = f"{where}.{f.name}" if where else f.name
        if v is None:
            continue
        if (name, f.name) in PATH_FIELDS:
            if isinstance(v, str):
                yield here, v
            else:
                for i, p in enumerate(v):
                    yield f"{here}[{i}]", p
        elif isinstance(v, Model):
            yield from _walk(v, here)
        elif isinstance(v, tuple):
            for i, item in enumerate(v):
                yield from _walk(item, f"{here}[{i}]")


def paths_of(request: Any) -> list[tuple[str, str]]:
    """Every path a request names, as (field, path): ``merge.output_path``, ``query_inputs[0].data_paths[1]``."""
    return list(_walk(request, ""))


def string_fields(union: str = REQUEST_UNION) -> set[tuple[str, str]]:
    """Every (table, field) holding strings reachable from a union's variants: what :data:`PATH_FIELDS` is checked
    against."""
    seen: set[str] = set()
    out: set[tuple[str, str]] = set()

    def visit_wire(table: str, fname: str, wire: Wire) -> None:
        if wire.kind is W.STR:
            out.add((table, fname))
        elif wire.kind is W.TABLE:
            visit(TABLES[wire.ref])
        elif wire.kind is W.UNION:
            for variant in UNIONS[wire.ref].variants:
                visit(variant)
        elif wire.kind is W.LIST:
            visit_wire(table, fname, wire.ref)

    def visit(cls: type) -> None:
        if cls.__name__ in seen:
            return
        seen.add(cls.__name__)
        for f in fields_of(cls):
            visit_wire(cls.__name__, f.name, f.wire)

    for variant in UNIONS[union].variants:
        visit(variant)
    return out


def _url_parts(url: str) -> tuple[str, str] | None:
    """``s3a://bucket/a/b/`` -> (``s3``, ``bucket/a/b``); None for a local path. ``.``/``..`` segments are kept so
    the caller can refuse them (a URL is never resolved)."""
    scheme, sep, rest = url.partition("://")
    if not sep or not scheme.isalnum() or scheme.lower() == "file":
        return None
    scheme = scheme.lower()
    return _SCHEMES.get(scheme, scheme), rest.strip("/")


def _local(path: str) -> str:
    for prefix in ("file://", "file:"):  # what the engine's readers accept (spark_jobs.parquet_files.local_path)
        if path.startswith(prefix):
            return path[len(prefix):]
    return path


def default_roots() -> list[str]:
    """The engine's working directory (unless it is ``/``), the system temp directory and the ingest staging
    directory (``$ODF_STAGING_DIR``, else the user's cache directory)."""
    cwd = os.getcwd()
    staging = os.environ.get("ODF_STAGING_DIR") or str(Path.home() / ".cache" / "odf" / "staging")
    return [r for r in (cwd, tempfile.gettempdir(), staging) if os.path.realpath(r) != "/"]


@dataclass(frozen=True)
class AllowedRoots:
    local: tuple[str, ...]  # resolved directories
    urls: tuple[tuple[str, str], ...]  # (scheme, bucket/prefix)

    @classmethod
    def parse(cls, specs: Sequence[str] | None) -> AllowedRoots:
        """``--allow-path`` values (directories or ``s3://bucket/prefix``); none: :func:`default_roots`."""
        local: list[str] = []
        urls: list[tuple[str, str]] = []
        for spec in specs or default_roots():
            parts = _url_parts(spec)
            if parts is None:
                local.append(os.path.realpath(_local(spec)))
            elif not parts[1] or any(s in (".", "..") for s in parts[1].split("/")):
                raise EngineError(f"--allow-path {spec!r}: expected a directory or s3://bucket[/prefix]")
            else:
                urls.append(parts)
        return cls(tuple(dict.fromkeys(local)), tuple(dict.fromkeys(urls)))

    def describe(self) -> str:
        return ", ".join([*self.local, *(f"{s}://{p}" for s, p in self.urls)]) or "none"

    def refusal(self, path: str) -> str | None:
        """Why the engine must not touch ``path`` (None: it may)."""
        if any(c in GLOB_CHARACTERS for c in path):
            return "it holds glob characters, which the engine's readers would expand"
        parts = _url_parts(path)
        if parts is not None:
            scheme, rest = parts
            if any(s in (".", "..") for s in rest.split("/")):
                return "a URL with '.' or '..' segments"
            if any(scheme == s and (rest == p or rest.startswith(p + "/")) for s, p in self.urls):
                return None
        else:
            real = os.path.realpath(_local(path))
            if any(real == r or real.startswith(r.rstrip("/") + "/") for r in self.local):
                return None
            if real != os.path.abspath(_local(path)):
                return f"it resolves to {real}, outside the engine's allowed roots"
        return "it is outside the engine's allowed roots"

    def check(self, request: Any, what: str) -> None:
        """Raise :class:`PathRefused` naming the first path of ``request`` the engine must not touch."""
        for where, path in paths_of(request):
            reason = self.refusal(path)
            if reason is not None:
                hint = ("--allow-path s3://BUCKET/PREFIX to allow another bucket or prefix" if _url_parts(path)
                        else "--allow-path DIR to allow another directory")
                raise PathRefused(f"{what}: {where} {path!r} refused: {reason} ({self.describe()}); start the "
                                  f"engine with {hint}")
