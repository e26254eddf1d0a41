"""The warm engine's allowed roots (no Spark): which paths of a request are checked, and how they resolve.

The first test keeps :data:`PATH_FIELDS` in step with the protocol: a new path-like field in a request type that is
not listed would be a path the engine never checks."""
from __future__ import annotations

import os
import re

import pytest

from odf_core.engine import protocol  # noqa: F401 - registers the request types walked below
from odf_core.engine.base import EngineError
from odf_core.engine.confinement import PATH_FIELDS, AllowedRoots, PathRefused, default_roots, paths_of, \
    string_fields
from odf_core.metadata import RawQueryRequest, TransformSql

from .test_protocol import REQUESTS

PATH_LIKE = re.compile(r"path|dir|file|url|uri|location|folder", re.IGNORECASE)
# Path-like names that are not files the engine opens, and why.
NOT_PATHS = {
    ("ReadStepJson", "sub_path"): "a JSON path inside the document",
    ("ReadStepEsriShapefile", "sub_path"): "a name pattern matched against the members of the input file",
}


def test_every_path_like_field_of_a_request_type_is_checked():
    fields = string_fields()
    path_like = {f for f in fields if PATH_LIKE.search(f[1])}
    unlisted = path_like - PATH_FIELDS - set(NOT_PATHS)
    assert not unlisted, f"request fields that look like paths but are not in confinement.PATH_FIELDS: {unlisted}"
    assert PATH_FIELDS <= fields, f"PATH_FIELDS names fields that do not exist: {PATH_FIELDS - fields}"
    assert set(NOT_PATHS) <= fields


def test_paths_of_finds_every_path_of_the_sample_requests():
    found = {r.__class__.__name__ + ":" + where: p for r in REQUESTS for where, p in paths_of(r)}
    assert found == {
        "IngestRequest:work_dir": "/w", "IngestRequest:read.inputs[0].path": "/p",
        "IngestRequest:merge.output_path": "/o", "IngestRequest:merge.new_checkpoint_path": "/c",
        "IngestRequest:merge.prev_data_paths[0]": "/d/1", "IngestRequest:merge.prev_data_paths[1]": "/d/2",
        "IngestRequest:merge.input_path": "/r",
        "OdfTransformRequest:request.query_inputs[0].data_paths[0]": "/d/0",
        "OdfTransformRequest:request.query_inputs[0].schema_file": "/s",
        "OdfTransformRequest:request.new_checkpoint_path": "/c", "OdfTransformRequest:request.new_data_path": "/o",
        "OdfTransformRequest:histories[0].data_paths[0]": "/d/0",
        "ValidateQueryRequest:inputs[0].schema_file": "/s",
        "SqlRequest:tables[0].data_paths[0]": "/d",
        "RawQueryRequest:input_data_paths[0]": "/a", "RawQueryRequest:output_data_path": "/o",
    }


def test_paths_resolve_after_symlinks_and_dot_dot(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "link").symlink_to(outside)
    roots = AllowedRoots.parse([str(root)])
    assert roots.refusal(str(root / "a" / "new.parquet")) is None  # not there yet: still checked lexically
    assert roots.refusal(f"file://{root}/x.parquet") is None
    assert roots.refusal(str(root)) is None
    assert "outside the engine's allowed roots" in roots.refusal(str(root / ".." / "outside" / "x"))
    assert roots.refusal(str(root) + "-sibling/x") is not None  # a prefix of the name is not a parent
    reason = roots.refusal(str(root / "link" / "x.parquet"))
    assert reason == f"it resolves to {outside}/x.parquet, outside the engine's allowed roots"
    assert "glob" in roots.refusal(f"{root}/{{x,../outside}}/y")
    assert "glob" in roots.refusal(f"{root}/*")


def test_object_store_roots():
    roots = AllowedRoots.parse(["s3://bucket/odf/"])
    assert roots.refusal("s3://bucket/odf/ws/x.parquet") is None
    assert roots.refusal("s3a://bucket/odf/ws/x.parquet") is None  # Spark's connector names the same bucket
    assert roots.refusal("s3://bucket/odf-other/x") is not None
    assert roots.refusal("s3://other/odf/x") is not None
    assert "'..'" in roots.refusal("s3://bucket/odf/../secret/x")
    assert roots.refusal("/tmp/x") is not None  # an object-store root allows no local path
    with pytest.raises(EngineError, match="--allow-path 's3://': expected a directory or s3://bucket"):
        AllowedRoots.parse(["s3://"])


def test_default_roots_are_the_working_temp_and_staging_directories(tmp_path, monkeypatch):
    import tempfile

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ODF_STAGING_DIR", "/var/odf-staging")
    assert default_roots() == [str(tmp_path), tempfile.gettempdir(), "/var/odf-staging"]
    monkeypatch.chdir("/")
    assert "/" not in default_roots()  # an engine started from / would otherwise allow everything


def test_check_names_the_field_and_the_path(tmp_path):
    roots = AllowedRoots.parse([str(tmp_path)])
    raw = REQUESTS[-2]
    with pytest.raises(PathRefused) as e:
        roots.check(raw, "raw query")
    assert str(e.value).startswith("raw query: input_data_paths[0] '/a' refused: it is outside the engine's "
                                   f"allowed roots ({os.path.realpath(tmp_path)}); start the engine with "
                                   "--allow-path DIR")
    with pytest.raises(PathRefused, match=r"'s3://other/x' refused: it is outside .*--allow-path s3://BUCKET/PREFIX"):
        roots.check(RawQueryRequest(input_data_paths=(str(tmp_path / "in"),), transform=TransformSql(
            engine="spark", query="SELECT 1"), output_data_path="s3://other/x"), "raw query")
