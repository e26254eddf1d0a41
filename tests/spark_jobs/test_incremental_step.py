"""A step's materialised frames (spark_jobs.transform.incremental.step.Step.keep/leaf): a small step holds its small
frames as local relations of Spark's own rows, exactly (dates before the Gregorian calendar's start included), and
keeps a local checkpoint past the limit or in a step that is not small."""
from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from spark_jobs.transform.incremental import step as step_module
from spark_jobs.transform.incremental.sizing import size_step
from spark_jobs.transform.incremental.step import KEPT_ROWS, Step

pytestmark = pytest.mark.spark

# a date in the ten days the Julian-Gregorian calendar skipped, one before it and an ordinary one: Java's
# java.sql.Date/Timestamp values (what Spark's collect() gives) move the first; a frame's own rows must not
ROWS = "SELECT * FROM VALUES (1, timestamp'1582-10-10 00:00:00', date'1582-10-10', 1.5D, 'a'), " \
       "(2, timestamp'0001-01-01 00:00:00', date'-0044-03-15', -0.0D, NULL), " \
       "(3, timestamp'2020-03-29 02:30:00.123456', date'2020-03-29', double('NaN'), 'c') AS v(i, t, d, x, s)"
EXACT = ["i", "unix_micros(t) AS t", "unix_date(d) AS d", "cast(x AS string) AS x", "s"]


def _step(spark, rows_seen: int = 0) -> Step:
    session = spark.newSession()
    sizing = size_step(session, [], None)
    if rows_seen:
        sizing.cover(rows_seen)
    return Step(session, None, (), (), {}, frozenset(), None, sizing)  # type: ignore[arg-type]


def _plan_leaf(df) -> str:
    return df._jdf.queryExecution().analyzed().getClass().getSimpleName()


def test_a_small_steps_small_frame_is_a_local_relation_of_the_same_rows(spark):
    step = _step(spark)
    frame = step.session.sql(ROWS)
    kept, row = step.keep(frame, F.sum("i").alias("total"))
    assert _plan_leaf(kept) == "LocalRelation" and row[KEPT_ROWS] == 3 and row["total"] == 6
    assert kept.selectExpr(*EXACT).collect() == frame.selectExpr(*EXACT).collect()
    assert kept.schema == frame.schema
    leaf = step.leaf(frame.where("i > 1"))
    assert _plan_leaf(leaf) == "LocalRelation" and leaf.count() == 2
    # a kept frame joined with a frame derived from it (the self-join that made persist() recompute)
    assert leaf.join(leaf.select("i", F.col("s").alias("s2")), "i").count() == 2
    assert step.kept() == "2 frame(s) kept, 2 as local relations"
    assert not step._leaves  # the checkpoints behind them were released at once
    step.release()


def test_frames_past_the_limit_or_in_a_big_step_stay_checkpoints(spark, monkeypatch):
    monkeypatch.setattr(step_module, "LOCAL_ROWS", 2)
    step = _step(spark)
    kept, row = step.keep(step.session.sql(ROWS))
    assert _plan_leaf(kept) == "LogicalRDD" and row[KEPT_ROWS] == 3  # 3 rows > 2
    assert _plan_leaf(step.keep(step.session.sql(ROWS).where("i = 1"))[0]) == "LocalRelation"
    assert step.kept() == "2 frame(s) kept, 1 as local relations"
    step.release()
    monkeypatch.undo()
    big = _step(spark, rows_seen=step.sizing.small + 1)  # type: ignore[union-attr]
    assert not big.sizing.local_leaves  # type: ignore[union-attr]
    assert _plan_leaf(big.leaf(big.session.sql(ROWS))) == "LogicalRDD"
    assert big.kept() == "1 frame(s) kept, 0 as local relations"
    big.release()
