"""YAML form of manifests (conformance §2): round trips, RFC-013 enums, and clear errors for every kind of bad input."""
from __future__ import annotations

import copy

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from odf_core.errors import MetadataError
from odf_core.metadata import DatasetSnapshot
from odf_core.metadata.events import METADATA_EVENT
from odf_core.metadata.fragments import ReadStepNdJson, SourceOrdering
from odf_core.metadata.yaml_serde import dump_manifest, load_manifest, manifest_from_data, read_manifest_file

from .strategies import for_type, names
from .test_flatbuffers import blocks

SNAPSHOT = {
    "kind": "DatasetSnapshot",
    "version": 1,
    "content": {
        "name": "com.example.cities",
        "kind": "Root",
        "metadata": [
            {
                "kind": "SetPollingSource",
                "fetch": {"kind": "FilesGlob", "path": "/data/*.csv", "order": "ByName",
                          "eventTime": {"kind": "FromPath", "pattern": r"(\d{4}-\d{2}-\d{2})"}},
                "read": {"kind": "Csv", "header": True, "schema": ["city STRING", "population BIGINT"]},
                "merge": {"kind": "Ledger", "primaryKey": ["city"]},
            },
            {"kind": "SetVocab", "eventTimeColumn": "date"},
        ],
    },
}


@settings(max_examples=300, deadline=None)
@given(blocks())
def test_block_yaml_round_trip(block):
    text = dump_manifest(block)
    assert load_manifest(text, expected="MetadataBlock") == block


@settings(max_examples=100, deadline=None)
@given(st.builds(DatasetSnapshot, name=names, kind=for_type(DatasetSnapshot).map(lambda s: s.kind),
                 metadata=st.lists(st.one_of([for_type(c) for c in METADATA_EVENT.variants]), max_size=4).map(tuple)))
def test_snapshot_yaml_round_trip(snapshot):
    assert load_manifest(dump_manifest(snapshot)) == snapshot


def test_output_is_pascal_case_camel_case_schema_order_and_omits_absent():
    snap = manifest_from_data(copy.deepcopy(SNAPSHOT))
    out = yaml.safe_load(dump_manifest(snap))
    src = out["content"]["metadata"][0]
    assert list(src) == ["kind", "fetch", "read", "merge"]
    assert list(src["fetch"]) == ["kind", "path", "eventTime", "order"]
    assert src["read"] == {"kind": "Csv", "schema": ["city STRING", "population BIGINT"], "header": True}


@pytest.mark.parametrize("spelling", ["NdJson", "ndJson", "ndjson"])
def test_rfc013_accepts_pascal_camel_lower(spelling):
    data = copy.deepcopy(SNAPSHOT)
    data["content"]["metadata"][0]["read"] = {"kind": spelling}
    data["content"]["metadata"][0]["fetch"]["order"] = spelling.replace("NdJson", "ByName").replace(
        "ndJson", "byName").replace("ndjson", "byname")
    snap = manifest_from_data(data)
    assert isinstance(snap.metadata[0].read, ReadStepNdJson)
    assert snap.metadata[0].fetch.order is SourceOrdering.BY_NAME


def test_block_timestamps_keep_nanoseconds_in_yaml():
    text = """
kind: MetadataBlock
version: 2
content:
  systemTime: 2024-01-01T00:00:00.123456789Z
  sequenceNumber: 1
  event:
    kind: SetInfo
    description: x
"""
    block = load_manifest(text)
    assert block.system_time.epoch_ns % 1_000_000_000 == 123456789
    assert "2024-01-01T00:00:00.123456789Z" in dump_manifest(block)


def _mutate(path: list, value, delete=False):
    data = copy.deepcopy(SNAPSHOT)
    node = data
    for p in path[:-1]:
        node = node[p]
    if delete:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return data


BAD = [
    # (mutation, expected path in message, expected fragment of the problem, offending value shown)
    (_mutate(["content", "metadata", 0, "fetch", "kind"], "Ftp"),
     "content.metadata[0].fetch.kind", "unknown FetchStep kind", "'Ftp'"),
    (_mutate(["content", "metadata", 0, "read", "kind"], "nDjson"),
     "content.metadata[0].read.kind", "unknown ReadStep kind", "'nDjson'"),
    (_mutate(["content", "metadata", 0, "merge", "primaryKey"], None, delete=True),
     "content.metadata[0].merge.primaryKey", "missing required property", None),
    (_mutate(["content", "metadata", 0, "read", "header"], "yes please"),
     "content.metadata[0].read.header", "expected a boolean", "'yes please'"),
    (_mutate(["content", "metadata", 0, "fetch", "order"], "ByDate"),
     "content.metadata[0].fetch.order", "invalid SourceOrdering", "'ByDate'"),
    (_mutate(["content", "metadata", 0, "fetch", "colour"], "red"),
     "content.metadata[0].fetch.colour", "unknown property of FilesGlob", None),
    (_mutate(["content", "kind"], "Leaf"), "content.kind", "invalid DatasetKind", "'Leaf'"),
    (_mutate(["content", "name"], "in^valid"), "content.name", "invalid dataset", "'in^valid'"),
    (_mutate(["content", "metadata"], {"a": 1}), "content.metadata", "expected a list", None),
    (_mutate(["content", "metadata", 1, "kind"], "SetColour"),
     "content.metadata[1].kind", "unknown MetadataEvent kind", "'SetColour'"),
    (_mutate(["content", "metadata", 0, "read", "schema"], "id INT"),
     "content.metadata[0].read.schema", "expected a list", "'id INT'"),
    (_mutate(["kind"], "Dataset"), "kind", "unknown manifest kind", "'Dataset'"),
    (_mutate(["version"], 7), "version", "unsupported DatasetSnapshot version", "7"),
]


@pytest.mark.parametrize("data,path,problem,value", BAD)
def test_bad_snapshot_names_file_path_and_value(tmp_path, data, path, problem, value):
    f = tmp_path / "bad.yaml"
    f.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(MetadataError) as ei:
        read_manifest_file(f)
    msg = str(ei.value)
    assert msg.startswith(str(f)), msg
    assert f": {path}:" in msg, msg
    assert problem in msg, msg
    if value:
        assert value in msg, msg


@pytest.mark.parametrize("text,fragment", [
    ("kind: DatasetSnapshot\nversion: 1\ncontent: {name: x, kind: Root, metadata: [\n",
     ":3: invalid YAML (at the end of the file): "),
    ("kind: DatasetSnapshot\nkind: MetadataBlock\nversion: 1\ncontent: {}\n",
     ":2: invalid YAML (column 1): duplicate key"),
    ("- just\n- a list\n", ":1: expected a manifest mapping"),
    ("", ": expected exactly one YAML document"),
])
def test_yaml_syntax_errors_name_the_file_and_line(tmp_path, text, fragment):
    f = tmp_path / "broken.yaml"
    f.write_text(text)
    with pytest.raises(MetadataError) as ei:
        read_manifest_file(f)
    assert str(ei.value).startswith(f"{f}{fragment}"), str(ei.value)


LINES = """kind: DatasetSnapshot
version: 1
content:
  name: x
  kind: Root
  metadata:
    - kind: AddPushSource
      sourceName: app
      read:
        kind: Csv
        schema:
          - a INT
          - 7
      merge:
        kind: Ledger
"""


@pytest.mark.parametrize("edit,expected", [
    ({}, ":13: content.metadata[0].read.schema[1]: expected a string"),  # a list item: its own line
    ({"        kind: Csv": "        kind: Csv\n        colour: red"}, ":11: content.metadata[0].read.colour: unknown"),
    # its mapping
    ({"          - 7": "          - b INT"}, ":14: content.metadata[0].merge.primaryKey: missing required"),
    ({"  kind: Root": "  kind: Leaf"}, ":5: content.kind: invalid DatasetKind"),
    ({"    - kind: AddPushSource": "    - kind: AddPushSourze"}, ":7: content.metadata[0].kind: unknown"),
])
def test_property_errors_name_the_line(edit, expected):
    text = LINES
    for old, new in edit.items():
        text = text.replace(old, new)
    with pytest.raises(MetadataError) as ei:
        load_manifest(text, "s.yaml")
    assert str(ei.value).startswith("s.yaml" + expected), str(ei.value)


@pytest.mark.parametrize("field,value,problem", [
    ("sequenceNumber", -1, "out of range"),
    ("sequenceNumber", "1", "expected an integer"),
    ("sequenceNumber", True, "expected an integer"),
    ("systemTime", "yesterday", "invalid RFC 3339"),
    ("prevBlockHash", "f1620zz", "invalid base16"),
    ("prevBlockHash", "x1234", "unsupported multibase"),
])
def test_bad_block_fields(field, value, problem):
    data = {"kind": "MetadataBlock", "version": 2,
            "content": {"systemTime": "2024-01-01T00:00:00Z", "sequenceNumber": 0, "event": {"kind": "SetInfo"}}}
    data["content"][field] = value
    with pytest.raises(MetadataError) as ei:
        manifest_from_data(data, "b.yaml")
    assert f"content.{field}" in str(ei.value) and problem in str(ei.value)


def test_bad_dataset_id_in_seed():
    data = {"kind": "MetadataBlock", "version": 2, "content": {
        "systemTime": "2024-01-01T00:00:00Z", "sequenceNumber": 0,
        "event": {"kind": "Seed", "datasetId": "did:odf:xyz", "datasetKind": "Root"}}}
    with pytest.raises(MetadataError, match=r"content\.event\.datasetId.*did:odf:xyz"):
        manifest_from_data(data)


def test_snapshot_query_is_kept_as_written_when_read():
    data = {"kind": "DatasetSnapshot", "version": 1, "content": {"name": "d", "kind": "Derivative", "metadata": [
        {"kind": "SetTransform", "inputs": [{"datasetRef": "a"}],
         "transform": {"kind": "Sql", "engine": "spark", "query": "select * from a"}}]}}
    snap = manifest_from_data(data)
    t = snap.metadata[0].transform
    assert t.query == "select * from a" and t.queries is None
    n = t.normalized()
    assert n.query is None and n.queries[0].query == "select * from a" and n.queries[0].alias is None
