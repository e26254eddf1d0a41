"""An incremental step's shuffle plan (spark_jobs.transform.incremental.sizing): partitions for the rows it can see,
raised when it reads a history, set on its own session only."""
from __future__ import annotations

import pytest

from spark_jobs.errors import EngineFailure
from spark_jobs.transform.incremental.sizing import (ADAPTIVE_CONF, BROADCAST_CONF, BROADCAST_ROWS, CODEGEN_CONF,
                                                    FACTORY_CONF, INTERPRETED_CONF, INTERPRETED_ROWS, LOCAL_ROWS,
                                                    ROWS_PER_PARTITION, SMALL_STEP_CONF, SMALL_STEP_ROWS,
                                                    interpret_small_history, size_stateless_step, size_step)

pytestmark = pytest.mark.spark


def test_partitions_follow_the_rows_a_step_reads(spark):
    caller_partitions = spark.conf.get("spark.sql.shuffle.partitions")
    session = spark.newSession()
    cores = spark.sparkContext.defaultParallelism
    sizing = size_step(session, [], None)
    # a small step: one partition (its tasks would cost more than they share)
    assert sizing.partitions == 1 and session.conf.get("spark.sql.adaptive.enabled") == "false"
    sizing.cover(SMALL_STEP_ROWS + 1)  # past the small step: at least one partition per core
    assert sizing.partitions == cores and session.conf.get("spark.sql.shuffle.partitions") == str(cores)
    sizing.cover(ROWS_PER_PARTITION * (cores + 1))  # a history bigger than one partition per core
    assert sizing.partitions == cores + 2 and session.conf.get("spark.sql.shuffle.partitions") == str(cores + 2)
    sizing.cover(10)  # never lowered
    assert sizing.partitions == cores + 2
    assert "adaptive execution off" in sizing.describe()
    assert spark.conf.get("spark.sql.shuffle.partitions") == caller_partitions  # the caller's session untouched


def _codegen(session) -> tuple[str, str]:
    return session.conf.get(CODEGEN_CONF), session.conf.get(FACTORY_CONF, "FALLBACK")


@pytest.mark.parametrize("own", [None, ("true", "FALLBACK"), ("false", "CODEGEN_ONLY")])
def test_a_small_step_runs_without_code_generation(spark, own):
    """Up to :data:`INTERPRETED_ROWS` a small step's queries run interpreted (no whole-stage code, Spark's interpreted
    projections); past them (a history read) with the request's own settings again, whatever they were, still in one
    partition and with local leaves up to the small step's rows; the caller's session keeps its own."""
    session = spark.newSession()
    if own is not None:
        session.conf.set(CODEGEN_CONF, own[0])
        session.conf.set(FACTORY_CONF, own[1])
    sizing = size_step(session, [], None)
    assert sizing.interpreted and _codegen(session) == ("false", "NO_CODEGEN")
    assert sizing.describe() == "1 shuffle partition(s) for up to 0 row(s), adaptive execution and code generation off"
    assert sizing.local_leaves
    sizing.cover(INTERPRETED_ROWS)  # still interpreted
    assert _codegen(session) == ("false", "NO_CODEGEN") and sizing.local_leaves
    sizing.cover(1)  # compiled, still one partition with local leaves
    assert not sizing.interpreted and _codegen(session) == (own or ("true", "FALLBACK"))
    assert sizing.local_leaves and sizing.partitions == 1
    said = sizing.describe()
    assert said == f"1 shuffle partition(s) for up to {INTERPRETED_ROWS + 1} row(s), adaptive execution off"
    sizing.cover(SMALL_STEP_ROWS - INTERPRETED_ROWS)  # past the small step
    assert not sizing.local_leaves and LOCAL_ROWS < SMALL_STEP_ROWS  # frames past LOCAL_ROWS stay checkpoints anyway
    assert _codegen(session) == (own or ("true", "FALLBACK"))
    assert sizing.describe().endswith(f"{SMALL_STEP_ROWS + 1} row(s), adaptive execution off")
    assert _codegen(spark) == ("true", "FALLBACK")
    adaptive = spark.newSession()
    adaptive.conf.set(ADAPTIVE_CONF, "true")  # adaptive execution plans the step: Spark's own settings stay
    assert not size_step(adaptive, [], None).local_leaves
    assert _codegen(adaptive) == ("true", "FALLBACK")


def test_interpreted_rows_are_a_setting_bounded_by_the_small_step(spark):
    """``interpretedRows`` moves the limit of interpretation; it never reaches past ``smallStepRows`` (0 there: no
    small step, nothing interpreted)."""
    session = spark.newSession()
    session.conf.set(INTERPRETED_CONF, "10")
    sizing = size_step(session, [], None)
    sizing.cover(10)
    assert sizing.interpreted
    sizing.cover(1)
    assert not sizing.interpreted and sizing.partitions == 1
    session.conf.set(SMALL_STEP_CONF, "0")
    sizing = size_step(session, [], None)
    sizing.cover(1)
    assert not sizing.interpreted and not sizing.local_leaves and not interpret_small_history(session, 1)


def test_adaptive_execution_can_be_kept(spark):
    session = spark.newSession()
    session.conf.set(ADAPTIVE_CONF, "true")
    before = session.conf.get("spark.sql.shuffle.partitions")
    sizing = size_step(session, [], None)
    sizing.cover(10 * ROWS_PER_PARTITION)
    assert sizing.partitions is None and sizing.describe() == "adaptive execution"
    assert session.conf.get("spark.sql.shuffle.partitions") == before


def test_a_full_step_over_a_small_history_runs_interpreted(spark):
    session = spark.newSession()
    assert not interpret_small_history(session, INTERPRETED_ROWS + 1) and _codegen(session) == ("true", "FALLBACK")
    assert interpret_small_history(session, INTERPRETED_ROWS) and _codegen(session) == ("false", "NO_CODEGEN")
    assert _codegen(spark) == ("true", "FALLBACK")


@pytest.mark.parametrize("adaptive", ["false", "true"])
def test_a_frame_of_the_change_is_broadcast_while_the_step_sees_few_rows_or_it_is_counted_few(spark, adaptive):
    """The bound is the rows the step's shuffles can see (its new rows, its state, the history it read); past it the
    frame's count decides."""
    session = spark.newSession()
    session.conf.set(ADAPTIVE_CONF, adaptive)
    sizing = size_step(session, [], None)
    assert sizing.broadcast == BROADCAST_ROWS and sizing.broadcastable() is True
    sizing.cover(BROADCAST_ROWS)
    assert sizing.broadcastable() is True
    sizing.cover(1)  # a history past the limit: the frame must be counted
    assert sizing.broadcastable() is None
    assert sizing.broadcastable(BROADCAST_ROWS) is True and sizing.broadcastable(BROADCAST_ROWS + 1) is False
    session.conf.set(BROADCAST_CONF, "0")  # nothing is broadcast but an empty frame
    sizing = size_step(session, [], None)
    assert sizing.broadcastable() is True and sizing.broadcastable(0) is True and sizing.broadcastable(1) is False
    sizing.cover(1)
    assert sizing.broadcastable() is None


@pytest.mark.parametrize("conf", [SMALL_STEP_CONF, BROADCAST_CONF, INTERPRETED_CONF])
@pytest.mark.parametrize("value", ["many", "-1"])
def test_a_bad_rows_setting_names_itself(spark, conf, value):
    session = spark.newSession()
    session.conf.set(conf, value)
    with pytest.raises(EngineFailure, match=rf"{conf}: expected a number of rows \(0 or more\), got '{value}'"):
        size_step(session, [], None)


def _new_rows(n: int):
    from types import SimpleNamespace

    from odf_core.metadata import OffsetInterval

    return [SimpleNamespace(request=SimpleNamespace(offset_interval=OffsetInterval(start=10, end=9 + n)))]


def test_a_small_stateless_step_runs_interpreted_in_one_partition(spark):
    """Up to the small step's new rows: adaptive execution off, one shuffle partition, and up to the interpreted rows
    interpreted; past them the request's settings stay; ``spark.odf.incremental.adaptive=true`` keeps adaptive
    execution. Only on the request's session."""
    session = spark.newSession()
    session.conf.set(SMALL_STEP_CONF, "5")
    assert size_stateless_step(session, _new_rows(6)) is None
    assert _codegen(session) == ("true", "FALLBACK") and session.conf.get("spark.sql.adaptive.enabled") == "true"
    said = size_stateless_step(session, _new_rows(5))
    assert said == "1 shuffle partition(s) for up to 5 new row(s), adaptive execution and code generation off"
    assert _codegen(session) == ("false", "NO_CODEGEN") and session.conf.get("spark.sql.adaptive.enabled") == "false"
    assert session.conf.get("spark.sql.shuffle.partitions") == "1"
    adaptive = spark.newSession()
    adaptive.conf.set(ADAPTIVE_CONF, "true")
    assert size_stateless_step(adaptive, _new_rows(1)) == "up to 1 new row(s), code generation off"
    assert adaptive.conf.get("spark.sql.adaptive.enabled") == "true" and _codegen(adaptive) == ("false", "NO_CODEGEN")
    assert _codegen(spark) == ("true", "FALLBACK") and spark.conf.get("spark.sql.adaptive.enabled") == "true"
    compiled = spark.newSession()
    compiled.conf.set(SMALL_STEP_CONF, "10")
    compiled.conf.set(INTERPRETED_CONF, "5")
    said = size_stateless_step(compiled, _new_rows(6))  # small, but past the interpreted rows: compiled
    assert said == "1 shuffle partition(s) for up to 6 new row(s), adaptive execution off"
    assert _codegen(compiled) == ("true", "FALLBACK") and compiled.conf.get("spark.sql.shuffle.partitions") == "1"
