"""Spark sessions for requests: one child session per request, with the ODF settings and its own job group.

A long-lived engine serves several requests at once from one driver; each gets ``spark.newSession()`` (own temp
views and SQL settings, shared SparkContext) and a job group named after it, so one request's views or settings never
leak into another's and a cancelled request stops only its own Spark jobs. The child is the thread's active session
while the request runs and the thread's earlier one after it (:func:`request_session`): Spark reads some settings
from the active session, and a serving thread runs one request after another.
"""
from __future__ import annotations

import json
import logging
import uuid
from contextlib import contextmanager
from typing import Any, Callable, Iterator, TypeVar

from pyspark.sql import SparkSession

from odf_core.engine.spark_conf import DRIVER_CONF, SQL_CONF

A = TypeVar("A")
B = TypeVar("B")


def create_session(app_name: str, master: str | None = None, conf: dict[str, str] | None = None) -> SparkSession:
    """The driver's session for spark-submit jobs and the engine server (in-process engines build their own)."""
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    for k, v in {**DRIVER_CONF, **(conf or {})}.items():
        builder = builder.config(k, v)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    quiet_pyspark_loggers()
    return session


def quiet_pyspark_loggers() -> None:
    """pyspark logs every captured SQL error with its JVM trace to stderr; we report errors ourselves (one line for
    the user, the trace in a log file), so those loggers stay silent."""
    from pyspark.logger import PySparkLogger

    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL + 1)


def cache_class_lookups() -> None:
    """Make py4j look each JVM class, package and static method up once per gateway, not at every use.

    Every ``F.col``/``F.lit``/``F.when``... asks the JVM for the class ``org.apache.spark.sql.functions`` and then
    for the member by name before it calls it: three round trips where one would do (~600 of a tiny GROUP BY step's
    ~6,300). ``jvm.PythonUtils`` (pyspark's ``_to_seq``, behind every ``select``/``groupBy`` of columns) and
    ``jvm.org.apache…X`` cost a round trip per name too, and the JVM resolves a short name by trying it against
    every import: each miss is a ``Class.forName`` that searches every jar of the class path (~300) before it
    fails. A tiny incremental step of a running window made ~470 such lookups (~0.15 s of its ~2.5 s; in the
    driver's own CPU profile the class-path searches were the largest single item). Classes, packages and static
    methods of a running JVM never change, and their py4j proxies hold only a name and the gateway: one serves
    every thread. Field values are not cached (they can change)."""
    from py4j import java_gateway as jg

    if getattr(jg.JVMView.__getattr__, "odf_cached", False):
        return
    found: dict[tuple[int, str, str, str], Any] = {}
    cacheable = (jg.JavaClass, jg.JavaPackage, jg.JavaMember)

    def cached(kind: str, lookup: Callable[[Any, str], Any], prefix: Callable[[Any], str]) -> Callable[[Any, str], Any]:
        def get(self: Any, name: str) -> Any:
            # the proxies keep their gateway client alive: while one is cached, its id is never reused
            key = (id(self._gateway_client), kind, prefix(self), name)
            hit = found.get(key)
            if hit is None:
                hit = lookup(self, name)
                if isinstance(hit, cacheable):
                    found[key] = hit
            return hit

        get.odf_cached = True  # type: ignore[attr-defined]
        return get

    jg.JavaClass.__getattr__ = cached("class", jg.JavaClass.__getattr__, lambda c: c._fqn)  # type: ignore[method-assign]
    jg.JavaPackage.__getattr__ = cached(  # type: ignore[method-assign]
        "package", jg.JavaPackage.__getattr__, lambda p: f"{p._jvm_id}:{p._fqn}")
    jg.JVMView.__getattr__ = cached("view", jg.JVMView.__getattr__, lambda v: v._id)  # type: ignore[method-assign]


def settings(spark: SparkSession) -> dict[str, str]:
    """Every setting of ``spark``'s runtime conf, in three py4j round trips: ``conf.getAll`` walks the JVM map one
    entry at a time (two round trips an entry, ~30 ms a call in a session of ~30 settings, paid twice a step)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None, "no active SparkContext"
    mapper = jvm.com.fasterxml.jackson.databind.ObjectMapper()
    return json.loads(mapper.writeValueAsString(spark.conf._jconf.getAllAsJava()))


def child_session(spark: SparkSession) -> SparkSession:
    """A child session with the caller's SQL and ``spark.odf.*`` settings and then the ODF ones on top: own temp
    views and settings, the caller's session untouched (a new session would otherwise start from the SparkConf
    alone)."""
    cache_class_lookups()
    session = spark.newSession()
    for k, v in settings(spark).items():
        if (k.startswith("spark.sql.") and session.conf.isModifiable(k)) or k.startswith("spark.odf."):
            session.conf.set(k, v)
    for k, v in SQL_CONF.items():
        session.conf.set(k, v)
    return session


@contextmanager
def request_session(spark: SparkSession) -> Iterator[SparkSession]:
    """A request's :func:`child_session`, the active session of the calling thread while the request runs, and the
    thread's earlier one again after it.

    Spark reads some settings from the thread's active session rather than from the session a frame belongs to:
    how rows are decoded into objects (a small step's interpreted expressions cannot decode a catalog's ``Table``),
    a cast's ANSI mode in an expression built in Python. pyspark's ``createDataFrame`` makes its session the
    thread's active one and leaves it so: without the restore, a request's own settings reached whatever its thread
    ran next (the caller's ``spark.catalog.listTables()`` failed after a small incremental step; in the engine
    server, the next request served by the same thread)."""
    session = child_session(spark)
    jvm = spark.sparkContext._jvm
    assert jvm is not None, "no active SparkContext"
    sessions = SparkSession._get_j_spark_session_class(jvm)
    before = sessions.getActiveSession()
    python_before = SparkSession._activeSession
    sessions.setActiveSession(session._jsparkSession)
    try:
        yield session
    finally:
        if before.isDefined():
            sessions.setActiveSession(before.get())
        else:
            sessions.clearActiveSession()
        if SparkSession._activeSession is session:  # pyspark's record (one per process) if it is still this one's
            SparkSession._activeSession = python_before


@contextmanager
def job_group(spark: SparkSession, description: str, group: str | None = None) -> Iterator[str]:
    """Run the block's Spark jobs in their own job group (thread-local in pinned-thread mode, pyspark's default), so
    :func:`cancel` stops exactly them."""
    group = group or f"odf-{uuid.uuid4().hex[:12]}"
    sc = spark.sparkContext
    sc.setJobGroup(group, description[:200], interruptOnCancel=True)
    try:
        yield group
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
        sc.setLocalProperty("spark.job.description", None)


def cancel(spark: SparkSession, group: str) -> None:
    spark.sparkContext.cancelJobGroup(group)


def side_by_side(first: Callable[[], A], second: Callable[[], B]) -> tuple[A, B]:
    """Run ``first`` in a thread of its own while ``second`` runs in this one, and return both results.

    Spark runs the jobs of two threads at once: where one job's stage leaves cores idle (a one-task sort and write)
    the other's tasks use them. The thread sees what this one does: its job group (a cancelled request stops both)
    and its active session, whose settings Spark reads when it builds expressions (a cast's ANSI mode). ``second``'s
    error wins over ``first``'s: it is the one a run of ``second`` and then ``first`` would have raised."""
    from pyspark import InheritableThread, SparkContext

    jvm = SparkContext._jvm
    assert jvm is not None, "no active SparkContext"
    sessions = SparkSession._get_j_spark_session_class(jvm)
    active = sessions.getActiveSession()
    results: dict[str, Any] = {}

    def run() -> None:
        try:
            if active.isDefined():
                sessions.setActiveSession(active.get())
            results["value"] = first()
        except BaseException as e:  # noqa: BLE001 - raised in the caller's thread below
            results["error"] = e

    thread = InheritableThread(target=run, daemon=True)
    thread.start()
    try:
        other = second()
    finally:
        thread.join()
    if "error" in results:
        raise results["error"]
    return results["value"], other
