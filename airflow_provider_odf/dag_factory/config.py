"""The sidecar ``odf-dags.yaml``: Airflow settings for the DAGs of a snapshot folder — never ODF metadata.

::

    defaults:                 # every DAG of the folder
      odf_conn_id: odf_default
      schedule: "@daily"
    datasets:                 # per dataset name (case-insensitive), overriding the defaults
      com.example.trips:
        schedule: "0 * * * *"
        pool: spark
        fetch_options: {glob_batch: true}   # how the fetch step runs (odf_core.ingest.FetchOptions)
        push_to: s3://bucket/repo            # after each commit (and verify) push to s3://bucket/repo/<dataset>

A broken ``defaults`` section fails the whole DAG file (no DAG could be trusted: which workspace, which
schedule?); a broken per-dataset section only stops that dataset's DAG.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Callable, Literal

import yaml

from odf_core.errors import MetadataError
from odf_core.identity.names import HOSTNAME_RE


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """Safe YAML where a repeated key is an error (a second entry for a dataset must not silently win)."""


def _mapping_no_duplicates(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_no_duplicates)


class _Bad(Exception):
    """A value that does not fit its setting; the message says what was expected."""


def _str(v: Any) -> str:
    if not isinstance(v, str) or not v.strip():
        raise _Bad("expected a non-empty string")
    return v.strip()


def _opt_str(v: Any) -> str | None:
    return None if v is None else _str(v)


def _int_ge0(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise _Bad("expected a whole number >= 0")
    return v


def _seconds(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
        raise _Bad("expected a positive number of seconds")
    return float(v)


def _opt_seconds(v: Any) -> float | None:
    return None if v is None else _seconds(v)


def _bool(v: Any) -> bool:
    if not isinstance(v, bool):
        raise _Bad("expected true or false")
    return v


def _tags(v: Any) -> tuple[str, ...]:
    if not isinstance(v, list) or not all(isinstance(t, str) and t.strip() for t in v):
        raise _Bad("expected a list of non-empty strings")
    return tuple(t.strip() for t in v)


def _one_of(*allowed: str) -> Callable[[Any], str]:
    def check(v: Any) -> str:
        if v not in allowed:
            raise _Bad(f"expected one of {', '.join(allowed)}")
        return v

    return check


def _int_gt0(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise _Bad("expected a whole number > 0")
    return v


# The fields of odf_core.ingest.FetchOptions (kept in step by a test; not imported: parsing stays light).
FETCH_OPTIONS: dict[str, Callable[[Any], Any]] = {
    "timeout_s": _seconds, "glob_batch": _bool, "hardlink": _bool, "container_batch_size": _int_gt0,
    "docker_host": _str, "container_network": _str, "container_timeout_s": _seconds,
    "deadline_s": _seconds, "min_bytes_per_s": _int_ge0, "stall_window_s": _seconds,
}


def _fetch_options(v: Any) -> tuple[tuple[str, Any], ...]:
    if not isinstance(v, dict):
        raise _Bad(f"expected a mapping of fetch options ({', '.join(FETCH_OPTIONS)})")
    out = {}
    for key, value in v.items():
        check = FETCH_OPTIONS.get(key)
        if check is None:
            raise _Bad(f"unknown fetch option {key!r} (allowed: {', '.join(FETCH_OPTIONS)})")
        try:
            out[key] = check(value)
        except _Bad as e:
            raise _Bad(f"fetch option {key!r}: {e}") from None
    return tuple(sorted(out.items()))


_REPO = re.compile(r"(?:(?:file|s3|https?)://\S+|[A-Za-z0-9][A-Za-z0-9._-]*)")


def _push_to(v: Any) -> str | None:
    """A repository: a URL (file://, s3://; the dataset goes to URL/<name>) or a name from 'odf repo add'."""
    if v is None:
        return None
    if not isinstance(v, str) or not _REPO.fullmatch(v.strip()) or v.strip().lower().startswith("http"):
        raise _Bad("expected a repository URL (file://…, s3://…) or the name of a repository added with "
                   "'odf repo add'")
    return v.strip().rstrip("/")


def _namespace(v: Any) -> str:
    v = _str(v)
    if not re.match(r"^[A-Za-z0-9._~-]+$", v):
        raise _Bad("expected letters, digits, '.', '_', '~' or '-' (it becomes the host part of odf:// URIs)")
    return v.lower()


@dataclass(frozen=True)
class DagSettings:
    """Settings of one dataset's DAG (or task group)."""

    schedule: str | None = "@daily"  # roots; derivatives run on their inputs' asset events
    retries: int = 2
    retry_delay: float = 60.0
    pool: str | None = None
    owner: str = "odf"
    tags: tuple[str, ...] = ()
    spark_conn_id: str | None = None
    execution_timeout: float | None = None
    verify: Literal["integrity", "full", "none"] = "integrity"
    sensor: str = "deferrable"  # deferrable | reschedule | poke | none (polling roots)
    sensor_poke_interval: float = 60.0
    sensor_timeout: float = 600.0
    asset_trigger: str = "any"  # any | all (derivatives: one updated input is enough, or all of them)
    fetch_options: tuple[tuple[str, Any], ...] = ()  # polling roots: FetchOptions fields, e.g. glob_batch
    push_to: str | None = None  # a repository (URL or registered name): push the dataset there after each commit


@dataclass(frozen=True)
class FolderSettings:
    """Settings of a whole folder: where the workspace is, how its DAGs are laid out, per-dataset overrides."""

    odf_conn_id: str = "odf_default"
    asset_namespace: str | None = None
    whole_graph: bool = False
    sync_schedule: str | None = "@hourly"
    defaults: DagSettings = DagSettings()
    datasets: dict[str, DagSettings] = field(default_factory=dict)  # by lower-case dataset name
    dataset_errors: dict[str, str] = field(default_factory=dict)  # by lower-case dataset name
    explicit: dict[str, frozenset[str]] = field(default_factory=dict)  # settings a dataset's section sets itself
    file: str | None = None

    @property
    def namespace(self) -> str:
        """Host part of the datasets' ``odf://`` asset URIs."""
        return self.asset_namespace or self.odf_conn_id.lower()

    def for_dataset(self, key: str) -> DagSettings:
        return self.datasets.get(key, self.defaults)


_DAG_FIELDS: dict[str, Callable[[Any], Any]] = {
    "schedule": _opt_str, "retries": _int_ge0, "retry_delay": _seconds, "pool": _opt_str, "owner": _str,
    "tags": _tags, "spark_conn_id": _opt_str, "execution_timeout": _opt_seconds,
    "verify": _one_of("integrity", "full", "none"), "sensor": _one_of("deferrable", "reschedule", "poke", "none"),
    "sensor_poke_interval": _seconds, "sensor_timeout": _seconds, "asset_trigger": _one_of("any", "all"),
    "fetch_options": _fetch_options, "push_to": _push_to,
}
_FOLDER_FIELDS: dict[str, Callable[[Any], Any]] = {
    "odf_conn_id": _str, "asset_namespace": _namespace, "whole_graph": _bool, "sync_schedule": _opt_str,
}
assert set(_DAG_FIELDS) == {f.name for f in fields(DagSettings)}


def _mapping(data: Any, file: str, path: str) -> dict[str, Any]:
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise MetadataError("expected a mapping", file=file, path=path, value=data)
    return data


def _parse_fields(data: dict[str, Any], allowed: dict[str, Callable[[Any], Any]], file: str, path: str,
                  hint: str) -> dict[str, Any]:
    out = {}
    for key, value in data.items():
        where = f"{path}.{key}" if path else str(key)
        check = allowed.get(key)
        if check is None:
            raise MetadataError(f"unknown setting ({hint}; allowed: {', '.join(sorted(allowed))})",
                                file=file, path=where)
        try:
            out[key] = check(value)
        except _Bad as e:
            raise MetadataError(str(e), file=file, path=where, value=value) from None
    return out


def _merge(base: DagSettings, values: dict[str, Any]) -> DagSettings:
    if "tags" in values:  # tags add up: the defaults' tags stay on every DAG
        values = {**values, "tags": tuple(dict.fromkeys(base.tags + values["tags"]))}
    return replace(base, **values)


def load_settings(file: str | Path | None) -> FolderSettings:
    """Read the sidecar (None: built-in defaults). Raises :class:`MetadataError` only for the top level and
    ``defaults``; problems of one dataset's section land in ``dataset_errors``."""
    if file is None:
        return FolderSettings()
    name = str(file)
    try:
        data = yaml.load(Path(file).read_text(encoding="utf-8"), Loader=_Loader)
    except OSError as e:
        raise MetadataError(f"cannot read file: {e}", file=name) from None
    except yaml.YAMLError as e:
        raise MetadataError(f"invalid YAML: {e}", file=name) from None
    top = _mapping(data, name, "")
    unknown = set(top) - {"defaults", "datasets"}
    if unknown:
        raise MetadataError("unknown section (allowed: defaults, datasets)", file=name,
                            path=sorted(map(str, unknown))[0])
    hint = "Airflow settings only: ODF metadata belongs in the DatasetSnapshot files"
    defaults_raw = _mapping(top.get("defaults"), name, "defaults")
    folder_fields = {k: v for k, v in defaults_raw.items() if k in _FOLDER_FIELDS}
    dag_fields = {k: v for k, v in defaults_raw.items() if k not in _FOLDER_FIELDS}
    folder = _parse_fields(folder_fields, _FOLDER_FIELDS, name, "defaults", hint)
    defaults = _merge(DagSettings(), _parse_fields(dag_fields, _DAG_FIELDS, name, "defaults", hint))

    per_dataset: dict[str, DagSettings] = {}
    errors: dict[str, str] = {}
    explicit: dict[str, frozenset[str]] = {}
    for ds, section in _mapping(top.get("datasets"), name, "datasets").items():
        path = f"datasets.{ds}"
        try:
            if not isinstance(ds, str) or not HOSTNAME_RE.match(ds):
                raise MetadataError("not a dataset name", file=name, path=path, value=ds)
            raw = _mapping(section, name, path)
            misplaced = sorted(set(raw) & set(_FOLDER_FIELDS))
            if misplaced:
                raise MetadataError("only allowed under defaults (it applies to the whole folder)",
                                    file=name, path=f"{path}.{misplaced[0]}")
            if ds.lower() in per_dataset or ds.lower() in errors:
                raise MetadataError("dataset listed twice (names are case-insensitive)", file=name, path=path)
            per_dataset[ds.lower()] = _merge(defaults, _parse_fields(raw, _DAG_FIELDS, name, path, hint))
            explicit[ds.lower()] = frozenset(raw)
        except MetadataError as e:
            errors[str(ds).lower()] = str(e)
    return FolderSettings(defaults=defaults, datasets=per_dataset, dataset_errors=errors, explicit=explicit,
                          file=name, **folder)
