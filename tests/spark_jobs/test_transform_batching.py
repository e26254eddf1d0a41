"""The batching property of spark_jobs/transform.py: however the inputs are split into transactions, the reduced
output changelog equals a plain Spark batch query over the reduced inputs, and each transaction's output watermark
is the minimum of its inputs' explicit watermarks.

The splits come from Hypothesis (transform_support.splits): 1-4 transactions per example, with empty, one-row and
watermark-only transactions, plus two explicit examples every run (one transaction; an edge-case sequence). The
examples per query are few because each transaction is a real Spark job; ``ODF_BATCHING_EXAMPLES`` raises them for
a deeper search, and a failing split is shrunk and kept in Hypothesis' example database.
"""
from __future__ import annotations

import os

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, example, given, settings

from .transform_support import (
    Event,
    InputSpec,
    Txn,
    batch_reference,
    expected_watermark,
    minutes,
    reduce_output,
    run_split,
    splits,
)

pytestmark = pytest.mark.spark

A, R, CF, CT = 0, 1, 2, 3


def input_a() -> InputSpec:
    """Appends, a retraction, corrections (one moving event_time), an exact duplicate partly retracted."""
    return InputSpec("a", pa.schema([("k", pa.string()), ("x", pa.int64())]), [
        Event(A, minutes(1), ("p", 1)),
        Event(A, minutes(2), ("q", 2)),
        Event(A, minutes(3), ("p", 3)),
        Event(A, minutes(4), ("r", 4)),
        Event(R, minutes(1), ("p", 1)),
        Event(A, minutes(5), ("p", 5)),
        Event(CF, minutes(2), ("q", 2)),
        Event(CT, minutes(6), ("q", 6)),
        Event(A, minutes(7), ("s", 7)),
        Event(A, minutes(7), ("s", 7)),
        Event(R, minutes(7), ("s", 7)),
        Event(A, minutes(68), ("r", 9)),
        Event(CF, minutes(3), ("p", 3)),
        Event(CT, minutes(3), ("p", 11)),
        Event(A, minutes(69), ("q", 1)),
    ])


def input_b() -> InputSpec:
    return InputSpec("b", pa.schema([("k", pa.string()), ("name", pa.string())]), [
        Event(A, minutes(1), ("p", "Pete")),
        Event(A, minutes(2), ("q", "Quinn")),
        Event(A, minutes(3), ("r", "Rita")),
        Event(CF, minutes(2), ("q", "Quinn")),
        Event(CT, minutes(2), ("q", "Quincy")),
        Event(R, minutes(3), ("r", "Rita")),
        Event(A, minutes(4), ("s", "Sam")),
    ])


def sql(query: str) -> dict:
    return {"kind": "Sql", "engine": "spark", "query": query}


def steps(*queries: tuple[str | None, str]) -> dict:
    return {"kind": "Sql", "engine": "spark",
            "queries": [{"query": q} if alias is None else {"alias": alias, "query": q} for alias, q in queries]}


# name -> (transform, expected plan class, inputs read as raw changelog)
CASES = {
    "union": (sql("SELECT event_time, k, x FROM a UNION ALL SELECT event_time, k, length(name) AS x FROM b"),
              "stateless", ()),
    "projection_filter_multi_step": (steps(("odd", "SELECT event_time, k, x FROM a WHERE x % 2 = 1"),
                                           (None, "SELECT event_time, upper(k) AS k, x * 10 AS x10 FROM odd")),
                                     "stateless", ()),
    "reads_op_stateless": (sql("SELECT event_time, k, x, op AS source_op FROM a"), "stateless", ("a",)),
    "join": (sql("SELECT a.event_time, a.k, a.x, b.name FROM a JOIN b ON a.k = b.k"), "stateful", ()),
    "aggregate": (sql("SELECT k, count(*) AS n, sum(x) AS total, max(event_time) AS event_time FROM a GROUP BY k"),
                  "stateful", ()),
    "window": (sql("SELECT event_time, k, x, sum(x) OVER (PARTITION BY k ORDER BY event_time "
                   "ROWS UNBOUNDED PRECEDING) AS running FROM a"), "stateful", ()),
    "distinct": (sql("SELECT DISTINCT k, date_trunc('HOUR', event_time) AS event_time FROM a"), "stateful", ()),
    "multi_step_stateful": (steps(
        ("big", "SELECT * FROM a WHERE x > 2"),
        ("per_k", "SELECT k, sum(x) AS s, max(event_time) AS event_time FROM big GROUP BY k"),
        (None, "SELECT p.event_time, p.k, p.s, b.name FROM per_k p LEFT JOIN b ON p.k = b.k")), "stateful", ()),
    "reads_op_stateful": (sql("SELECT k, count(*) AS changes, max(event_time) AS event_time FROM a "
                              "WHERE op <> 0 GROUP BY k"), "stateful", ("a",)),
}


EXAMPLES = int(os.environ.get("ODF_BATCHING_EXAMPLES", "3"))
ONE_TRANSACTION = [Txn({"a": 15, "b": 7})]
# nothing at all, one row of each, a watermark-only transaction of a, the rest, a watermark-only transaction of b
EDGE_CASES = [Txn({"a": 0, "b": 0}), Txn({"a": 1, "b": 1}), Txn({}, frozenset({"a"})), Txn({"a": 14, "b": 6}),
              Txn({}, frozenset({"b"}))]
_references: dict[str, object] = {}


def _reference(spark, name: str):
    if name not in _references:
        transform, _, changelog = CASES[name]
        _references[name] = batch_reference(spark, transform, [input_a(), input_b()], changelog)
        assert _references[name], "the reference result must not be empty, else the comparison proves little"
    return _references[name]


@pytest.mark.parametrize("name", sorted(CASES))
@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@example(split=ONE_TRANSACTION)
@example(split=EDGE_CASES)
@given(split=splits([input_a(), input_b()]))
def test_any_split_gives_the_batch_result(spark, tmp_path_factory, name, split):
    transform, plan_class, _ = CASES[name]
    inputs = [input_a(), input_b()]
    assert [sum(t.rows.get(s.alias, 0) for t in split) for s in inputs] == [len(s.events) for s in inputs]
    result = run_split(spark, tmp_path_factory.mktemp(name), transform, inputs, split, watermarks=True)
    assert {r.diagnostics["planClass"] for r in result.responses} == {plan_class}
    assert reduce_output(result.rows()) == _reference(spark, name), f"split {split}"
    assert [r.new_watermark for r in result.responses] == [expected_watermark(q) for q in result.requests]
