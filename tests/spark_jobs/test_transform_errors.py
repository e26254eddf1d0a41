"""Rejections of spark_jobs/transform.py (InvalidQuery / InternalError) and query validation."""
from __future__ import annotations

import json

import pyarrow as pa
import pytest
from pyspark.sql import types as T

from spark_jobs import transform as tr

from .transform_support import Event, InputSpec, MiniCoordinator, minutes, spark_schema

pytestmark = pytest.mark.spark

KX = pa.schema([("k", pa.string()), ("x", pa.int64())])
A_SCHEMA = spark_schema(InputSpec("a", KX, []))


def sql(query: str, **extra) -> dict:
    return {"kind": "Sql", "engine": "spark", "query": query, **extra}


def invalid(spark, transform: dict, schemas: dict | None = None) -> str:
    with pytest.raises(tr.InvalidQueryError) as exc:
        tr.validate_query(spark, transform, schemas or {"a": A_SCHEMA})
    return str(exc.value)


@pytest.mark.parametrize("expr, name", [
    ("rand()", "rand"), ("random(7)", "random"), ("uuid()", "uuid"), ("shuffle(array(x, 1))", "shuffle"),
    ("current_timestamp()", "current_timestamp"), ("now()", "now"), ("current_date()", "current_date"),
    ("monotonically_increasing_id()", "monotonically_increasing_id"), ("input_file_name()", "input_file_name"),
])
def test_non_deterministic_functions_are_rejected_by_name(spark, expr, name):
    msg = invalid(spark, sql(f"SELECT event_time, k, {expr} AS v FROM a"))
    assert f"non-deterministic function {name}()" in msg


def test_non_deterministic_function_in_a_step_or_subquery(spark):
    steps = {"kind": "Sql", "engine": "spark", "queries": [
        {"alias": "s", "query": "SELECT event_time, k FROM a WHERE x > (SELECT max(x) * rand() FROM a)"},
        {"query": "SELECT event_time, k FROM s"}]}
    assert "rand()" in invalid(spark, steps)


@pytest.mark.parametrize("transform, needles", [
    (sql("SELEC event_time FROM a"), ["query step 0 (output)", "PARSE_SYNTAX_ERROR"]),
    ({"kind": "Sql", "engine": "spark", "queries": [{"alias": "s1", "query": "SELECT * FROM nope"},
                                                   {"query": "SELECT event_time FROM s1"}]},
     ["query step 0 (alias 's1')", "TABLE_OR_VIEW_NOT_FOUND", "`nope`"]),
    (sql("SELECT event_time, missing_col FROM a"), ["UNRESOLVED_COLUMN", "missing_col"]),
    (sql("SELECT event_time, x + array(1) AS bad FROM a"), ["query step 0 (output)", "DATATYPE_MISMATCH"]),
    (sql("DROP VIEW a"), ["PARSE_SYNTAX_ERROR"]),
    (sql("SELECT offset, event_time, k FROM a"), ["'offset'", "must not contain"]),
    (sql("SELECT system_time, event_time, k FROM a"), ["'system_time'"]),
    (sql("SELECT k, x FROM a"), ["no 'event_time' column"]),
    (sql("SELECT k AS event_time, x FROM a"), ["must be a timestamp or date", "string"]),
    (sql("SELECT event_time, k, x AS __odf_count FROM a"), ["reserved"]),
    (sql("SELECT event_time, k, k AS K FROM a"), ["duplicate column names"]),
    (sql("SELECT max(event_time) AS event_time, op FROM a GROUP BY op"), ["outputs the 'op' column", "stateful"]),
    (sql("SELECT * FROM parquet.`/tmp`"), ["TABLE_OR_VIEW_NOT_FOUND"]),
    (sql("SELECT event_time, k FROM a TABLESAMPLE (50 PERCENT)"), ["TABLESAMPLE"]),
    (sql("SELECT event_time FROM a", temporalTables=[{"name": "a", "primaryKey": ["k"]}]), ["Flink-specific"]),
    (sql("SELECT event_time FROM a", engine="flink"), ["'flink'", "only runs 'spark'"]),
    ({"kind": "Sql", "engine": "spark", "queries": [{"query": "SELECT event_time FROM a"},
                                                   {"query": "SELECT event_time FROM a"}]}, ["exactly one"]),
    ({"kind": "Sql", "engine": "spark", "queries": [{"alias": "a", "query": "SELECT event_time FROM a"},
                                                   {"query": "SELECT event_time FROM a"}]}, ["already used"]),
])
def test_invalid_queries_explain_themselves(spark, transform, needles):
    msg = invalid(spark, transform)
    for needle in needles:
        assert needle in msg, msg
    assert "\tat org.apache" not in msg and "'Project" not in msg  # no JVM stack or plan dump


def test_validate_returns_the_slice_schema_and_plan_class(spark, tmp_path):
    schemas = {"a": T.StructType([*A_SCHEMA.fields, T.StructField("local", T.TimestampNTZType())])}
    out = tr.validate_query(spark, sql("SELECT event_time, k, local, x * 2.5 AS y FROM a"), schemas)
    assert [(f.name, f.dataType.simpleString()) for f in out.fields] == [
        ("offset", "bigint"), ("op", "int"), ("system_time", "timestamp"), ("event_time", "timestamp"),
        ("k", "string"), ("local", "timestamp"), ("y", "decimal(23,1)")]
    # The CLI form reads the schemas from the request's schemaFile entries.
    coord = MiniCoordinator(spark, tmp_path, sql("SELECT k, count(*) AS n, max(event_time) AS event_time FROM a "
                                                 "GROUP BY k"), [InputSpec("a", KX, [])])
    req, resp = tmp_path / "req.json", tmp_path / "resp.json"
    req.write_text(json.dumps(coord.request({})))
    tr.run_validate_file(spark, str(req), str(resp))
    doc = json.loads(resp.read_text())
    assert doc["kind"] == "ValidateQueryResponseRoot" and doc["extensions"]["planClass"] == "stateful"
    value = doc["content"]["value"]
    assert value["kind"] == "Success"
    assert [f["name"] for f in json.loads(value["schema"])["fields"]] == [
        "offset", "op", "system_time", "event_time", "k", "n"]
    req.write_text(json.dumps({**coord.request({}), "content": {
        **coord.request({})["content"], "transform": sql("SELECT nope FROM a")}}))
    tr.run_validate_file(spark, str(req), str(resp))
    value = json.loads(resp.read_text())["content"]["value"]
    assert value["kind"] == "InvalidQuery" and "nope" in value["message"]


def test_errors_while_running_are_reported_not_raised(spark, tmp_path):
    a = InputSpec("a", KX, [Event(0, minutes(1), ("p", 0))])
    coord = MiniCoordinator(spark, tmp_path, sql("SELECT event_time, k, 10 / x AS y FROM a"), [a])
    doc = coord.request({"a": 1})
    resp = coord.execute(doc)
    assert isinstance(resp, tr.InvalidQuery) and "DIVIDE_BY_ZERO" in resp.message
    doc["content"]["transform"] = sql("SELECT event_time, k, uuid() AS id FROM a")
    resp = coord.execute(doc)
    assert isinstance(resp, tr.InvalidQuery) and "uuid()" in resp.message
    doc["content"]["queryInputs"][0]["schemaFile"] = str(tmp_path / "missing.parquet")
    doc["content"]["queryInputs"][0]["dataPaths"] = []
    del doc["content"]["queryInputs"][0]["offsetInterval"]
    doc["extensions"] = {}  # else the schema would be read from the history slices
    resp = coord.execute(doc)
    assert isinstance(resp, tr.InternalError) and "missing.parquet" in resp.message
    resp_path = tmp_path / "resp.json"
    (tmp_path / "bad.json").write_text("{not json")
    tr.run_transform_file(spark, str(tmp_path / "bad.json"), str(resp_path))
    value = json.loads(resp_path.read_text())["content"]["value"]
    assert value["kind"] == "InternalError" and "not valid JSON" in value["message"]
