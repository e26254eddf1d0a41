"""The parallel Spark merge plans check primary keys with a hash aggregation instead of a per-row window.

Ledger skips its first-row-per-key window when no key repeats in the input; Snapshot finds a duplicate key before
merging. Both must give exactly what the driver plan (pyarrow) and the single-partition plan (which keeps the
window) give.
"""
from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from spark_jobs.ingest import merge as plans
from spark_jobs.ingest.merge import ledger as ledger_merge
from spark_jobs.ingest.merge import snapshot as snapshot_merge
from spark_jobs.parquet_files import write_parts

from .ingest_support import Dataset

pytestmark = pytest.mark.spark

KV_ET = {"kind": "Csv", "schema": ["key STRING", "value BIGINT", "event_time TIMESTAMP"]}
CITY = {"kind": "Csv", "schema": ["city STRING", "year INT", "value BIGINT"]}


def _spark_plans(monkeypatch, parallel: bool) -> None:
    monkeypatch.setattr(plans, "DRIVER_MERGE_BYTES", -1)
    if parallel:
        monkeypatch.setattr(plans, "SMALL_MERGE_BYTES", -1)


def _plans_of_written_frames(monkeypatch) -> list[str]:
    """Record the optimized plan of every frame the job writes (the real write still happens)."""
    plans_seen: list[str] = []
    def spy(df, directory):
        plans_seen.append(df._jdf.queryExecution().optimizedPlan().toString())
        return write_parts(df, directory)

    for module in (plans, ledger_merge, snapshot_merge):
        monkeypatch.setattr(module, "write_parts", spy)
    return plans_seen


def _ledger_in_every_plan(spark, tmp_path, monkeypatch, rounds):
    """The rounds through the driver, single-partition and parallel plans; all equal. Returns the parallel plan's
    results and the plans of the frames it wrote."""
    driver = _ledger_rounds(spark, tmp_path / "driver", rounds)
    _spark_plans(monkeypatch, parallel=False)
    small = _ledger_rounds(spark, tmp_path / "small", rounds)
    _spark_plans(monkeypatch, parallel=True)
    plans = _plans_of_written_frames(monkeypatch)
    parallel = _ledger_rounds(spark, tmp_path / "parallel", rounds)
    assert parallel == small == driver
    return parallel, plans


def _ledger_rounds(spark, root, rounds):
    root.mkdir()
    ds = Dataset(spark, root, {"kind": "Ledger", "primaryKey": ["key"]}, KV_ET)
    out = [ds.ingest(text, event_time=f"2024-02-0{i + 1}T00:00:00Z")[1] for i, text in enumerate(rounds)]
    return out + [pq.read_table(ds.checkpoint).to_pylist()]


def test_ledger_with_unique_keys_skips_the_window_and_matches_the_single_partition_plan(spark, tmp_path,
                                                                                       monkeypatch):
    # unsorted event times, a missing event time (filled from the source), a null key; round 2 repeats the null
    # key and "a" (both seen before) next to new keys
    rounds = ["b,1,2024-01-02T00:00:00Z\na,2,\n,3,2024-01-01T00:00:00Z\nc,4,2024-01-01T00:00:00Z\n",
              ",9,\nd,5,2024-01-05T00:00:00Z\na,6,2024-01-09T00:00:00Z\ne,7,2024-01-04T00:00:00Z\n"]
    parallel, plans = _ledger_in_every_plan(spark, tmp_path, monkeypatch, rounds)
    assert [(r["key"], r["value"]) for r in parallel[0]] == [(None, 3), ("c", 4), ("b", 1), ("a", 2)]
    assert [(r["key"], r["value"]) for r in parallel[1]] == [("e", 7), ("d", 5)]
    assert plans and not any("Window" in p for p in plans)


def test_ledger_with_a_repeated_key_keeps_the_first_by_event_time_in_the_parallel_plan(spark, tmp_path,
                                                                                      monkeypatch):
    rounds = ["b,1,2024-01-02T00:00:00Z\na,2,2024-01-03T00:00:00Z\nb,3,2024-01-01T00:00:00Z\n,4,\n,5,\n"]
    parallel, plans = _ledger_in_every_plan(spark, tmp_path, monkeypatch, rounds)
    assert [(r["key"], r["value"]) for r in parallel[0]] == [("b", 3), ("a", 2), (None, 4)]
    assert any("Window" in p for p in plans)


@pytest.mark.parametrize("plan", ["driver", "single", "parallel"])
def test_snapshot_duplicate_composite_key_is_the_same_error_in_every_plan(spark, tmp_path, monkeypatch, plan):
    if plan != "driver":
        _spark_plans(monkeypatch, parallel=plan == "parallel")
    ds = Dataset(spark, tmp_path, {"kind": "Snapshot", "primaryKey": ["city", "year"]}, CITY)
    resp, rows = ds.ingest("b,2020,1\na,2021,2\na,2020,3\n", event_time="2024-01-01T00:00:00Z")
    assert resp["status"] == "Success" and len(rows) == 3
    resp, _ = ds.ingest("a,2020,3\nb,2020,1\na,2020,4\n", event_time="2024-01-02T00:00:00Z")
    assert resp["status"] == "InvalidInput"
    assert resp["message"].startswith('duplicate primary key {"city":"a","year":2020} in the new snapshot')


def test_duplicate_key_finds_null_keys_and_reports_none_for_unique_keys(spark):
    df = spark.createDataFrame([("a", 1), (None, 2), ("b", 3), (None, 4)], "key STRING, v INT")
    assert plans.duplicate_key(df, ["key"]) == "{}"  # to_json drops null fields: the null key
    assert plans.duplicate_key(df.where("v < 4"), ["key"]) is None
    two = spark.createDataFrame([("a", 1, 0), ("a", 2, 0), ("a", 1, 1)], "k1 STRING, k2 INT, v INT")
    assert plans.duplicate_key(two, ["k1", "k2"]) == '{"k1":"a","k2":1}'
