"""A transform's SQL must be a query: ``odf add`` refuses an ``INSERT``/``DROP`` step with the YAML file and line,
before anything is written (no Spark: :mod:`odf_core.engine.sql_text`), instead of failing at the first pull."""
from __future__ import annotations

import pytest

from odf_core.cli import main
from odf_core.engine.sql_text import query_problem
from odf_core.workspace import Workspace

SNAPSHOT = """\
kind: DatasetSnapshot
version: 1
content:
  name: b
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs: [{datasetRef: a}]
      transform:
        kind: Sql
        engine: spark
        queries:
          - alias: t
            query: "select 1 as x"
          - query: |
              -- a comment first
              %s
"""
ROOT = """\
kind: DatasetSnapshot
version: 1
content:
  name: a
  kind: Root
  metadata:
    - kind: AddPushSource
      sourceName: app
      read: {kind: NdJson, schema: ["x INT"]}
      preprocess: {kind: Sql, engine: spark, query: "insert into t select * from input"}
      merge: {kind: Append}
"""


@pytest.mark.parametrize("sql", ["select 1", "  (( SELECT 1) union all (select 2))", ("/* c */ with t as (select 1) "
                                 "select * from t"), "-- x\nvalues (1), (2)", "from t select a", "table t",
                                 "FROM t |> where a > 1"])
def test_queries_pass(sql):
    assert query_problem(sql) is None


@pytest.mark.parametrize("sql,word", [("insert into x select 1", "INSERT"), ("drop table y", "DROP"),
                                      ("(create table z as select 1)", "CREATE"), ("/* select */ set a=1", "SET"),
                                      ("map a using 'cat' as b from t", "MAP")])
def test_statements_that_are_not_queries_are_refused(sql, word):
    assert query_problem(sql) == (f"not a query: it starts with '{word}'; a query starts with SELECT, WITH, VALUES, "
                                  "FROM or TABLE")
    assert query_problem("  ") == "not a query: it is empty; a query starts with SELECT, WITH, VALUES, FROM or TABLE"


def test_add_refuses_a_step_that_is_not_a_query_with_file_and_line(tmp_path, capsys):
    ws = str(tmp_path / ".odf")
    assert main(["-w", ws, "init"]) == 0
    root = tmp_path / "a.yaml"
    root.write_text(ROOT)
    capsys.readouterr()
    assert main(["-w", ws, "add", str(root)]) == 1
    assert capsys.readouterr().err == (
        f"odf: error: {root}:10: content.metadata[0].preprocess.query: not a query: it starts with 'INSERT'; a query "
        "starts with SELECT, WITH, VALUES, FROM or TABLE\n")
    assert main(["-w", ws, "list", "-o", "json"]) == 0
    assert capsys.readouterr().out == ""  # nothing was added
    root.write_text(ROOT.replace("insert into t select * from input", "select * from input"))
    assert main(["-w", ws, "add", str(root)]) == 0  # the input exists: only the query can refuse the derivative
    bad = tmp_path / "b.yaml"
    for statement in ("insert into x select 1", "drop table y"):
        bad.write_text(SNAPSHOT % statement)
        capsys.readouterr()
        assert main(["-w", ws, "add", str(bad)]) == 1
        word = statement.split()[0].upper()
        assert capsys.readouterr().err == (
            f"odf: error: {bad}:15: content.metadata[0].transform.queries[1].query: not a query: it starts with "
            f"'{word}'; a query starts with SELECT, WITH, VALUES, FROM or TABLE\n")
    assert [str(h.name) for h in Workspace.open(ws).list()] == ["a"]  # b was not added


def test_set_transform_refuses_a_step_that_is_not_a_query_with_file_and_line(tmp_path, capsys):
    """``odf set-transform DATASET FILE`` reads the file as ``odf add`` does: the same one line, nothing appended."""
    ws = str(tmp_path / ".odf")
    assert main(["-w", ws, "init"]) == 0
    bad = tmp_path / "b.yaml"
    bad.write_text(SNAPSHOT % "insert into x select 1")
    capsys.readouterr()
    assert main(["-w", ws, "set-transform", "b", str(bad)]) == 1
    assert capsys.readouterr().err == (
        f"odf: error: {bad}:15: content.metadata[0].transform.queries[1].query: not a query: it starts with "
        "'INSERT'; a query starts with SELECT, WITH, VALUES, FROM or TABLE\n")
