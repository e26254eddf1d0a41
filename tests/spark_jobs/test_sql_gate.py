"""The SQL gate (spark_jobs/sql_gate.py) on every SQL surface of the engine: ``odf sql`` (run_sql), the spec's raw
query, transform query validation and ingest preprocess steps, in-process and over gRPC to a real engine server.

A hostile corpus must be refused with a one-line error AND leave no trace: a sentinel data file that an
``INSERT OVERWRITE DIRECTORY`` would delete keeps its bytes, a ``TRANSFORM ... USING`` program never ran, a JVM
system property a ``java_method``/``reflect`` call would set stays unset, no jar is added and nothing is cached.
Legitimate queries (CTEs, subqueries, windows, values, unions, comments, odd names) still answer.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from odf_core.engine import remote_engine
from odf_core.engine.protocol import SqlRequest, SqlResponseSuccess, SqlTable, ValidateInput, ValidateQueryRequest
from odf_core.metadata import DatasetVocabulary, RawQueryRequest, RawQueryResponseSuccess, TransformSql
from spark_jobs.errors import QueryRejected
from spark_jobs.ingest import execute_ingest
from spark_jobs.queries import raw_query, run_sql
from spark_jobs.session import child_session
from spark_jobs.sql_gate import gated_query
from spark_jobs.transform import validate_query

from ..odf_core.engine.engine_support import url
from .engine_support import engine_server
from .ingest_support import typed_request
from .transform_support import InputSpec

pytestmark = pytest.mark.spark

PROPERTY = "odf.gate.test"  # a JVM system property that a Java call of the corpus would set


@dataclass
class Sentinel:
    """Files a hostile statement would change, and how to tell that nothing ran."""

    root: Path
    spark: Any

    @property
    def victim_dir(self) -> Path:
        return self.root / "datasets" / "p.root" / "data"

    @property
    def victim(self) -> Path:
        return self.victim_dir / "slice-0.parquet"

    def fill(self) -> None:
        self.victim_dir.mkdir(parents=True)
        pq.write_table(pa.table({"k": ["a", "b"], "x": [1, 2]}), self.victim)
        (self.root / "input.csv").write_text("k,v\na,1\n")
        (self.root / "x.jar").write_bytes(b"")
        kx = pa.schema([("k", pa.string()), ("x", pa.int64())])
        pq.write_table(InputSpec("t", kx, []).arrow_schema().empty_table(), self.root / "t-schema.parquet")
        self.bytes = self.victim.read_bytes()
        self.jars = self._jars()
        self.cache_empty = self._cache_empty()

    def _jars(self) -> int:
        return int(self.spark.sparkContext._jsc.sc().listJars().size())

    def _cache_empty(self) -> bool:
        return bool(self.spark._jsparkSession.sharedState().cacheManager().isEmpty())

    def assert_untouched(self) -> None:
        assert sorted(p.name for p in self.victim_dir.iterdir()) == ["slice-0.parquet"]
        assert self.victim.read_bytes() == self.bytes, "the sentinel data file changed"
        assert not (self.root / "out").exists() and not (self.root / "ran").exists()
        assert self.spark._jvm.java.lang.System.getProperty(PROPERTY) is None, "a Java method ran"
        assert self._jars() == self.jars and self._cache_empty() == self.cache_empty
        assert self.spark.conf.get("spark.sql.ansi.enabled") == "true"


@pytest.fixture(scope="module")
def sentinel(spark, tmp_path_factory) -> Sentinel:
    s = Sentinel(tmp_path_factory.mktemp("gate"), spark)
    s.fill()
    return s


SET_PROPERTY = f"'java.lang.System', 'setProperty', '{PROPERTY}', 'ran'"
INSERT = "insert overwrite directory '{victim_dir}' using parquet select 1 as x"
COMMAND = "only a query is allowed: {what} is a command ({cls})"

# (statement with {victim_dir}/{root} placeholders, needle of the refusal; {what} is the surface's label)
HOSTILE = [
    pytest.param("/**/ " + INSERT, COMMAND.format(what="{what}", cls="InsertIntoDir"), id="comment-insert-dir"),
    pytest.param("--\n" + INSERT, COMMAND.format(what="{what}", cls="InsertIntoDir"), id="line-comment-insert-dir"),
    pytest.param(" \n\t InSeRt OvErWrItE DiReCtOrY '{victim_dir}' UsInG parquet SeLeCt 1 AS x",
                 COMMAND.format(what="{what}", cls="InsertIntoDir"), id="case-whitespace"),
    pytest.param("with a as (select 1 as x) insert overwrite directory '{victim_dir}' using parquet select * from a",
                 COMMAND.format(what="{what}", cls="InsertIntoDir"), id="cte-insert-dir"),
    pytest.param("insert\u00a0overwrite directory '{victim_dir}' using parquet select 1 as x", "PARSE_SYNTAX_ERROR",
                 id="nbsp-insert"),
    pytest.param("\uff49\uff4e\uff53\uff45\uff52\uff54 overwrite directory '{victim_dir}' using parquet select 1",
                 "PARSE_SYNTAX_ERROR", id="fullwidth-insert"),
    pytest.param("(" + INSERT + ")", "PARSE_SYNTAX_ERROR", id="parenthesised-insert"),
    pytest.param("select 1 as x; " + INSERT, "only one statement is allowed: {what} is followed by",
                 id="chain-insert"),
    pytest.param("select 1; drop table x", "only one statement is allowed", id="chain-drop"),
    pytest.param("insert into t select 'c', 3", COMMAND.format(what="{what}", cls="InsertIntoStatement"),
                 id="insert-into"),
    pytest.param("create table c using parquet location '{root}/out' as select 1 as x", "is a command (",
                 id="ctas"),
    pytest.param("create temporary view v as select 1", "is a command (CreateViewCommand)", id="create-view"),
    pytest.param("create temporary function f as 'java.lang.String'", "is a command (CreateFunctionCommand)",
                 id="create-function"),
    pytest.param("create function f() returns int return 1", "is a command (", id="sql-function"),
    pytest.param("drop view t", "is a command (DropView)", id="drop-view"),
    pytest.param("alter view t as select 1", "is a command (", id="alter-view"),
    pytest.param("set spark.sql.ansi.enabled=false", "is a command (SetCommand)", id="set"),
    pytest.param("reset", "is a command (ResetCommand)", id="reset"),
    pytest.param("add jar {root}/x.jar", "is a command (AddJarsCommand)", id="add-jar"),
    pytest.param("add file {root}/x.jar", "is a command (AddFilesCommand)", id="add-file"),
    pytest.param("cache table t", "is a command (CacheTable)", id="cache"),
    pytest.param("cache lazy table c as select 1", "is a command (", id="cache-as"),
    pytest.param("uncache table t", "is a command (UncacheTable)", id="uncache"),
    pytest.param("clear cache", "is a command (ClearCacheCommand", id="clear-cache"),
    pytest.param("refresh table t", "is a command (RefreshTable)", id="refresh"),
    pytest.param("refresh '{root}'", "is a command (RefreshResource)", id="refresh-path"),
    pytest.param("use default", "is a command (SetCatalogAndNamespace)", id="use"),
    pytest.param("explain select 1", "is a command (ExplainCommand)", id="explain"),
    pytest.param("describe t", "is a command (DescribeRelation)", id="describe"),
    pytest.param("load data local inpath '{victim_dir}' into table t", "is a command (LoadData)", id="load"),
    pytest.param("msck repair table t", "is a command (RepairTable)", id="msck"),
    pytest.param("analyze table t compute statistics", "is a command (AnalyzeTable)", id="analyze"),
    pytest.param("declare v int", "is a command (CreateVariable)", id="declare"),
    pytest.param("execute immediate 'insert overwrite directory ''{victim_dir}'' using parquet select 1'",
                 "is a command (UnresolvedExecuteImmediate)", id="execute-immediate"),
    pytest.param("begin " + INSERT + "; end", "is a command (CompoundBody)", id="script"),
    pytest.param("select transform('x') using 'touch {root}/ran'", "runs an external program", id="transform-using"),
    pytest.param(f"select java_method({SET_PROPERTY})", "function java_method() is not allowed", id="java_method"),
    pytest.param(f"select reflect({SET_PROPERTY})", "function reflect() is not allowed", id="reflect"),
    pytest.param(f"select try_reflect({SET_PROPERTY})", "function try_reflect() is not allowed", id="try_reflect"),
    pytest.param(f"select ReFlEcT({SET_PROPERTY})", "function reflect() is not allowed", id="reflect-case"),
    pytest.param(f"select system.builtin.java_method({SET_PROPERTY})", "function java_method() is not allowed",
                 id="qualified"),
    pytest.param(f"select identifier('reflect')({SET_PROPERTY})", "function reflect() is not allowed",
                 id="identifier-function"),
    pytest.param(f"select identifier(concat('ref', 'lect'))({SET_PROPERTY})", "computed IDENTIFIER",
                 id="computed-identifier"),
    pytest.param(f"with c as (select reflect({SET_PROPERTY}) as v) select 1", "function reflect() is not allowed",
                 id="unused-cte"),
    pytest.param(f"select 1 where exists (select java_method({SET_PROPERTY}))", "function java_method()",
                 id="subquery"),
    pytest.param("select to_protobuf(named_struct('a', 1), 'M', '{victim}')", "function to_protobuf()",
                 id="protobuf-descriptor-file"),
    pytest.param("select * from parquet.`{victim}`", "TABLE_OR_VIEW_NOT_FOUND", id="parquet-path"),
    pytest.param("select * from json.`{root}/input.csv`", "TABLE_OR_VIEW_NOT_FOUND", id="json-path"),
    pytest.param("select * from identifier('parquet.`{victim}`')", "TABLE_OR_VIEW_NOT_FOUND", id="identifier-path"),
    pytest.param("select * from read_files('{victim}')", "table function read_files() is not allowed",
                 id="read_files"),
    pytest.param("select * from python_worker_logs()", "table function python_worker_logs() is not allowed",
                 id="python_worker_logs"),
    pytest.param("select * from t timestamp as of '2020-01-01'", "uses RelationTimeTravel", id="time-travel"),
    pytest.param("select * from default.t", "TABLE_OR_VIEW_NOT_FOUND", id="catalog-table"),
]

LEGIT = [
    ("select k, x from t order by k", [("a", 1), ("b", 2)]),
    ("with a as (select * from t where x > 1), b as (select k from a) select * from b", [("b",)]),
    ("select k from t where x = (select max(x) from t)", [("b",)]),
    ("select k, sum(x) over (order by k rows between unbounded preceding and current row) as s from t order by k",
     [("a", 1), ("b", 3)]),
    ("values (1, 'one'), (2, 'two')", [(1, "one"), (2, "two")]),
    ("select k from t union all select 'c' order by 1", [("a",), ("b",), ("c",)]),
    ("/* leading */ select -- a comment; with a semicolon\n k /* inside */ from t where k = 'a';", [("a",)]),
    ("select `odd.name-x`.k from t as `odd.name-x` where x = 2", [("b",)]),
    ("select * from range(2)", [(0,), (1,)]),
    ("select count(*) as n from t where exists (select 1 from t as u where u.k = t.k)", [(2,)]),
    ("from t |> where x > 1 |> select k", [("b",)]),
    ("select k, input_file_name() like '%slice-0.parquet' as f from t where x = 1", [("a", True)]),
    ("select transform(array(x), v -> v * 10)[0] as y from t order by y", [(10,), (20,)]),
]


def _sql_request(sentinel: Sentinel, query: str) -> SqlRequest:
    return SqlRequest(query=query, tables=(SqlTable(name="t", data_paths=(str(sentinel.victim),)),), limit=10)


def _raw_request(sentinel: Sentinel, query: str) -> RawQueryRequest:
    return RawQueryRequest(input_data_paths=(str(sentinel.victim),),
                           transform=TransformSql(engine="spark", query=query),
                           output_data_path=str(sentinel.root / "out" / "raw.parquet"))


def _validate_request(sentinel: Sentinel, query: str) -> ValidateQueryRequest:
    vocab = DatasetVocabulary.default()
    return ValidateQueryRequest(vocab=vocab, transform=TransformSql(engine="spark", query=query),
                                inputs=(ValidateInput(query_alias="t", vocab=vocab,
                                                      schema_file=str(sentinel.root / "t-schema.parquet")),))


def _ingest_request(sentinel: Sentinel, query: str):
    out = sentinel.root / "out"
    return typed_request({
        "dataset": "gate", "workDir": str(sentinel.root),
        "read": {"inputs": [{"path": str(sentinel.root / "input.csv"), "eventTime": "2024-01-01T00:00:00Z"}],
                 "readStep": {"kind": "Csv", "header": True, "schema": ["k STRING", "v BIGINT"]},
                 "preprocess": {"kind": "Sql", "engine": "spark", "query": query}},
        "merge": {"strategy": {"kind": "Ledger", "primaryKey": ["k"]}, "systemTime": "2024-01-02T00:00:00Z",
                  "outputPath": str(out / "slice.parquet"), "newCheckpointPath": str(out / "ckpt.parquet")}},
        str(sentinel.root))


# surface: (request builder, in-process engine function, label the gate names the statement with)
SURFACES: dict[str, tuple[Callable[[Sentinel, str], Any], Callable[[Any, Any], Any], str]] = {
    "sql": (_sql_request, run_sql, "statement 1"),
    "raw-query": (_raw_request, raw_query, "query step 1 (output)"),
    "transform-validation": (_validate_request, validate_query, "query step 1 (output)"),
    "ingest-preprocess": (_ingest_request, execute_ingest, "preprocess query 1 (output)"),
}


def _refusal(answer: Any) -> str:
    """The message of an engine's refusal (invalid query / input), failing the test on anything else."""
    value = getattr(answer, "value", answer)
    assert type(value).__name__.endswith(("InvalidQuery", "InvalidInput")), f"not refused: {value!r}"
    message = value.message
    assert "\n" not in message and "\tat " not in message and "Traceback" not in message, message
    return message


@pytest.mark.parametrize("surface", list(SURFACES))
@pytest.mark.parametrize("template, needle", HOSTILE)
def test_the_hostile_corpus_is_refused_in_process_and_nothing_runs(spark, sentinel, surface, template, needle):
    build, run, what = SURFACES[surface]
    query = template.format(victim_dir=sentinel.victim_dir, victim=sentinel.victim, root=sentinel.root)
    message = _refusal(run(spark, build(sentinel, query)))
    assert needle.format(what=what) in message, message
    sentinel.assert_untouched()


@pytest.fixture(scope="module")
def engine(spark):
    with engine_server(spark) as srv:
        yield remote_engine(url(srv))


@pytest.mark.parametrize("surface", list(SURFACES))
def test_the_hostile_corpus_is_refused_over_grpc(engine, sentinel, surface):
    build, _, what = SURFACES[surface]
    for param in HOSTILE:
        template, needle = param.values
        query = template.format(victim_dir=sentinel.victim_dir, victim=sentinel.victim, root=sentinel.root)
        message = _refusal(engine.execute(build(sentinel, query)))
        assert needle.format(what=what) in message, (param.id, message)
        sentinel.assert_untouched()


def _rows(answer: Any) -> list[tuple]:
    value = getattr(answer, "value", answer)
    assert isinstance(value, SqlResponseSuccess), value
    table = pa.ipc.open_stream(value.arrow_ipc).read_all()
    return [tuple(r.values()) for r in table.to_pylist()]


@pytest.mark.parametrize("query, rows", LEGIT)
def test_legitimate_queries_still_answer(spark, sentinel, query, rows):
    assert _rows(run_sql(spark, _sql_request(sentinel, query))) == rows
    sentinel.assert_untouched()


def test_legitimate_queries_over_grpc_and_as_a_raw_query(engine, sentinel, tmp_path):
    for query, rows in LEGIT:
        assert _rows(engine.execute(_sql_request(sentinel, query))) == rows, query
    out = tmp_path / "raw.parquet"
    request = RawQueryRequest(input_data_paths=(str(sentinel.victim),), output_data_path=str(out),
                              transform=TransformSql(engine="spark", query="with a as (select * from input) "
                                                                            "select k from a where x > 1"))
    answer = engine.execute(request)
    assert isinstance(getattr(answer, "value", answer), RawQueryResponseSuccess), answer
    assert pq.read_table(out).column("k").to_pylist() == ["b"]


def test_file_paths_are_refused_even_with_sql_on_files_enabled(spark, sentinel):
    """Request sessions turn ``spark.sql.runSQLOnFiles`` off; the gate does not rely on it: with it on, a path-named
    relation is refused before analysis (which would read the file's schema), and anything read outside a view after
    it."""
    session = child_session(spark)
    session.conf.set("spark.sql.runSQLOnFiles", "true")
    session.read.parquet(str(sentinel.victim)).createOrReplaceTempView("t")
    for query in (f"select * from parquet.`{sentinel.victim}`",
                  f"select * from identifier('parquet.`{sentinel.victim}`')",
                  f"select * from t join parquet.`{sentinel.victim}` using (k)"):
        with pytest.raises(QueryRejected, match="only the request's views can be read"):
            gated_query(session, query)
    assert gated_query(session, "select count(*) from t").collect()[0][0] == 2
