"""The Spark settings every ODF engine path runs with: one list, used by spark-submit, in-process sessions, the
long-lived engine and the tests.

ANSI mode makes bad casts errors instead of nulls; UTC and millisecond timestamps make slices byte-identical wherever
they are computed; SQL over files is off so a query can only read its inputs.
"""
from __future__ import annotations

#: Session-level SQL settings: applied to every request's own session, so a shared driver never leaks one request's
#: settings into another's.
SQL_CONF: dict[str, str] = {
    "spark.sql.ansi.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MILLIS",
    "spark.sql.runSQLOnFiles": "false",
    # frames a step persists (states, changes) are small: let adaptive execution coalesce their shuffles too, instead
    # of 200 tasks per stage (a keyed window step on a tiny history: ~8 s -> ~3 s)
    "spark.sql.optimizer.canChangeCachedPlanOutputPartitioning": "true",
}

#: Added for ingest requests only (read, preprocess, merge): source columns whose names differ only in case stay apart
#: and resolve exactly, as in the reference implementation's ingest. Transforms and ad-hoc SQL keep Spark's
#: case-insensitive resolution: existing derivative queries (and ``odf verify`` replaying them) rely on it.
INGEST_SQL_CONF: dict[str, str] = {
    "spark.sql.caseSensitive": "true",
}

#: Added for a transform's incremental step and its rebuild: the plans the step builds refer to each column under many
#: aliases (old and new states, before and after a change), and Spark's constraint propagation derives constraints for
#: every combination of a column's aliases: a GROUP BY with 6 aggregates spent ~10 s a step in the optimizer, with 8
#: more than 13 minutes. Without it the optimizer takes ~0.5-1 s of such a step; all it would add here is an inferred
#: IS NOT NULL filter or a filter copied across a join's keys. The full path and ingest keep Spark's default.
INCREMENTAL_SQL_CONF: dict[str, str] = {
    "spark.sql.constraintPropagation.enabled": "false",
}

#: Driver-level settings for the processes we start (spark-submit, in-process sessions, the engine server).
DRIVER_CONF: dict[str, str] = {
    **SQL_CONF,
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    # compiled classes of generated code, kept by their source: Spark keeps 100, fewer than one
    # incremental step of a long-lived driver generates (~55), so every step compiled its plans again and ran the
    # new rows through cold, interpreted code. 1000 keep a few dozen queries' classes (a few MB of metaspace).
    "spark.sql.codegen.cache.maxEntries": "1000",
    # PySpark records the Python call site of every DataFrame/Column call in the JVM (for error contexts), ~5 py4j
    # round trips each: ~0.3 s of a ~1.7 s incremental step. Our errors name the query, file and field instead.
    "spark.python.sql.dataFrameDebugging.enabled": "false",
}
