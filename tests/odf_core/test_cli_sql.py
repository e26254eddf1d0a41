"""``odf sql``: dataset names as written (dots, hyphens), a "did you mean" for unknown ones, and a shell that keeps
one Spark session for every statement."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from odf_core.cli import main
from odf_core.errors import OdfError
from odf_core.engine.sql_text import first_word, split_statements
from odf_core.query import resolve_names

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOT = """
kind: DatasetSnapshot
version: 1
content:
  name: my.data-set
  kind: Root
  metadata:
    - kind: AddPushSource
      sourceName: app
      read: {kind: NdJson, schema: ["city STRING", "v INT"]}
      merge: {kind: Append}
"""


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_names_are_quoted_where_unquoted_and_left_alone_elsewhere():
    names = ["my.data-set", "cities"]
    assert resolve_names("select a-1 from my.data-set d join cities c on d.city = c.city", names) == \
        "select a-1 from `my.data-set` d join cities c on d.city = c.city"
    untouched = "select 'my.data-set', extract(year from ts) from `my.data-set` -- my.data-set"
    assert resolve_names(untouched, names) == untouched
    assert resolve_names("with t as (select 1) select * from t, range(2)", names).endswith("from t, range(2)")
    with pytest.raises(OdfError, match=r"^unknown dataset 'my\.data-sets' \(did you mean 'my\.data-set'\?\)$"):
        resolve_names("select * from cities where x in (select x from my.data-sets)", names)
    assert split_statements("select 1; select ';' as x;\nselect") == (["select 1", "select ';' as x"], "\nselect")



def test_the_client_check_reads_the_first_word_after_comments_spaces_and_parentheses(tmp_path, capsys):
    """Only for a friendlier message before the engine is asked (the engine's gate decides): comments and
    parentheses in front of a command no longer hide it, as ``/**/ insert`` hid it from the anchored regex."""
    assert first_word("/**/ -- x\n ( \t/* y */InSeRt overwrite directory '/d' select 1") == "InSeRt"
    assert first_word("'insert'") == "" and first_word("/* select */ with a as (select 1) select 1") == "with"
    ws = str(tmp_path / ".odf")
    assert run(capsys, "-w", ws, "init")[0] == 0
    code, out, err = run(capsys, "-w", ws, "sql", "--/*\n(  Drop table x")
    assert (code, out, err) == (1, "", "odf: error: not a query: it starts with 'DROP'; a query starts with SELECT, "
                                       "WITH, VALUES, FROM or TABLE\n")

@pytest.mark.spark
def test_sql_takes_names_as_written_and_hints_unknown_ones(tmp_path, capsys, spark):
    ws = str(tmp_path / ".odf")
    (tmp_path / "s.yaml").write_text(SNAPSHOT)
    data = tmp_path / "d.ndjson"
    data.write_text('{"city": "Oslo", "v": 1}\n{"city": "Riga", "v": 2}\n')
    assert run(capsys, "-w", ws, "init")[0] == 0
    assert run(capsys, "-w", ws, "add", str(tmp_path / "s.yaml"))[0] == 0
    assert run(capsys, "-w", ws, "ingest", "my.data-set", str(data))[0] == 0
    code, out, err = run(capsys, "-w", ws, "sql", "select sum(v) as total from my.data-set")
    assert (code, out.split()) == (0, ["total", "3"]), err
    code, out, err = run(capsys, "-w", ws, "sql", "select * from my.dataset")
    assert code == 1 and out == ""
    assert err == "odf: error: unknown dataset 'my.dataset' (did you mean 'my.data-set'?)\n"


@pytest.mark.spark
def test_piped_statements_share_one_spark_session(tmp_path):
    """Two statements piped into one ``odf sql``: both answered, by the same Spark application (one session)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
           "ODF_LOG_DIR": str(tmp_path / "logs")}
    ws = str(tmp_path / ".odf")
    subprocess.run([sys.executable, "-m", "odf_core.cli", "-w", ws, "init"], check=True, env=env,
                   capture_output=True)
    proc = subprocess.run(
        [sys.executable, "-m", "odf_core.cli", "-w", ws, "sql", "--verbose", "--master", "local[1]",
         "--conf", "spark.ui.enabled=false"],
        input="select 40 + 2 as answer;\nselect 'b' as\n  second; select * from nope;\n", capture_output=True,
        text=True, env=env, timeout=300)
    assert proc.returncode == 1, proc.stderr  # the third statement failed; the shell went on and says so
    assert "answer" in proc.stdout and "42" in proc.stdout and "second" in proc.stdout
    assert "odf: error: unknown dataset 'nope'" in proc.stderr
    apps = re.findall(r"^-- 1 row\(s\) in [\d.]+ s, Spark application (\S+)$", proc.stdout, re.M)
    assert len(apps) == 2 and apps[0] == apps[1], proc.stdout
    # Spark's start-up log (NativeCodeLoader, log4j profile...) goes to the log file, not the user's console
    first_parts = [line.split(" (")[0] for line in proc.stderr.strip().splitlines()]
    assert first_parts == ["odf: error: unknown dataset 'nope'"], proc.stderr
    assert "NativeCodeLoader" in (tmp_path / "logs" / "spark-driver.log").read_text()


ROOT_P = SNAPSHOT.replace("name: my.data-set", "name: p.root")


@pytest.fixture
def workspace_p(tmp_path, capsys) -> tuple[str, Path]:
    """A workspace with one Root dataset ``p.root`` holding a data slice; (workspace, its data directory)."""
    ws = tmp_path / ".odf"
    (tmp_path / "p.yaml").write_text(ROOT_P)
    data = tmp_path / "d.ndjson"
    data.write_text('{"city": "Oslo", "v": 1}\n')
    assert run(capsys, "-w", str(ws), "init")[0] == 0
    assert run(capsys, "-w", str(ws), "add", str(tmp_path / "p.yaml"))[0] == 0
    assert run(capsys, "-w", str(ws), "ingest", "p.root", str(data))[0] == 0
    (data_dir,) = {p.parent for p in ws.rglob("*") if p.is_file() and p.parent.name == "data"}
    return str(ws), data_dir


def _files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in d.iterdir()}


@pytest.mark.spark
def test_sql_refuses_a_comment_prefixed_insert_overwrite_directory_and_deletes_nothing(workspace_p, capsys, spark):
    """Issue #61 (1): ``/**/ insert overwrite directory '<dataset's data>'`` got past the client's regex and Spark ran
    it inside ``session.sql``, deleting the dataset's data files. The client now skips comments, and the engine's gate
    refuses a command hidden behind a CTE (which the client lets through) before anything runs."""
    ws, data_dir = workspace_p
    before = _files(data_dir)
    insert = f"insert overwrite directory '{data_dir}' using parquet select 1 as x"
    code, out, err = run(capsys, "-w", ws, "sql", "/**/ " + insert)
    assert (code, out) == (1, "") and err == (
        "odf: error: not a query: it starts with 'INSERT'; "
        "a query starts with SELECT, WITH, VALUES, FROM or TABLE\n"), err
    code, out, err = run(capsys, "-w", ws, "sql", f"with a as (select 1 as x) {insert}")
    assert (code, out) == (1, "") and err == \
        "odf: error: invalid query: only a query is allowed: statement 1 is a command (InsertIntoDir) " \
        "[PARSE_SYNTAX_ERROR]\n", err
    assert _files(data_dir) == before
    code, out, err = run(capsys, "-w", ws, "sql", "select sum(v) as total from p.root")
    assert (code, out.split()) == (0, ["total", "1"]), err


@pytest.mark.spark
def test_sql_refuses_java_method_and_reflect(workspace_p, capsys, spark):
    """Issue #61 (2): any static Java method was callable from ``odf sql``; the engine's gate refuses the functions
    that call Java before the query runs (the JVM system property the call would set stays unset)."""
    ws, _ = workspace_p
    prop = "odf.cli.sql.gate"
    for fn in ("java_method", "reflect"):
        code, out, err = run(capsys, "-w", ws, "sql",
                             f"select {fn}('java.lang.System', 'setProperty', '{prop}', 'ran') from p.root")
        assert (code, out) == (1, ""), out
        assert err == f"odf: error: invalid query: function {fn}() is not allowed in statement 1: it calls Java " \
                      "methods\n", err
    assert spark._jvm.java.lang.System.getProperty(prop) is None
