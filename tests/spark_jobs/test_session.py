"""Running two parts of one request's Spark work side by side (spark_jobs.session.side_by_side)."""
from __future__ import annotations

import threading

import pytest

from spark_jobs.session import job_group, side_by_side

pytestmark = pytest.mark.spark


def sql_conf(spark, key: str) -> str:
    """The setting Spark reads in the calling thread when it builds an expression (its active session's)."""
    return spark.sparkContext._jvm.org.apache.spark.sql.internal.SQLConf.get().getConfString(key)


@pytest.fixture
def keeps_active_session(spark):
    """Restores this thread's active session after a test that made a child session active (later tests build
    expressions with its settings otherwise)."""
    sessions = spark.sparkContext._jvm.org.apache.spark.sql.classic.SparkSession
    before = sessions.getActiveSession()
    yield
    if before.isDefined():
        sessions.setActiveSession(before.get())
    else:
        sessions.clearActiveSession()


def test_both_parts_run_at_once_in_the_callers_job_group_and_active_session(spark, keeps_active_session):
    session = spark.newSession()
    session.conf.set("spark.sql.session.timeZone", "Asia/Kathmandu")
    session.createDataFrame([(1,)], "x int")  # makes it the active session of this thread, as a request's code does
    assert sql_conf(spark, "spark.sql.session.timeZone") == "Asia/Kathmandu"
    met = threading.Barrier(2, timeout=60)  # each part waits for the other: a sequential run would break it
    sc = spark.sparkContext

    def part(name: str) -> tuple[str, str | None, str]:
        met.wait()
        assert session.range(1000).selectExpr("sum(id)").first()[0] == 499500
        return name, sc.getLocalProperty("spark.jobGroup.id"), sql_conf(spark, "spark.sql.session.timeZone")

    ungrouped = set(sc.statusTracker().getJobIdsForGroup(None))
    with job_group(session, "both parts", "odf-test-side-by-side") as group:
        first, second = side_by_side(lambda: part("first"), lambda: part("second"))
    assert first == ("first", group, "Asia/Kathmandu") and second == ("second", group, "Asia/Kathmandu")
    # each part's jobs ran in the group, none outside it (the tracker keeps the newest jobs only: after a thousand
    # jobs of earlier tests it drops the oldest, so only jobs newer than every earlier ungrouped one are compared)
    assert len(sc.statusTracker().getJobIdsForGroup(group)) >= 2
    last = max(ungrouped, default=-1)
    assert {j for j in sc.statusTracker().getJobIdsForGroup(None) if j > last} == set()


def test_the_second_parts_error_wins_and_both_parts_end_before_it_is_raised(spark):
    finished: list[str] = []
    failed = threading.Event()

    def first(fails: bool):
        def run() -> str:
            failed.wait(60)  # still running when the second part fails
            finished.append("first")
            if fails:
                raise ValueError("first failed")
            return "first"
        return run

    def second(fails: bool):
        def run() -> str:
            if fails:
                failed.set()
                raise ValueError("second failed")
            return "second"
        return run

    with pytest.raises(ValueError, match="second failed"):
        side_by_side(first(True), second(True))
    assert finished == ["first"]  # joined before the error was raised
    failed.set()
    with pytest.raises(ValueError, match="first failed"):
        side_by_side(first(True), second(False))
    assert side_by_side(first(False), second(False)) == ("first", "second")


def _commands_sent(monkeypatch) -> list[str]:
    """The kind of every py4j command this process sends from now on (c: a call, r: a reflection lookup...)."""
    import py4j.clientserver as cs

    sent: list[str] = []
    send = cs.ClientServerConnection.send_command

    def counting(self, command):
        sent.append(command.split("\n", 1)[0])
        return send(self, command)

    monkeypatch.setattr(cs.ClientServerConnection, "send_command", counting)
    return sent


def test_a_request_calls_spark_functions_without_looking_them_up_again(spark, monkeypatch):
    from pyspark.sql import functions as F

    from spark_jobs.session import request_session

    with request_session(spark) as session:  # what every request does first
        F.col("warm"), F.lit(0), F.when(F.lit(True), 1)  # each function's first call looks it up
        sent = _commands_sent(monkeypatch)
        built = [F.when(F.col("x") > F.lit(i), F.col("x")).otherwise(F.lit(i)).alias(f"y{i}") for i in range(3)]
        assert "r" not in sent and sent.count("c") >= 3 * 7  # only calls: no reflection round trip before each
        rows = session.createDataFrame([(1,), (5,)], "x int").select(*built).collect()
        assert [tuple(r) for r in rows] == [(1, 1, 2), (5, 5, 5)]


def test_a_request_names_jvm_classes_without_looking_them_up_again(spark, monkeypatch):
    """pyspark's ``jvm.PythonUtils`` (every select of columns), our ``jvm.org.apache…`` and static methods: after the
    first use, no reflection round trip (each was a search of the whole class path for the names that miss)."""
    from pyspark.sql import functions as F

    from spark_jobs.session import request_session

    with request_session(spark) as session:
        df = session.createDataFrame([(1,), (5,)], "x int")
        jvm = spark.sparkContext._jvm

        def build():
            return df.select("x", (F.col("x") + 1).alias("y")), jvm.org.apache.spark.sql.types.Metadata.empty()

        build()  # the first use looks each name up
        sent = _commands_sent(monkeypatch)
        frame, metadata = build()
        assert "r" not in sent and sent.count("c") >= 3, sent
        assert [tuple(r) for r in frame.collect()] == [(1, 2), (5, 6)] and metadata.json() == "{}"
        field = jvm.java.lang.Integer.MAX_VALUE  # a field's value is read again each time, never kept
        sent.clear()
        assert jvm.java.lang.Integer.MAX_VALUE == field == 2**31 - 1 and sent.count("r") == 1, sent


def test_settings_are_read_in_a_few_round_trips_and_equal_the_confs_own(spark, monkeypatch):
    from spark_jobs.session import child_session, settings

    tricky = 'a "quoted", = {value}\n\u00e9'
    spark.conf.set("spark.odf.test.tricky", tricky)
    try:
        expected = spark.conf.getAll  # pyspark's walk of the JVM map, entry by entry
        sent = _commands_sent(monkeypatch)
        found = settings(spark)
        assert len(sent) <= 10 and len(expected) >= 10  # pyspark's walk: two round trips an entry
        assert found == expected and found["spark.odf.test.tricky"] == tricky
        assert child_session(spark).conf.get("spark.odf.test.tricky") == tricky  # the child session gets it
    finally:
        spark.conf.unset("spark.odf.test.tricky")


def _active(spark):
    found = spark.sparkContext._jvm.org.apache.spark.sql.classic.SparkSession.getActiveSession()
    return found.get() if found.isDefined() else None


def test_a_request_leaves_its_threads_active_session_as_it_found_it(spark, keeps_active_session):
    """pyspark's createDataFrame makes its session the thread's active one and leaves it so; Spark decodes rows
    with the active session's settings: a request's interpreted expressions (a small step's) must not reach what
    the thread runs next (a catalog's Table rows cannot be decoded interpreted)."""
    from spark_jobs.session import request_session
    from spark_jobs.transform.incremental.sizing import FACTORY_CONF

    spark.range(1).createOrReplaceTempView("odf_test_listed")
    try:
        before = _active(spark)
        with request_session(spark) as session:
            session.conf.set(FACTORY_CONF, "NO_CODEGEN")  # what a small step sets on its own session
            session.createDataFrame([(1,)], "x int")
            assert _active(spark).equals(session._jsparkSession)  # the request's own while it runs
        assert (before is None and _active(spark) is None) or _active(spark).equals(before)
        assert "odf_test_listed" in [t.name for t in spark.catalog.listTables()]
    finally:
        spark.catalog.dropTempView("odf_test_listed")


def test_a_small_incremental_step_leaves_the_callers_catalog_readable(spark, tmp_path, keeps_active_session):
    """What failed in CI: after a transform whose small steps ran interpreted, the caller's listTables could not
    decode its rows."""
    import pyarrow as pa

    from .transform_support import OP_APPEND, Event, InputSpec, MiniCoordinator, minutes

    data = pa.schema([pa.field("k", pa.string()), pa.field("x", pa.int64())])
    events = [Event(OP_APPEND, minutes(i), (f"k{i % 3}", i)) for i in range(9)]
    spark.range(1).createOrReplaceTempView("odf_test_listed")
    try:
        coord = MiniCoordinator(spark, tmp_path, {"kind": "Sql", "engine": "spark",
                                                  "query": "SELECT k, count(*) AS n, max(event_time) AS event_time "
                                                           "FROM a GROUP BY k"},
                                [InputSpec("a", data, events)], watermarks=True)
        for n in (3, 3, 3):
            coord.step({"a": n})
        assert [r.diagnostics["path"] for r in coord.result.responses][-1] == "incremental"
        assert "code generation off" in coord.result.responses[-1].diagnostics["sizing"]
        assert "odf_test_listed" in [t.name for t in spark.catalog.listTables()]
    finally:
        spark.catalog.dropTempView("odf_test_listed")
