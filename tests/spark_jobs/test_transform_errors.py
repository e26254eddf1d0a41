"""Rejections of spark_jobs/transform.py (InvalidQuery / InternalError) and query validation."""
from __future__ import annotations

import tempfile

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from odf_core.engine.protocol import (
    QueryResponseInvalidQuery,
    ValidateInput,
    ValidateQueryRequest,
    ValidateQueryResponseSuccess,
)
from odf_core.metadata import DatasetVocabulary
from odf_core.metadata.arrow_schema import decode_arrow_schema
from odf_core.metadata.schema import W, Wire
from odf_core.metadata.yaml_serde import _value_from
from spark_jobs import transform as tr


from .transform_support import TS, Event, InputSpec, MiniCoordinator, minutes

pytestmark = pytest.mark.spark

KX = pa.schema([("k", pa.string()), ("x", pa.int64())])
A_SCHEMA = InputSpec("a", KX, []).arrow_schema()
_SCHEMA_DIR = tempfile.mkdtemp(prefix="odf-test-schemas-")


def sql(query: str, **extra) -> dict:
    return {"kind": "Sql", "engine": "spark", "query": query, **extra}


def validate(spark, transform: dict, schemas: dict[str, pa.Schema] | None = None):
    inputs = []
    for i, (alias, schema) in enumerate((schemas or {"a": A_SCHEMA}).items()):
        path = f"{_SCHEMA_DIR}/{alias}-{i}-{abs(hash(str(schema)))}.parquet"
        pq.write_table(schema.empty_table(), path)
        inputs.append(ValidateInput(query_alias=alias, vocab=DatasetVocabulary.default(), schema_file=path))
    request = ValidateQueryRequest(vocab=DatasetVocabulary.default(),
                                   transform=_value_from(Wire(W.UNION, "Transform"), transform, "transform"),
                                   inputs=tuple(inputs))
    return tr.validate_query(spark, request)


def invalid(spark, transform: dict, schemas: dict | None = None) -> str:
    resp = validate(spark, transform, schemas)
    assert isinstance(resp, QueryResponseInvalidQuery), resp
    return resp.message


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
    (sql("SELEC event_time FROM a"), ["query step 1 (output)", "PARSE_SYNTAX_ERROR"]),
    ({"kind": "Sql", "engine": "spark", "queries": [{"alias": "s1", "query": "SELECT * FROM nope"},
                                                   {"query": "SELECT event_time FROM s1"}]},
     ["query step 1 (alias 's1')", "TABLE_OR_VIEW_NOT_FOUND", "`nope`"]),
    (sql("SELECT event_time, missing_col FROM a"), ["UNRESOLVED_COLUMN", "missing_col"]),
    (sql("SELECT event_time, x + array(1) AS bad FROM a"), ["query step 1 (output)", "DATATYPE_MISMATCH"]),
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
    (sql("SELECT event_time FROM a", engine="flink"),
     ["transform engine 'flink'", "not supported by the Spark engine; use engine 'spark'"]),
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


def test_validate_returns_the_slice_schema_and_plan_class(spark):
    schemas = {"a": A_SCHEMA.append(pa.field("local", pa.timestamp("ms")))}
    out = validate(spark, sql("SELECT event_time, k, local, x * 2.5 AS y FROM a"), schemas)
    assert isinstance(out, ValidateQueryResponseSuccess) and out.plan_class == "stateless"
    schema = decode_arrow_schema(out.output_schema)
    assert [(f.name, f.type) for f in schema] == [
        ("offset", pa.int64()), ("op", pa.int32()), ("system_time", TS), ("event_time", TS),
        ("k", pa.string()), ("local", TS), ("y", pa.decimal128(23, 1))]
    out = validate(spark, sql("SELECT k, count(*) AS n, max(event_time) AS event_time FROM a GROUP BY k"))
    assert out.plan_class == "stateful" and out.reason == "Aggregate"
    assert decode_arrow_schema(out.output_schema).names == ["offset", "op", "system_time", "event_time", "k", "n"]
    assert "nope" in invalid(spark, sql("SELECT nope FROM a"))


def test_errors_while_running_are_reported_not_raised(spark, tmp_path):
    a = InputSpec("a", KX, [Event(0, minutes(1), ("p", 0))])
    coord = MiniCoordinator(spark, tmp_path, sql("SELECT event_time, k, 10 / x AS y FROM a"), [a])
    doc = coord.request({"a": 1})
    resp = coord.execute(doc)
    assert resp.kind == "InvalidQuery" and "DIVIDE_BY_ZERO" in resp.message
    doc["content"]["transform"] = sql("SELECT event_time, k, uuid() AS id FROM a")
    resp = coord.execute(doc)
    assert resp.kind == "InvalidQuery" and "uuid()" in resp.message
    doc["content"]["queryInputs"][0]["schemaFile"] = str(tmp_path / "missing.parquet")
    doc["content"]["queryInputs"][0]["dataPaths"] = []
    del doc["content"]["queryInputs"][0]["offsetInterval"]
    doc["extensions"] = {}  # else the schema would be read from the history slices
    resp = coord.execute(doc)
    assert resp.kind == "InternalError" and "missing.parquet" in resp.message
