"""spark_jobs/sql_steps.py: one runner of a Transform::Sql's steps for a transform, a raw query and a preprocess query
(one step numbering, one alias quoting, one set of checks), and the surfaces that use it."""
from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from odf_core.metadata import (
    RawQueryRequest,
    RawQueryResponseInvalidQuery,
    RawQueryResponseSuccess,
    SqlQueryStep,
    TemporalTable,
    TransformSql,
)
from spark_jobs.errors import QueryRejected
from spark_jobs.queries import raw_query
from spark_jobs.session import request_session
from spark_jobs.sql_steps import PREPROCESS, RAW_QUERY, TRANSFORM, check_steps, run_steps, step_label

from .ingest_support import run_read

OWNERS = [TRANSFORM, RAW_QUERY, PREPROCESS]


def _steps(*steps: tuple[str | None, str], **kw) -> TransformSql:
    return TransformSql(engine="spark", queries=tuple(SqlQueryStep(alias=a, query=q) for a, q in steps), **kw)


def _views(session) -> list[str]:
    return sorted(t.name for t in session.catalog.listTables() if t.isTemporary)


def test_a_step_is_named_by_its_number_from_one_and_its_alias():
    assert step_label(TRANSFORM, 1, "totals") == "query step 1 (alias 'totals')"
    assert step_label(RAW_QUERY, 2, None) == "query step 2 (output)"
    assert step_label(PREPROCESS, 3, None) == "preprocess query 3 (output)"


@pytest.mark.parametrize("owner", OWNERS, ids=lambda o: o.name)
def test_every_surface_refuses_what_the_spark_engine_cannot_run(owner):
    with pytest.raises(QueryRejected, match=rf"^{owner.name} engine 'flink' is not supported by the Spark engine"):
        check_steps(TransformSql(engine="flink", query="select 1"), owner)
    with pytest.raises(QueryRejected, match=rf"^{owner.name}\.temporalTables is a Flink-specific extension"):
        check_steps(TransformSql(engine="spark", query="select 1",
                                 temporal_tables=(TemporalTable(name="input", primary_key=("k",)),)), owner)
    with pytest.raises(QueryRejected, match="exactly one query step must have no alias .* found 2 of 2"):
        check_steps(_steps((None, "select 1"), (None, "select 2")), owner)
    with pytest.raises(QueryRejected, match="found 0 of 1"):
        check_steps(_steps(("a", "select 1")), owner)
    check_steps(_steps(("a", "select 1 as x"), (None, "select x from a")), owner)


@pytest.mark.spark
def test_steps_run_in_order_over_quoted_views_and_can_be_dropped(spark):
    with request_session(spark) as session:
        inputs = session.createDataFrame([("a", 1), ("b", 2)], "k string, x int")
        steps = _steps(("com.example.big", "select k, x * 10 as x from `com.example.input` where x > 1"),
                       (None, "select k, x from `com.example.big`"))
        out = run_steps(session, steps, {"com.example.input": inputs}, TRANSFORM, drop_views=True)
        assert [tuple(r) for r in out.collect()] == [("b", 20)]  # the plan keeps what the dropped views read
        assert _views(session) == []
        kept = run_steps(session, steps, {"com.example.input": inputs}, TRANSFORM)
        assert kept.count() == 1
        assert _views(session) == ["com.example.big", "com.example.input"]


@pytest.mark.spark
def test_a_failing_or_clashing_step_is_named_the_same_way_on_every_surface(spark):
    with request_session(spark) as session:
        inputs = session.createDataFrame([("a", 1)], "k string, x int")
        with pytest.raises(QueryRejected, match=r"^query step 2 \(output\) failed: .*UNRESOLVED_COLUMN.*nope"):
            run_steps(session, _steps(("s", "select k from input"), (None, "select nope from s")),
                      {"input": inputs}, RAW_QUERY)
    with request_session(spark) as session:  # a session of its own: the raw query's views are kept
        inputs = session.createDataFrame([("a", 1)], "k string, x int")
        clash = r"^preprocess query 1 \(alias 'INPUT'\): alias 'INPUT' is already used"
        with pytest.raises(QueryRejected, match=clash):
            run_steps(session, _steps(("INPUT", "select 1"), (None, "select * from input")), {"input": inputs},
                      PREPROCESS, drop_views=True)
        assert _views(session) == []  # dropped on a refusal too


@pytest.mark.spark
def test_a_raw_query_runs_its_steps_with_the_same_checks(spark, tmp_path):
    data = tmp_path / "in.parquet"
    spark.createDataFrame([("a", 1), ("b", 2)], "k string, x int").write.parquet(str(data))

    def run(transform: TransformSql):
        return raw_query(spark, RawQueryRequest(input_data_paths=(str(data),), transform=transform,
                                                output_data_path=str(tmp_path / "out.parquet")))

    answer = run(_steps(("my.rows", "select k from input where x > 1"), (None, "select * from `my.rows`")))
    assert isinstance(answer, RawQueryResponseSuccess) and answer.num_records == 1, answer
    assert pq.read_table(tmp_path / "out.parquet").column("k").to_pylist() == ["b"]
    answer = run(TransformSql(engine="spark", query="select * from input",
                              temporal_tables=(TemporalTable(name="input", primary_key=("k",)),)))
    assert isinstance(answer, RawQueryResponseInvalidQuery) and "raw query.temporalTables" in answer.message, answer


@pytest.mark.spark
def test_a_preprocess_query_names_its_step_and_file_and_quotes_its_aliases(spark, tmp_path):
    f = tmp_path / "in.csv"
    f.write_text("a,1\nb,2\n")
    step = {"kind": "Csv", "schema": ["k STRING", "n INT"]}
    et = "2024-05-05T00:00:00Z"
    resp, rows = run_read(spark, tmp_path, step, [f], event_time=et, preprocess={
        "kind": "Sql", "engine": "spark", "queries": [{"alias": "big.rows", "query": "SELECT * FROM input WHERE n > 1"},
                                                      {"query": "SELECT k FROM `big.rows`"}]})
    assert resp["status"] == "Success", resp
    assert [r["k"] for r in rows] == ["b"]
    resp, _ = run_read(spark, tmp_path, step, [f], event_time=et, preprocess={
        "kind": "Sql", "engine": "spark", "queries": [{"alias": "s", "query": "SELECT * FROM input"},
                                                      {"query": "SELECT nope FROM s"}]})
    assert resp["status"] == "InvalidInput" and resp["file"] == str(f), resp
    assert resp["message"].startswith(f"{f}: preprocess query 2 (output) failed: "), resp
    resp, _ = run_read(spark, tmp_path, step, [f], event_time=et, preprocess={
        "kind": "Sql", "engine": "spark", "query": "SELECT * FROM input", "temporalTables": [
            {"name": "input", "primaryKey": ["k"]}]})
    assert resp == {"status": "InvalidInput", "message": "preprocess.temporalTables is a Flink-specific extension and "
                    "is not supported by the Spark engine; use a join instead"}
