"""Incremental stateful transforms (spark_jobs.transform.incremental): for random changelogs (appends, retractions,
corrections, NULL keys and values) cut into random transactions, the output changelog reduces to the query's batch
result; the slices are the very bytes the full path writes; queries outside the fragment say why they take the full
path; the first step after a full-path checkpoint rebuilds the state once."""
from __future__ import annotations

import os
import re
import struct
from typing import Callable
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import example, given
from hypothesis import strategies as hst

from odf_core.engine.protocol import ValidateInput, ValidateQueryRequest, ValidateQueryResponseSuccess
from odf_core.metadata.yaml_serde import from_data
from spark_jobs import transform as tr
from spark_jobs.transform.incremental.sizing import SMALL_STEP_ROWS
from spark_jobs.transform.incremental.ties import BROKEN, PAIRED

from .transform_support import (
    OP_APPEND,
    OP_CORRECT_FROM,
    OP_CORRECT_TO,
    Event,
    InputSpec,
    MiniCoordinator,
    PathLog,
    Txn,
    batch_reference,
    checkpoint_tables,
    minutes,
    reduce_input,
    reduce_output,
    splits,
)
from ..hypothesis_profiles import spark_property

pytestmark = pytest.mark.spark

R = 1  # -R
DATA = pa.schema([pa.field("k", pa.string()), pa.field("x", pa.int64())])


def sql(query: str) -> dict:
    return {"kind": "Sql", "engine": "spark", "query": query}


def steps(*queries: tuple[str | None, str]) -> dict:
    return {"kind": "Sql", "engine": "spark",
            "queries": [{"query": q} if alias is None else {"alias": alias, "query": q} for alias, q in queries]}


# an ordering with one value per distinct row (event time, k, x): rows tied at it are equal rows
SEQ = "unix_micros(event_time) * 1000 + coalesce(ascii(k), 0) % 10 * 100 + coalesce(x, -6) + 6"

# name -> (transform, inputs read as raw changelog); every one of them takes the incremental path
FAMILIES = {
    "aggregates": (sql("SELECT k, count(*) AS n, count(x) AS nx, sum(x) AS s, avg(x) AS a, min(x) AS lo, "
                       "max(x) AS hi, max(event_time) AS event_time FROM a GROUP BY k"), ()),
    "global": (sql("SELECT coalesce(max(event_time), TIMESTAMP'2024-01-01 00:00:00Z') AS event_time, count(*) AS n, "
                   "sum(x) AS s, min(x) AS lo FROM a"), ()),
    "having_nested": (steps(
        ("per_k", "SELECT k, sum(x) AS s, max(event_time) AS et FROM a GROUP BY k HAVING count(*) > 1"),
        (None, "SELECT max(et) AS event_time, coalesce(s, 0) % 3 AS bucket, count(*) AS n FROM per_k "
               "GROUP BY coalesce(s, 0) % 3")), ()),
    "distinct": (sql("SELECT DISTINCT k, date_trunc('HOUR', event_time) AS event_time FROM a"), ()),
    "tumbling": (sql("SELECT window.start AS event_time, k, count(*) AS n, min(x) AS lo FROM a "
                     "GROUP BY window(event_time, '30 minutes'), k"), ()),
    "sliding": (sql("SELECT window.end AS event_time, count(*) AS n, max(x) AS hi FROM a "
                    "GROUP BY window(event_time, '30 minutes', '10 minutes')"), ()),
    "two_inputs": (sql("SELECT k, count(*) AS n, max(event_time) AS event_time FROM "
                       "(SELECT k, event_time FROM a UNION ALL SELECT k, event_time FROM b WHERE x > 0) GROUP BY k"),
                   ()),
    "changelog": (sql("SELECT k, count(*) AS changes, max(event_time) AS event_time FROM a WHERE op <> 0 "
                      "GROUP BY k"), ("a",)),
    # count DISTINCT: a count per group and value next to the group's state (with a min/max that can be recomputed)
    "count_distinct": (sql("SELECT k, count(DISTINCT x) AS nd, count(*) AS n, min(x) AS lo, "
                           "max(event_time) AS event_time FROM a GROUP BY k"), ()),
    "count_distinct_global": (sql("SELECT coalesce(max(event_time), TIMESTAMP'2024-01-01 00:00:00Z') AS event_time, "
                                  "count(DISTINCT k, x) AS nd, sum(x) AS s FROM a"), ()),
    "sum_distinct": (sql("SELECT k, sum(DISTINCT x) AS sd, avg(DISTINCT x) AS ad, count(DISTINCT x) AS nd, "
                         "sum(DISTINCT CAST(x AS DECIMAL(5, 1))) AS dd, max(event_time) AS event_time FROM a "
                         "GROUP BY k"), ()),
    "sum_distinct_global": (sql("SELECT coalesce(max(event_time), TIMESTAMP'2024-01-01 00:00:00Z') AS event_time, "
                                "avg(DISTINCT x) AS ad, count(*) AS n FROM a"), ()),
    "count_distinct_nested": (steps(
        ("per_k", "SELECT k, count(DISTINCT x % 3) AS nd, max(event_time) AS et FROM a GROUP BY k"),
        (None, "SELECT max(et) AS event_time, nd, count(DISTINCT et) AS nt FROM per_k GROUP BY nd")), ()),
    # max_by/min_by: the extreme ordering and the values at it; a removed extreme recomputes the group. Spark's pick
    # among rows tied at the extreme depends on their order (test_tied_extremes_recompute_the_group), so these order
    # by SEQ, one value per distinct row
    "latest_by_window": (sql("SELECT window.start AS event_time, k, max_by(x, seq) AS last_x, "
                             "min_by(x, seq) AS first_x, count(*) AS n FROM (SELECT *, " + SEQ + " AS seq FROM a) "
                             "GROUP BY window(event_time, '30 minutes'), k"), ()),
    "extreme_by_global": (sql("SELECT coalesce(max(event_time), TIMESTAMP'2024-01-01 00:00:00Z') AS event_time, "
                              "max_by(x, seq) AS top, "
                              "min_by(k, CAST(seq AS DECIMAL(20, 0))) AS bottom FROM (SELECT *, " + SEQ + " AS seq "
                              "FROM a)"), ()),
    "count_distinct_first_last": (sql(
        "SELECT k, count(DISTINCT x) AS nd, max_by(x, seq) AS last_x, min_by(x, seq) AS first_x, "
        "max(event_time) AS event_time FROM (SELECT *, " + SEQ + " AS seq FROM a) GROUP BY k"), ()),
    # DISTINCT aggregates over several column sets: Spark's rewrite, an aggregate per (group, value, column set)
    # under one with FILTER clauses and first() of the other functions' values, both with a state per group
    "distinct_two_sets": (sql("SELECT k, count(DISTINCT x) AS nx, count(DISTINCT date_trunc('HOUR', event_time)) AS "
                              "nh, sum(DISTINCT x % 4) AS s4, sum(x) AS s, min(x) AS lo, max(event_time) AS event_time "
                              "FROM a GROUP BY k"), ()),
    "distinct_two_sets_by_window": (sql("SELECT window.start AS event_time, count(DISTINCT k) AS nk, "
                                        "count(DISTINCT x) AS nx, count(*) AS n FROM a "
                                        "GROUP BY window(event_time, '30 minutes')"), ()),
    "filtered": (sql("SELECT k, count(*) FILTER (WHERE x > 0) AS pos, sum(x) FILTER (WHERE x % 2 = 0) AS even, "
                     "max(x) FILTER (WHERE x < 5) AS hi, max_by(x, seq) FILTER (WHERE x <> 3) AS last_x, "
                     "count(DISTINCT x) FILTER (WHERE x > 1) AS nd, max(event_time) AS event_time "
                     "FROM (SELECT *, " + SEQ + " AS seq FROM a) GROUP BY k"), ()),
    # max_by/min_by by string (prefixes of each other) and DOUBLE orderings (NaN, -0.0), each one-to-one with x
    "by_orderings": (sql("SELECT k, max_by(x, name) AS top, min_by(x, name) AS bottom, max_by(x, score) AS best, "
                         "min_by(x, score) AS worst, count(*) AS n, max(event_time) AS event_time FROM (SELECT *, "
                         "concat(repeat('\u00e9', x + 5), 'z') AS name, CASE WHEN x = 9 THEN double('NaN') WHEN x = 1 "
                         "THEN double('-0.0') WHEN x = 0 THEN 0.75D ELSE -1.0D / x END AS score FROM a) GROUP BY k"),
                     ()),
    # first()/last(): Spark picks a row by the order it reads them; here every row a group can pick has one value
    "first_last": (sql("SELECT k, first(CASE WHEN x > 4 THEN upper(k) END) IGNORE NULLS AS big, last(k) AS lk, "
                       "count(*) AS n, max(event_time) AS event_time FROM a GROUP BY k"), ()),
    # by key: functions with no state here whose value does not depend on the order of the rows (.keyed)
    "aggregate_by_key": (sql("SELECT k, bit_or(x) AS bits, approx_count_distinct(x) AS nd, every(x > 0) AS pos, "
                             "max(event_time) AS event_time FROM a GROUP BY k"), ()),
    # the value counts of a window's groups leave the state with them
    "count_distinct_by_window": (sql("SELECT window.start AS event_time, count(DISTINCT x) AS nd, count(*) AS n, "
                                     "sum(DISTINCT x) AS sd FROM a GROUP BY window(event_time, '30 minutes')"), ()),
    "window": (sql("SELECT event_time, k, x, sum(x) OVER (PARTITION BY k ORDER BY event_time, x "
                   "ROWS UNBOUNDED PRECEDING) AS running, rank() OVER (PARTITION BY k ORDER BY x) AS r FROM a"), ()),
    # a running state per partition (spark_jobs.transform.incremental.running); late rows recompute the partition
    "running": (sql("SELECT event_time, k, x, count(*) OVER w AS n, count(x) OVER w AS nx, min(x) OVER w AS lo, "
                    "max(x) OVER w AS hi, sum(CAST(x AS DECIMAL(10, 2))) OVER w AS dec, row_number() OVER w AS rn, "
                    "dense_rank() OVER (PARTITION BY k ORDER BY event_time) AS dr, "
                    "sum(x) OVER (PARTITION BY k ORDER BY event_time) AS peers FROM a "
                    "WINDOW w AS (PARTITION BY k ORDER BY event_time, x ROWS UNBOUNDED PRECEDING)"), ()),
    # lag: the partition's last rows are its state, beside invertible running functions of the same window
    "running_lag": (sql("SELECT event_time, k, x, lag(x) OVER w AS prev, lag(x, 3, -1) OVER w AS back3, "
                        "lag(k, 2, k) OVER w AS k2, sum(x) OVER w AS s, count(*) OVER w AS n, "
                        "row_number() OVER w AS rn, dense_rank() OVER w AS dr FROM a "
                        "WINDOW w AS (PARTITION BY k ORDER BY event_time, x)"), ()),
    # lead: the tail also holds the rows whose output new rows change; they are retracted and output again
    "running_lead": (sql("SELECT event_time, k, x, lead(x) OVER w AS next, lead(x, 2, -1) OVER w AS next2, "
                         "lag(x) OVER w AS prev, count(x) OVER w AS nx, row_number() OVER w AS rn, "
                         "dense_rank() OVER w AS dr FROM a WINDOW w AS (PARTITION BY k ORDER BY event_time, x)"), ()),
    # frames of rows around the row (moving aggregates): the tail again, for any aggregate (Spark's own over it)
    "running_frame": (sql("SELECT event_time, k, x, avg(x) OVER (PARTITION BY k ORDER BY event_time, x ROWS "
                          "BETWEEN 2 PRECEDING AND CURRENT ROW) AS avg3, sum(CAST(x AS DOUBLE)) OVER (PARTITION BY k "
                          "ORDER BY event_time, x ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) AS near, max(x) OVER "
                          "(PARTITION BY k ORDER BY event_time, x ROWS BETWEEN 3 PRECEDING AND 1 PRECEDING) AS "
                          "before3, last(x) OVER (PARTITION BY k ORDER BY event_time, x ROWS BETWEEN CURRENT "
                          "ROW AND 2 FOLLOWING) AS ahead2, count(*) OVER w AS n, row_number() OVER w AS rn FROM a "
                          "WINDOW w AS (PARTITION BY k ORDER BY event_time, x)"), ()),
    # frames of values (a rolling sum over the last 10 minutes): the tail keeps the rows within the frames' reach of
    # the partition's last ORDER BY value; beside a frame reaching FOLLOWING rows, see running_range_ahead
    "running_range": (sql("SELECT event_time, k, x, sum(x) OVER (PARTITION BY k ORDER BY event_time RANGE BETWEEN "
                          "INTERVAL 10 MINUTES PRECEDING AND CURRENT ROW) AS s10, avg(x) OVER (PARTITION BY k ORDER "
                          "BY event_time RANGE BETWEEN INTERVAL 20 MINUTES PRECEDING AND INTERVAL 5 MINUTES "
                          "FOLLOWING) AS near, count(*) OVER (PARTITION BY k ORDER BY event_time RANGE BETWEEN "
                          "INTERVAL 15 MINUTES PRECEDING AND INTERVAL 5 MINUTES PRECEDING) AS before, max(x) OVER "
                          "(PARTITION BY k ORDER BY event_time RANGE BETWEEN CURRENT ROW AND INTERVAL 10 MINUTES "
                          "FOLLOWING) AS ahead, count(x) OVER (PARTITION BY k ORDER BY event_time) AS nx FROM a"),
                      ()),
    # first/last (the forward fill last(x) IGNORE NULLS, the previous non-NULL value lag(x) IGNORE NULLS): the state
    # keeps the partition's first / last (non-NULL) value; beside a lag (a tail) too, and beside a lead (see
    # running_lead_folds)
    "running_first_last": (sql("SELECT event_time, k, x, first(x) OVER w AS f, first(x) IGNORE NULLS OVER w AS fi, "
                               "last(x) OVER w AS l, last(x) IGNORE NULLS OVER w AS filled, count(*) OVER w AS n, "
                               "lag(x) IGNORE NULLS OVER w AS known FROM a "
                               "WINDOW w AS (PARTITION BY k ORDER BY event_time, x)"), ()),
    "running_fill_lag": (sql("SELECT event_time, k, x, last(x) IGNORE NULLS OVER w AS filled, first_value(x, true) "
                             "OVER w AS fi, first(x) OVER w AS f, lag(x, 2) OVER w AS back2, max(x) OVER w AS hi, "
                             "min(x) OVER w AS lo, lag(x) IGNORE NULLS OVER w AS known FROM a "
                             "WINDOW w AS (PARTITION BY k ORDER BY event_time, x)"), ()),
    "running_first_lead": (sql("SELECT event_time, k, x, first(x) OVER w AS f, last(x) OVER w AS l, lead(x) OVER w "
                               "AS next FROM a WINDOW w AS (PARTITION BY k ORDER BY event_time, x)"), ()),
    # beside a lead the tail's rows are output again: sums, ranks, extremes and IGNORE NULLS keep their values there
    "running_lead_folds": (sql("SELECT event_time, k, x, lead(x) OVER w AS next, sum(x) OVER w AS total, rank() OVER "
                               "w AS r, max(x) OVER w AS hi, min(x) OVER w AS lo, last(x) IGNORE NULLS OVER w AS "
                               "filled, first(x) IGNORE NULLS OVER w AS fi, lag(x) IGNORE NULLS OVER w AS known "
                               "FROM a WINDOW w AS (PARTITION BY k ORDER BY event_time, x)"), ()),
    # IGNORE NULLS over a tail: it holds the rows from the partition's k-th last non-NULL value on (a lag reads
    # them; a lead's and a backward fill's rows change while fewer values follow them)
    "running_skips": (sql("SELECT event_time, k, x, lag(x, 2) IGNORE NULLS OVER w AS back2, lag(x, 1, -1) IGNORE "
                          "NULLS OVER w AS known, lag(k, 3, k) IGNORE NULLS OVER w AS k3, sum(x) OVER w AS total, "
                          "row_number() OVER w AS rn, last(x) IGNORE NULLS OVER w AS filled FROM a "
                          "WINDOW w AS (PARTITION BY k ORDER BY event_time, x)"), ()),
    "running_skips_ahead": (sql("SELECT event_time, k, x, lead(x) IGNORE NULLS OVER w AS next, lead(x, 2, -5) "
                                "IGNORE NULLS OVER w AS next2, first(x) IGNORE NULLS OVER (PARTITION BY k ORDER BY "
                                "event_time, x ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) AS backfill, "
                                "first(x, true) OVER (PARTITION BY k ORDER BY event_time, x ROWS BETWEEN 2 FOLLOWING "
                                "AND UNBOUNDED FOLLOWING) AS later, first(x) OVER (PARTITION BY k ORDER BY "
                                "event_time, x ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING) AS after1, "
                                "lag(x, 2) IGNORE NULLS OVER w AS back2, sum(x) OVER w AS total, rank() OVER w AS r "
                                "FROM a WINDOW w AS (PARTITION BY k ORDER BY event_time, x)"), ()),
    "running_range_ahead": (sql("SELECT event_time, k, x, count(*) OVER (PARTITION BY k ORDER BY event_time RANGE "
                                "BETWEEN CURRENT ROW AND INTERVAL 10 MINUTES FOLLOWING) AS ahead, sum(x) OVER "
                                "(PARTITION BY k ORDER BY event_time) AS total, max(x) OVER (PARTITION BY k ORDER BY "
                                "event_time) AS hi, rank() OVER (PARTITION BY k ORDER BY event_time) AS r FROM a"),
                            ()),
    "running_range_values": (sql("SELECT event_time, k, x, sum(x) OVER (PARTITION BY k ORDER BY x RANGE BETWEEN 2 "
                                 "PRECEDING AND CURRENT ROW) AS s2, min(event_time) OVER (PARTITION BY k "
                                 "ORDER BY x RANGE BETWEEN 3 PRECEDING AND 1 PRECEDING) AS first, max(event_time) "
                                 "OVER (PARTITION BY k ORDER BY x) AS latest FROM a"), ()),
    # frames of months over a TIMESTAMP (a minute of event time is a day and some hours here: Jan 1 to Mar 31 2024,
    # month ends clamped); over a DATE, see test_a_frame_of_months_keeps_the_rows_within_months_of_its_last_value
    "running_range_months": (sql("SELECT event_time, k, x, t, sum(x) OVER (PARTITION BY k ORDER BY t RANGE BETWEEN "
                                 "INTERVAL 1 MONTH PRECEDING AND CURRENT ROW) AS s1, count(*) OVER (PARTITION BY k "
                                 "ORDER BY t RANGE BETWEEN INTERVAL 1 MONTH PRECEDING AND INTERVAL 1 MONTH FOLLOWING) "
                                 "AS near, max(x) OVER (PARTITION BY k ORDER BY t RANGE BETWEEN INTERVAL 2 MONTHS "
                                 "PRECEDING AND INTERVAL 1 MONTH PRECEDING) AS before, min(x) OVER (PARTITION "
                                 "BY k ORDER BY t RANGE BETWEEN CURRENT ROW AND INTERVAL 1 MONTH FOLLOWING) AS ahead, "
                                 "count(x) OVER (PARTITION BY k ORDER BY t) AS nx FROM (SELECT *, TIMESTAMP"
                                 "'2024-01-01 00:00:00Z' + make_dt_interval(m, m % 7, 0, 0) AS t FROM (SELECT *, "
                                 "CAST((unix_seconds(event_time) - 1704067200) / 60 AS INT) AS m FROM a))"), ()),
    # a running window over one that outputs rows again, reading its values: a row output again changes the sums
    "running_over_ahead": (sql(f"SELECT event_time, k, x, ahead, sum(ahead) OVER w AS total, max(x) OVER w AS hi "
                               "FROM (SELECT *, count(*) OVER (PARTITION BY k ORDER BY event_time RANGE BETWEEN "
                               "CURRENT ROW AND INTERVAL 5 MINUTES FOLLOWING) AS ahead FROM a) WINDOW w AS "
                               f"(PARTITION BY k ORDER BY {SEQ})"), ()),
    # two windows with different orders, the lower one outputting rows again: the upper one reads retractions
    "running_stacked": (sql("SELECT event_time, k, x, count(*) OVER (PARTITION BY k ORDER BY event_time RANGE "
                            "BETWEEN CURRENT ROW AND INTERVAL 5 MINUTES FOLLOWING) AS ahead, lag(x) OVER w AS below, "
                            f"sum(x) OVER w AS upto FROM a WINDOW w AS (PARTITION BY k ORDER BY {SEQ})"), ()),
    # by key (spark_jobs.transform.incremental.keyed): the touched keys are recomputed, or the changed rows joined
    "window_by_key": (sql("SELECT event_time, k, x, lag(x) OVER (PARTITION BY k ORDER BY event_time, x) AS prev, "
                          "sum(x) OVER (PARTITION BY k ORDER BY event_time DESC, x) AS rest FROM a"), ()),
    # the first rows per partition are its state (spark_jobs.transform.incremental.top); removals among them
    # recompute the partition
    "top_per_key": (sql("SELECT event_time, k, x FROM (SELECT *, row_number() OVER (PARTITION BY k ORDER BY x DESC, "
                        "event_time) AS rn FROM a) WHERE rn <= 2"), ()),
    "top_latest": (sql(f"SELECT event_time, k, x, rn FROM (SELECT *, row_number() OVER (PARTITION BY k ORDER BY {SEQ} "
                       "DESC) AS rn FROM a) WHERE rn = 1"), ()),
    "top_ranked": (sql("SELECT event_time, k, x, r, dr FROM (SELECT *, rank() OVER w AS r, dense_rank() OVER w AS dr "
                       "FROM a WINDOW w AS (PARTITION BY k ORDER BY x NULLS LAST)) "
                       "WHERE r <= 2 AND event_time > TIMESTAMP'2024-01-01 00:10:00Z'"), ()),
    "top_dense": (sql("SELECT event_time, k, x, r, dr FROM (SELECT *, rank() OVER w AS r, dense_rank() OVER w AS dr "
                      "FROM a WINDOW w AS (PARTITION BY ascii(k) % 2, k ORDER BY x DESC NULLS FIRST)) "
                      "WHERE 2 >= dr"), ()),
    "top_of_aggregate": (steps(
        ("hourly", "SELECT k, date_trunc('HOUR', event_time) AS event_time, count(*) AS n, sum(x) AS s FROM a "
                   "GROUP BY k, date_trunc('HOUR', event_time)"),
        (None, "SELECT event_time, k, n, s FROM (SELECT *, row_number() OVER (PARTITION BY k ORDER BY n DESC, "
               "event_time) AS rn FROM hourly) WHERE rn = 1")), ()),
    "top_then_aggregate": (steps(
        ("top2", f"SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY k ORDER BY {SEQ}) AS rn FROM a) "
                 "WHERE rn <= 2"),
        (None, "SELECT k, sum(x) AS s, count(*) AS n, max(event_time) AS event_time FROM top2 GROUP BY k")), ()),
    "lookup_join": (sql("SELECT a.event_time, a.k, a.x, b.x AS bx FROM a JOIN b ON a.k = b.k"), ()),
    "outer_join": (sql("SELECT coalesce(a.event_time, b.event_time) AS event_time, a.k AS ak, b.k AS bk, a.x, "
                       "b.x AS bx FROM a FULL OUTER JOIN b ON a.k = b.k AND a.x < b.x + 3"), ()),
    "left_join_semi": (sql("SELECT a.event_time, a.k, b.x AS bx FROM a LEFT JOIN b ON a.k = b.k "
                           "WHERE a.k IN (SELECT k FROM b WHERE x > 0) OR a.x > 5"), ()),
    # integer keys: the history slices read are bounded by the keys' ranges in the new slices (.key_ranges)
    "join_on_ranges": (sql("SELECT a.event_time, a.k, a.x, b.k AS bk FROM a JOIN b ON a.x = b.x"), ()),
    "left_join_on_ranges": (sql("SELECT a.event_time, a.k, a.x, b.k AS bk FROM a LEFT JOIN b "
                                "ON a.event_time = b.event_time"), ()),
    "window_on_ranges": (sql("SELECT event_time, k, x, count(k) OVER (PARTITION BY x ORDER BY event_time, k "
                             "ROWS BETWEEN 1 PRECEDING AND UNBOUNDED FOLLOWING) AS near FROM a"), ()),
    "join_then_aggregate": (sql("SELECT a.k, count(*) AS n, sum(b.x) AS s, max(a.event_time) AS event_time "
                                "FROM a JOIN b ON a.k = b.k GROUP BY a.k"), ()),
    # event times within an interval of each other bound the history slices read (.key_ranges.Interval)
    "interval_join": (sql("SELECT coalesce(a.event_time, b.event_time) AS event_time, a.k, a.x, b.x AS bx FROM a "
                          "FULL OUTER JOIN b ON a.k = b.k AND b.event_time BETWEEN a.event_time - INTERVAL 10 MINUTES "
                          "AND a.event_time + INTERVAL 5 MINUTES"), ()),
    # rows tied in a window by key's ORDER BY (drawn at a few event times: TIED_FAMILIES): every evaluation orders
    # them by their other columns (.ties), as the batch query in TIE_BROKEN does explicitly (a rank would rank by those
    # too there)
    "window_ties": (sql("SELECT event_time, k, x, row_number() OVER w AS rn, lag(x) OVER w AS prev, "
                        "sum(x) OVER (PARTITION BY k ORDER BY event_time DESC ROWS BETWEEN 1 PRECEDING AND CURRENT "
                        "ROW) AS near FROM a WINDOW w AS (PARTITION BY k ORDER BY event_time DESC)"), ()),
    # ... in a running window: first/last over its RANGE frame pick among them, and the row number gets a window of
    # its own, over the rank's and the count's (.ties)
    "running_ties": (sql("SELECT event_time, k, x, last(x) IGNORE NULLS OVER w AS fill, first(x) OVER w AS opening, "
                         "row_number() OVER w AS rn, rank() OVER w AS r, count(*) OVER w AS n FROM a "
                         "WINDOW w AS (PARTITION BY k ORDER BY event_time)"), ()),
}
# the batch query a family's output reduces to, where it is not the family's own query
TIE_BROKEN = {"window_ties": sql(FAMILIES["window_ties"][0]["query"].replace("ORDER BY event_time DESC",
                                                                             "ORDER BY event_time DESC, x"))}
TIE_BROKEN["running_ties"] = sql(  # the picks from ROWS frames in that order, at the last row of each tied group
    "SELECT event_time, k, x, max_by(f, i) OVER w AS fill, max_by(o, i) OVER w AS opening, i AS rn, rank() OVER w AS "
    "r, count(*) OVER w AS n FROM (SELECT *, last(x) IGNORE NULLS OVER t AS f, first(x) OVER t AS o, row_number() "
    "OVER t AS i FROM a WINDOW t AS (PARTITION BY k ORDER BY event_time, x ROWS BETWEEN UNBOUNDED PRECEDING AND "
    "CURRENT ROW)) WINDOW w AS (PARTITION BY k ORDER BY event_time)")
TIED_FAMILIES = {"window_ties", "running_ties"}
# the stacked windows over histories mostly in event-time order: the window below outputs rows again without
# recomputing their partition, and the one above pairs them with the values it gave them (.incremental.reissued)
IN_ORDER = {"running_over_ahead_in_order", "running_stacked_in_order"}
FAMILIES.update({name: FAMILIES[name.removesuffix("_in_order")] for name in IN_ORDER})
STATEFUL_OPERATORS = {"Aggregate", "Window", "WindowGroupLimit", "Join"}

KEYS = hst.sampled_from(["p", "q", "r", None])
VALUES = hst.one_of(hst.none(), hst.integers(-5, 9))


@hst.composite
def changelogs(draw, max_events: int = 16, growing: bool = False, in_order: bool = False, tied: bool = False,
               min_events: int = 1) -> list[Event]:
    """A valid changelog: appends, and -R / -C+C of rows that are live at that point. ``growing``: the appended x
    grows with its position, like an id (sometimes NULL), so each slice holds a range of x of its own and key ranges
    leave slices out; a correction then changes k, so a retraction touches the x of an older slice again.
    ``in_order``: mostly appends, a minute apart in event-time order (one in 8 is 3 minutes late), so a window that
    looks minutes ahead outputs its last rows again without recomputing their partition. ``tied``: mostly appends at
    four event times, so most rows are tied with others of their key at it."""
    events: list[Event] = []
    live: list[Event] = []
    for i in range(draw(hst.integers(min_events, max_events))):
        kinds = ["append"] * (6 if in_order or tied else 2) + ["retract", "correct"]
        kind = draw(hst.sampled_from(kinds)) if live else "append"
        if kind == "append":
            x = (None if draw(hst.integers(0, 7)) == 0 else i) if growing else draw(VALUES)
            t = i - 3 * (draw(hst.integers(0, 7)) == 0) if in_order else draw(hst.integers(0, 3 if tied else 90))
            e = Event(OP_APPEND, minutes(t), (draw(KEYS), x))
            events.append(e)
            live.append(e)
            continue
        victim = live.pop(draw(hst.integers(0, len(live) - 1)))
        if kind == "retract":
            events.append(Event(R, victim.event_time, victim.data))
        else:
            data = (draw(KEYS), victim.data[1]) if growing else (victim.data[0], draw(VALUES))
            new = Event(OP_CORRECT_TO, victim.event_time, data)
            events += [Event(OP_CORRECT_FROM, victim.event_time, victim.data), new]
            live.append(Event(OP_APPEND, new.event_time, new.data))
    return events


def _inputs(a: list[Event], b: list[Event]) -> list[InputSpec]:
    return [InputSpec("a", DATA, a), InputSpec("b", DATA, b)]


# a fixed history with every kind of change, for the explicit examples
FIXED_A = [Event(OP_APPEND, minutes(1), ("p", 3)), Event(OP_APPEND, minutes(2), ("p", 7)),
           Event(OP_APPEND, minutes(40), (None, 1)), Event(OP_APPEND, minutes(41), ("q", None)),
           Event(R, minutes(2), ("p", 7)),  # removes p's max: recomputed
           Event(OP_CORRECT_FROM, minutes(1), ("p", 3)), Event(OP_CORRECT_TO, minutes(1), ("p", -2)),
           Event(OP_APPEND, minutes(75), ("r", 4)), Event(R, minutes(75), ("r", 4))]  # r appears and disappears
FIXED_B = [Event(OP_APPEND, minutes(5), ("p", 1)), Event(OP_APPEND, minutes(6), ("s", -1))]


def _run(spark, root, transform, inputs, split, incremental: bool = True, adaptive: bool = False,
         small_step_rows: int | None = None, before_step: Callable[[], None] | None = None,
         interpreted_rows: int | None = None) -> MiniCoordinator:
    spark.conf.set("spark.odf.incremental.enabled", str(incremental).lower())
    spark.conf.set("spark.odf.incremental.adaptive", str(adaptive).lower())
    if small_step_rows is not None:
        spark.conf.set("spark.odf.incremental.smallStepRows", str(small_step_rows))
    if interpreted_rows is not None:
        spark.conf.set("spark.odf.incremental.interpretedRows", str(interpreted_rows))
    try:
        coord = MiniCoordinator(spark, root, transform, inputs, watermarks=True)
        for t in split:
            if before_step is not None:
                before_step()
            coord.step(t)
        return coord
    finally:
        spark.conf.unset("spark.odf.incremental.enabled")
        spark.conf.unset("spark.odf.incremental.adaptive")
        spark.conf.unset("spark.odf.incremental.smallStepRows")
        spark.conf.unset("spark.odf.incremental.interpretedRows")


def _run_both(spark, root, transform, history: list[Event], split: list[Txn],
              before_step: Callable[[], None] | None = None) -> MiniCoordinator:
    """One input's history run incrementally and on the full path: the slices are the same bytes and reduce to the
    batch result. Returns the incremental run (``before_step``: called before each of its steps)."""
    inputs = [InputSpec("a", DATA, history)]
    inc = _run(spark, root / "inc", transform, inputs, split, before_step=before_step)
    full = _run(spark, root / "full", transform, inputs, split, incremental=False)
    for a, b in zip(inc.result.slices, full.result.slices, strict=True):
        assert a.equals(b), (a.to_pylist(), b.to_pylist())
    assert reduce_output(inc.result.rows()) == batch_reference(spark, transform, inc.inputs)
    return inc


# a history of appends in event-time order per partition, a new partition, a late row and a removal (split below)
TAIL_HISTORY = [*[Event(OP_APPEND, minutes(i), ("p", i)) for i in (1, 2, 3)], Event(OP_APPEND, minutes(1), ("q", 5)),
                Event(OP_APPEND, minutes(4), ("p", 4)), Event(OP_APPEND, minutes(5), ("r", None)),  # a new partition
                Event(OP_APPEND, minutes(5), ("p", 6)), Event(OP_APPEND, minutes(6), ("p", 7)),  # 7 looks back 3 rows
                Event(OP_APPEND, minutes(0), ("p", 0)),  # late: p is recomputed from its history
                Event(R, minutes(1), ("q", 5)), Event(OP_APPEND, minutes(7), ("p", 8))]  # q removed; p extended
TAIL_SPLIT = [Txn({"a": 4}), Txn({"a": 2}), Txn({"a": 2}), Txn({"a": 1}), Txn({"a": 2})]


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_any_changelog_and_split_gives_the_batch_result(spark, tmp_path_factory, name):
    """The fixed history, then the profile's generated examples (tests/hypothesis_profiles.py), each split into at
    least two transactions with rows of a: some generated step must have been incremental."""
    generated = PathLog()

    @given(data=hst.data())
    def check(data):
        _check_family(spark, tmp_path_factory, name, data, generated)

    if name not in IN_ORDER:  # an _in_order family's fixed history is its base family's: run there, once
        check = example(data=None)(check)
    spark_property(name)(check)()
    generated.assert_incremental(name)


def _check_family(spark, tmp_path_factory, name: str, data, generated: PathLog) -> None:
    transform, changelog = FAMILIES[name]
    if data is None:  # the fixed history: p's maximum removed and p corrected in step 3, r added and removed in 4
        inputs = _inputs(FIXED_A, FIXED_B)
        split = [Txn({"a": 2, "b": 1}), Txn({"a": 2, "b": 1}), Txn({"a": 3}), Txn({"a": 2})]
    else:
        in_order, tied = name in IN_ORDER, name in TIED_FAMILIES
        inputs = _inputs(data.draw(changelogs(40 if tied else 16, in_order=in_order, tied=tied, min_events=2), "a"),
                         data.draw(changelogs(8, in_order=in_order), "b"))
        split = data.draw(splits(inputs, min_steps=2), "split")
    coord = _run(spark, tmp_path_factory.mktemp(name), transform, inputs, split)
    if data is not None:
        generated.record(coord.result)
    responses = coord.result.responses
    paths = [r.diagnostics["path"] for r in responses]
    assert paths[0] == "rebuild" and set(paths[1:]) <= {"incremental", None}, paths  # None: nothing new
    operators = responses[0].diagnostics["operators"]
    assert any(o in STATEFUL_OPERATORS and p == "incremental" for o, p in operators), operators
    assert all(p != "full" for _, p in operators), operators
    if name.startswith("running"):  # the running state, not the recomputation by key
        details = [o.detail for o in responses[0].raw.diagnostics.operators if o.operator == "Window"]
        assert details and all(d.startswith("running state per partition") for d in details), details
    reference = TIE_BROKEN.get(name, transform)
    assert reduce_output(coord.result.rows()) == batch_reference(spark, reference, inputs, changelog), split


def test_slices_are_the_bytes_of_the_full_path(spark, tmp_path):
    """Same requests with the incremental path switched off, with Spark's adaptive execution planning the
    incremental steps' shuffles instead of the step itself, with these small steps shuffling in several
    partitions instead of one, and with them compiled in one partition: the same output tables, row for row."""
    transform, _ = FAMILIES["aggregates"]
    split = [Txn({"a": 3, "b": 0}), Txn({"a": 2}), Txn({"a": 3}), Txn({"a": 1})]
    inc = _run(spark, tmp_path / "inc", transform, _inputs(FIXED_A, FIXED_B), split)
    parts = _run(spark, tmp_path / "parts", transform, _inputs(FIXED_A, FIXED_B), split, small_step_rows=0)
    cores = str(spark.sparkContext.defaultParallelism)
    assert [r.diagnostics["sizing"].split(" ")[0] for r in parts.result.responses[1:]] == [cores] * 3
    assert [r.diagnostics["sizing"].split(" ")[0] for r in inc.result.responses[1:]] == ["1"] * 3
    # the small steps ran interpreted, the others with whole-stage code generation: the same bytes
    assert all("and code generation off" in r.diagnostics["sizing"] for r in inc.result.responses[1:])
    assert not any("code generation" in r.diagnostics["sizing"] for r in parts.result.responses[1:])
    # the small steps held their kept frames as local relations, the others as checkpoints: the same bytes
    kept = [re.search(r"(\d+) frame\(s\) kept, (\d+) as local", r.diagnostics["sizing"])
            for r in inc.result.responses[1:]]
    assert all(k and int(k[1]) == int(k[2]) > 0 for k in kept), [r.diagnostics["sizing"] for r in inc.result.responses]
    assert all(r.diagnostics["sizing"].endswith(" 0 as local relations") for r in parts.result.responses[1:])
    for a, b in zip(inc.result.slices, parts.result.slices):
        assert a.equals(b), (a.to_pylist(), b.to_pylist())
    # small steps past the interpreted rows: one partition, local relations, compiled
    compiled = _run(spark, tmp_path / "compiled", transform, _inputs(FIXED_A, FIXED_B), split, interpreted_rows=0)
    said = [r.diagnostics["sizing"] for r in compiled.result.responses[1:]]
    assert all(s.startswith("1 shuffle partition(s)") and "adaptive execution off;" in s
               and not s.endswith(" 0 as local relations") for s in said), said
    for a, b in zip(inc.result.slices, compiled.result.slices):
        assert a.equals(b), (a.to_pylist(), b.to_pylist())
    adaptive = _run(spark, tmp_path / "adaptive", transform, _inputs(FIXED_A, FIXED_B), split, adaptive=True)
    full = _run(spark, tmp_path / "full", transform, _inputs(FIXED_A, FIXED_B), split, incremental=False)
    assert [r.diagnostics["path"] for r in inc.result.responses] == ["rebuild", "incremental", "incremental",
                                                                      "incremental"]
    assert {r.diagnostics["path"] for r in full.result.responses} == {"full"}
    # the step planned its shuffles: the state's rows and the history's (a min/max may be recomputed) bound them
    sizing = [r.diagnostics.get("sizing") for r in inc.result.responses]
    assert sizing[0] is None and all("shuffle partition(s) for up to" in s and "adaptive execution" in s
                                     and s.split(";")[0].endswith(" off") for s in sizing[1:]), sizing
    assert [r.diagnostics["sizing"].split(";")[0] for r in adaptive.result.responses[1:]] == ["adaptive execution"] * 3
    assert len(inc.result.slices) == len(adaptive.result.slices) == len(full.result.slices) == 4
    for a, b, c in zip(inc.result.slices, adaptive.result.slices, full.result.slices):
        assert a.equals(b) and a.equals(c), (a.to_pylist(), b.to_pylist(), c.to_pylist())
    # steps 2 and 3 remove p's extremes (its groups are recomputed: netted), step 4 adds a group
    assert [r.diagnostics["slice"] for r in inc.result.responses] == ["all new", "netted", "netted", "per group"]
    ops = [r["op"] for t in inc.result.slices for r in t.to_pylist()]
    assert {R, OP_CORRECT_FROM, OP_CORRECT_TO} <= set(ops)  # the history exercised retractions and corrections


@pytest.mark.timeout(600)
def test_a_group_by_with_many_aggregates_steps_without_the_optimizer_taking_over(spark, tmp_path):
    """Eight aggregates: an incremental step's plans alias each output column several times, and Spark's
    constraint propagation derives constraints for every combination of the aliases. With it on, a step of 8
    aggregates spent more than 13 minutes in the optimizer (6: ~10 s); the engine switches it off for incremental
    steps (odf_core.engine.spark_conf.INCREMENTAL_SQL_CONF), so this takes seconds, and the timeout fails it if not."""
    transform = sql("SELECT k, " + ", ".join(f"sum(x + {i}) AS s{i}" for i in range(8))
                    + ", max(event_time) AS event_time FROM a GROUP BY k")
    # p and q change: the step's slice is per group (an old and a new row per touched group)
    history = FIXED_A[:4] + [Event(OP_APPEND, minutes(50 + i), ("pq"[i % 2], i)) for i in range(2)]
    inc = _run_both(spark, tmp_path, transform, history, [Txn({"a": 4}), Txn({"a": 2})])
    responses = inc.result.responses
    assert [r.diagnostics["path"] for r in responses] == ["rebuild", "incremental"]
    assert responses[1].diagnostics["slice"] == "per group"
    assert spark.conf.get("spark.sql.constraintPropagation.enabled") == "true"  # the caller's session: untouched


def test_count_distinct_counts_each_value_and_reads_no_history(spark, tmp_path):
    """count(DISTINCT x) keeps a row count per (group, value) in the checkpoint: a step reads no history, a value
    leaves a group's number when its last row is retracted or corrected away (not before), and the slices are the
    full path's bytes. sum/avg(DISTINCT x) keep the same counts."""
    transform = sql("SELECT k, count(DISTINCT x) AS nd, max(event_time) AS event_time FROM a GROUP BY k")
    history = [Event(OP_APPEND, minutes(1), ("p", 3)), Event(OP_APPEND, minutes(2), ("p", 3)),
               Event(OP_APPEND, minutes(3), ("p", None)), Event(OP_APPEND, minutes(4), ("q", 1)),
               Event(OP_APPEND, minutes(9), ("q", 5)),
               Event(R, minutes(2), ("p", 3)),  # p keeps its value 3 (one row of it is left): nd stays 1
               Event(OP_APPEND, minutes(5), ("p", 4)),  # p: 2
               Event(R, minutes(1), ("p", 3)),  # the last 3 is gone: p 1
               Event(OP_CORRECT_FROM, minutes(4), ("q", 1)), Event(OP_CORRECT_TO, minutes(4), ("q", 2)),  # q 5, 2
               Event(OP_APPEND, minutes(6), ("q", 1))]  # q: 5, 2, 1
    split = [Txn({"a": 5}), Txn({"a": 1}), Txn({"a": 1}), Txn({"a": 1}), Txn({"a": 3})]
    inc = _run(spark, tmp_path / "inc", transform, [InputSpec("a", DATA, history)], split)
    full = _run(spark, tmp_path / "full", transform, [InputSpec("a", DATA, history)], split, incremental=False)
    diags = [r.diagnostics for r in inc.result.responses]
    assert [d["path"] for d in diags] == ["rebuild"] + ["incremental"] * 4
    assert all(d.get("history") is None for d in diags[1:]), [d.get("history") for d in diags]
    # group states (p, q) plus the (group, value) counts: p 3, q 1, q 5 after the first step; p 4, q 5, 2, 1 at the end
    assert [d["stateRows"] for d in diags] == [5, 5, 6, 5, 6]
    nd = [{r["k"]: r["nd"] for r in t.to_pylist() if r["op"] in (OP_APPEND, OP_CORRECT_TO)}
          for t in inc.result.slices]
    assert nd == [{"p": 1, "q": 2}, {"p": 2}, {"p": 1}, {"q": 3}], nd  # the second step changes no output row
    for a, b in zip(inc.result.slices, full.result.slices, strict=True):
        assert a.equals(b), (a.to_pylist(), b.to_pylist())
    assert reduce_output(inc.result.rows()) == batch_reference(spark, transform, inc.inputs)
    # sum/avg DISTINCT: the same value table; a value joining or leaving a group adds or takes off its value
    sums = sql("SELECT k, sum(DISTINCT x) AS sd, avg(DISTINCT x) AS ad, max(event_time) AS event_time FROM a "
               "GROUP BY k")
    inc = _run(spark, tmp_path / "sums", sums, [InputSpec("a", DATA, history)], split)
    assert all(r.diagnostics.get("history") is None for r in inc.result.responses[1:])
    sd = [{r["k"]: (r["sd"], r["ad"]) for r in t.to_pylist() if r["op"] in (OP_APPEND, OP_CORRECT_TO)}
          for t in inc.result.slices]
    assert sd == [{"p": (3, 3.0), "q": (6, 3.0)}, {"p": (7, 3.5)}, {"p": (4, 4.0)}, {"q": (8, 8 / 3)}], sd
    assert reduce_output(inc.result.rows()) == batch_reference(spark, sums, inc.inputs)
    # functions over the same values read one value table: count and sum DISTINCT of x share one, and the sum and
    # count an avg(DISTINCT x) is made of (over x as a DECIMAL) another; the states are unchanged by the sharing
    both = sql("SELECT k, count(DISTINCT x) AS nd, sum(DISTINCT x) AS sd, avg(DISTINCT x) AS ad, "
               "max(event_time) AS event_time FROM a GROUP BY k")
    inc = _run(spark, tmp_path / "both", both, [InputSpec("a", DATA, history)], split)
    _, tables = checkpoint_tables(inc.checkpoint)
    assert len([n for n in tables if "/values" in n]) == 2, sorted(tables)  # (four DISTINCT functions)
    # group states (p, q) plus the (group, value) counts of each table, as the count DISTINCT's alone above
    assert [r.diagnostics["stateRows"] for r in inc.result.responses] == [2 + 3 * 2, 2 + 3 * 2, 2 + 4 * 2, 2 + 3 * 2,
                                                                          2 + 4 * 2]
    assert all(r.diagnostics.get("history") is None for r in inc.result.responses[1:])
    assert reduce_output(inc.result.rows()) == batch_reference(spark, both, inc.inputs)


def test_tied_extremes_recompute_the_group(spark, tmp_path):
    """max_by/min_by keep the extreme ordering and the largest and smallest value at it: a later row replaces them
    (a step reads no history), a removed extreme recomputes the group, and so do rows tied at the extreme with
    different values, whose value is Spark's own pick (it depends on the rows' order); a group left untouched keeps
    that pick, and once the tie is gone the value is the batch query's again."""
    transform = sql("SELECT k, max_by(x, event_time) AS last_x, min_by(x, event_time) AS first_x, "
                    "max(event_time) AS event_time FROM a GROUP BY k")
    history = [Event(OP_APPEND, minutes(1), ("p", 1)), Event(OP_APPEND, minutes(1), ("q", 5)),
               Event(OP_APPEND, minutes(2), ("p", 2)),  # p's latest: no history read
               Event(OP_APPEND, minutes(2), ("p", 3)),  # tied with p's 2 at minute 2: recomputed
               Event(OP_APPEND, minutes(3), ("q", 6)),  # p untouched keeps Spark's pick
               Event(R, minutes(2), ("p", 3)),  # the tie is gone with the extreme: recomputed, 2
               Event(OP_APPEND, minutes(0), ("p", None))]  # p's earliest becomes NULL (a value like any other)
    split = [Txn({"a": 2}), Txn({"a": 1}), Txn({"a": 1}), Txn({"a": 1}), Txn({"a": 1}), Txn({"a": 1})]
    inc = _run(spark, tmp_path / "inc", transform, [InputSpec("a", DATA, history)], split)
    diags = [r.diagnostics for r in inc.result.responses]
    assert [d["path"] for d in diags] == ["rebuild"] + ["incremental"] * 5
    assert [d["slice"] for d in diags] == ["all new", "per group", "netted", "per group", "netted", "per group"], diags
    assert [d.get("history") is None for d in diags[1:]] == [True, False, True, False, True], diags
    latest = [{r["k"]: (r["last_x"], r["first_x"]) for r in t.to_pylist() if r["op"] in (OP_APPEND, OP_CORRECT_TO)}
              for t in inc.result.slices]
    assert latest[:2] == [{"p": (1, 1), "q": (5, 5)}, {"p": (2, 1)}], latest
    assert latest[2] in ({"p": (3, 1)}, {}), latest  # Spark's pick between 2 and 3: 3, or 2 (no change)
    assert latest[3:] == [{"q": (6, 5)}, {"p": (2, 1)} if latest[2] else {}, {"p": (2, None)}], latest
    assert reduce_output(inc.result.rows()) == batch_reference(spark, transform, inc.inputs)
    explained = diags[0]["operators"]
    assert ("Aggregate", "incremental") in explained, explained


BIG = 2 ** 53  # Spark's DOUBLE additions of an integer avg round past it


@pytest.mark.parametrize("query, operator", [
    ("SELECT k, avg(x) AS a, count(*) AS n, max(event_time) AS event_time FROM a GROUP BY k", "Aggregate"),
    ("SELECT event_time, k, x, avg(x) OVER (PARTITION BY k) AS a FROM a", "Window"),
])
def test_an_average_of_integers_is_their_exact_sum_over_their_count_in_any_order(spark, tmp_path, query, operator):
    """Spark adds an integer avg's values as DOUBLEs: past 2^53 its value depends on the order it reads the rows in
    (2^53, 1, 1 gives ...330.5 read in that order, ...331.5 with the ones first). Every evaluation divides the exact
    sum, rounded once, by the count: the incremental path (a state, or a key recomputed from the history) and the
    full path write the same bytes, each retraction removes the row output before, and the values are exact."""
    history = [Event(OP_APPEND, minutes(1), ("p", BIG)), Event(OP_APPEND, minutes(2), ("p", 1)),
               Event(OP_APPEND, minutes(3), ("p", 1)), Event(OP_APPEND, minutes(4), ("q", BIG)),
               Event(OP_APPEND, minutes(5), ("q", 1)),
               Event(OP_APPEND, minutes(6), ("p", 1)),  # p: 2^53 + 3 over 4
               Event(R, minutes(2), ("p", 1)),  # p: 2^53 + 2 over 3
               Event(OP_CORRECT_FROM, minutes(5), ("q", 1)), Event(OP_CORRECT_TO, minutes(5), ("q", 3)),
               Event(OP_APPEND, minutes(8), ("q", -BIG))]  # q: 3 over 3
    split = [Txn({"a": 5}), Txn({"a": 1}), Txn({"a": 1}), Txn({"a": 2}), Txn({"a": 1})]
    inputs = [InputSpec("a", DATA, history)]
    inc = _run(spark, tmp_path / "inc", sql(query), inputs, split)
    full = _run(spark, tmp_path / "full", sql(query), inputs, split, incremental=False)
    assert [r.diagnostics["path"] for r in inc.result.responses][1:] == ["incremental"] * 4
    assert (operator, "incremental") in inc.result.responses[-1].diagnostics["operators"]
    for a, b in zip(inc.result.slices, full.result.slices, strict=True):
        assert a.equals(b), (a.to_pylist(), b.to_pylist())
    live = reduce_output(inc.result.rows())  # each retraction removes a live row
    values: dict[str, list[int]] = {}
    for e in reduce_input(inputs[0]):
        values.setdefault(e[1].data[0], []).append(e[1].data[1])
    exact = {k: float(sum(v)) / len(v) for k, v in values.items()}  # the sum rounded once, then divided
    # (Spark's DOUBLE sums in the rows' order: (2^53 + 1 + 1) / 3 is ...330.5, (2^53 + 3 - 2^53) / 3 is 4/3)
    assert exact == {"p": 3002399751580331.5, "q": 1.0}
    names = [c for c in inc.result.rows()[0] if c not in ("offset", "op", "system_time")]
    got = sorted({(dict(zip(names, r))["k"], dict(zip(names, r))["a"]) for r in live.elements()})
    assert got == sorted(exact.items()), (got, exact)


@pytest.mark.parametrize("query, operator", [
    ("SELECT k, avg(CAST(x AS DECIMAL(20, 2))) AS a, max(event_time) AS event_time FROM a GROUP BY k", "Aggregate"),
    # (Spark's optimiser averages a DECIMAL of up to 11 digits as its unscaled longs: an integer average)
    ("SELECT k, avg(DISTINCT CAST(x AS DECIMAL(9, 2))) AS a, max(event_time) AS event_time FROM a GROUP BY k",
     "Aggregate"),
    ("SELECT event_time, k, x, avg(CAST(x AS DECIMAL(20, 2))) OVER (PARTITION BY k) AS a FROM a", "Window"),
    # a running average: a running sum and count (the removals in the history recompute their partitions)
    ("SELECT event_time, k, x, avg(x) OVER (PARTITION BY k ORDER BY event_time) AS a, "
     "avg(CAST(x AS DECIMAL(20, 2))) OVER (PARTITION BY k ORDER BY event_time) AS d FROM a", "Window"),
])
def test_a_decimal_average_is_a_sum_and_a_count_that_keep_a_state(spark, tmp_path, query, operator):
    """No state is kept for Spark's average function; a DECIMAL average is written as Spark's own final expression
    over a sum and a count, which are (and so is an integer average, running too): the steps are incremental, and
    their slices are the full path's bytes."""
    split = [Txn({"a": 3}), Txn({"a": 2}), Txn({"a": 2}), Txn({"a": 2})]
    inc = _run_both(spark, tmp_path, sql(query), FIXED_A, split)
    diags = [r.diagnostics for r in inc.result.responses]
    assert [d["path"] for d in diags[1:]] == ["incremental"] * 3, [d.get("reason") for d in diags]
    assert (operator, "incremental") in diags[-1]["operators"], diags[-1]["operators"]


FLOATS = pa.schema([pa.field("k", pa.string()), pa.field("x", pa.float64())])


@pytest.mark.parametrize("query, operator", [
    ("SELECT k, sum(x) AS s, stddev(x) AS sd, collect_list(x) AS xs, count(*) AS n, max(event_time) AS event_time "
     "FROM a GROUP BY k", "Aggregate"),
    ("SELECT event_time, k, x, sum(x) OVER (PARTITION BY k) AS s, collect_list(x) OVER (PARTITION BY k) AS xs, "
     "count(*) OVER (PARTITION BY k) AS n FROM a", "Window"),
])
def test_a_value_that_depends_on_the_rows_order_is_never_recomputed_to_retract_it(spark, tmp_path, query, operator):
    """A DOUBLE sum (its rounding), collect_list (its order) and stddev depend on the order Spark reads the rows in.
    Recomputed from the history by key, a group's row *before* the change could differ from the row output then,
    and its retraction removed a row that was never there (a malformed changelog). Such a query takes the full
    path, which keeps its output; every retraction matches a live row."""
    values = [1e16, 1.0, 0.1, 0.2, 0.3, -1e16, 3.0, 1e-3, 7.7]
    history = [Event(OP_APPEND, minutes(i), ("pq"[(i * 7) % 3 % 2], values[(i * 5) % len(values)]))
               for i in range(160)]
    split = [Txn({"a": n}) for n in (50, 1, 2, 3, 40, 1, 2, 3, 50, 1, 2, 5)]
    assert sum(t.rows["a"] for t in split) == len(history)
    inc = _run(spark, tmp_path / "inc", sql(query), [InputSpec("a", FLOATS, history)], split)
    diags = [r.diagnostics for r in inc.result.responses]
    assert all(d["path"] == "full" for d in diags[1:]), [d["path"] for d in diags]
    assert (operator, "full") in diags[-1]["operators"], diags[-1]["operators"]
    assert "depends on the order Spark reads the rows in" in diags[-1]["reason"], diags[-1]["reason"]
    rows = [{c: tuple(v) if isinstance(v, list) else v for c, v in r.items()} for r in inc.result.rows()]
    live = reduce_output(rows)  # asserts that each retraction removes a live row
    names = [c for c in rows[0] if c not in ("offset", "op", "system_time")]
    got = sorted((dict(zip(names, r))["k"], dict(zip(names, r))["n"]) for r in live.elements())
    counts = Counter(e.data[0] for e in history)
    if operator == "Aggregate":  # one row per group, with its row count
        assert got == sorted(counts.items()), got
    else:  # one row per input row, with its partition's row count
        assert got == sorted((k, n) for k, n in counts.items() for _ in range(n)), got


TIED = "WINDOW w AS (PARTITION BY k ORDER BY event_time DESC)"
BY_K = "PARTITION BY k ORDER BY event_time DESC ROWS BETWEEN"


@pytest.mark.parametrize("query, path, why", [
    (f"SELECT event_time, k, x, row_number() OVER w AS rn, lag(x) OVER w AS lx, sum(x) OVER ({BY_K} UNBOUNDED "
     f"PRECEDING AND CURRENT ROW) AS s, collect_list(x) OVER ({BY_K} 2 PRECEDING AND CURRENT ROW) AS xs, "
     f"rank() OVER w AS n FROM a {TIED}",
     "incremental", "rows tied in its ORDER BY in the order of their other columns"),
    (f"SELECT event_time, k, x, sum(x) OVER w AS s, rank() OVER w AS n FROM a {TIED}", "full", "over a RANGE frame"),
    # beside a RANGE frame: the row_number takes tie-breakers in a window of its own, over the count's
    (f"SELECT event_time, k, x, row_number() OVER w AS rn, count(*) OVER w AS n FROM a {TIED}", "incremental",
     "rows tied in its ORDER BY in the order of their other columns"),
])
def test_rows_tied_in_a_window_by_key_are_recomputed_in_the_order_they_were_output(spark, tmp_path, query, path, why):
    """Spark numbers and folds rows tied in a window's ORDER BY in the order it reads them. A window by key (a DESC
    order keeps no running state) recomputes a touched partition from the history and retracts its rows as they were
    before: every evaluation now orders tied rows by their other columns, so the recomputed rows are the rows output
    and every retraction removes a live row. A RANGE frame treats tied rows as one (a tie-breaker would split them):
    with a function that tells them apart over it, the window takes the full path; beside it, that function gets a
    window of its own."""
    values = [1e16, 1.0, 0.1, 0.2, -0.0, 0.0, -1e16, 3.0, 0.1]
    history = [Event(OP_APPEND, minutes(i // 6), ("pq"[(i * 7) % 3 % 2], values[(i * 5) % len(values)]))
               for i in range(160)]  # six rows a minute: ties in every partition, and identical rows
    split = [Txn({"a": n}) for n in (50, 1, 2, 3, 40, 1, 2, 3, 50, 1, 2, 5)]
    assert sum(t.rows["a"] for t in split) == len(history)
    inc = _run(spark, tmp_path / "inc", sql(query), [InputSpec("a", FLOATS, history)], split)
    diags = [r.diagnostics for r in inc.result.responses]
    assert all(d["path"] == ("incremental" if path == "incremental" else "full") for d in diags[1:]), diags
    window = [o for o in inc.result.responses[-1].raw.diagnostics.operators if o.operator == "Window"]
    assert [o.path for o in window] == [path] * (2 if "count(*)" in query else 1), window
    assert why in (window[0].detail if path == "incremental" else diags[-1]["reason"]), (window, diags[-1]["reason"])
    rows = [{c: tuple(v) if isinstance(v, list) else v for c, v in r.items()} for r in inc.result.rows()]
    live = reduce_output(rows)  # asserts that each retraction removes a live row
    names = [c for c in rows[0] if c not in ("offset", "op", "system_time")]
    at = names.index("event_time"), names.index("k"), names.index("n")
    got = Counter(tuple(r[i] for i in at) for r in live.elements())
    batch = batch_reference(spark, sql(f"SELECT event_time, k, n FROM ({query})"), inc.inputs)
    assert got == batch, (got, batch)  # the ranks of every row (one value for tied rows), as the batch query has them


RUNNING_TIES = "SELECT event_time, k, x, row_number() OVER w AS rn, lag(x) OVER w AS lx, "
TIED_ROWS = "FROM a WINDOW w AS (PARTITION BY k ORDER BY event_time)"


@pytest.mark.parametrize("query, reference, paired", [
    (RUNNING_TIES + "sum(x) OVER (PARTITION BY k ORDER BY event_time ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS "
     "near " + TIED_ROWS, None, False),
    # a rank and a RANGE count give tied rows one value: the row_number and the lag get a window of their own, and
    # the two keep one state
    (RUNNING_TIES + "rank() OVER w AS r, count(*) OVER w AS n " + TIED_ROWS,
     "SELECT event_time, k, x, row_number() OVER t AS rn, lag(x) OVER t AS lx, rank() OVER w AS r, count(*) OVER w "
     "AS n " + TIED_ROWS + ", t AS (PARTITION BY k ORDER BY event_time, x)", True),
])
def test_rows_tied_in_a_running_window_are_recomputed_in_the_order_they_were_output(spark, tmp_path, query, reference,
                                                                                     paired):
    """A running window recomputes a partition from the history when a late row or a removal reaches it, and retracts
    its rows as they were before: tied rows are ordered by their other columns there too, as in the extension of the
    state and in the rebuild. Without it, each of two random cuts retracted a row that was not live. The state keeps
    a partition's last value of the query's ORDER BY alone: a new row tied with it is late too. The reduced output is
    the batch query with the tie-breakers written out."""
    import random

    rnd = random.Random(7)
    values = [1e16, 1.0, 0.1, 0.2, 0.0, -1e16, 3.0, 0.1]
    history = [Event(OP_APPEND, minutes(rnd.randint(0, 30)), ("pq"[(i * 7) % 3 % 2], values[(i * 5) % len(values)]))
               for i in range(160)]  # late rows, and five rows a minute: ties
    split = [Txn({"a": n}) for n in (50, 1, 2, 3, 40, 1, 2, 3, 50, 1, 2, 5)]
    inc = _run(spark, tmp_path / "inc", sql(query), [InputSpec("a", FLOATS, history)], split)
    diags = [r.diagnostics for r in inc.result.responses]
    assert [d["path"] for d in diags] == ["rebuild"] + ["incremental"] * 11, diags
    assert sum(d.get("history") is not None for d in diags) > 5, diags  # late rows recomputed their partitions
    window = [o for o in inc.result.responses[-1].raw.diagnostics.operators if o.operator == "Window"]
    assert [o.detail.startswith("running state per partition") for o in window] == [True], window
    assert BROKEN in window[0].detail and (PAIRED in window[0].detail) == paired, window
    _, tables = checkpoint_tables(inc.checkpoint)  # the state keeps the last event time, not the tie-breakers
    state = next(t for name, t in tables.items() if name.startswith("running:") and "/" not in name)
    assert [c for c in state.column_names if c[0] == "l"] == ["l0"], (list(tables), state.schema)
    live = reduce_output(inc.result.rows())  # asserts that each retraction removes a live row
    reference = reference or query.replace("ORDER BY event_time", "ORDER BY event_time, x")
    assert live == batch_reference(spark, sql(reference), inc.inputs)


NESTED_TIES = "SELECT event_time, k, x, count(*) OVER w AS n FROM a WINDOW w AS (PARTITION BY k ORDER BY event_time)"


@pytest.mark.parametrize("query, reference, paired", [
    # a RANGE count and a rank beside a row number and a lag: two Window nodes, one running state
    (RUNNING_TIES + "count(*) OVER w AS n, rank() OVER w AS r " + TIED_ROWS,
     "SELECT event_time, k, x, row_number() OVER t AS rn, lag(x) OVER t AS lx, count(*) OVER w AS n, rank() OVER w "
     "AS r " + TIED_ROWS + ", t AS (PARTITION BY k ORDER BY event_time, x)", True),
    # the upper window's lag reads the lower one's count: not a window split for its ties, a state each
    (f"SELECT event_time, k, x, n, lag(n) OVER w AS ln, row_number() OVER w AS rn FROM ({NESTED_TIES}) "
     "WINDOW w AS (PARTITION BY k ORDER BY event_time)",
     f"SELECT event_time, k, x, n, lag(n) OVER w AS ln, row_number() OVER w AS rn FROM ({NESTED_TIES}) "
     "WINDOW w AS (PARTITION BY k ORDER BY event_time, x)", False),
])
def test_rows_tied_with_a_partitions_last_rows_change_what_the_ties_change(spark, tmp_path, query, reference, paired):
    """Transactions that end among rows tied in the ORDER BY: a new row tied with its partition's last rows changes
    their count over the ties, so where two Window nodes (the functions over the ties, and those with tie-breakers)
    keep one running state it recomputes the partition, though the tie-breakers put it after them. A window reading
    the values of the window below over the ties is not such a pair (:func:`.ties.split_pair`): the running state
    corrects those values after the Window nodes ran, so it keeps a state of its own. The output is the batch
    query's with the tie-breakers written out."""
    values = [1e16, 1.0, 0.1, 0.2, 0.0, -1e16, 3.0, 0.1]
    history = [Event(OP_APPEND, minutes(i // 4), ("pq"[(i * 7) % 3 % 2], values[(i * 5) % len(values)]))
               for i in range(160)]  # four rows a minute: transactions end between and among tied rows
    split = [Txn({"a": n}) for n in (50, 1, 2, 3, 40, 1, 2, 3, 50, 1, 2, 5)]
    inc = _run(spark, tmp_path / "inc", sql(query), [InputSpec("a", FLOATS, history)], split)
    diags = [r.diagnostics for r in inc.result.responses]
    assert [d["path"] for d in diags] == ["rebuild"] + ["incremental"] * 11, diags
    window = [o for o in inc.result.responses[-1].raw.diagnostics.operators if o.operator == "Window"]
    assert [o.detail.startswith("running state per partition") for o in window] == [True] * (1 if paired else 2)
    assert [PAIRED in o.detail for o in window] == [paired] * len(window), window
    live = reduce_output(inc.result.rows())  # asserts that each retraction removes a live row
    assert live == batch_reference(spark, sql(reference), inc.inputs)


def test_first_and_last_over_a_range_frame_pick_among_tied_rows_by_their_other_columns(spark, tmp_path):
    """``first``/``last`` over a RANGE frame (the forward fill ``last(x) IGNORE NULLS OVER (… ORDER BY t)``) give
    tied rows one value: the first / last of them as Spark reads them. A tie-breaker in the ORDER BY would split the
    frame's peers, so they pick among them by the rows' other columns instead, in the running state (a late row
    recomputes its partition) and by key (DESC). The reduced output is the batch query written with ROWS frames in
    the tie-broken order, the value taken at each peer group's last row."""
    import random

    rnd = random.Random(11)
    values = [None, 1.0, 0.1, None, 0.2, 3.0, None, -1e16]
    history = [Event(OP_APPEND, minutes(rnd.randint(0, 30)), ("pq"[(i * 7) % 3 % 2], values[(i * 5) % len(values)]))
               for i in range(160)]  # late rows, five rows a minute: ties, some of NULLs only
    split = [Txn({"a": n}) for n in (50, 1, 2, 3, 40, 1, 2, 3, 50, 1, 2, 5)]
    running = ("SELECT event_time, k, x, last(x) IGNORE NULLS OVER w AS fill, first(x) OVER w AS opening, "
               "last(x) OVER w AS closing FROM a WINDOW w AS (PARTITION BY k ORDER BY event_time)")
    by_key = running.replace("ORDER BY event_time)", "ORDER BY event_time DESC)")
    # the same values, from ROWS frames in the tie-broken order, taken at the last row of each group of tied rows
    rows = ("SELECT event_time, k, x, max_by(f, i) OVER p AS fill, max_by(o, i) OVER p AS opening, "
            "max_by(c, i) OVER p AS closing FROM (SELECT *, last(x) IGNORE NULLS OVER w AS f, first(x) OVER w AS o, "
            "last(x) OVER w AS c, row_number() OVER w AS i FROM a WINDOW w AS (PARTITION BY k ORDER BY event_time, "
            "x ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)) WINDOW p AS (PARTITION BY k ORDER BY event_time)")
    by_key_rows = rows.replace("event_time, x", "event_time DESC, x DESC NULLS LAST").replace(
        "ORDER BY event_time)", "ORDER BY event_time DESC)")
    for query, reference, detail in ((running, rows, "running state per partition"),
                                     (by_key, by_key_rows, "window functions")):
        inc = _run(spark, tmp_path / detail.split()[0], sql(query), [InputSpec("a", FLOATS, history)], split)
        diags = [r.diagnostics for r in inc.result.responses]
        assert [d["path"] for d in diags] == ["rebuild"] + ["incremental"] * 11, diags
        assert sum(d.get("history") is not None for d in diags) > 5, diags  # partitions recomputed
        window = [o for o in inc.result.responses[-1].raw.diagnostics.operators if o.operator == "Window"]
        assert [o.detail.startswith(detail) for o in window] == [True], window
        assert window[0].detail.endswith(BROKEN), window
        live = reduce_output(inc.result.rows())  # asserts that each retraction removes a live row
        assert live == batch_reference(spark, sql(reference), inc.inputs)


def test_max_by_a_string_or_floating_point_ordering_reads_no_history(spark, tmp_path):
    """max_by/min_by by a string ordering (prefixes of each other, multi-byte characters) or a DOUBLE one (NaN above
    every number, -0.0 equal to 0.0) keep their extremes as by an integer one: later rows replace them without
    reading the history (a wrong turn of the ordering would see a tie and recompute the group); a removed extreme
    recomputes the group, and -0.0 tied with 0.0 is Spark's own pick."""
    transform = sql("SELECT k, max_by(x, name) AS top, min_by(x, name) AS bottom, max_by(x, score) AS best, "
                    "min_by(x, score) AS worst, max(event_time) AS event_time FROM (SELECT *, repeat('\u00e9', x) AS "
                    "name, CASE WHEN x = 9 THEN double('NaN') WHEN x = 1 THEN double('-0.0') WHEN x = 0 THEN 0.0D "
                    "ELSE -1.0D / x END AS score FROM a) GROUP BY k")
    history = [Event(OP_APPEND, minutes(1), ("p", 2)), Event(OP_APPEND, minutes(1), ("q", 3)),
               Event(OP_APPEND, minutes(2), ("p", 5)),  # a longer name, a larger score (-0.2 > -0.5)
               Event(OP_APPEND, minutes(3), ("p", 1)),  # -0.0 above every negative score
               Event(OP_APPEND, minutes(4), ("p", 9)),  # NaN above every number; the longest name
               Event(OP_APPEND, minutes(5), ("p", 0)),  # the empty name: the smallest
               Event(R, minutes(4), ("p", 9))]  # both maxima removed: recomputed; 1 (-0.0) and 0 (0.0) are tied
    split = [Txn({"a": 2}), Txn({"a": 1}), Txn({"a": 1}), Txn({"a": 1}), Txn({"a": 1}), Txn({"a": 1})]
    inc = _run(spark, tmp_path / "inc", transform, [InputSpec("a", DATA, history)], split)
    diags = [r.diagnostics for r in inc.result.responses]
    assert [d["path"] for d in diags] == ["rebuild"] + ["incremental"] * 5, diags
    assert [d.get("history") is None for d in diags[1:]] == [True, True, True, True, False], diags
    latest = [{r["k"]: (r["top"], r["bottom"], r["best"], r["worst"]) for r in t.to_pylist()
               if r["op"] in (OP_APPEND, OP_CORRECT_TO)} for t in inc.result.slices]
    assert latest[:5] == [{"p": (2, 2, 2, 2), "q": (3, 3, 3, 3)}, {"p": (5, 2, 5, 2)}, {"p": (5, 1, 1, 2)},
                          {"p": (9, 1, 9, 2)}, {"p": (9, 0, 9, 2)}], latest
    assert latest[5] in ({"p": (5, 0, 1, 2)}, {"p": (5, 0, 0, 2)}), latest  # Spark's pick between -0.0 and 0.0
    explained = diags[0]["operators"]
    assert ("Aggregate", "incremental") in explained, explained


def test_first_knows_its_pick_while_one_row_can_have_it(spark, tmp_path):
    """first(x) IGNORE NULLS keeps the number of non-NULL values and the value: a NULL row, a group's first value and
    a correction of its only value read no history; a group with two values to pick from is recomputed (Spark's pick
    depends on the rows' order; here both are 2), and so is one of two that loses one. Slices are the full path's
    bytes."""
    transform = sql("SELECT k, first(x) IGNORE NULLS AS fx, count(*) AS n, max(event_time) AS event_time FROM a "
                    "GROUP BY k")
    history = [Event(OP_APPEND, minutes(1), ("p", 1)), Event(OP_APPEND, minutes(1), ("q", None)),
               Event(OP_APPEND, minutes(2), ("p", None)),  # not a value to pick: p keeps 1
               Event(OP_APPEND, minutes(3), ("q", 5)),  # q's first value
               Event(OP_CORRECT_FROM, minutes(1), ("p", 1)), Event(OP_CORRECT_TO, minutes(1), ("p", 2)),  # p's only
               Event(OP_APPEND, minutes(4), ("p", 2)),  # two values: recomputed
               Event(R, minutes(4), ("p", 2))]  # one of two left: recomputed
    split = [Txn({"a": 2}), Txn({"a": 1}), Txn({"a": 1}), Txn({"a": 2}), Txn({"a": 1}), Txn({"a": 1})]
    inc = _run_both(spark, tmp_path, transform, history, split)
    diags = [r.diagnostics for r in inc.result.responses]
    assert [d["path"] for d in diags] == ["rebuild"] + ["incremental"] * 5
    assert [d.get("history") is None for d in diags[1:]] == [True, True, True, False, False], diags
    picks = [{r["k"]: r["fx"] for r in t.to_pylist() if r["op"] in (OP_APPEND, OP_CORRECT_TO)}
             for t in inc.result.slices]
    assert picks == [{"p": 1, "q": None}, {"p": 1}, {"q": 5}, {"p": 2}, {"p": 2}, {"p": 2}], picks


def test_distinct_aggregates_over_two_column_sets_read_no_history(spark, tmp_path):
    """Spark rewrites DISTINCT aggregates over two column sets into an aggregate per (group, value, column set) and one
    above it whose first() has one row per group to pick from: appends, retractions and corrections update both
    states, and no step reads the history."""
    transform = sql("SELECT k, count(DISTINCT x) AS nx, count(DISTINCT x % 2) AS parities, sum(x) AS s, "
                    "max(event_time) AS event_time FROM a GROUP BY k")
    history = [Event(OP_APPEND, minutes(1), ("p", 1)), Event(OP_APPEND, minutes(1), ("q", 4)),
               Event(OP_APPEND, minutes(2), ("p", 3)), Event(OP_APPEND, minutes(3), ("p", 3)),
               Event(R, minutes(2), ("p", 3)),  # 3 is still there once
               Event(OP_APPEND, minutes(4), ("q", 6)),  # (a removed latest event time would recompute its group)
               Event(OP_CORRECT_FROM, minutes(1), ("q", 4)), Event(OP_CORRECT_TO, minutes(1), ("q", None)),
               Event(OP_APPEND, minutes(5), (None, 8)), Event(OP_APPEND, minutes(6), ("p", 5)),
               Event(R, minutes(3), ("p", 3))]  # p's last 3 goes
    split = [Txn({"a": 2}), Txn({"a": 2}), Txn({"a": 1}), Txn({"a": 3}), Txn({"a": 3})]
    inc = _run_both(spark, tmp_path, transform, history, split)
    diags = [r.diagnostics for r in inc.result.responses]
    assert [d["path"] for d in diags] == ["rebuild"] + ["incremental"] * 4
    assert all(d.get("history") is None for d in diags[1:]), diags
    final = {}
    for r in inc.result.rows():
        if r["op"] in (OP_APPEND, OP_CORRECT_TO):
            final[r["k"]] = (r["nx"], r["parities"], r["s"])
        elif r["op"] == R:
            final.pop(r["k"])
    assert final == {"p": (2, 1, 6), "q": (1, 1, 6), None: (1, 1, 8)}, final


def test_a_lag_or_lead_keeps_its_partitions_last_rows(spark, tmp_path):
    """lag(x, k) keeps a partition's last k rows as its state: rows after them read no history, their first k rows
    look back into the kept rows, a running sum and row number beside the lag continue from the partition's state,
    and a late row or a removal recomputes its partition from the history. lead(x, k) keeps them too, and corrects
    their output. Slices are the full path's bytes."""
    transform = sql("SELECT event_time, k, x, lag(x) OVER w AS prev, lag(x, 3, -1) OVER w AS back3, "
                    "sum(x) OVER w AS s, row_number() OVER w AS rn FROM a "
                    "WINDOW w AS (PARTITION BY k ORDER BY event_time)")
    inc = _run_both(spark, tmp_path / "lag", transform, TAIL_HISTORY, TAIL_SPLIT)
    diags = [r.diagnostics for r in inc.result.responses]
    assert [d["path"] for d in diags] == ["rebuild"] + ["incremental"] * 4
    assert [d.get("history") is None for d in diags[1:]] == [True, True, False, False], diags
    # a row per partition plus its last (up to 3) rows in the tail table: p 3, q 1, then r 1; q is gone at the end;
    # (the sum's RANGE frame is a window split from the lags and row number, .ties, with this one state)
    assert [d["stateRows"] for d in diags] == [6, 8, 8, 8, 6], diags
    added = [sorted((r["k"], r["x"], r["prev"], r["back3"], r["s"], r["rn"]) for r in t.to_pylist()
                    if r["op"] == OP_APPEND) for t in inc.result.slices]
    assert added[1:3] == [[("p", 4, 3, 1, 10, 4), ("r", None, None, -1, None, 1)],
                          [("p", 6, 4, 2, 16, 5), ("p", 7, 6, 3, 23, 6)]], added
    window = [o for o in inc.result.responses[0].raw.diagnostics.operators if o.operator == "Window"]
    assert "running state per partition (1 key(s)) and its last 3 row(s)" in window[0].detail, window
    # lead: the partition's last rows get the new rows' values; their old output is retracted
    ahead = sql("SELECT event_time, k, x, lead(x) OVER w AS next, lead(x, 2, -1) OVER w AS next2, "
                "row_number() OVER w AS rn FROM a WINDOW w AS (PARTITION BY k ORDER BY event_time)")
    inc = _run_both(spark, tmp_path / "lead", ahead, TAIL_HISTORY, TAIL_SPLIT)
    diags = [r.diagnostics for r in inc.result.responses]
    assert [d.get("history") is None for d in diags[1:]] == [True, True, False, False], diags
    changed = [sorted((r["op"], r["x"], r["next"], r["next2"], r["rn"]) for r in t.to_pylist() if r["k"] == "p")
               for t in inc.result.slices]
    assert changed[1] == [(OP_APPEND, 2, 3, 4, 2), (OP_APPEND, 3, 4, -1, 3), (OP_APPEND, 4, None, -1, 4),
                          (R, 2, 3, -1, 2), (R, 3, None, -1, 3)], changed[1]  # no key pairs them: -R and +A


def test_a_frame_of_rows_keeps_its_partitions_last_rows(spark, tmp_path):
    """An aggregate over a frame of rows around the row (a moving average; a sum over the rows beside it) keeps the
    partition's last rows like a lag and a lead: appends read no history, the rows whose frame reaches the new rows
    are retracted and output again, and a late row or a removal recomputes the partition."""
    transform = sql("SELECT event_time, k, x, avg(x) OVER (PARTITION BY k ORDER BY event_time ROWS BETWEEN 2 "
                    "PRECEDING AND CURRENT ROW) AS avg3, sum(x) OVER (PARTITION BY k ORDER BY event_time ROWS "
                    "BETWEEN 1 PRECEDING AND 1 FOLLOWING) AS near FROM a")
    inc = _run_both(spark, tmp_path, transform, TAIL_HISTORY, TAIL_SPLIT)
    diags = [r.diagnostics for r in inc.result.responses]
    assert [d.get("history") is None for d in diags[1:]] == [True, True, False, False], diags
    changed = sorted((r["op"], r["x"], round(r["avg3"], 3), r["near"]) for r in inc.result.slices[2].to_pylist())
    assert changed == sorted([(OP_APPEND, 4, 3.0, 13), (OP_APPEND, 6, 4.333, 17), (OP_APPEND, 7, 5.667, 13),
                              (R, 4, 3.0, 7)]), changed  # 4's frame now reaches 6


def test_a_frame_of_values_keeps_its_partitions_rows_within_reach(spark, tmp_path):
    """An aggregate over a frame of ORDER BY values (a rolling sum over the last 3 minutes; a count of the rows
    within a minute either side) keeps the partition's rows within the frames' reach of its last value: appends read
    no history, the rows whose frame reaches the new rows are retracted and output again, and a late row or a
    removal recomputes the partition."""
    transform = sql("SELECT event_time, k, x, sum(x) OVER (PARTITION BY k ORDER BY event_time RANGE BETWEEN "
                    "INTERVAL 3 MINUTES PRECEDING AND CURRENT ROW) AS s3, count(*) OVER (PARTITION BY k ORDER BY "
                    "event_time RANGE BETWEEN INTERVAL 1 MINUTE PRECEDING AND INTERVAL 1 MINUTE FOLLOWING) AS near "
                    "FROM a")
    inc = _run_both(spark, tmp_path, transform, TAIL_HISTORY, TAIL_SPLIT)
    diags = [r.diagnostics for r in inc.result.responses]
    assert [d.get("history") is None for d in diags[1:]] == [True, True, False, False], diags
    # a row per partition, plus its rows from a minute before its last one (the rows a new row's count changes) on,
    # and 3 minutes (the sum's reach) before these
    assert [d["stateRows"] for d in diags] == [6, 9, 10, 10, 8], diags
    changed = sorted((r["op"], r["x"], r["s3"], r["near"]) for r in inc.result.slices[2].to_pylist())
    assert changed == sorted([(OP_APPEND, 6, 15, 3), (OP_APPEND, 7, 20, 2), (R, 4, 10, 2), (OP_APPEND, 4, 10, 3)]), \
        changed  # the row at minute 4 now has the one at minute 5 within a minute
    window = [o for o in inc.result.responses[0].raw.diagnostics.operators if o.operator == "Window"]
    assert "running state per partition (1 key(s)) and the rows new rows can change (its rows from its last ORDER BY " \
           "value - (INTERVAL '01' MINUTE) on) with the rows these and new rows read (down to their ORDER BY values " \
           "+ (INTERVAL '-03' MINUTE), down to their ORDER BY values + (INTERVAL '-01' MINUTE))" in window[0].detail, \
        window


DAY = "date_add(DATE'2024-01-01', CAST((unix_seconds(event_time) - 1704067200) / 60 AS INT))"  # minute n: day n


def test_an_operators_change_reaches_the_operator_above_computed_once(spark, tmp_path, monkeypatch):
    """Two windows with different ORDER BYs, the lower one outputting rows again (a FOLLOWING frame): its change is
    netted and materialised before the upper window reads it, so the upper one reads a small plan over one
    materialised leaf (a local relation in these small steps), not the lower window's plan; the leaves are released
    at each step's end. The output is the full path's."""
    from spark_jobs.transform.incremental import Step

    passed: list = []
    real = Step.passed_up

    def spy(self, change):  # records what the real method returns
        out = real(self, change)
        passed.append(out)
        return out

    monkeypatch.setattr(Step, "passed_up", spy)
    held = spark.sparkContext._jsc.sc().getPersistentRDDs().size()
    transform = sql("SELECT event_time, k, x, count(*) OVER (PARTITION BY k ORDER BY event_time RANGE BETWEEN "
                    "CURRENT ROW AND INTERVAL 2 MINUTES FOLLOWING) AS ahead, sum(x) OVER (PARTITION BY k ORDER BY d) "
                    f"AS by_day FROM (SELECT *, {DAY} AS d FROM a)")
    _run_both(spark, tmp_path, transform, TAIL_HISTORY, TAIL_SPLIT)
    frames = [f for d in passed if not d.empty for f in ((d.pos,) if d.gains_only else (d.pos, d.neg))]
    # both windows (the query's top node is the Project that drops d), in each step after the first: gains and losses
    assert len(frames) == 2 * 2 * (len(TAIL_SPLIT) - 1), passed
    for f in frames:
        plan = f._jdf.queryExecution().analyzed()
        leaves = plan.collectLeaves()
        kinds = {leaves.apply(i).getClass().getSimpleName() for i in range(leaves.size())}
        # one materialised leaf: a small step's small frames are local relations (Step.keep), others checkpoints
        assert len(kinds) == 1 and kinds <= {"LogicalRDD", "LocalRelation"}, plan.treeString()
        assert plan.treeString().count("\n") <= 3, plan.treeString()
    assert spark.sparkContext._jsc.sc().getPersistentRDDs().size() == held


def test_a_row_the_window_below_outputs_again_keeps_the_values_the_window_above_gave_it(spark, tmp_path):
    """Over a window that outputs rows again (a count of the next 2 minutes), a running window with another ORDER BY
    keeps the values it gave the rows the lower one can still change: a row retracted and output again with the same
    columns the upper window reads keeps them, and appends read no history. A late row and a removal below
    recompute the partitions they touch, as before."""
    transform = sql("SELECT event_time, k, x, count(*) OVER (PARTITION BY k ORDER BY event_time RANGE BETWEEN "
                    "CURRENT ROW AND INTERVAL 2 MINUTES FOLLOWING) AS ahead, sum(x) OVER (PARTITION BY k ORDER BY "
                    "event_time, x) AS upto FROM a")
    history = [*[Event(OP_APPEND, minutes(i), ("p", i)) for i in (1, 2, 3)], Event(OP_APPEND, minutes(1), ("q", 5)),
               Event(OP_APPEND, minutes(4), ("p", 4)), Event(OP_APPEND, minutes(2), ("q", 6)),
               Event(OP_APPEND, minutes(5), ("p", 5)), Event(OP_APPEND, minutes(6), ("p", 6)),
               # late, beside p's 5 and 6 output again: p is recomputed from its history (the rows output again are
               # output with it, once) and keeps the values it gave them
               Event(OP_APPEND, minutes(0), ("p", 0)), Event(OP_APPEND, minutes(7), ("p", 7)),
               Event(OP_APPEND, minutes(8), ("p", 8)),  # p's 6 and 7 output again with the recomputed values
               Event(R, minutes(1), ("q", 5))]  # q's first row removed: q is recomputed
    inc = _run_both(spark, tmp_path, transform, history, [Txn({"a": 4}), Txn({"a": 2}), Txn({"a": 2}),
                                                          Txn({"a": 2}), Txn({"a": 1}), Txn({"a": 1})])
    diags = [r.diagnostics for r in inc.result.responses]
    assert [d["path"] for d in diags] == ["rebuild", *["incremental"] * 5], diags
    assert [d.get("history") is None for d in diags[1:]] == [True, True, False, True, False], diags
    rows = [sorted((r["op"], r["k"], r["event_time"].minute, r["ahead"], r["upto"]) for r in t.to_pylist())
            for t in inc.result.slices[1:3]]
    # p's minute 3 and 4 counted minute 4 (and 5): retracted and output with the running sums they had
    assert rows == [sorted([(OP_APPEND, "p", 4, 1, 10), (OP_APPEND, "q", 2, 1, 11), (R, "p", 2, 2, 3),
                            (OP_APPEND, "p", 2, 3, 3), (R, "p", 3, 1, 6), (OP_APPEND, "p", 3, 2, 6),
                            (R, "q", 1, 1, 5), (OP_APPEND, "q", 1, 2, 5)]),
                    sorted([(OP_APPEND, "p", 5, 2, 15), (OP_APPEND, "p", 6, 1, 21), (R, "p", 3, 2, 6),
                            (OP_APPEND, "p", 3, 3, 6), (R, "p", 4, 1, 10), (OP_APPEND, "p", 4, 3, 10)])], rows
    _, tables = checkpoint_tables(inc.checkpoint)
    kept = next(t for name, t in tables.items() if name.endswith("/reissued")).to_pylist()
    # the rows the count can still change (within 2 minutes of the partition's last): p's 6, 7, 8 and q's 2
    assert sorted((r["c1"], r["c2"], r["c3"], r["v0"]) for r in kept) == \
        [("p", 6, 3, 21), ("p", 7, 2, 28), ("p", 8, 1, 36), ("q", 6, 1, 6)], kept
    window = [o for o in inc.result.responses[0].raw.diagnostics.operators if o.operator == "Window"]
    assert "a row the window below outputs again with the same 3 column(s) this one reads keeps the values this " \
           "window gave it" in window[0].detail, window


def test_a_row_output_again_unchanged_for_the_window_above_keeps_its_entry(spark, tmp_path):
    """Between the two windows a projection can map a row output again to the same row (a count of the next 3
    minutes of 2 and then 3 is ``big`` both times): the upper window retracts and outputs it with its kept values
    (they cancel out) and keeps its entry for the next time (the count of 4), reading no history."""
    transform = sql("SELECT event_time, k, x, big, sum(x) OVER (PARTITION BY k ORDER BY event_time, x) AS upto FROM "
                    "(SELECT *, count(*) OVER (PARTITION BY k ORDER BY event_time RANGE BETWEEN CURRENT ROW AND "
                    "INTERVAL 3 MINUTES FOLLOWING) > 1 AS big FROM a)")
    history = [Event(OP_APPEND, minutes(i), ("p", i)) for i in range(1, 8)]
    inc = _run_both(spark, tmp_path, transform, history, [Txn({"a": 2}), *[Txn({"a": 1})] * 5])
    assert [r.diagnostics.get("history") is None for r in inc.result.responses[1:]] == [True] * 5
    _, tables = checkpoint_tables(inc.checkpoint)
    kept = next(t for name, t in tables.items() if name.endswith("/reissued")).to_pylist()
    assert sorted((r["c2"], r["c3"], r["v0"]) for r in kept) == [(4, True, 10), (5, True, 15), (6, True, 21),
                                                                 (7, False, 28)], kept


def test_a_row_output_again_with_a_value_the_window_above_reads_recomputes_its_partition(spark, tmp_path):
    """A running window that reads the values of the window below it (a running sum of a count of the next minutes):
    a row output again with a new count changes its sum and those after it, so its partition is recomputed."""
    transform = FAMILIES["running_over_ahead"][0]
    history = [Event(OP_APPEND, minutes(i), ("p", i)) for i in (1, 2, 3, 4, 5)]
    inc = _run_both(spark, tmp_path, transform, history, [Txn({"a": 3}), Txn({"a": 1}), Txn({"a": 1})])
    assert [r.diagnostics.get("history") is None for r in inc.result.responses[1:]] == [False, False]
    assert sorted((r["op"], r["x"], r["ahead"], r["total"]) for r in inc.result.slices[1].to_pylist()) == sorted(
        [(R, 1, 3, 3), (R, 2, 2, 5), (R, 3, 1, 6), (OP_APPEND, 1, 4, 4), (OP_APPEND, 2, 3, 7), (OP_APPEND, 3, 2, 9),
         (OP_APPEND, 4, 1, 10)])


def _last_execution(spark) -> int:
    """The id of the driver's newest SQL execution (-1: none yet)."""
    executions = spark._jsparkSession.sharedState().statusStore().executionsList()
    return max((executions.apply(i).executionId() for i in range(executions.size())), default=-1)


def _broadcast_frames(spark, since: int, names: tuple[str, ...], until: int | None = None
                      ) -> list[tuple[set[str], set[str]]]:
    """Per SQL execution after the one with id ``since`` (up to ``until``) that uses any of the columns ``names``:
    those it uses and those it broadcasts (from the formatted physical plans in the driver's status store, which keeps
    the newest executions only: a long session has more, so they are told apart by id, not by position)."""
    found = []
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty()  # the store learns of executions from the bus
    executions = spark._jsparkSession.sharedState().statusStore().executionsList()
    runs = sorted((executions.apply(i) for i in range(executions.size())), key=lambda e: e.executionId())
    for run in runs:
        if run.executionId() <= since or (until is not None and run.executionId() > until):
            continue
        plan = run.physicalPlanDescription()
        used = {n for n in names if f"{n}#" in plan}
        nodes = [b for b in plan.split("\n\n") if b.lstrip().startswith("(")]
        broadcast = {n for b in nodes if "BroadcastExchange" in b.splitlines()[0] for n in names if f"{n}#" in b}
        if used:
            found.append((used, broadcast))
    return found


def _broadcasts_per_step(spark, tmp_path, transform, history: list[Event], split: list[Txn], limit: int,
                         names: tuple[str, ...]) -> tuple[MiniCoordinator, list[tuple[set[str], set[str]]]]:
    """The incremental run (checked against the full path and the batch result) with Spark's own size-based
    broadcasts off and ``spark.odf.incremental.broadcastRows`` at ``limit``, so only the engine's hints show; per
    step, the columns of ``names`` its SQL executions use and those they broadcast."""
    marks: list[int] = []
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    spark.conf.set("spark.odf.incremental.broadcastRows", str(limit))
    try:
        inc = _run_both(spark, tmp_path, transform, history, split, lambda: marks.append(_last_execution(spark)))
        marks.append(_last_execution(spark))
    finally:
        spark.conf.unset("spark.sql.autoBroadcastJoinThreshold")
        spark.conf.unset("spark.odf.incremental.broadcastRows")
    per_step = []
    for since, until in zip(marks, marks[1:]):
        frames = _broadcast_frames(spark, since, names, until)
        per_step.append((set().union(*[u for u, _ in frames]), set().union(*[b for _, b in frames])))
    return inc, per_step


def test_a_frame_of_the_change_is_broadcast_to_pair_reissued_rows_only_while_it_is_known_to_be_small(spark, tmp_path):
    """The pairing of reissued rows looks up the lost rows' hashes in the table of kept values; the rows a window
    below outputs again come from its state and, when it recomputes a partition, from the history: millions of rows
    for a big partition, more than a broadcast (held whole by the driver and every executor) can. Here at most 4
    rows are broadcast: the lost rows of the appends at 4 and 5 minutes (the 3 and 4 rows within 5 minutes before
    them) are, those of the late row (the window below recomputes p: all 5 rows) are not, and that join shuffles."""
    transform = FAMILIES["running_over_ahead"][0]
    history = [*[Event(OP_APPEND, minutes(i), ("p", i)) for i in (1, 2, 3, 4, 5)],
               Event(OP_APPEND, minutes(5), ("p", 9))]  # late (not after p's last): p is recomputed from its history
    inc, steps = _broadcasts_per_step(spark, tmp_path, transform, history, [Txn({"a": 3}), *[Txn({"a": 1})] * 3], 4,
                                      ("l_hash",))
    assert [r.diagnostics.get("history") for r in inc.result.responses] == \
        [None, "a 2 of 2 slice(s)", "a 3 of 3 slice(s)", "a 4 of 4 slice(s)"]
    lost = {"l_hash"}
    assert steps == [(set(), set()), (lost, lost), (lost, lost), (lost, set())], steps


def test_the_keys_a_step_touches_are_broadcast_only_while_they_are_known_to_be_few(spark, tmp_path):
    """A window by partition looks up its state (and, to recompute a partition, the history) by the keys the step
    touched. They are broadcast when they are known to be few: at most 3 here, and as the state holds more rows than
    that, they are counted. 2 keys and 4 new rows of one key are broadcast; 4 keys are not, and their lookups shuffle.
    The keys of a recomputed partition are counted too: the history read to recompute it does not stop them."""
    transform = FAMILIES["running_lag"][0]
    history = [*[Event(OP_APPEND, minutes(1), (k, 1)) for k in "pqrs"],
               Event(OP_APPEND, minutes(2), ("p", 2)), Event(OP_APPEND, minutes(2), ("q", 2)),  # 2 keys: fit
               *[Event(OP_APPEND, minutes(3), (k, 3)) for k in "pqrs"],  # 4 keys: too many
               *[Event(OP_APPEND, minutes(i), ("p", i)) for i in (4, 5, 6, 7)],  # 4 rows of one key: fit
               Event(OP_APPEND, minutes(0), ("q", 9))]  # late: q is recomputed from its history
    inc, steps = _broadcasts_per_step(spark, tmp_path, transform, history, [Txn({"a": 4}), Txn({"a": 2}),
                                      Txn({"a": 4}), Txn({"a": 4}), Txn({"a": 1})], 3, ("w_k0", "__odf_want0"))
    assert [r.diagnostics.get("history") is not None for r in inc.result.responses] == [False] * 4 + [True]
    keys, recomputed = {"w_k0"}, {"w_k0", "__odf_want0"}
    assert steps == [(set(), set()), (keys, keys), (keys, set()), (keys, keys), (recomputed, recomputed)], steps


def test_a_frame_of_months_keeps_the_rows_within_months_of_its_last_value(spark, tmp_path):
    """A frame of months (a sum over the last month, a count of the rows within the next month) keeps the rows within
    months of the partition's last value, month ends clamped as Spark adds months: appends read no history, and the
    tail drops the rows no later row reads (Feb 28 once Mar 29 and Mar 31 came: Mar 31 - 1 month is Feb 29)."""
    transform = sql("SELECT event_time, k, x, d, sum(x) OVER (PARTITION BY k ORDER BY d RANGE BETWEEN INTERVAL 1 "
                    "MONTH PRECEDING AND CURRENT ROW) AS s1, count(*) OVER (PARTITION BY k ORDER BY d RANGE BETWEEN "
                    f"CURRENT ROW AND INTERVAL 1 MONTH FOLLOWING) AS ahead FROM (SELECT *, {DAY} AS d FROM a)")
    day = {"Jan 15": 14, "Jan 29": 28, "Jan 31": 30, "Feb 28": 58, "Mar 29": 88, "Mar 31": 90, "May 31": 151}
    history = [Event(OP_APPEND, minutes(day[d]), (k, x)) for d, k, x in (
        ("Jan 29", "p", 1), ("Jan 31", "p", 2), ("Jan 15", "q", 5), ("Feb 28", "p", 3), ("Mar 29", "p", 4),
        ("Mar 31", "p", 5), ("May 31", "p", 6))]
    inc = _run_both(spark, tmp_path, transform, history, [Txn({"a": 3}), Txn({"a": 1}), Txn({"a": 2}), Txn({"a": 1})])
    diags = [r.diagnostics for r in inc.result.responses]
    assert [d.get("history") is None for d in diags[1:]] == [True, True, True], diags
    # p, q and the tail: all rows; p's 3; from Feb 29 on (Mar 29, Mar 31); from Apr 30 on (May 31); q's row throughout
    assert [d["stateRows"] for d in diags] == [5, 6, 5, 4], diags

    def changes(i: int) -> list[tuple]:
        return sorted((r["op"], r["d"].isoformat(), r["s1"], r["ahead"]) for r in inc.result.slices[i].to_pylist())

    assert changes(1) == sorted([(OP_APPEND, "2024-02-28", 6, 1), (R, "2024-01-29", 1, 2), (OP_APPEND, "2024-01-29",
                                 1, 3), (R, "2024-01-31", 3, 1), (OP_APPEND, "2024-01-31", 3, 2)]), changes(1)
    assert changes(2) == [(OP_APPEND, "2024-03-29", 4, 2), (OP_APPEND, "2024-03-31", 9, 1)], changes(2)
    assert changes(3) == [(OP_APPEND, "2024-05-31", 6, 1)], changes(3)
    window = [o for o in inc.result.responses[0].raw.diagnostics.operators if o.operator == "Window"]
    assert "running state per partition (1 key(s)) and the rows new rows can change (its rows from its last ORDER " \
           "BY value - (INTERVAL '1' MONTH) on) with the rows these and new rows read (down to their ORDER BY values " \
           "+ (INTERVAL '-1' MONTH))" in window[0].detail, window


def test_rows_output_again_keep_every_row_they_read(spark, tmp_path):
    """Rows whose output new rows change are output again (and retracted as they were output), so the tail also
    holds every row that any function of the window reads at them: rows further back than new rows read (a frame
    of the previous 3 minutes beside one of the next 2, a lag beside a lead IGNORE NULLS, a lag IGNORE NULLS beside
    a frame of the next 2 minutes, a frame of values beside a lead of 2 rows)."""
    def run(name: str, query: str, history: list[tuple[int, int | None]], split: list[int]) -> list[list]:
        inc = _run_both(spark, tmp_path / name, sql(f"SELECT event_time, k, x, {query} FROM a"),
                        [Event(OP_APPEND, minutes(m), ("p", x)) for m, x in history], [Txn({"a": n}) for n in split])
        diags = [r.diagnostics for r in inc.result.responses]
        assert all(d.get("history") is None for d in diags[1:]), diags
        return [sorted(((r["op"], r["x"]) for r in s.to_pylist()), key=str) for s in inc.result.slices]

    w = "(PARTITION BY k ORDER BY event_time"
    # each case takes three steps, so that a tail extended by a step is read by the next
    # 4's sum reads minute 2 (100), below 5 - 3 (what a new row reads): 4's count changes at 6, 5's at 7
    out = run("values", f"sum(x) OVER {w} RANGE BETWEEN INTERVAL 3 MINUTES PRECEDING AND CURRENT ROW) AS s3, "
              f"count(*) OVER {w} RANGE BETWEEN CURRENT ROW AND INTERVAL 2 MINUTES FOLLOWING) AS ahead",
              [(2, 100), (4, 1), (5, 2), (6, 3), (7, 4)], [3, 1, 1])
    assert out[1] == sorted([(R, 1), (R, 2), (OP_APPEND, 1), (OP_APPEND, 2), (OP_APPEND, 3)], key=str), out
    # 1's next known value changes at 5 (9), and its lag reads 0 (7): a row before the rows with no value after them
    run("skips", f"lead(x) IGNORE NULLS OVER {w}) AS next, lag(x) OVER {w}) AS prev",
        [(0, 7), (1, 5), (2, None), (3, None), (4, None), (5, 9)], [4, 1, 1])
    # 4's and 5's counts change at 6 and 7, and their lag(x, 2) IGNORE NULLS reads back to 0 (2 values before 4)
    run("lag_skips", f"count(*) OVER {w} RANGE BETWEEN CURRENT ROW AND INTERVAL 2 MINUTES FOLLOWING) AS ahead, "
        f"lag(x, 2) IGNORE NULLS OVER {w}) AS back2", [(0, 1), (1, 2), (4, None), (5, 3), (6, None), (7, 4)],
        [4, 1, 1])
    # 2's lead(x, 2) changes at 7 and 5's at 8, and their sums read minutes 1 (100) and 2, below 5 - 3 and 7 - 3
    run("lead", f"lead(x, 2) OVER {w}) AS next2, sum(x) OVER {w} RANGE BETWEEN INTERVAL 3 MINUTES PRECEDING AND "
        "CURRENT ROW) AS s3", [(1, 100), (2, 1), (5, 2), (7, 3), (8, 4)], [3, 1, 1])


def test_months_added_to_a_time_where_clocks_change_keep_no_tail(spark):
    """Months added to a TIMESTAMP are monotonic only in a time zone without daylight saving (an hour repeated in
    autumn: 01:30 EDT - 1 month is after 01:10 EST - 1 month, the later time). The engine sets UTC on every request
    session; a session in another zone keeps the recomputation by key (the window's analysis, on this session)."""
    from spark_jobs.transform.catalyst import Catalyst
    from spark_jobs.transform.incremental import running
    from spark_jobs.transform.incremental.plan import Unsupported

    cat = Catalyst(spark)
    zone = spark.conf.get("spark.sql.session.timeZone")
    query = "SELECT k, sum(x) OVER (PARTITION BY k ORDER BY {} RANGE BETWEEN INTERVAL '1-2' YEAR TO MONTH " \
            "PRECEDING AND CURRENT ROW) AS y FROM VALUES ('a', 1, TIMESTAMP'2024-11-03 01:30:00-04:00') AS v(k, x, t)"
    for tz, order, kept in (("UTC", "t", True), ("+02:00", "t", True), ("America/New_York", "t", False),
                            ("America/New_York", "CAST(t AS DATE)", True),
                            ("America/New_York", "CAST(t AS TIMESTAMP_NTZ)", True)):
        spark.conf.set("spark.sql.session.timeZone", tz)
        try:
            plan = spark.sql(query.format(order))._jdf.queryExecution().optimizedPlan()
            node = next(n for n in cat.walk(plan) if cat.cls(n) == "Window")
            try:
                spec = running.analyze(cat, node)
                found = spec.functions[0].lower
            except Unsupported as e:
                found = e.reason
        finally:
            spark.conf.set("spark.sql.session.timeZone", zone)
        if kept:
            assert found == "(INTERVAL '-1-2' YEAR TO MONTH)", (tz, order, found)
        else:
            assert "months added to a TIMESTAMP in the session's time zone America/New_York are not monotonic" in \
                found, found


def test_only_tails_that_now_hold_more_rows_change_the_plans_fingerprint():
    """A window whose rows output again read rows that new rows do not names its tail's layout, so that a state from
    before (whose tail may lack those rows) is rebuilt once; any other plan keeps its fingerprint. No Spark: the
    specs are built from their functions."""
    import hashlib
    from dataclasses import replace

    from pyspark.sql import types as T

    from spark_jobs.transform.incremental.plan import PLAN_VERSION, _fingerprint
    from spark_jobs.transform.incremental.running import RunningFunction, RunningSpec

    class X:  # what the functions' SQL and the fingerprint read of a JVM expression, plan or schema
        def __init__(self, text: str) -> None:
            self.text = text

        def sql(self) -> str:
            return self.text

        toString = json = sql

    t = T.LongType()
    lag = RunningFunction("lag", None, t, "lag(x)", behind=1)
    lead = RunningFunction("lead", None, t, "lead(x, 2)", ahead=2)
    rolling = RunningFunction("frame", None, t, "sum(x) OVER (RANGE 3 PRECEDING)", lower="(- 3)")
    ahead = RunningFunction("frame", None, t, "count(*) OVER (RANGE 2 FOLLOWING)", upper="(2)")
    skips = RunningFunction("lag", None, t, "lag(x, 2) IGNORE NULLS", ignore_nulls=True, skips=X("x"), known=2)
    fill = RunningFunction("frame", None, t, "first(x) IGNORE NULLS", ignore_nulls=True, skips=X("x"), known=1)
    around = RunningFunction("frame", None, t, "count(*) OVER (RANGE 1 PRECEDING AND 2 FOLLOWING)", lower="(- 1)",
                             upper="(2)")  # its own rows output again read down to last - 2 - 1, as before
    # rows output again: the tail keeps every function's value as output ("outputs")
    out, reads = "outputs", "tail-reads+outputs"
    cases = {(lag,): "", (rolling,): "", (skips,): "", (lag, rolling, skips): "",
             (lead,): out, (lag, lead): out, (ahead,): out, (fill,): out, (around,): out, (ahead, skips): out,
             (lead, skips): out, (fill, skips): out,  # a lag IGNORE NULLS keeps its value as output
             (rolling, ahead): reads, (lead, rolling): reads, (ahead, lag): reads, (fill, lag): reads,
             (fill, rolling): reads, (around, ahead): reads}
    for functions, layout in cases.items():
        spec = RunningSpec(("k",), ("t",), "Window", functions, None, "")
        assert spec.layout == layout, ([f.sql for f in functions], spec.layout)
    # a state without the ORDER BY's tie-breakers (since 11-29; ORDER BY t, then the breakers x and y)
    broken = RunningSpec(("k",), ("t", "x", "y"), "Window", (lag,), None, "", peers=1)
    assert broken.layout == "peers" and replace(broken, functions=(lead,)).layout == "outputs+peers"
    plan, schemas = X("Window [k#12]"), [X('{"type": "struct"}')]
    before = hashlib.sha256(f"{PLAN_VERSION}\nWindow [k#]\n{{\"type\": \"struct\"}}".encode()).hexdigest()
    assert _fingerprint(plan, schemas, ["", ""]) == before
    assert _fingerprint(plan, schemas, ["root: tail-reads", ""]) != before


def test_first_last_and_the_previous_known_value_continue_from_the_state(spark, tmp_path):
    """first/last (also IGNORE NULLS: the forward fill) and lag(x) IGNORE NULLS keep the partition's first / last
    (non-NULL) value: appended rows continue from it without reading history, also when every new row of a
    partition is NULL or its first value was NULL."""
    transform = sql("SELECT event_time, k, x, last(x) IGNORE NULLS OVER w AS filled, lag(x) IGNORE NULLS OVER w AS "
                    "known, first(x) IGNORE NULLS OVER w AS fi, first(x) OVER w AS f, last(x) OVER w AS l FROM a "
                    "WINDOW w AS (PARTITION BY k ORDER BY event_time)")
    history = [Event(OP_APPEND, minutes(1), ("p", 1)), Event(OP_APPEND, minutes(2), ("p", None)),
               Event(OP_APPEND, minutes(1), ("q", None)),
               Event(OP_APPEND, minutes(3), ("p", None)), Event(OP_APPEND, minutes(2), ("q", 5)),
               Event(OP_APPEND, minutes(4), ("p", 4)), Event(OP_APPEND, minutes(5), ("p", None)),
               Event(OP_APPEND, minutes(3), ("q", None))]
    inc = _run_both(spark, tmp_path, transform, history, [Txn({"a": 3}), Txn({"a": 2}), Txn({"a": 3})])
    diags = [r.diagnostics for r in inc.result.responses]
    assert [d["path"] for d in diags] == ["rebuild", "incremental", "incremental"], diags
    assert [d.get("history") for d in diags[1:]] == [None, None], diags
    rows = [sorted((r["k"], r["event_time"].minute, r["filled"], r["known"], r["fi"], r["f"], r["l"])
                   for r in t.to_pylist()) for t in inc.result.slices[1:]]
    assert rows == [[("p", 3, 1, 1, 1, 1, None), ("q", 2, 5, None, 5, None, 5)],
                    [("p", 4, 4, 1, 1, 1, 4), ("p", 5, 4, 4, 1, 1, None), ("q", 3, 5, 5, 5, None, None)]], rows


def test_beside_a_lead_the_tail_keeps_the_running_values_it_output(spark, tmp_path, monkeypatch):
    """Beside a lead the tail's rows are output again when a new row changes their lead. A running sum, max or
    forward fill at such a row cannot be told from the partition's state (it folds the later tail rows too), so the
    tail keeps them as they were output: from the rebuild, from a step, and from a partition recomputed for a late
    row. A NULL before a larger value in the tail is the case the state alone gets wrong. The tail keeps every
    function's value, the lead's too, so a row output again is retracted with its stored values: a step runs the
    window once, over the tails and the new rows, not a second time over the tails alone."""
    from spark_jobs.transform.incremental import running_tails as running

    windows: list[int] = []
    real = running._window

    def spy(*args, **kwargs):  # counts the window's runs over tails (and new rows); the real one computes them
        windows.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(running, "_window", spy)
    # ROWS frames: over the default RANGE frame (or beside a rank) the functions would get a window of their own
    transform = sql("SELECT event_time, k, x, lead(x, 2) OVER w AS nx2, sum(x) OVER r AS total, row_number() OVER w "
                    "AS r, max(x) OVER r AS hi, last(x) IGNORE NULLS OVER r AS filled FROM a "
                    "WINDOW w AS (PARTITION BY k ORDER BY event_time), r AS (PARTITION BY k ORDER BY event_time ROWS "
                    "BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)")
    history = [Event(OP_APPEND, minutes(1), ("p", 1)), Event(OP_APPEND, minutes(2), ("p", None)),
               Event(OP_APPEND, minutes(3), ("p", 9)),  # rebuild: p's tail is its rows at minutes 2 and 3
               Event(OP_APPEND, minutes(4), ("p", 2)), Event(OP_APPEND, minutes(1), ("q", None)),  # 2's lead: 2
               Event(OP_APPEND, minutes(0), ("p", 7)), Event(OP_APPEND, minutes(2), ("q", 3)),  # late: p recomputed
               Event(OP_APPEND, minutes(5), ("p", None)), Event(OP_APPEND, minutes(6), ("p", 4))]  # 4's lead: 4
    inc = _run_both(spark, tmp_path, transform, history, [Txn({"a": 3}), Txn({"a": 2}), Txn({"a": 2}),
                                                          Txn({"a": 2})])
    diags = [r.diagnostics for r in inc.result.responses]
    assert [d["path"] for d in diags] == ["rebuild", "incremental", "incremental", "incremental"], diags
    assert [d.get("history") is None for d in diags[1:]] == [True, False, True], diags
    rows = [sorted((r["op"], r["k"], r["event_time"].minute, r["nx2"], r["total"], r["r"], r["hi"], r["filled"])
                   for r in t.to_pylist()) for t in inc.result.slices[1:]]
    assert rows[0] == sorted([(OP_APPEND, "p", 2, 2, 1, 2, 1, 1), (OP_APPEND, "p", 4, None, 12, 4, 9, 2),
                              (OP_APPEND, "q", 1, None, None, 1, None, None),
                              (R, "p", 2, None, 1, 2, 1, 1)]), rows[0]
    assert rows[2] == sorted([(OP_APPEND, "p", 4, 4, 19, 5, 9, 2), (OP_APPEND, "p", 5, None, 19, 6, 9, 2),
                              (OP_APPEND, "p", 6, None, 23, 7, 9, 4), (R, "p", 4, None, 19, 5, 9, 2)]), rows[2]
    assert len(windows) == 3, windows  # once in each incremental step (the rebuild and the full run run none)
    _, tables = checkpoint_tables(inc.checkpoint)
    tail = next(t for name, t in tables.items() if name.endswith("/tail")).to_pylist()
    # p's last 2 rows and q's, from the last, with nx2, total, r, hi and filled as the last slice output them
    assert sorted((r["__odf_i"], r["v0"], r["v1"], r["v2"], r["v3"], r["v4"]) for r in tail if r["v2"] > 2) == \
        [(1, None, 23, 7, 9, 4), (2, None, 19, 6, 9, 2)], tail
    window = [o for o in inc.result.responses[0].raw.diagnostics.operators if o.operator == "Window"]
    assert "its last 2 row(s) (with each row's values as output)" in \
        window[0].detail, window


def test_the_tails_stored_values_are_the_values_its_rows_were_output_with(spark, tmp_path):
    """Beside rows output again the tail keeps every row's values as output, and retracts its rows with them. Its
    oldest rows are there because the rows output again read them: a window over the tail and the new rows does not
    hold every row their own frames read, so they keep their stored values (a sum over 2 rows before to 1 after: the
    row at minute 4 stays in the tail after the step that adds minute 6, with the 14 it was output with, not the 12
    of a frame missing minute 2)."""
    transform = sql("SELECT event_time, k, x, sum(x) OVER (PARTITION BY k ORDER BY event_time ROWS BETWEEN 2 "
                    "PRECEDING AND 1 FOLLOWING) AS near FROM a")
    history = [Event(OP_APPEND, minutes(i), ("p", i)) for i in range(1, 7)]
    inc = _run_both(spark, tmp_path, transform, history, [Txn({"a": 3}), Txn({"a": 1}), Txn({"a": 1}),
                                                          Txn({"a": 1})])
    diags = [r.diagnostics for r in inc.result.responses]
    assert [d.get("history") is None for d in diags[1:]] == [True, True, True], diags
    _, tables = checkpoint_tables(inc.checkpoint)
    tail = next(t for name, t in tables.items() if name.endswith("/tail")).to_pylist()
    assert [r["v0"] for r in sorted(tail, key=lambda r: r["__odf_i"])] == [4 + 5 + 6, 3 + 4 + 5 + 6, 2 + 3 + 4 + 5], \
        tail
    assert [r["__odf_changed"] for r in sorted(tail, key=lambda r: r["__odf_i"])] == [True, False, False], tail


def test_ignore_nulls_keeps_the_rows_back_to_the_kth_last_value(spark, tmp_path):
    """lag(x, 2) IGNORE NULLS reads back to its partition's 2nd last non-NULL value, however many NULLs lie between:
    the tail holds the rows from there on. A lead IGNORE NULLS and a backward fill (first IGNORE NULLS to UNBOUNDED
    FOLLOWING) change the rows no non-NULL value follows yet: the tail holds them, and they are retracted and output
    again when one comes. A partition of NULLs only keeps all its rows. Appends read no history; a late row
    recomputes its partition. Slices are the full path's bytes."""
    transform = sql("SELECT event_time, k, x, lag(x, 2) IGNORE NULLS OVER w AS back2, lead(x) IGNORE NULLS OVER w AS "
                    "next, first(x) IGNORE NULLS OVER (PARTITION BY k ORDER BY event_time ROWS BETWEEN CURRENT ROW "
                    "AND UNBOUNDED FOLLOWING) AS backfill FROM a WINDOW w AS (PARTITION BY k ORDER BY event_time)")
    history = [Event(OP_APPEND, minutes(1), ("p", 1)), Event(OP_APPEND, minutes(2), ("p", None)),
               Event(OP_APPEND, minutes(3), ("p", 5)), Event(OP_APPEND, minutes(4), ("p", None)),
               Event(OP_APPEND, minutes(1), ("q", None)), Event(OP_APPEND, minutes(2), ("q", None)),
               Event(OP_APPEND, minutes(5), ("p", None)), Event(OP_APPEND, minutes(6), ("p", 8)),
               Event(OP_APPEND, minutes(3), ("q", 2)), Event(OP_APPEND, minutes(7), ("p", None)),
               Event(OP_APPEND, minutes(0), ("p", 3))]  # late: p is recomputed from its history
    split = [Txn({"a": 6}), Txn({"a": 2}), Txn({"a": 2}), Txn({"a": 1})]
    inc = _run_both(spark, tmp_path / "both", transform, history, split)
    diags = [r.diagnostics for r in inc.result.responses]
    assert [d["path"] for d in diags] == ["rebuild"] + ["incremental"] * 3, diags
    assert [d.get("history") is None for d in diags[1:]] == [True, True, False], diags
    # a state row per partition; p's tail from its 2nd last non-NULL value on (@1-@4, @3-@6, @3-@7), q's all rows
    assert [d["stateRows"] for d in diags] == [8, 8, 10, 10], diags
    changed = [sorted((r["op"], r["k"], r["event_time"].minute, r["x"], r["back2"], r["next"], r["backfill"])
                      for r in t.to_pylist()) for t in inc.result.slices]
    assert changed[1] == sorted([(R, "p", 3, 5, None, None, 5), (OP_APPEND, "p", 3, 5, None, 8, 5),
                                 (R, "p", 4, None, 1, None, None), (OP_APPEND, "p", 4, None, 1, 8, 8),
                                 (OP_APPEND, "p", 5, None, 1, 8, 8), (OP_APPEND, "p", 6, 8, 1, None, 8)]), changed[1]
    assert changed[2] == sorted([(OP_APPEND, "p", 7, None, 5, None, None),
                                 (R, "q", 1, None, None, None, None), (OP_APPEND, "q", 1, None, None, 2, 2),
                                 (R, "q", 2, None, None, None, None), (OP_APPEND, "q", 2, None, None, 2, 2),
                                 (OP_APPEND, "q", 3, 2, None, None, 2)]), changed[2]
    window = [o for o in inc.result.responses[0].raw.diagnostics.operators if o.operator == "Window"]
    assert "running state per partition (1 key(s)) and the rows new rows can change (its rows with fewer than 1 " \
           "non-NULL a.x after them) and its rows with fewer than 2 non-NULL a.x after them (with each row's " \
           "values as output): lag(a.x, 2, NULL) IGNORE NULLS, lead(a.x, 1, NULL) IGNORE " \
           "NULLS, first(a.x) IGNORE NULLS" in window[0].detail, window[0].detail
    # the backward fill alone: only the rows no non-NULL value follows stay, and the last non-NULL value's row
    backfill = sql("SELECT event_time, k, x, first(x) IGNORE NULLS OVER (PARTITION BY k ORDER BY event_time ROWS "
                   "BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) AS backfill FROM a")
    inc = _run_both(spark, tmp_path / "backfill", backfill, history, split)
    diags = [r.diagnostics for r in inc.result.responses]
    assert [d.get("history") is None for d in diags[1:]] == [True, True, False], diags
    assert [d["stateRows"] for d in diags] == [6, 5, 5, 5], diags  # p: @3-4, @6, @6-7, @6-7; q: all, all, @3


def test_the_first_rows_of_each_partition_are_its_state(spark, tmp_path):
    """A filter on row_number() keeps each partition's first rows as state: new rows are ranked against them (no
    history read), a late row or a removed row ranked after them changes nothing, and removing or correcting a kept
    row recomputes that partition from its history. Slices are the full path's bytes."""
    transform = sql("SELECT event_time, k, x, rn FROM (SELECT *, row_number() OVER (PARTITION BY k ORDER BY "
                    "event_time DESC) AS rn FROM a) WHERE rn <= 2")
    history = [*[Event(OP_APPEND, minutes(i), ("p", i)) for i in (1, 2, 3)], Event(OP_APPEND, minutes(1), ("q", 5)),
               Event(OP_APPEND, minutes(4), ("p", 4)), Event(OP_APPEND, minutes(5), ("r", None)),  # p's 4 comes first
               Event(OP_APPEND, minutes(0), ("p", 0)), Event(R, minutes(1), ("p", 1)),  # both ranked after p's 4, 3
               Event(OP_APPEND, minutes(6), ("q", 6)),
               Event(R, minutes(4), ("p", 4)),  # a kept row removed: p is recomputed (3, 2)
               Event(OP_CORRECT_FROM, minutes(6), ("q", 6)), Event(OP_CORRECT_TO, minutes(6), ("q", 7))]
    split = [Txn({"a": 4}), Txn({"a": 2}), Txn({"a": 3}), Txn({"a": 1}), Txn({"a": 2})]
    inc = _run_both(spark, tmp_path, transform, history, split)
    diags = [r.diagnostics for r in inc.result.responses]
    assert [d["path"] for d in diags] == ["rebuild"] + ["incremental"] * 4
    assert [d.get("history") is None for d in diags[1:]] == [True, True, False, False], diags
    assert [d["stateRows"] for d in diags] == [3, 4, 5, 5, 5], diags  # up to 2 rows a partition
    changed = [sorted((r["op"], r["k"], r["x"], r["rn"]) for r in t.to_pylist()) for t in inc.result.slices]
    assert changed[1] == [(OP_APPEND, "p", 3, 2), (OP_APPEND, "p", 4, 1), (OP_APPEND, "r", None, 1),
                          (R, "p", 2, 2), (R, "p", 3, 1)], changed[1]
    assert changed[2] == [(OP_APPEND, "q", 5, 2), (OP_APPEND, "q", 6, 1), (R, "q", 5, 1)], changed[2]
    assert changed[3] == [(OP_APPEND, "p", 2, 2), (OP_APPEND, "p", 3, 1), (R, "p", 3, 2), (R, "p", 4, 1)], changed[3]
    window = [o for o in inc.result.responses[0].raw.diagnostics.operators if o.operator == "Window"]
    assert "first rows per partition (1 key(s)): row_number() limited to 2" in window[0].detail, window


def test_a_global_aggregate_whose_rows_are_all_removed_gives_sparks_row_over_no_rows(spark, tmp_path):
    """A global aggregate's one group outlives its rows: when a step removes the rows it adds and the rest, its
    min/max_by are recomputed (as NULL), not left at the extreme of the step's added rows."""
    transform = sql("SELECT coalesce(max(event_time), TIMESTAMP'2024-01-01 00:00:00Z') AS event_time, count(*) AS n, "
                    "min(x) AS lo, max_by(k, x) AS top FROM a")
    history = [Event(OP_APPEND, minutes(1), ("p", 1)), Event(OP_APPEND, minutes(2), ("q", 2)),
               Event(R, minutes(2), ("q", 2)), Event(R, minutes(1), ("p", 1))]
    for i, split in enumerate(([Txn({"a": 0}), Txn({"a": 4})], [Txn({"a": 1}), Txn({"a": 3})])):
        inc = _run(spark, tmp_path / f"split{i}", transform, [InputSpec("a", DATA, history)], split)
        assert [r.diagnostics["path"] for r in inc.result.responses] == ["rebuild", "incremental"]
        assert reduce_output(inc.result.rows()) == batch_reference(spark, transform, inc.inputs), split


def test_a_top_aggregate_writes_each_groups_old_and_new_row(spark, tmp_path):
    """A top-level GROUP BY whose output carries its keys takes a touched group's old and new output rows from its
    one state row (``slice: per group``) instead of netting all changed rows by value: the same bytes as the full
    path, with groups that appear, disappear or do not change, and -0.0 and NaN written as netting writes them.
    Timestamp keys finer than the slice's milliseconds can make two groups one output key: those steps are netted, as
    are outputs with floats inside structs. A column Spark knows is never NULL is nullable in every path's slice."""
    floats = sql("SELECT k, count(*) AS n, avg(x) AS a, max(event_time) AS event_time, "
                 "max(CASE WHEN x = 0 THEN double('NaN') ELSE x * -0.0D END) AS z FROM a GROUP BY k")
    events = [Event(OP_APPEND, minutes(1), ("p", 3)), Event(OP_APPEND, minutes(2), ("q", -2)),
              Event(OP_APPEND, minutes(3), ("p", 0)),  # p's z: -0.0 -> NaN
              Event(OP_APPEND, minutes(4), ("r", 5)),  # a new group
              Event(R, minutes(4), ("r", 5)),  # r is gone
              Event(OP_APPEND, minutes(5), ("q", 4)),  # q's z: 0.0 and -0.0
              Event(OP_APPEND, minutes(6), ("s", 1)), Event(R, minutes(6), ("s", 1)),  # s never shows
              Event(OP_APPEND, minutes(1), ("p", 3)), Event(R, minutes(1), ("p", 3))]  # p's row does not change
    fine = sql("SELECT max(event_time) AS event_time, k, t, count(*) AS n FROM "
               "(SELECT *, timestamp_micros(unix_micros(event_time) + x) AS t FROM a) GROUP BY k, t")
    collide = [Event(OP_APPEND, minutes(1), ("p", 1)), Event(OP_APPEND, minutes(1), ("p", 2)),
               Event(OP_APPEND, minutes(1), ("p", 1)), Event(OP_APPEND, minutes(1), ("p", 2)),  # one ms, two keys
               Event(OP_APPEND, minutes(2), ("q", 1)), Event(OP_APPEND, minutes(3), ("q", 0))]
    nested = sql("SELECT k, named_struct('z', max(x * -0.0D)) AS s, count(*) AS n, max(event_time) AS event_time "
                 "FROM a GROUP BY k")  # -0.0 inside a struct: only netting normalises it
    cases = [(floats, events, [2, 2, 6], ["all new", "per group", "per group"]),
             (fine, collide, [2, 2, 1, 1], ["all new", "netted", "netted", "per group"]),
             (nested, events, [2, 2, 6], [None, "netted", "netted"])]
    for n, (transform, history, cuts, expected) in enumerate(cases):
        split = [Txn({"a": c}) for c in cuts]
        inc = _run(spark, tmp_path / f"inc{n}", transform, [InputSpec("a", DATA, history)], split)
        full = _run(spark, tmp_path / f"full{n}", transform, [InputSpec("a", DATA, history)], split,
                    incremental=False)
        assert [r.diagnostics["path"] for r in inc.result.responses][1:] == ["incremental"] * (len(cuts) - 1)
        assert [r.diagnostics.get("slice") for r in inc.result.responses] == expected
        for a, b in zip(inc.result.slices, full.result.slices, strict=True):
            assert a.schema.equals(b.schema, check_metadata=True) and _bits(a) == _bits(b), (_bits(a), _bits(b))
        if transform is not nested:  # (reduce_output keys rows by flat values)
            got, want = reduce_output(inc.result.rows()), batch_reference(spark, transform, inc.inputs)
            assert _nan_named(got) == _nan_named(want)


def test_a_first_step_writes_the_query_rows_without_counting_them(spark, tmp_path):
    """The first step has no previous output to diff against: its slice is the query's rows, every one +A, sorted
    (``slice: all new``) instead of counted into a state file and netted. The same bytes as the full path, which
    counts them: identical rows, -0.0 and NaN as grouping writes them, by key for an output with one; a float inside a
    struct is counted as before (grouping normalises it there too)."""
    window = sql("SELECT event_time, k, x, CASE WHEN x = 0 THEN double('NaN') ELSE x * -0.0D END AS z, "
                 "count(*) OVER (PARTITION BY k ORDER BY event_time) AS n FROM a")
    grouped = sql("SELECT k, max(event_time) AS event_time, max(CASE WHEN x = 0 THEN double('NaN') ELSE x * -0.0D "
                  "END) AS z, count(*) AS n FROM a GROUP BY k")
    nested = sql("SELECT event_time, k, named_struct('z', x * -0.0D) AS s FROM (SELECT *, row_number() OVER "
                 "(PARTITION BY k ORDER BY event_time) AS r FROM a) WHERE r <= 2")
    events = [Event(OP_APPEND, minutes(1), ("p", 3)), Event(OP_APPEND, minutes(1), ("p", 3)),  # identical rows
              Event(OP_APPEND, minutes(2), ("q", -2)), Event(OP_APPEND, minutes(2), ("q", 0)),  # 0.0, NaN
              Event(OP_APPEND, minutes(3), (None, 1)), Event(OP_APPEND, minutes(3), ("p", 0)),  # a NULL key
              Event(OP_APPEND, minutes(4), ("q", 5)), Event(R, minutes(1), ("p", 3))]
    cases = [(window, "all new", 6), (grouped, "all new", 3), (nested, None, 5)]
    for n, (transform, expected, rows) in enumerate(cases):
        split = [Txn({"a": 6}), Txn({"a": 2})]
        inc = _run(spark, tmp_path / f"inc{n}", transform, [InputSpec("a", DATA, events)], split)
        full = _run(spark, tmp_path / f"full{n}", transform, [InputSpec("a", DATA, events)], split,
                    incremental=False)
        assert [r.diagnostics["path"] for r in inc.result.responses] == ["rebuild", "incremental"]
        assert inc.result.responses[0].diagnostics.get("slice") == expected
        assert inc.result.slices[0].num_rows == rows
        for a, b in zip(inc.result.slices, full.result.slices, strict=True):
            assert a.schema.equals(b.schema, check_metadata=True) and _bits(a) == _bits(b), (_bits(a), _bits(b))


def _nan_named(rows: Counter) -> Counter:
    return Counter({tuple("NaN" if isinstance(v, float) and v != v else v for v in row): n for row, n in rows.items()})


def _bits(table: pa.Table) -> list[tuple]:
    """Rows with each float, also inside structs, as its IEEE bits (NaN is not equal to itself, -0.0 equals 0.0)."""
    def bits(v: object) -> object:
        if isinstance(v, float):
            return struct.pack(">d", v).hex()
        return tuple((k, bits(x)) for k, x in v.items()) if isinstance(v, dict) else v

    return [tuple(bits(v) for v in row.values()) for row in table.to_pylist()]


RANGED = {
    **{name: FAMILIES[name][0] for name in ("join_on_ranges", "left_join_on_ranges", "window_on_ranges")},
    "group_recomputed": sql("SELECT x, min(event_time) AS event_time, count(*) AS n, max(k) AS hk FROM a GROUP BY x"),
    "running_recomputed": sql("SELECT event_time, k, x, count(*) OVER (PARTITION BY x ORDER BY event_time, k ROWS "
                              "UNBOUNDED PRECEDING) AS n FROM a"),
    "interval_join_inner": sql("SELECT a.event_time, a.k, a.x, b.x AS bx FROM a JOIN b ON a.k <=> b.k "
                               "AND b.x BETWEEN a.x - 2 AND a.x + 1"),
    "interval_join_left": sql("SELECT a.event_time, a.k, a.x, b.x AS bx FROM a LEFT JOIN b "
                              "ON b.x - 1 <= a.x AND a.x < b.x + 3 AND a.k = b.k"),
    "interval_join_anti": sql("SELECT a.event_time, a.k, a.x FROM a WHERE NOT EXISTS (SELECT 1 FROM b WHERE "
                              "b.k = a.k AND b.x > a.x - 3 AND b.x <= a.x)"),
}


@pytest.mark.parametrize("name", sorted(RANGED))
def test_keys_that_grow_with_the_history_give_the_batch_result(spark, tmp_path_factory, name):
    """Keys whose ranges prune the history's slices (.key_ranges), with retractions and corrections of rows in older
    slices, for any split (at least two transactions with rows of a): the output reduces to the batch result, and
    some generated step was incremental."""
    transform = RANGED[name]
    generated = PathLog()

    @spark_property(f"ranged {name}", scale=2)
    @given(data=hst.data())
    def check(data):
        inputs = _inputs(data.draw(changelogs(growing=True, min_events=2), "a"),
                         data.draw(changelogs(10, growing=True), "b"))
        split = data.draw(splits(inputs, min_steps=2), "split")
        coord = _run(spark, tmp_path_factory.mktemp(name), transform, inputs, split)
        generated.record(coord.result)
        paths = [r.diagnostics["path"] for r in coord.result.responses]
        assert paths[0] == "rebuild" and set(paths[1:]) <= {"incremental", None}, paths
        assert reduce_output(coord.result.rows()) == batch_reference(spark, transform, inputs), split

    check()
    generated.assert_incremental(name)


def test_a_join_of_two_growing_inputs_reads_the_history_slices_its_keys_reach(spark, tmp_path):
    """Two inputs that grow with increasing ids, joined on the id: a step reads, of each side's history, only the
    slices whose id range (their footers) meets the other side's new ids, and says so; the output is the batch
    result and the slices are the full path's bytes. The same holds for a window's partitions (a NULL key too), a
    recomputed group and a recomputed running partition, and for string keys. A computed key reads all slices."""
    def ids(start: int, n: int, minute: int, k: str) -> list[Event]:
        return [Event(OP_APPEND, minutes(minute + i), (k, start + i)) for i in range(n)]

    # each step adds ids 10s+0..2 on both sides; a also retracts its row 10 in step 3 (its new ids span 10..22)
    a = [*ids(0, 3, 0, "p"), *ids(10, 3, 10, "p"), *ids(20, 3, 20, "q"), Event(R, minutes(10), ("p", 10)),
         *ids(30, 3, 30, "q")]
    b = [*ids(0, 3, 0, "p"), *ids(10, 3, 10, "p"), *ids(20, 3, 20, "q"), *ids(30, 3, 30, "q")]
    split = [Txn({"a": 3, "b": 3}), Txn({"a": 3, "b": 3}), Txn({"a": 4, "b": 3}), Txn({"a": 3, "b": 3})]
    transform, _ = FAMILIES["join_on_ranges"]
    inputs = [InputSpec("a", DATA, a), InputSpec("b", DATA, b)]
    inc = _run(spark, tmp_path / "inc", transform, inputs, split)
    full = _run(spark, tmp_path / "full", transform, inputs, split, incremental=False)
    responses = inc.result.responses
    assert [r.diagnostics["path"] for r in responses] == ["rebuild", "incremental", "incremental", "incremental"]
    # a's change meets b's old rows of its ids (none, but in step 3 the slice of id 10); b's change meets a's rows
    # of its ids as of now: a's newest slice
    assert [r.diagnostics.get("history") for r in responses] == [
        None, "a 1 of 2 slice(s), b 0 of 2 slice(s)", "a 1 of 3 slice(s), b 1 of 3 slice(s)",
        "a 1 of 4 slice(s), b 0 of 4 slice(s)"]
    assert any("history slices read by the range of x/x" in (o.detail or "")
               for o in responses[0].raw.diagnostics.operators)
    for x, y in zip(inc.result.slices, full.result.slices, strict=True):
        assert x.equals(y), (x.to_pylist(), y.to_pylist())
    assert reduce_output(inc.result.rows()) == batch_reference(spark, transform, inputs)
    # an INT id joined with a BIGINT one: Spark widens it (a cast that keeps the order), the reads are the same
    narrow = [inputs[0], InputSpec("b", pa.schema([pa.field("k", pa.string()), pa.field("x", pa.int32())]), b)]
    widened = _run(spark, tmp_path / "widened", transform, narrow, split)
    assert [r.diagnostics.get("history") for r in widened.result.responses] == [
        r.diagnostics.get("history") for r in responses]
    assert reduce_output(widened.result.rows()) == batch_reference(spark, transform, narrow)
    # a partition key's NULL is a key too: the slices with NULLs are read for a new NULL, the others are not
    window, _ = FAMILIES["window_on_ranges"]
    nulls = [*ids(0, 3, 0, "p"), Event(OP_APPEND, minutes(5), ("q", None)), *ids(10, 3, 10, "p"),
             *ids(20, 2, 20, "r"), Event(OP_APPEND, minutes(25), ("s", None))]
    cuts = [Txn({"a": 4}), Txn({"a": 3}), Txn({"a": 3})]
    parts = _run(spark, tmp_path / "nulls", window, [InputSpec("a", DATA, nulls)], cuts)
    whole = _run(spark, tmp_path / "nulls-full", window, [InputSpec("a", DATA, nulls)], cuts, incremental=False)
    assert [r.diagnostics.get("history") for r in parts.result.responses] == [None, "a 0 of 2 slice(s)",
                                                                               "a 1 of 3 slice(s)"]
    for x, y in zip(parts.result.slices, whole.result.slices, strict=True):
        assert x.equals(y), (x.to_pylist(), y.to_pylist())
    # a group or a running partition recomputed (a removed minimum, a removed row) reads its key's slices only
    recomputing = [*ids(0, 3, 0, "p"), Event(OP_APPEND, minutes(10), ("p", 10)),
                   Event(OP_APPEND, minutes(11), ("q", 10)), Event(OP_APPEND, minutes(12), ("p", 11)),
                   Event(R, minutes(10), ("p", 10)), *ids(20, 2, 20, "r")]
    cuts = [Txn({"a": 3}), Txn({"a": 3}), Txn({"a": 3})]
    for query, kind in (("SELECT x, min(event_time) AS event_time, count(*) AS n FROM a GROUP BY x", "Aggregate"),
                        ("SELECT event_time, k, x, count(*) OVER (PARTITION BY x ORDER BY event_time ROWS UNBOUNDED "
                         "PRECEDING) AS n FROM a", "Window")):
        parts = _run(spark, tmp_path / f"re-{kind}", sql(query), [InputSpec("a", DATA, recomputing)], cuts)
        whole = _run(spark, tmp_path / f"re-{kind}-full", sql(query), [InputSpec("a", DATA, recomputing)], cuts,
                     incremental=False)
        assert (kind, "incremental") in parts.result.responses[0].diagnostics["operators"]
        # x 10..21 in step 3: the slice of 10..11 and the new one (the rows after the step), not the one of 0..2
        assert [r.diagnostics.get("history") for r in parts.result.responses] == [None, None, "a 2 of 3 slice(s)"]
        for x, y in zip(parts.result.slices, whole.result.slices, strict=True):
            assert x.equals(y), (kind, x.to_pylist(), y.to_pylist())
    # strings have ranges too: k is p in the first two slices, q in the last two (a's step 3 retracts a p row)
    by_name = sql("SELECT a.event_time, a.k, a.x, b.x AS bx FROM a JOIN b ON a.k = b.k")
    named = _run(spark, tmp_path / "named", by_name, inputs, split)
    assert [r.diagnostics.get("history") for r in named.result.responses][1:] == [
        "a 2 of 2 slice(s), b 1 of 2 slice(s)", "a 1 of 3 slice(s), b 2 of 3 slice(s)",
        "a 2 of 4 slice(s), b 1 of 4 slice(s)"]
    assert reduce_output(named.result.rows()) == batch_reference(spark, by_name, inputs)
    # a computed key has no range in the footers: every slice it may need is read
    spread = sql("SELECT a.event_time, a.k, a.x, b.x AS bx FROM a JOIN b ON lower(a.k) = lower(b.k)")
    wide = _run(spark, tmp_path / "wide", spread, inputs, split)
    assert [r.diagnostics.get("history") for r in wide.result.responses][1:] == [
        f"a {n} of {n} slice(s), b {n - 1} of {n} slice(s)" for n in (2, 3, 4)]
    assert reduce_output(wide.result.rows()) == batch_reference(spark, spread, inputs)


def test_an_interval_join_reads_the_history_slices_its_interval_reaches(spark, tmp_path):
    """Two inputs growing in event time, joined on a key that every slice holds (p and q) and on event times within
    an interval of each other: a step reads, of each side's history, only the slices whose event times the new rows'
    times reach through the interval, and says so. The preserved side of an outer join, recomputed for the keys a
    change touches, reads its own slices within reach too (here by integers); a NULL meets nothing but is output. Slices
    are the full path's bytes and the output is the batch result. An interval bounded on one side only, and an
    interval between computed columns, read every slice."""
    def rows(minute: int, n: int) -> list[Event]:  # n rows a minute apart, p and q alternating
        return [Event(OP_APPEND, minutes(minute + i), ("pq"[i % 2], minute + i)) for i in range(n)]

    # each step adds 3 rows 10 minutes after the last step's; a retracts a row of step 2 in step 4 (so its new
    # times span 10..42) and b adds a row with a NULL key
    a = [*rows(0, 3), *rows(10, 3), *rows(20, 3), *rows(30, 3), Event(R, minutes(10), ("p", 10)), *rows(40, 3)]
    b = [*rows(2, 3), *rows(12, 3), *rows(22, 3), *rows(32, 2), Event(OP_APPEND, minutes(33), (None, 33)),
         *rows(42, 3)]
    split = [Txn({"a": 3, "b": 3}), Txn({"a": 3, "b": 3}), Txn({"a": 3, "b": 3}), Txn({"a": 3, "b": 3}),
             Txn({"a": 4, "b": 3})]
    near = "b.event_time BETWEEN a.event_time - INTERVAL 1 MINUTE AND a.event_time + INTERVAL 3 MINUTES"
    inner = sql(f"SELECT a.event_time, a.k, a.x, b.x AS bx FROM a JOIN b ON a.k = b.k AND {near}")
    inputs = [InputSpec("a", DATA, a), InputSpec("b", DATA, b)]
    inc = _run(spark, tmp_path / "inc", inner, inputs, split)
    full = _run(spark, tmp_path / "full", inner, inputs, split, incremental=False)
    responses = inc.result.responses
    assert [r.diagnostics["path"] for r in responses] == ["rebuild"] + ["incremental"] * 4
    # a's new rows (10s..10s+2) meet b's rows within 10s-1..10s+5: none of b's older slices; b's new rows meet a's
    # rows as of now within 10s-1..10s+5: a's newest slice. In step 5, a's retraction of minute 10 widens the range
    # of its new times to 10..42, which reaches b's slices of 12..14, 22..24 and 32..34 (one range, not two)
    assert [r.diagnostics.get("history") for r in responses][1:] == [
        "a 1 of 2 slice(s), b 0 of 2 slice(s)", "a 1 of 3 slice(s), b 0 of 3 slice(s)",
        "a 1 of 4 slice(s), b 0 of 4 slice(s)", "a 1 of 5 slice(s), b 3 of 5 slice(s)"]
    assert any("history slices read by the range of k/k, event_time/event_time (widened by the join's interval, "
               "-1 min to 3 min) in the new slices" in (o.detail or "") for o in responses[0].raw.diagnostics.operators)
    for x, y in zip(inc.result.slices, full.result.slices, strict=True):
        assert x.equals(y), (x.to_pylist(), y.to_pylist())
    assert reduce_output(inc.result.rows()) == batch_reference(spark, inner, inputs)
    # a full outer join recomputes the keys a change touches: the changed side's own rows are read within its new
    # range widened by the interval's width (4) both ways, the other side's within the interval's reach. Step 5:
    # a's own rows within 6..46 (its retraction of 10) and for b's change 32..45; b's within 9..45 for a's change
    # and its own within 31..48 and NULL, before and after its retraction (so with its new slice)
    outer = sql("SELECT coalesce(a.event_time, b.event_time) AS event_time, a.k, a.x, b.x AS bx FROM a "
                "FULL OUTER JOIN b ON a.k = b.k AND b.x BETWEEN a.x - 1 AND a.x + 3")
    # b adds a NULL x in step 4 (output, meets nothing) and retracts it in step 5, where its 35 (p) meets a's 32,
    # which met b's 32 before: the rows of b within 31..48 as they were (not only its new 35..44) say so
    b_null = [*b[:12], Event(OP_APPEND, minutes(34), ("q", None)), *b[12:], Event(OP_APPEND, minutes(35), ("p", 35)),
              Event(R, minutes(34), ("q", None))]
    both = [inputs[0], InputSpec("b", DATA, b_null)]
    split_null = [*split[:3], Txn({"a": 3, "b": 4}), Txn({"a": 4, "b": 5})]
    wide = _run(spark, tmp_path / "outer", outer, both, split_null)
    whole = _run(spark, tmp_path / "outer-full", outer, both, split_null, incremental=False)
    assert [r.diagnostics.get("history") for r in wide.result.responses][1:] == [
        "a 1 of 2 slice(s), b 0 of 2 slice(s)", "a 1 of 3 slice(s), b 0 of 3 slice(s)",
        "a 1 of 4 slice(s), b 0 of 4 slice(s)", "a 4 of 5 slice(s), b 4 of 5 slice(s)"]
    for x, y in zip(wide.result.slices, whole.result.slices, strict=True):
        assert x.equals(y), (x.to_pylist(), y.to_pylist())
    assert reduce_output(wide.result.rows()) == batch_reference(spark, outer, both)
    # an interval that holds no difference: nothing meets, and every row, retractions too, is output unmatched
    never = sql("SELECT coalesce(a.event_time, b.event_time) AS event_time, a.k, a.x, b.x AS bx FROM a "
                "FULL OUTER JOIN b ON a.k = b.k AND b.x BETWEEN a.x + 3 AND a.x - 3")
    apart = _run(spark, tmp_path / "never", never, both, split_null)
    alone = _run(spark, tmp_path / "never-full", never, both, split_null, incremental=False)
    for x, y in zip(apart.result.slices, alone.result.slices, strict=True):
        assert x.equals(y), (x.to_pylist(), y.to_pylist())
    # bounded on one side only, or between computed columns: no interval, every slice with the keys is read
    for cond in ("b.event_time >= a.event_time - INTERVAL 1 MINUTE",
                 "abs(b.x) BETWEEN a.x - 1 AND a.x + 3"):
        q = sql(f"SELECT a.event_time, a.k, a.x, b.x AS bx FROM a JOIN b ON a.k = b.k AND {cond}")
        open_ = _run(spark, tmp_path / f"open{len(cond)}", q, inputs, split[:3])
        assert [r.diagnostics.get("history") for r in open_.result.responses][1:] == [
            f"a {n} of {n} slice(s), b {n - 1} of {n} slice(s)" for n in (2, 3)]
        assert reduce_output(open_.result.rows()) == batch_reference(spark, q, [
            InputSpec(i.alias, DATA, i.events[:9]) for i in inputs])


@pytest.mark.parametrize("condition, found", [
    ("b.t BETWEEN a.t - INTERVAL 10 MINUTES AND a.t + INTERVAL 1 HOUR", [("t", "t", -600 * 10**6, 3600 * 10**6)]),
    ("a.t - INTERVAL 1 HOUR <= b.t AND b.t < a.t", [("t", "t", -3600 * 10**6, 0)]),
    ("a.t >= b.t AND a.t <= b.t + INTERVAL 5 SECONDS", [("t", "t", -5 * 10**6, 0)]),  # the left side on the left
    ("b.z BETWEEN a.z AND a.z + INTERVAL 2 DAYS", [("z", "z", 0, 2 * 86_400 * 10**6)]),  # without a time zone
    ("a.i BETWEEN b.n - 2 AND b.n + 3", [("i", "n", -3, 2)]),  # an INT widened to BIGINT
    ("b.d BETWEEN date_sub(a.d, 1) AND date_add(a.d, 3)", [("d", "d", -1, 3)]),
    ("b.n >= a.n AND b.n >= a.n + 1 AND b.n <= a.n + 9 AND b.n < a.n + 5", [("n", "n", 1, 5)]),  # the tightest
    ("b.t BETWEEN a.t AND a.t + INTERVAL 1 HOUR AND b.n BETWEEN a.n AND a.n + 1",
     [("n", "n", 0, 1), ("t", "t", 0, 3600 * 10**6)]),
    ("b.t >= a.t", []),  # one side only
    ("b.n >= a.i AND b.t <= a.t", []),  # one side of each pair
    ("b.t BETWEEN a.t AND a.t + INTERVAL 1 MONTH", []),  # months have no fixed length
    ("b.n BETWEEN abs(a.n) AND a.n + 1", []),  # a computed column
    ("b.n BETWEEN b.i AND b.i + 1", []),  # one input's columns
    ("b.t BETWEEN a.t AND a.t + INTERVAL 1 HOUR OR a.n = 0", []),  # not a conjunct
])
def test_a_joins_intervals_are_read_from_its_condition(spark, condition, found):
    """The intervals between one column per side that a join's condition bounds on both sides, as the right column
    minus the left in the columns' unit; a footer value moved by one stays within its column's type."""
    import datetime

    from pyspark.sql import types as T

    from spark_jobs.transform.catalyst import INPUT_MARKER, Catalyst
    from spark_jobs.transform.incremental.key_ranges import _shift, intervals

    schema = T.StructType([T.StructField("op", T.IntegerType(), True, {INPUT_MARKER: 0}),
                           *[T.StructField(n, t) for n, t in (("t", T.TimestampType()), ("z", T.TimestampNTZType()),
                                                              ("n", T.LongType()), ("i", T.IntegerType()),
                                                              ("d", T.DateType()))]])
    for alias in ("a", "b"):
        spark.createDataFrame(spark.sparkContext.emptyRDD(), schema).createOrReplaceTempView(alias)
    cat = Catalyst(spark)
    join = next(n for n in cat.walk(spark.sql(f"SELECT * FROM a JOIN b ON {condition}")._jdf.queryExecution()
                                    .optimizedPlan()) if cat.cls(n) == "Join")
    got = intervals(cat, join, join.condition().get() if join.condition().isDefined() else None)
    assert sorted((iv.left.column, iv.right.column, iv.low, iv.high) for iv in got) == found
    assert _shift(2**31 - 3, 10, T.IntegerType()) == 2**31 - 1 and _shift(-2**63 + 1, -5, T.TimestampType()) == -2**63
    with pytest.raises(OverflowError):
        _shift(datetime.date(9999, 12, 30), 3, T.DateType())


def test_integer_arithmetic_that_can_wrap_bounds_no_interval(spark):
    """Without ANSI mode, ``a.n + 1`` wraps around at the largest BIGINT: it bounds nothing."""
    from pyspark.sql import types as T

    from spark_jobs.transform.catalyst import INPUT_MARKER, Catalyst
    from spark_jobs.transform.incremental.key_ranges import intervals

    schema = T.StructType([T.StructField("op", T.IntegerType(), True, {INPUT_MARKER: 0}),
                           T.StructField("n", T.LongType())])
    for alias in ("a", "b"):
        spark.createDataFrame(spark.sparkContext.emptyRDD(), schema).createOrReplaceTempView(alias)
    cat = Catalyst(spark)
    query = "SELECT * FROM a JOIN b ON b.n BETWEEN a.n - 1 AND a.n + 1"
    ansi = spark.conf.get("spark.sql.ansi.enabled")
    spark.conf.set("spark.sql.ansi.enabled", "false")
    try:
        plan = spark.sql(query)._jdf.queryExecution().optimizedPlan()
    finally:
        spark.conf.set("spark.sql.ansi.enabled", ansi)
    join = next(n for n in cat.walk(plan) if cat.cls(n) == "Join")
    assert intervals(cat, join, join.condition().get()) == ()
    checked = next(n for n in cat.walk(spark.sql(query)._jdf.queryExecution().optimizedPlan()) if cat.cls(n) == "Join")
    assert len(intervals(cat, checked, checked.condition().get())) == 1


def test_a_repeated_step_runs_warm_generated_code(spark, tmp_path):
    """Past a small step, a step of the shape of the previous one compiles no new class of generated code: the codegen
    cache holds a step's classes, and no per-step value (offset bounds, next offset, system time) is written into the
    code. New code would be compiled at every step and run the step's rows cold. A small step compiles next to
    nothing (sizing.INTERPRETED)."""
    import random

    events = [Event(OP_APPEND, minutes(i), (f"k{i % 4}", i)) for i in range(16)]
    compiled = spark._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
    # a constant of its own: code no earlier test (or run of this one in the same JVM) compiled
    transform = sql(f"SELECT k, count(*) AS n, sum(x + {random.randrange(10**9)}) AS s, min(x) AS lo, "
                    "max(event_time) AS event_time FROM a GROUP BY k")

    def compilations(root, small_step_rows: int) -> list[int]:
        counts: list[int] = []
        coord = _run(spark, root, transform, [InputSpec("a", DATA, events)], [Txn({"a": 4})] * 4,
                     small_step_rows=small_step_rows, before_step=lambda: counts.append(compiled.getCount()))
        counts.append(compiled.getCount())
        assert [r.diagnostics["path"] for r in coord.result.responses] == ["rebuild"] + ["incremental"] * 3
        assert reduce_output(coord.result.rows()) == batch_reference(spark, coord.transform, coord.inputs)
        return [b - a for a, b in zip(counts, counts[1:])]

    small = compilations(tmp_path / "small", SMALL_STEP_ROWS)
    compiled_steps = compilations(tmp_path / "compiled", 0)
    assert compiled_steps[1] > 0 and compiled_steps[2:] == [0, 0], compiled_steps
    # interpreted, the same query's small steps compile next to nothing (58 classes against 3 when this was written)
    assert small[2:] == [0, 0] and sum(small) * 10 < sum(compiled_steps), (small, compiled_steps)


def test_a_driver_plans_a_stateful_query_once(spark, tmp_path, monkeypatch):
    """Later steps of the same query, input schemas and settings take the plan the driver made at the first step
    (spark_jobs.transform.plan_cache) instead of analysing the query twice again, and write the same slices as steps
    planned afresh; a changed setting is planned again."""
    from spark_jobs.transform import plan_cache
    from spark_jobs.transform.incremental import planner as plan_module

    planned: list[int] = []
    real = plan_module.plan_query
    monkeypatch.setattr(plan_module, "plan_query", lambda *a, **k: planned.append(1) or real(*a, **k))
    transform, _ = FAMILIES["aggregates"]
    split = [Txn({"a": 3, "b": 1}), Txn({"a": 2}), Txn({"a": 3, "b": 1}), Txn({"a": 1})]
    plan_cache.clear()
    warm = MiniCoordinator(spark, tmp_path / "warm", transform, _inputs(FIXED_A, FIXED_B))
    for t in split:
        warm.step(t)
    assert len(planned) == 1
    cold = MiniCoordinator(spark, tmp_path / "cold", transform, _inputs(FIXED_A, FIXED_B))
    for t in split:
        plan_cache.clear()
        cold.step(t)
    assert len(planned) == 1 + len(split)
    assert [r.diagnostics["path"] for r in warm.result.responses] == ["rebuild"] + ["incremental"] * 3
    for a, b in zip(warm.result.slices, cold.result.slices, strict=True):
        assert a.equals(b), (a.to_pylist(), b.to_pylist())
    assert reduce_output(warm.result.rows()) == batch_reference(spark, transform, warm.inputs)
    spark.conf.set("spark.odf.incremental.enabled", "false")
    try:
        warm.step(Txn({"a": 0, "b": 0}))
    finally:
        spark.conf.unset("spark.odf.incremental.enabled")
    assert len(planned) == 2 + len(split)
    assert warm.result.responses[-1].diagnostics["path"] in ("full", None)



def test_a_driver_inspects_a_stateless_query_once_and_gates_it_at_every_step(spark, tmp_path, monkeypatch):
    """Issue #64: later steps of a row-wise query reuse the first step's inspection of its plan (purity,
    classification, layout) but still run the query through the SQL gate, and write the slices a driver inspecting
    every step writes."""
    from spark_jobs import sql_gate
    from spark_jobs.transform import plan_cache
    from spark_jobs.transform import planning

    inspected: list[int] = []
    gated: list[int] = []
    real_inspect, real_gate = planning.inspect_plan, sql_gate.gated_query
    monkeypatch.setattr(planning, "inspect_plan", lambda *a, **k: inspected.append(1) or real_inspect(*a, **k))
    monkeypatch.setattr(sql_gate, "gated_query", lambda *a, **k: gated.append(1) or real_gate(*a, **k))
    transform = sql("SELECT event_time, k, x * 2 AS x2 FROM a WHERE x > 0")
    split = [Txn({"a": 3}), Txn({"a": 3}), Txn({"a": 3})]
    plan_cache.clear()
    warm = MiniCoordinator(spark, tmp_path / "warm", transform, [InputSpec("a", DATA, FIXED_A)])
    for t in split:
        warm.step(t)
    assert (len(inspected), len(gated)) == (1, len(split))
    cold = MiniCoordinator(spark, tmp_path / "cold", transform, [InputSpec("a", DATA, FIXED_A)])
    for t in split:
        plan_cache.clear()
        cold.step(t)
    assert (len(inspected), len(gated)) == (1 + len(split), 2 * len(split))
    assert [r.diagnostics["planClass"] for r in warm.result.responses] == ["stateless"] * len(split)
    for a, b in zip(warm.result.slices, cold.result.slices, strict=True):
        assert a.equals(b), (a.to_pylist(), b.to_pylist())
    assert reduce_output(warm.result.rows()) == batch_reference(spark, transform, warm.inputs)

def test_a_small_stateless_step_runs_interpreted_and_writes_the_same_bytes(spark, tmp_path):
    """Issue #64: a row-wise query's step over at most the small step's new rows runs without whole-stage code,
    adaptive execution or more than one shuffle partition (sizing.size_stateless_step); past it, with the request's
    own settings. The slices are the same bytes either way, corrections included."""
    transform = sql("SELECT event_time, k, x * 2 AS x2 FROM a WHERE x > 0")
    split = [Txn({"a": 3}), Txn({"a": 4}), Txn({"a": 3})]
    small = _run(spark, tmp_path / "small", transform, [InputSpec("a", DATA, FIXED_A)], split)
    big = _run(spark, tmp_path / "big", transform, [InputSpec("a", DATA, FIXED_A)], split, small_step_rows=0)
    assert [r.diagnostics["planClass"] for r in small.result.responses] == ["stateless"] * len(split)
    assert [r.diagnostics.get("sizing") for r in small.result.responses] == [
        f"1 shuffle partition(s) for up to {t.rows['a']} new row(s), adaptive execution and code generation off"
        for t in split]
    assert [r.diagnostics.get("sizing") for r in big.result.responses] == [None] * len(split)
    assert any(r["op"] in (OP_CORRECT_FROM, OP_CORRECT_TO, R) for r in small.result.rows())  # not appends only
    for a, b in zip(small.result.slices, big.result.slices, strict=True):
        assert a.equals(b), (a.to_pylist(), b.to_pylist())
    assert reduce_output(small.result.rows()) == batch_reference(spark, transform, small.inputs)


def test_a_small_steps_aggregation_reads_its_union_in_one_task(spark, tmp_path, monkeypatch):
    """Issue #64: in a small step (one shuffle partition) the union of a GROUP BY's old states and changed rows is
    read by one task (Step.narrow) and its aggregation has no shuffle; past a small step it shuffles as before. The
    slices are the same bytes (test_slices_are_the_bytes_of_the_full_path compares the two)."""
    from spark_jobs.transform.incremental import aggregate

    plans: list[str] = []
    real = aggregate.update

    def spy(spec, old, rows, narrow=lambda df: df):
        out = real(spec, old, rows, narrow)
        plans.append(out._jdf.queryExecution().executedPlan().toString())
        return out

    monkeypatch.setattr(aggregate, "update", spy)
    transform, _ = FAMILIES["aggregates"]
    split = [Txn({"a": 3, "b": 0}), Txn({"a": 2}), Txn({"a": 3})]
    small = _run(spark, tmp_path / "small", transform, _inputs(FIXED_A, FIXED_B), split)
    narrowed, plans[:] = list(plans), []
    parts = _run(spark, tmp_path / "parts", transform, _inputs(FIXED_A, FIXED_B), split, small_step_rows=0)
    assert len(narrowed) == len(plans) == len(split) - 1  # the incremental steps (the first is a rebuild)
    assert all("Exchange" not in p and "Coalesce 1" in p for p in narrowed), narrowed
    assert all("Exchange hashpartitioning" in p for p in plans), plans
    for a, b in zip(small.result.slices, parts.result.slices, strict=True):
        assert a.equals(b), (a.to_pylist(), b.to_pylist())


@pytest.mark.parametrize("transform,state_rows", [
    (FAMILIES["tumbling"][0], [2, 1, 1, 2]),  # 30-minute windows by k
    # the same groups, each with its one value's count
    (sql("SELECT window.start AS event_time, k, count(DISTINCT x) AS n FROM a "
         "GROUP BY window(event_time, '30 minutes'), k"), [4, 2, 2, 4]),
], ids=["groups", "value-counts"])
def test_windows_closed_by_the_watermark_leave_the_state(spark, tmp_path, transform, state_rows):
    """The state keeps the open event-time windows only: a window that ends at or before the inputs' watermark is
    dropped from the checkpoint, with its count DISTINCT's value counts. A retraction that reaches a dropped window
    anyway recomputes that group from the history, so the output stays the batch result."""
    events = [Event(OP_APPEND, minutes(1), ("p", 1)), Event(OP_APPEND, minutes(5), ("q", 2)),
              Event(OP_APPEND, minutes(35), ("p", 3)), Event(OP_APPEND, minutes(65), ("p", 4)),
              Event(R, minutes(5), ("q", 2)), Event(OP_APPEND, minutes(66), ("q", 5))]
    coord = _run(spark, tmp_path, transform, [InputSpec("a", DATA, events)],
                 [Txn({"a": 2}), Txn({"a": 1}), Txn({"a": 1}), Txn({"a": 2})])
    diags = [r.diagnostics for r in coord.result.responses]
    assert [d["path"] for d in diags] == ["rebuild", "incremental", "incremental", "incremental"]
    # watermark 0:05 keeps both groups of [0:00, 0:30); 0:35 closes it; 1:05 closes [0:30, 1:00); the last step
    # revives q's closed window (its row is retracted) and keeps p's and q's groups of [1:00, 1:30)
    assert [d["stateRows"] for d in diags] == state_rows, [d["stateRows"] for d in diags]
    last = coord.result.slices[-1].to_pylist()
    assert {(r["op"], r["k"], r["n"]) for r in last} == {(R, "q", 1), (0, "q", 1)}, last
    assert reduce_output(coord.result.rows()) == batch_reference(spark, transform, coord.inputs)


def test_a_full_path_checkpoint_is_rebuilt_once_then_updated(spark, tmp_path):
    """Switching the path on for a dataset whose checkpoint the full path wrote: one rebuild (said in a warning),
    then incremental steps; the reduced output is still the batch result."""
    transform, _ = FAMILIES["aggregates"]
    inputs = _inputs(FIXED_A, FIXED_B)
    spark.conf.set("spark.odf.incremental.enabled", "false")
    try:
        coord = MiniCoordinator(spark, tmp_path, transform, inputs)
        coord.step(Txn({"a": 4}))
    finally:
        spark.conf.unset("spark.odf.incremental.enabled")
    coord.step(Txn({"a": 3}))
    coord.step(Txn({"a": 2}))
    diags = [r.diagnostics for r in coord.result.responses]
    assert [d["path"] for d in diags] == ["full", "rebuild", "incremental"]
    assert any("full path" in w and "rebuilt" in w for w in diags[1]["warnings"]), diags[1]["warnings"]
    assert diags[2]["stateRows"] > 0
    assert reduce_output(coord.result.rows()) == batch_reference(spark, transform, inputs)


@pytest.mark.parametrize("version", [2, 4])
def test_an_older_checkpoint_is_rebuilt_once_with_a_warning(spark, tmp_path, version):
    """data/checkpoint-v<version>-aggregates.parquet was written by an earlier engine for the "aggregates" family,
    FIXED_A/FIXED_B and a first transaction of 4 + 1 rows: version 2 kept the output state as a table, version 4
    kept sums of integers as DECIMAL(38) (this engine keeps them as longs). A dataset whose checkpoint it is continues
    with one rebuild that says why, then incremental steps, never wrong rows."""
    import shutil

    transform, _ = FAMILIES["aggregates"]
    inputs = _inputs(FIXED_A, FIXED_B)
    coord = MiniCoordinator(spark, tmp_path, transform, inputs)
    coord.step(Txn({"a": 4, "b": 1}))
    assert coord.checkpoint is not None
    shutil.copyfile(os.path.join(os.path.dirname(__file__), "data", f"checkpoint-v{version}-aggregates.parquet"),
                    coord.checkpoint)
    coord.step(Txn({"a": 3}))
    coord.step(Txn({"a": 2, "b": 1}))
    diags = [r.diagnostics for r in coord.result.responses]
    assert [d["path"] for d in diags] == ["rebuild", "rebuild", "incremental"]
    assert any(f"state layout of version {version}" in w and "rebuilt" in w for w in diags[1]["warnings"]), diags[1]
    assert reduce_output(coord.result.rows()) == batch_reference(spark, transform, inputs)


@pytest.mark.parametrize("family, fixture, why", [
    ("count_distinct", "checkpoint-v5-count-distinct-by-key.parquet", "no state table aggregate:root "),
    # since 11-29 the lag's running state also names its layout (without the tie-breakers): that says it first
    ("running_lag", "checkpoint-v5-lag-by-key.parquet", "the layout of an operator's state changed"),
    ("top_per_key", "checkpoint-v5-top-by-key.parquet", "no state table top:root.0 "),
])
def test_a_checkpoint_without_an_operators_state_is_rebuilt_once(spark, tmp_path, family, fixture, why):
    """Checkpoints written by engines before an operator kept a state (they recomputed its touched keys from the
    history and kept no table): data/checkpoint-v5-count-distinct-by-key.parquet, before count DISTINCT kept a count
    per value, data/checkpoint-v5-lag-by-key.parquet, before lag kept its partitions' last rows, and
    data/checkpoint-v5-top-by-key.parquet, before a filter on row_number() kept each partition's first rows; each for
    its family, FIXED_A/FIXED_B and a first transaction of 4 + 1 rows. A dataset whose checkpoint it is continues with
    one rebuild that names the missing table (or the changed layout), then incremental steps."""
    import shutil

    transform, _ = FAMILIES[family]
    inputs = _inputs(FIXED_A, FIXED_B)
    coord = MiniCoordinator(spark, tmp_path, transform, inputs)
    coord.step(Txn({"a": 4, "b": 1}))
    assert coord.checkpoint is not None
    shutil.copyfile(os.path.join(os.path.dirname(__file__), "data", fixture), coord.checkpoint)
    coord.step(Txn({"a": 3}))
    coord.step(Txn({"a": 2, "b": 1}))
    diags = [r.diagnostics for r in coord.result.responses]
    assert [d["path"] for d in diags] == ["rebuild", "rebuild", "incremental"]
    warnings = diags[1]["warnings"]
    assert any(why in w and "rebuilt" in w for w in warnings), warnings
    assert diags[2]["stateRows"] > 0
    assert reduce_output(coord.result.rows()) == batch_reference(spark, transform, inputs)


@pytest.mark.parametrize("incremental", [True, False])
def test_a_sum_beyond_a_long_fails_the_step_as_sparks_own_sum_does(spark, tmp_path, incremental):
    """A sum of integers is kept as a long: a group whose total leaves a long's range fails the step with Spark's
    overflow error, on either path, and nothing is written; never a wrapped or truncated total."""
    big = 2 ** 62
    a = [Event(OP_APPEND, minutes(1), ("p", big)), Event(OP_APPEND, minutes(2), ("q", 1)),
         Event(OP_APPEND, minutes(3), ("p", big))]
    transform = sql("SELECT k, sum(x) AS s, max(event_time) AS event_time FROM a GROUP BY k")
    coord = _run(spark, tmp_path, transform, _inputs(a, []), [Txn({"a": 2})], incremental=incremental)
    spark.conf.set("spark.odf.incremental.enabled", str(incremental).lower())
    try:
        doc = coord.request({"a": 1})
        resp = coord.execute(doc)
    finally:
        spark.conf.unset("spark.odf.incremental.enabled")
    assert resp.kind != "Success" and "overflow" in resp.message.lower(), (resp.kind, resp.message)
    assert not os.path.exists(doc["content"]["newDataPath"])
    assert not os.path.exists(doc["content"]["newCheckpointPath"])
    assert coord.result.responses[0].diagnostics["path"] == ("rebuild" if incremental else "full")


def test_a_changed_query_rebuilds_the_state(spark, tmp_path):
    first = sql("SELECT k, count(*) AS n, max(event_time) AS event_time FROM a GROUP BY k")
    second = sql("SELECT k, sum(x) AS n, max(event_time) AS event_time FROM a GROUP BY k")
    inputs = _inputs(FIXED_A, FIXED_B)
    coord = MiniCoordinator(spark, tmp_path, first, inputs)
    coord.step(Txn({"a": 4}))
    coord.transform = second
    coord.step(Txn({"a": 5}))
    diag = coord.result.responses[1].diagnostics
    assert diag["path"] == "rebuild" and any("the query changed" in w for w in diag["warnings"])
    assert reduce_output(coord.result.rows()) == batch_reference(spark, second, inputs)


@pytest.mark.parametrize("query, operator, why", [
    ("SELECT a.event_time, a.k, b.x FROM a FULL JOIN b ON a.x < b.x", "Join", "without equality keys"),
    ("SELECT event_time, k, sum(x) OVER (ORDER BY event_time) AS run FROM a", "Window", "without PARTITION BY"),
    ("SELECT stddev(DISTINCT x) AS n, max(event_time) AS event_time FROM a", "Aggregate",
     "no incremental form for a DISTINCT StddevSamp"),
    # (without DISTINCT, a floating-point sum is exact and keeps a state: tests/spark_jobs/test_transform_exact_sums.py)
    ("SELECT sum(DISTINCT CAST(x AS DOUBLE)) AS s, max(event_time) AS event_time FROM a", "Aggregate",
     "floating-point"),
    ("SELECT k, sum(DISTINCT CAST(x AS DOUBLE)) AS s, max(event_time) AS event_time FROM a GROUP BY k", "Aggregate",
     "sum(DISTINCT CAST(a.x AS DOUBLE)) (exact: a sum or an average of DECIMALs, or one of floating-point values in a "
     "GROUP BY without DISTINCT): its value depends on the order"),
    ("SELECT k, stddev(x) AS sd, max(event_time) AS event_time FROM a GROUP BY k", "Aggregate",
     "stddev(CAST(a.x AS DOUBLE))"),
    ("SELECT event_time, k, x, sum(CAST(x AS DOUBLE)) OVER (PARTITION BY k) AS s FROM a", "Window",
     "a partition recomputed from the history could differ"),
    ("SELECT event_time, k FROM (SELECT * FROM a ORDER BY x LIMIT 3)", "GlobalLimit", "LIMIT"),
    ("SELECT k, count(*) AS n, max(event_time) AS event_time FROM a WHERE offset > 2 GROUP BY k", "Filter",
     "'offset' column of a reduced input"),
])
def test_queries_outside_the_fragment_take_the_full_path_and_say_why(spark, tmp_path, query, operator, why):
    inputs = _inputs(FIXED_A, FIXED_B)
    coord = MiniCoordinator(spark, tmp_path, sql(query), inputs)
    coord.step(Txn({"a": 4, "b": 2}))
    coord.step(Txn({"a": 5}))
    diag = coord.result.responses[1].diagnostics
    assert diag["path"] == "full"
    assert why in diag["reason"], diag["reason"]
    assert (operator, "full") in diag["operators"], diag["operators"]
    assert reduce_output(coord.result.rows()) == batch_reference(spark, sql(query), inputs)


def test_validate_query_explains_each_operator(spark, tmp_path):
    schema = tmp_path / "a.parquet"
    pq.write_table(_inputs([], [])[0].arrow_schema().empty_table(), schema)
    vocab = {"offsetColumn": "offset", "operationTypeColumn": "op", "systemTimeColumn": "system_time",
             "eventTimeColumn": "event_time"}

    def explain(query: str) -> ValidateQueryResponseSuccess:
        req = from_data(ValidateQueryRequest, {
            "transform": sql(query), "vocab": vocab,
            "inputs": [{"queryAlias": "a", "vocab": vocab, "schemaFile": str(schema)}]})
        assert isinstance(req.inputs[0], ValidateInput)
        resp = tr.validate_query(spark, req)
        assert isinstance(resp, ValidateQueryResponseSuccess), resp
        return resp

    inc = explain("SELECT k, count(*) AS n, max(event_time) AS event_time FROM a WHERE x > 0 GROUP BY k")
    assert inc.path == "incremental"
    assert [(o.depth, o.operator, o.path) for o in inc.operators] == [
        (0, "Aggregate", "incremental"), (1, "Project", "row-wise"), (2, "Filter", "row-wise")]
    assert "count(1)" in inc.operators[0].detail and "max(a.event_time)" in inc.operators[0].detail
    tumbling = explain("SELECT window.start AS event_time, k, count(*) AS n FROM a "
                       "GROUP BY window(event_time, '30 minutes'), k")
    assert "windows closed by the watermark leave the state" in tumbling.operators[0].detail, tumbling.operators
    assert "leave the state" not in inc.operators[0].detail
    distinct = explain("SELECT max(et) AS event_time, count(DISTINCT et) AS nt FROM "
                       "(SELECT k, count(DISTINCT x, k) AS nd, max(event_time) AS et FROM a GROUP BY k) GROUP BY nd")
    aggregates = [o for o in distinct.operators if o.operator == "Aggregate"]
    assert len(aggregates) == 2 and all(o.path == "incremental" and "count per group and distinct value" in o.detail
                                        for o in aggregates), [o.detail for o in distinct.operators]
    sums = explain("SELECT k, sum(DISTINCT x) AS sd, avg(DISTINCT x) AS ad, max(event_time) AS event_time FROM a "
                   "GROUP BY k")
    assert "count per group and distinct value" in sums.operators[0].detail, sums.operators
    # two DISTINCT aggregates over different columns: Spark's rewrite into two aggregates over an Expand, each with a
    # state per group (the outer one's FILTER clauses and first() are kept)
    two = explain("SELECT k, count(DISTINCT x) AS nx, count(DISTINCT event_time) AS nt, max(event_time) AS "
                  "event_time FROM a GROUP BY k")
    assert [(o.operator, o.path) for o in two.operators][:4] == [
        ("Aggregate", "incremental"), ("Aggregate", "incremental"), ("Expand", "row-wise"), ("Project", "row-wise")]
    outer, inner = two.operators[0].detail, two.operators[1].detail
    assert outer.startswith("state per group (1 key(s)): count(") and "FILTER (WHERE (gid = 1))" in outer, outer
    assert "first(" in outer and "first()/last() group is recomputed when" in outer, outer
    assert inner.startswith("state per group (4 key(s)): max("), inner
    filtered = explain("SELECT k, count(*) FILTER (WHERE x > 0) AS n, first(x) AS fx, max(event_time) AS event_time "
                       "FROM a GROUP BY k")
    assert filtered.operators[0].detail.startswith(
        "state per group (1 key(s)): count(1) FILTER (WHERE (a.x > 0L)), first(a.x)"), filtered.operators
    respects = explain("SELECT k, first(x) FILTER (WHERE x > 0) AS fx, max(event_time) AS event_time FROM a "
                       "GROUP BY k")
    # by key its value would be Spark's pick by the order it reads the rows in: the full path
    assert respects.operators[0].path == "full", respects.operators
    assert "first(a.x) FILTER (WHERE (a.x > 0L)): its value depends on the order Spark reads the rows in" in \
        respects.operators[0].detail, respects.operators
    latest = explain("SELECT k, max_by(x, event_time) AS last_x, max(event_time) AS event_time FROM a GROUP BY k")
    assert latest.operators[0].path == "incremental", latest.operators
    assert "max_by(a.x, a.event_time)" in latest.operators[0].detail and "(a tie)" in latest.operators[0].detail
    by_text = explain("SELECT k, max_by(x, CAST(x AS STRING) COLLATE UTF8_LCASE) AS top, max(event_time) AS "
                      "event_time FROM a GROUP BY k")
    # no state (ties under the collation cannot be told apart), and by key Spark's pick among them: the full path
    assert by_text.operators[0].path == "full", by_text.operators
    assert "max_by(a.x, collate(CAST(a.x AS STRING), UTF8_LCASE)): its value depends on the order" in \
        by_text.operators[0].detail, by_text.operators
    window = explain("SELECT event_time, k, rank() OVER (PARTITION BY k ORDER BY x) AS r FROM a")
    assert window.path == "incremental" and window.operators[1].operator == "Window", window.operators
    assert "running state per partition (1 key(s)): RANK()" in window.operators[1].detail
    ranked = "SELECT event_time, k, x FROM (SELECT *, {} OVER (PARTITION BY k ORDER BY {}) AS r FROM a) WHERE {}"
    latest = explain(ranked.format("row_number()", "event_time DESC", "r = 1"))
    assert [(o.operator, o.path) for o in latest.operators][:2] == [("Project", "row-wise"), ("Window", "incremental")]
    assert "row_number() limited to 1; each partition keeps its first 1 row(s)" in latest.operators[1].detail
    dense = explain(ranked.format("dense_rank()", "x", "r <= 3 AND x > 0"))
    assert "its first 3 ORDER BY value(s)" in dense.operators[1].detail, dense.operators
    wide = explain(ranked.format("row_number()", "event_time DESC", "r <= 1001"))
    assert [(o.operator, o.path) for o in wide.operators][1:3] == [("Filter", "row-wise"), ("Window", "incremental")]
    assert "the filter keeps rows ranked up to 1001: only 1 to 1000" in wide.operators[1].detail, wide.operators
    assert "partitions the new rows touch are recomputed" in wide.operators[2].detail, wide.operators
    lag = explain("SELECT event_time, k, lag(x) OVER (PARTITION BY k ORDER BY event_time) AS prev FROM a")
    assert "running state per partition (1 key(s)) and its last 1 row(s): lag(a.x, 1, NULL)" in \
        lag.operators[1].detail, lag.operators
    lead = explain("SELECT event_time, k, lead(x, 2) OVER w AS next, lag(x) OVER w AS prev FROM a "
                   "WINDOW w AS (PARTITION BY k ORDER BY event_time)")
    assert "and its last 3 row(s) (with each row's values as output): lead(a.x, 2, NULL), lag(a.x, 1, NULL)" in \
        lead.operators[1].detail, lead.operators
    moving = explain("SELECT event_time, k, avg(x) OVER (PARTITION BY k ORDER BY event_time ROWS BETWEEN 6 PRECEDING "
                     "AND CURRENT ROW) AS week, sum(x) OVER (PARTITION BY k ORDER BY event_time ROWS BETWEEN 1 "
                     "PRECEDING AND 2 FOLLOWING) AS near FROM a")
    # the average of integers is their exact sum over their count (a Project above the window divides them)
    assert [o.operator for o in moving.operators[1:3]] == ["Project", "Window"], moving.operators
    assert "running state per partition (1 key(s)) and its last 8 row(s) (with each row's values as output): " \
           "sum(CAST(a.x AS DECIMAL(20,0))), count(CAST(a.x AS DECIMAL(20,0))), sum(a.x)" in \
           moving.operators[2].detail, moving.operators
    running_avg = explain("SELECT event_time, k, avg(x) OVER (PARTITION BY k ORDER BY event_time) AS a FROM a")
    assert running_avg.operators[2].detail.startswith(
        "running state per partition (1 key(s)): sum(CAST(a.x AS DECIMAL(20,0))), count(CAST(a.x AS DECIMAL(20,0)))"
    ), running_avg.operators
    fill = explain("SELECT event_time, k, last(x) IGNORE NULLS OVER w AS filled, first(x) OVER w AS x0, "
                   "lag(x) IGNORE NULLS OVER w AS known FROM a WINDOW w AS (PARTITION BY k ORDER BY event_time)")
    # first/last over a RANGE frame pick among tied rows; the lag takes tie-breakers over them in a window of its
    # own, and the two windows keep one state
    fill = [o.detail for o in fill.operators if o.operator == "Window"]
    assert [d.split(":")[1].split(";")[0] for d in fill] == [" last(a.x) IGNORE NULLS, first(a.x), lag(a.x, 1, NULL) "
                                                              "IGNORE NULLS"], fill
    assert fill[0].startswith("running state per partition (1 key(s))") and BROKEN in fill[0], fill
    assert fill[0].endswith(PAIRED), fill
    extreme = explain("SELECT event_time, k, lag(x) OVER w AS prev, max(x) OVER w AS hi FROM a "
                      "WINDOW w AS (PARTITION BY k ORDER BY event_time)")
    extreme = [o.detail for o in extreme.operators if o.operator == "Window"]  # max: a RANGE frame, its own window
    assert len(extreme) == 1 and "and its last 1 row(s): max(a.x), lag(a.x, 1, NULL);" in extreme[0], extreme
    ahead = explain("SELECT event_time, k, lead(x) OVER w AS next, sum(x) OVER w AS total, count(*) OVER w AS n, "
                    "last(x) IGNORE NULLS OVER w AS filled, max(x) OVER (PARTITION BY k ORDER BY event_time ROWS "
                    "BETWEEN 2 PRECEDING AND 1 FOLLOWING) AS near FROM a WINDOW w AS (PARTITION BY k ORDER BY "
                    "event_time)")
    ahead = [o.detail for o in ahead.operators if o.operator == "Window"]
    assert len(ahead) == 1 and "and its last 3 row(s) (with each row's values as output): sum(a.x), count(1), " \
        "last(a.x) IGNORE NULLS, lead(a.x, 1, NULL), max(a.x);" in ahead[0], ahead
    keyed = explain("SELECT event_time, k, sum(x) OVER (PARTITION BY k ORDER BY event_time ROWS BETWEEN 1 PRECEDING "
                    "AND UNBOUNDED FOLLOWING) AS rest FROM a")
    assert keyed.path == "incremental" and keyed.operators[1].operator == "Window", keyed.operators
    assert "partitions the new rows touch are recomputed" in keyed.operators[1].detail
    assert "only ROWS frames within 100 rows of the current row keep" in keyed.operators[1].detail, keyed.operators
    # a ROWS frame tells rows tied in the ORDER BY apart: every evaluation orders them by their other columns
    # (docs/transforms.md); rank() and a RANGE frame of an integer sum give tied rows one value
    assert BROKEN in keyed.operators[1].detail, keyed.operators
    newest = explain("SELECT event_time, k, row_number() OVER w AS rn, rank() OVER w AS r FROM a "
                     "WINDOW w AS (PARTITION BY k ORDER BY event_time DESC)")
    newest = next(o.detail for o in newest.operators if o.operator == "Window")
    assert newest.endswith(BROKEN), newest
    # a running rank counts the ORDER BY values as they are: its row_number takes tie-breakers in a window of its own
    # (one state for both)
    ranked_rows = explain("SELECT event_time, k, x, row_number() OVER w AS rn, rank() OVER w AS r FROM a "
                          "WINDOW w AS (PARTITION BY k ORDER BY event_time)")
    ranked_rows = [o.detail for o in ranked_rows.operators if o.operator == "Window"]
    assert [d.split(":")[1].split(";")[0] for d in ranked_rows] == [" RANK(), row_number()"], ranked_rows
    assert ranked_rows[0].startswith("running state per partition") and ranked_rows[0].endswith(PAIRED), ranked_rows
    assert not any("cannot take tie-breakers" in d for d in ranked_rows), ranked_rows
    for query in ("SELECT event_time, k, rank() OVER w AS r, sum(x) OVER w AS s, count(*) OVER (PARTITION BY k ORDER "
                  "BY event_time ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS n FROM a "
                  "WINDOW w AS (PARTITION BY k ORDER BY event_time DESC)",
                  "SELECT event_time, k, count(*) OVER (PARTITION BY k) AS n FROM a"):
        windows = [o.detail for o in explain(query).operators if o.operator == "Window"]
        assert windows and all("partitions the new rows touch are recomputed" in d and "tied" not in d
                               for d in windows), windows
    for query, why in (("lag(x, 101) IGNORE NULLS OVER (PARTITION BY k ORDER BY event_time)",
                        "only lags of 1 to 100 rows"),
                       ("first(x) IGNORE NULLS OVER (PARTITION BY k ORDER BY event_time ROWS BETWEEN 1 PRECEDING AND "
                        "UNBOUNDED FOLLOWING)", "first() to UNBOUNDED FOLLOWING keeps a tail only from the current"),
                       ("last(x) IGNORE NULLS OVER (PARTITION BY k ORDER BY event_time ROWS BETWEEN CURRENT ROW AND "
                        "UNBOUNDED FOLLOWING)", "only ROWS frames within 100 rows of the current row keep"),
                       ("lag(x, 101) OVER (PARTITION BY k ORDER BY event_time)", "only lags of 1 to 100 rows"),
                       ("lead(x) OVER (PARTITION BY k ORDER BY event_time DESC)", "only ascending orders"),
                       ("sum(x) OVER (PARTITION BY k ORDER BY x RANGE BETWEEN 1 PRECEDING AND UNBOUNDED "
                        "FOLLOWING)", "a RANGE frame to UNBOUNDED can reach any number of rows")):
        other = explain(f"SELECT event_time, k, {query} AS y FROM a")
        window = [o for o in other.operators if o.operator == "Window"]
        assert window and why in window[0].detail and "no running state" in window[0].detail, other.operators
    join = explain("SELECT a.event_time, a.k, b.x FROM a LEFT JOIN a AS b ON a.k = b.k")
    assert [o.operator for o in join.operators if o.path == "incremental"] == ["Join"], join.operators
    assert "LeftOuter join on 1 key(s): new left rows are joined" in join.operators[1].detail
    full = explain("SELECT event_time, k, rank() OVER (ORDER BY x) AS r FROM a")
    assert full.path == "full" and full.operators[0].operator == "Window"
    assert explain("SELECT event_time, k FROM a").path is None  # stateless: nothing to explain per operator


def test_a_reversed_ordering_turns_the_order_around_exactly(spark):
    """max_by/min_by tell ties apart with the ordering turned around: for every ordering type they accept, sorting
    by the turned value is the exact reverse of sorting by the value, extremes of the type included."""
    from datetime import date, datetime, timezone
    from decimal import Decimal

    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from spark_jobs.transform.incremental.aggregate import _REVERSIBLE, _reversed, reversible

    cases = {
        T.ByteType(): [-128, -1, 0, 1, 127],
        T.ShortType(): [-32768, -5, 0, 32767],
        T.IntegerType(): [-2**31, -1, 0, 7, 2**31 - 1],
        T.LongType(): [-2**63, -2**62, -1, 0, 1, 2**63 - 1],
        T.DecimalType(34, 2): [Decimal("-" + "9" * 32 + ".99"), Decimal("-" + "9" * 32 + ".98"), Decimal("-0.01"),
                               Decimal("0"), Decimal("9" * 32 + ".98"), Decimal("9" * 32 + ".99")],
        T.DateType(): [date(1, 1, 1), date(1969, 12, 31), date(1970, 1, 1), date(9999, 12, 31)],
        T.TimestampType(): [datetime(1000, 1, 1, tzinfo=timezone.utc), datetime(1969, 12, 31, 23, 59, 59, 999999,
                                                                              tzinfo=timezone.utc),
                            datetime(1970, 1, 1, tzinfo=timezone.utc), datetime(9999, 12, 31, tzinfo=timezone.utc)],
        T.TimestampNTZType(): [datetime(1000, 1, 1), datetime(2024, 3, 31, 2, 30), datetime(9999, 12, 31)],
        T.FloatType(): [float("-inf"), -3.4e38, -1.0, -1e-45, 0.0, 1e-45, 2.5, 3.4e38, float("inf"), float("nan")],
        T.DoubleType(): [float("-inf"), -1.7976931348623157e308, -1.5, -5e-324, 0.0, 5e-324, 1.7976931348623157e308,
                         float("inf"), float("nan")],
        T.StringType(): ["", "\x00", "\x00a", "a", "a\x00", "ab", "b", "z", "\u00e9", "\u00e9\u00e9", "\u20ac",
                         "\U0001f600", "\U0010ffff"],  # bytes 00, 61, C3 A9, E2 82 AC, F0 9F 98 80, F4 8F BF BF
    }
    assert {type(t) for t in cases} == set(_REVERSIBLE) and all(reversible(t) for t in cases)
    assert not reversible(T.DecimalType(35, 2))  # negated in 34 digits: 10^34 + 1 would become 10^34
    assert not reversible(T.StringType("UTF8_LCASE"))  # ordered by its collation, not its bytes
    for t, values in cases.items():
        df = spark.createDataFrame([(v,) for v in values], T.StructType([T.StructField("o", t)]))
        turned = df.select(F.col("o"), _reversed(F.col("o"), t).alias("r"))
        by_value = [repr(r["o"]) for r in turned.orderBy("o").collect()]  # repr: NaN equals NaN
        by_turned = [repr(r["o"]) for r in turned.orderBy(F.col("r").desc()).collect()]
        assert len(by_value) == len(values) and by_turned == by_value, (t, by_value, by_turned)
        assert turned.select("r").distinct().count() == len(values), t  # no two values turn into one
    for t in (T.FloatType(), T.DoubleType()):  # equal in Spark's order, so equal turned around
        df = spark.createDataFrame([(-0.0,), (0.0,)], T.StructType([T.StructField("o", t)]))
        assert df.select(_reversed(F.col("o"), t).alias("r")).distinct().count() == 1, t
