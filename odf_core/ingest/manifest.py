"""Results of the fetch and prepare steps and their JSON "step manifests" in the staging directory.

The next step usually runs in another process (another Airflow task), so each step writes its result as
``<staging>/fetch.json`` or ``<staging>/prepare.json``.  Paths inside the staging directory are stored relative to it
and resolved again on loading, so the staging directory may be mounted at another place by the next worker.
A manifest is written atomically and last: its presence means the step finished.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from odf_core.ingest.errors import ManifestError
from odf_core.ingest.staging import atomic_write_text
from odf_core.metadata import SourceState, Timestamp
from odf_core.metadata.timestamp import InvalidTimestamp

FETCH_MANIFEST = "fetch.json"
PREPARE_MANIFEST = "prepare.json"
_VERSION = 1


@dataclass(frozen=True)
class FetchedFile:
    """One file to ingest: where it is now, when its events happened (if known), and its source-side name."""

    path: str
    event_time: Timestamp | None
    name: str


@dataclass(frozen=True)
class FetchResult:
    """Outcome of one fetch.

    ``up_to_date``: nothing new (HTTP 304, unchanged file, no pending glob file, cached source already ingested);
    then ``files`` is empty and ``new_source_state`` is the previous state, unchanged.
    ``files``: in ingest order, inside the staging directory.  ``new_source_state``: to record in
    ``AddData.newSourceState`` (None when the source gives nothing to resume from).  ``has_more``: more data is
    pending at the source, run another transaction.
    """

    up_to_date: bool
    files: tuple[FetchedFile, ...]
    new_source_state: SourceState | None
    has_more: bool
    bytes_fetched: int

    def to_json(self, staging_dir: str | None = None) -> str:
        return json.dumps(
            {
                "kind": "odf-fetch-result",
                "version": _VERSION,
                "upToDate": self.up_to_date,
                "hasMore": self.has_more,
                "bytesFetched": self.bytes_fetched,
                "newSourceState": _state_to_obj(self.new_source_state),
                "files": _files_to_obj(self.files, staging_dir),
            },
            indent=2,
        )

    @classmethod
    def from_json(cls, text: str, staging_dir: str | None = None, *, origin: str = "<fetch manifest>") -> "FetchResult":
        obj = _load(text, "odf-fetch-result", origin)
        try:
            return cls(
                up_to_date=_typed(obj, "upToDate", bool, origin),
                files=_files_from_obj(obj.get("files"), staging_dir, origin),
                new_source_state=_state_from_obj(obj.get("newSourceState"), origin),
                has_more=_typed(obj, "hasMore", bool, origin),
                bytes_fetched=_typed(obj, "bytesFetched", int, origin),
            )
        except (KeyError, TypeError, InvalidTimestamp) as e:
            raise ManifestError(f"{origin}: malformed fetch manifest: {e}") from None


def prepare_to_json(files: tuple[FetchedFile, ...], staging_dir: str | None = None) -> str:
    obj = {"kind": "odf-prepare-result", "version": _VERSION, "files": _files_to_obj(files, staging_dir)}
    return json.dumps(obj, indent=2)


def prepare_from_json(
    text: str, staging_dir: str | None = None, *, origin: str = "<prepare manifest>"
) -> tuple[FetchedFile, ...]:
    obj = _load(text, "odf-prepare-result", origin)
    return _files_from_obj(obj.get("files"), staging_dir, origin)


def write_fetch_manifest(staging_dir: str, result: FetchResult) -> str:
    path = os.path.join(staging_dir, FETCH_MANIFEST)
    atomic_write_text(path, result.to_json(staging_dir))
    return path


def read_fetch_manifest(staging_dir: str) -> FetchResult:
    """The result of the fetch step that ran into ``staging_dir``; ManifestError if it did not finish."""
    path = os.path.join(staging_dir, FETCH_MANIFEST)
    return FetchResult.from_json(_read(path, "fetch"), staging_dir, origin=path)


def write_prepare_manifest(staging_dir: str, files: tuple[FetchedFile, ...]) -> str:
    path = os.path.join(staging_dir, PREPARE_MANIFEST)
    atomic_write_text(path, prepare_to_json(files, staging_dir))
    return path


def read_prepare_manifest(staging_dir: str) -> tuple[FetchedFile, ...]:
    """The files the prepare step left in ``staging_dir`` (the input of the read step)."""
    path = os.path.join(staging_dir, PREPARE_MANIFEST)
    return prepare_from_json(_read(path, "prepare"), staging_dir, origin=path)


# --- helpers -----------------------------------------------------------------------------------------------------


def _read(path: str, step: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        raise ManifestError(f"{path} not found: the {step} step has not completed in this staging directory") from None


def _load(text: str, kind: str, origin: str) -> dict[str, Any]:
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise ManifestError(f"{origin}: not valid JSON: {e}") from None
    if not isinstance(obj, dict) or obj.get("kind") != kind:
        raise ManifestError(f"{origin}: not a {kind} manifest")
    if obj.get("version") != _VERSION:
        raise ManifestError(f"{origin}: unsupported manifest version {obj.get('version')!r} (expected {_VERSION})")
    return obj


def _typed(obj: dict[str, Any], key: str, kind: type, origin: str) -> Any:
    value = obj.get(key)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ManifestError(f"{origin}: {key} must be {kind.__name__} (got {value!r})")
    return value


def _state_to_obj(state: SourceState | None) -> dict[str, str] | None:
    if state is None:
        return None
    return {"sourceName": state.source_name, "kind": state.kind, "value": state.value}


def _state_from_obj(obj: Any, origin: str) -> SourceState | None:
    if obj is None:
        return None
    if not isinstance(obj, dict) or not all(isinstance(obj.get(k), str) for k in ("sourceName", "kind", "value")):
        raise ManifestError(f"{origin}: newSourceState must have string sourceName, kind and value (got {obj!r})")
    return SourceState(source_name=obj["sourceName"], kind=obj["kind"], value=obj["value"])


def _files_to_obj(files: tuple[FetchedFile, ...], staging_dir: str | None) -> list[dict[str, Any]]:
    root = os.path.abspath(staging_dir) if staging_dir else None
    out = []
    for f in files:
        path = os.path.abspath(f.path)
        if root and (path == root or path.startswith(root + os.sep)):
            path = os.path.relpath(path, root)
        out.append(
            {"path": path, "name": f.name, "eventTime": f.event_time.isoformat() if f.event_time else None}
        )
    return out


def _files_from_obj(obj: Any, staging_dir: str | None, origin: str) -> tuple[FetchedFile, ...]:
    if not isinstance(obj, list):
        raise ManifestError(f"{origin}: files must be a list (got {obj!r})")
    out = []
    for i, item in enumerate(obj):
        if not isinstance(item, dict) or not isinstance(item.get("path"), str) or not isinstance(item.get("name"), str):
            raise ManifestError(f"{origin}: files[{i}] must have string path and name (got {item!r})")
        path = item["path"]
        if not os.path.isabs(path) and staging_dir:
            path = os.path.join(os.path.abspath(staging_dir), path)
        event_time = item.get("eventTime")
        try:
            ts = Timestamp.parse(event_time) if event_time is not None else None
        except InvalidTimestamp as e:
            raise ManifestError(f"{origin}: files[{i}].eventTime: {e}") from None
        out.append(FetchedFile(path=path, event_time=ts, name=item["name"]))
    return tuple(out)
