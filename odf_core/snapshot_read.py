"""Reading DatasetSnapshot files and validating them fully, without a workspace, Spark or network.

Every consumer of a snapshot folder (``odf add``, the sync, the Airflow DAG factory) reads files through
:func:`read_snapshot_file`, so a snapshot is refused the same way everywhere and as early as possible: YAML syntax,
the model (types, required and unknown properties), the name, and the DDL of every read ``schema``, each problem
located as ``FILE:LINE: property.path: problem (got VALUE)``.

SQL (transform and preprocess queries) is not parsed here: pure Python cannot parse Spark SQL. Each must start like a
query (:mod:`odf_core.engine.sql_text`: an ``INSERT`` or ``DROP`` step is refused here, not at the first pull); the hook
``check_query`` takes a function that can parse (an engine's parser); without it queries are first checked by Spark
when a transform evolves (``set_transform``) or runs.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from odf_core.errors import InvalidIdentifier, MetadataError, OdfError
from odf_core.identity import DatasetAlias
from odf_core.metadata import (
    AddPushSource,
    DatasetSnapshot,
    FetchStepFilesGlob,
    SetPollingSource,
    SetTransform,
    TransformSql,
)
from odf_core.metadata.ddl import schema_problems
from odf_core.metadata.yaml_serde import ManifestDoc, read_manifest_docs

QueryCheck = Callable[[str], "str | None"]
"""Hook for an engine to validate SQL at add time: given one query, the problem as one line, or None if valid."""


@dataclass(frozen=True)
class SnapshotDoc:
    """One document of a snapshot file: the snapshot, or the first problem that stops it. ``name`` is the dataset
    name as written when it can be read, also from a broken document (so the problem can be shown for that dataset)."""

    file: str
    snapshot: DatasetSnapshot | None = None
    error: OdfError | None = None
    name: str | None = None
    manifest: ManifestDoc | None = None

    @property
    def valid(self) -> DatasetSnapshot:
        """The snapshot of a document read without a problem (callers have looked at ``error`` first)."""
        assert self.snapshot is not None, self.error
        return self.snapshot

    @property
    def key(self) -> str | None:
        return self.name.lower() if self.name else None

    def error_at(self, problem: str, path: str, value: Any = ...) -> MetadataError:
        """A problem of this document at ``path``, with the line when the document was read from YAML."""
        if self.manifest is not None:
            return self.manifest.error_at(problem, path, value)
        return MetadataError(problem, file=self.file, path=path, value=value)


def read_snapshot_file(file: str | os.PathLike[str], *, check_query: QueryCheck | None = None) -> list[SnapshotDoc]:
    """Every DatasetSnapshot of a (possibly multi-document) YAML file, each validated on its own. Never raises for
    bad content: an unreadable file, invalid YAML or a file without any document gives one broken entry."""
    path = str(file)
    try:
        manifests = read_manifest_docs(path, expected="DatasetSnapshot")
    except MetadataError as e:
        return [SnapshotDoc(path, error=e)]
    if not manifests:
        return [SnapshotDoc(path, error=MetadataError("no DatasetSnapshot document in this file (it is empty)",
                                                      file=path))]
    base = Path(path).resolve().parent
    out = []
    for m in manifests:
        name = _readable_name(m.yaml.data)
        doc = SnapshotDoc(path, name=name, manifest=m)
        if m.error is not None:
            out.append(SnapshotDoc(path, error=m.error, name=name, manifest=m))
            continue
        problem = next(content_problems(doc, m.value, check_query), None)
        if problem is not None:
            out.append(SnapshotDoc(path, error=problem, name=name, manifest=m))
        else:
            out.append(SnapshotDoc(path, snapshot=resolve_relative_paths(m.value, base), name=name, manifest=m))
    return out


def _readable_name(data: Any) -> str | None:
    content = data.get("content") if isinstance(data, dict) else None
    name = content.get("name") if isinstance(content, dict) else None
    if not isinstance(name, str):
        return None
    try:
        alias = DatasetAlias.parse(name)
    except InvalidIdentifier:
        return None
    return str(alias.name) if alias.account is None else None


def content_problems(doc: SnapshotDoc, snapshot: DatasetSnapshot,
                     check_query: QueryCheck | None = None) -> Iterator[MetadataError]:
    """What the model cannot see: a name with an account, read schemas Spark would refuse, and (with the hook)
    queries the engine refuses."""
    if DatasetAlias.parse(snapshot.name).account is not None:
        yield doc.error_at("a workspace is single-tenant: the name must not have an account", "content.name",
                           snapshot.name)
    for i, ev in enumerate(snapshot.metadata):
        where = f"content.metadata[{i}]"
        if isinstance(ev, (SetPollingSource, AddPushSource)):
            schema = getattr(ev.read, "schema", None) or ()
            for j, problem in schema_problems(schema):
                yield doc.error_at(f"invalid DDL column: {problem}", f"{where}.read.schema[{j}]", schema[j])
            if ev.preprocess is not None:
                yield from _query_problems(doc, ev.preprocess, f"{where}.preprocess", check_query)
        elif isinstance(ev, SetTransform):
            yield from _query_problems(doc, ev.transform, f"{where}.transform", check_query)


def _query_problems(doc: SnapshotDoc, transform: TransformSql, where: str,
                    check_query: QueryCheck | None) -> Iterator[MetadataError]:
    """Each query of a transform: a query at all (no Spark: :mod:`odf_core.engine.sql_text`), then the engine's hook."""
    from odf_core.engine.sql_text import query_problem

    queries = [(f"{where}.query", transform.query)] if transform.query is not None else []
    queries += [(f"{where}.queries[{k}].query", q.query) for k, q in enumerate(transform.queries or ())]
    for path, query in queries:
        problem = query_problem(query)
        if problem:
            yield doc.error_at(problem, path)
            continue
        problem = check_query(query) if check_query is not None else None
        if problem:
            yield doc.error_at(f"invalid SQL: {problem}", path)


def resolve_relative_paths(snapshot: DatasetSnapshot, base: Path) -> DatasetSnapshot:
    """A relative ``FilesGlob.path`` is relative to the folder of its YAML file, so a folder of snapshots and their
    data can be checked out anywhere (the block records the resolved absolute path)."""
    events = []
    for ev in snapshot.metadata:
        if isinstance(ev, SetPollingSource) and isinstance(ev.fetch, FetchStepFilesGlob):
            if not os.path.isabs(ev.fetch.path):
                ev = ev.replace(fetch=ev.fetch.replace(path=os.path.normpath(str(base / ev.fetch.path))))
        events.append(ev)
    return snapshot.replace(metadata=tuple(events))


def snapshot_files(folder: str | os.PathLike[str], *, recursive: bool = True) -> list[Path]:
    """The YAML files of a snapshot folder (and its subfolders), hidden ones (such as a ``.odf`` workspace) skipped:
    the same files the Airflow DAG factory makes DAGs of, so every DAG it builds gets its dataset."""
    root = Path(folder)
    found = root.rglob("*") if recursive else root.glob("*")
    return sorted(p for p in found
                  if p.suffix.lower() in (".yaml", ".yml") and p.is_file()
                  and not any(part.startswith(".") for part in p.relative_to(root).parts))
