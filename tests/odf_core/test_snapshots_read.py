"""Reading snapshot files: every document validated on its own, each problem as FILE:LINE: path: problem."""
from __future__ import annotations

from pathlib import Path

import pytest

from odf_core.errors import MetadataError
from odf_core.snapshot_read import read_snapshot_file
from odf_core.snapshots import load_snapshot_files

ROOT = """kind: DatasetSnapshot
version: 1
content:
  name: {name}
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch:
        kind: FilesGlob
        path: data/*.csv
      read:
        kind: Csv
        header: true
        schema:
          - city STRING
          - population {type}
      merge:
        kind: Ledger
        primaryKey: [city]
"""
DERIVED = """kind: DatasetSnapshot
version: 1
content:
  name: derived
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs:
        - datasetRef: cities
      transform:
        kind: Sql
        engine: spark
        queries:
          - alias: big
            query: select * from cities where population > 1000
          - query: select city from big
"""


def write(tmp_path: Path, text: str, name: str = "s.yaml") -> Path:
    f = tmp_path / name
    f.write_text(text)
    return f


@pytest.mark.parametrize("text", ["", "# only a comment\n", "---\n...\n"])
def test_a_file_without_a_snapshot_is_a_problem_naming_it(tmp_path, text):
    f = write(tmp_path, text)
    (doc,) = read_snapshot_file(f)
    assert str(doc.error) == f"{f}: no DatasetSnapshot document in this file (it is empty)"
    with pytest.raises(MetadataError, match="no DatasetSnapshot document"):
        load_snapshot_files([f])


def test_a_misspelled_type_is_refused_with_file_line_path_and_value(tmp_path):
    f = write(tmp_path, ROOT.format(name="cities", type="STRANG"))
    (doc,) = read_snapshot_file(f)
    assert str(doc.error) == (
        f"{f}:16: content.metadata[0].read.schema[1]: invalid DDL column: unknown type 'STRANG' (did you mean "
        "STRING?) (at character 12) (got 'population STRANG')")
    assert doc.name == "cities" and doc.snapshot is None  # the name is still known: the problem has a dataset


def test_each_document_stands_alone(tmp_path):
    text = ROOT.format(name="good", type="BIGINT") + "---\n" + ROOT.format(name="bad", type="BIGINT").replace(
        "kind: Ledger", "kind: Ledgr")
    f = write(tmp_path, text)
    good, bad = read_snapshot_file(f)
    assert good.error is None and good.snapshot.name == "good"
    assert str(bad.error).startswith(f"{f}:38: content.metadata[0].merge.kind: unknown MergeStrategy kind")
    assert bad.name == "bad"


def test_unreadable_names_stay_unknown(tmp_path):
    (doc,) = read_snapshot_file(write(tmp_path, ROOT.format(name="in^valid", type="INT")))
    assert doc.name is None and "content.name" in str(doc.error)
    (doc,) = read_snapshot_file(write(tmp_path, "kind: DatasetSnapshot\ncontent: [\n"))
    assert doc.name is None and "invalid YAML" in str(doc.error)


def test_names_with_an_account_are_refused(tmp_path):
    f = write(tmp_path, ROOT.format(name="alice/cities", type="INT"))
    (doc,) = read_snapshot_file(f)
    assert str(doc.error).startswith(f"{f}:4: content.name: a workspace is single-tenant")


def test_relative_glob_paths_are_relative_to_the_file(tmp_path):
    (tmp_path / "sub").mkdir()
    (doc,) = read_snapshot_file(write(tmp_path / "sub", ROOT.format(name="c", type="INT")))
    assert doc.snapshot.metadata[0].fetch.path == str(tmp_path / "sub" / "data" / "*.csv")


def test_the_query_hook_sees_every_query_and_locates_its_problem(tmp_path):
    """The hook an engine can fill in (pure Python cannot parse Spark SQL): here a stand-in that refuses one query."""
    f = write(tmp_path, DERIVED)
    seen: list[str] = []

    def check(query: str) -> str | None:
        seen.append(query)
        return "table or view not found: big" if query.endswith("from big") else None

    (doc,) = read_snapshot_file(f, check_query=check)
    assert seen == ["select * from cities where population > 1000", "select city from big"]
    assert str(doc.error) == (f"{f}:16: content.metadata[0].transform.queries[1].query: invalid SQL: table or view "
                              "not found: big")
    (doc,) = read_snapshot_file(f)  # without a hook SQL is left to Spark
    assert doc.error is None
