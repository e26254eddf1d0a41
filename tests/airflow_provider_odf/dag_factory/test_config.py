"""The sidecar settings file: types, placement rules and precise error locations."""
from __future__ import annotations

import pytest

from odf_core.errors import MetadataError

from airflow_provider_odf.dag_factory.config import DagSettings, FolderSettings, load_settings


def sidecar(tmp_path, text: str):
    f = tmp_path / "odf-dags.yaml"
    f.write_text(text)
    return f


def test_no_sidecar_means_builtin_defaults():
    s = load_settings(None)
    assert s == FolderSettings() and s.namespace == "odf_default"
    assert s.for_dataset("any.thing") == DagSettings()


def test_defaults_and_overrides_merge(tmp_path):
    s = load_settings(sidecar(tmp_path, """
defaults:
  odf_conn_id: Lake
  retries: 4
  tags: [a, b]
  execution_timeout: 60
datasets:
  Com.Example.X:
    retries: 0
    tags: [b, c]
    pool: spark
"""))
    assert s.odf_conn_id == "Lake" and s.namespace == "lake"
    assert (s.defaults.retries, s.defaults.tags, s.defaults.execution_timeout) == (4, ("a", "b"), 60.0)
    x = s.for_dataset("com.example.x")  # names are case-insensitive
    assert (x.retries, x.tags, x.pool, x.execution_timeout) == (0, ("a", "b", "c"), "spark", 60.0)
    assert s.explicit["com.example.x"] == {"retries", "tags", "pool"}
    assert s.for_dataset("other") == s.defaults


@pytest.mark.parametrize("text, location, problem", [
    ("defaults:\n  retries: two\n", "defaults.retries", "expected a whole number >= 0 (got 'two')"),
    ("defaults:\n  retries: true\n", "defaults.retries", "expected a whole number >= 0 (got True)"),
    ("defaults:\n  retry_delay: 0\n", "defaults.retry_delay", "expected a positive number of seconds"),
    ("defaults:\n  sensor: sometimes\n", "defaults.sensor", "expected one of deferrable, reschedule, poke, none"),
    ("defaults:\n  whole_graph: 'yes'\n", "defaults.whole_graph", "expected true or false"),
    ("defaults:\n  asset_namespace: 'a/b'\n", "defaults.asset_namespace", "expected letters, digits"),
    ("defaults:\n  tags: odf\n", "defaults.tags", "expected a list of non-empty strings"),
    ("defaults:\n  primaryKey: [id]\n", "defaults.primaryKey", "unknown setting (Airflow settings only"),
    ("default:\n  retries: 1\n", "default", "unknown section (allowed: defaults, datasets)"),
    ("defaults: [1]\n", "defaults", "expected a mapping"),
    ("defaults: {retries: 1\n", "", "invalid YAML"),
    ("datasets:\n  a.b: {}\n  a.b: {retries: 1}\n", "", "duplicate key 'a.b'"),
])
def test_top_level_problems_raise_with_location(tmp_path, text, location, problem):
    f = sidecar(tmp_path, text)
    with pytest.raises(MetadataError) as e:
        load_settings(f)
    assert e.value.file == str(f) and e.value.path == location
    assert problem in str(e.value)


def test_missing_explicit_file_is_an_error(tmp_path):
    with pytest.raises(MetadataError, match="cannot read file"):
        load_settings(tmp_path / "absent.yaml")


def test_per_dataset_problems_are_collected_not_raised(tmp_path):
    s = load_settings(sidecar(tmp_path, """
datasets:
  good.one: {retries: 1}
  bad.one: {verify: always}
  worse.one: {odf_conn_id: other}
  not_a_name!: {}
  twice: {}
  TWICE: {}
"""))
    assert set(s.datasets) == {"good.one", "twice"}
    assert "datasets.bad.one.verify: expected one of integrity, full, none" in s.dataset_errors["bad.one"]
    assert "datasets.worse.one.odf_conn_id: only allowed under defaults" in s.dataset_errors["worse.one"]
    assert "not a dataset name" in s.dataset_errors["not_a_name!"]
    assert "dataset listed twice" in s.dataset_errors["twice"]


def test_fetch_options_are_checked_against_the_ingest_fetch_options(tmp_path):
    from dataclasses import fields

    from odf_core.ingest import FetchOptions

    from airflow_provider_odf.dag_factory.config import FETCH_OPTIONS

    assert set(FETCH_OPTIONS) == {f.name for f in fields(FetchOptions)}
    s = load_settings(sidecar(tmp_path, """
defaults:
  fetch_options: {timeout_s: 20}
datasets:
  a.b: {fetch_options: {glob_batch: true, container_network: bridge}}
  c.d: {fetch_options: {glob_batch: 'yes'}}
  e.f: {fetch_options: {parallel: 4}}
  g.h: {fetch_options: [glob_batch]}
"""))
    assert s.defaults.fetch_options == (("timeout_s", 20.0),)
    options = dict(s.for_dataset("a.b").fetch_options)
    assert options == {"glob_batch": True, "container_network": "bridge"}
    FetchOptions(**options)  # what the fetch task will build from them
    assert "datasets.c.d.fetch_options: fetch option 'glob_batch': expected true or false" in s.dataset_errors["c.d"]
    assert "unknown fetch option 'parallel' (allowed: timeout_s, glob_batch" in s.dataset_errors["e.f"]
    assert "expected a mapping of fetch options" in s.dataset_errors["g.h"]


def test_download_limits_are_fetch_options(tmp_path):
    from odf_core.ingest import FetchOptions

    s = load_settings(sidecar(tmp_path, """
defaults:
  fetch_options: {deadline_s: 7200, min_bytes_per_s: 0, stall_window_s: 30}
datasets:
  a.b: {fetch_options: {min_bytes_per_s: -1}}
  c.d: {fetch_options: {deadline_s: 0}}
"""))
    options = dict(s.defaults.fetch_options)
    assert options == {"deadline_s": 7200.0, "min_bytes_per_s": 0, "stall_window_s": 30.0}
    assert FetchOptions(**options).deadline_s == 7200.0
    assert "fetch option 'min_bytes_per_s': expected a whole number >= 0" in s.dataset_errors["a.b"]
    assert "fetch option 'deadline_s': expected a positive number of seconds" in s.dataset_errors["c.d"]
