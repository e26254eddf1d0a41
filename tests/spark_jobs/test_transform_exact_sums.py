"""Exact sums of floating-point values (spark_jobs.transform.incremental.exact_sums): a DOUBLE or FLOAT ``sum``/``avg``
in a GROUP BY is the exact sum of its values rounded once, in every evaluation (incremental state, full path,
rebuild). For random values (subnormals, extremes, cancellations, NaN, infinities, NULLs) in random changelogs cut
into random transactions: the steps are incremental, their slices are the full path's bytes, every retraction
removes a live row, and the reduced output is Python's exact sum (``fractions.Fraction``) rounded once."""
from __future__ import annotations

import math
import struct
from collections import Counter
from fractions import Fraction

import pyarrow as pa
import pytest
from hypothesis import example, given
from hypothesis import strategies as hst

from spark_jobs.transform.catalyst import Catalyst
from spark_jobs.transform.incremental import canonical, exact_sums

from ..hypothesis_profiles import spark_property
from .test_transform_incremental import _run, sql
from .transform_support import (OP_APPEND, OP_CORRECT_FROM, OP_CORRECT_TO, Event, InputSpec, PathLog, Txn, minutes,
                                reduce_input, reduce_output, splits)

pytestmark = pytest.mark.spark

R = 1
FLOATS = pa.schema([pa.field("k", pa.string()), pa.field("x", pa.float64())])
QUERY = ("SELECT k, sum(x) AS s, avg(x) AS a, sum(x) FILTER (WHERE x > 0) AS pos, count(*) AS n, "
         "max(event_time) AS event_time FROM a GROUP BY k")
BIG = 2.0 ** 1000


def exact_sum(values: list[float | None]) -> float | None:
    """The sum as this engine defines it: NULL over no values, NaN with a NaN or both infinities, an infinity,
    else the exact sum rounded once to the nearest double (ties to even; past the largest double, an infinity)."""
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    if any(math.isnan(v) for v in vals) or (math.inf in vals and -math.inf in vals):
        return math.nan
    if math.inf in vals or -math.inf in vals:
        return math.inf if math.inf in vals else -math.inf
    total = sum(Fraction(v) for v in vals)
    try:
        return float(total)  # Fraction -> float is correctly rounded
    except OverflowError:
        return math.inf if total > 0 else -math.inf


def exact_avg(values: list[float | None]) -> float | None:
    s = exact_sum(values)
    n = sum(1 for v in values if v is not None)
    return None if s is None else s / n


def bits(v: object) -> object:
    return struct.pack(">d", v).hex() if isinstance(v, float) else v


def expected(events: list[tuple[int, Event]]) -> Counter:
    """The query's groups from the live rows, floats as their bits."""
    groups: dict[str | None, list[Event]] = {}
    for _, e in events:
        groups.setdefault(e.data[0], []).append(e)
    rows = Counter()
    for k, es in groups.items():
        xs = [e.data[1] for e in es]
        pos = [x for x in xs if x is not None and (math.isnan(x) or x > 0)]  # Spark: NaN is above every number
        row = (max(e.event_time for e in es), k, exact_sum(xs), exact_avg(xs), exact_sum(pos), len(es))
        rows[tuple(bits(v) for v in (round(row[0].timestamp() * 1000), *row[1:]))] += 1
    return rows


def got(rows: list[dict]) -> Counter:
    live = reduce_output([{c: bits(v) for c, v in r.items()} for r in rows])  # a NaN row too: by its bits
    # (reduce_output asserts that each retraction removes a live row)
    names = [c for c in rows[0] if c not in ("offset", "op", "system_time")]
    out = Counter()
    for row, n in live.items():
        d = dict(zip(names, row))
        out[tuple(d[c] for c in ("event_time", "k", "s", "a", "pos", "n"))] += n
    return out


VALUES = hst.one_of(
    hst.none(),
    hst.sampled_from([0.0, -0.0, 0.1, 0.2, 0.3, 1e16, -1e16, 1.0, 3.0, 5e-324, -5e-324, 2.2250738585072014e-308,
                      1.7976931348623157e308, -1.7976931348623157e308, BIG, -BIG, math.inf, -math.inf, math.nan]),
    hst.floats(allow_nan=False, allow_infinity=False),  # any finite double, subnormals and extremes included
    hst.floats(min_value=-1e6, max_value=1e6, allow_nan=False),
)


@hst.composite
def changelogs(draw, max_events: int = 18, min_events: int = 2) -> list[Event]:
    """Appends, and -R / -C+C of live rows (never of a NaN: an input's removal matches a row by equality); at least
    ``min_events`` of them, so that a split can cut them into that many transactions with rows."""
    events: list[Event] = []
    live: list[Event] = []
    for _ in range(draw(hst.integers(min_events, max_events))):
        removable = [j for j, e in enumerate(live) if not (isinstance(e.data[1], float) and math.isnan(e.data[1]))]
        kind = draw(hst.sampled_from(["append", "append", "retract", "correct"])) if removable else "append"
        if kind == "append":
            e = Event(OP_APPEND, minutes(draw(hst.integers(0, 90))), (draw(hst.sampled_from(["p", "q", None])),
                                                                      draw(VALUES)))
            events.append(e)
            live.append(e)
            continue
        victim = live.pop(draw(hst.sampled_from(removable)))
        if kind == "retract":
            events.append(Event(R, victim.event_time, victim.data))
        else:
            new = Event(OP_CORRECT_TO, victim.event_time, (victim.data[0], draw(VALUES)))
            events += [Event(OP_CORRECT_FROM, victim.event_time, victim.data), new]
            live.append(Event(OP_APPEND, new.event_time, new.data))
    return events


def _both(spark, root, events: list[Event], split: list[Txn], query: str = QUERY):
    inputs = [InputSpec("a", FLOATS, events)]
    inc = _run(spark, root / "inc", sql(query), inputs, split)
    full = _run(spark, root / "full", sql(query), inputs, split, incremental=False)
    paths = [r.diagnostics["path"] for r in inc.result.responses]
    assert paths[0] == "rebuild" and set(paths[1:]) <= {"incremental", None}, paths
    for a, b in zip(inc.result.slices, full.result.slices, strict=True):
        assert a.schema.equals(b.schema) and [tuple(bits(v) for v in r.values()) for r in a.to_pylist()] == \
            [tuple(bits(v) for v in r.values()) for r in b.to_pylist()], (a.to_pylist(), b.to_pylist())
    return inc, inputs


# a cancellation chain: each value cancels the one before down to its lowest bits, 52 bits apart (the exact sum is
# 2^-8, far below every value; added in another order than this one, the doubles' sum is 0 or far off)
CHAIN = [2.0 ** 200] + [-(2.0 ** (200 - 52 * i)) + 2.0 ** (200 - 52 * (i + 1)) for i in range(4)]
FIXED = ([Event(OP_APPEND, minutes(i), ("p", v)) for i, v in enumerate(CHAIN)]
         + [Event(OP_APPEND, minutes(10), ("q", 1e16)), Event(OP_APPEND, minutes(11), ("q", 1.0)),
            Event(OP_APPEND, minutes(12), ("q", -1e16)), Event(OP_APPEND, minutes(13), ("q", 1.0)),
            Event(R, minutes(11), ("q", 1.0)),  # q: 1e16 - 1e16 + 1 = 1 exactly
            Event(OP_APPEND, minutes(14), (None, 1.7976931348623157e308)),
            Event(OP_APPEND, minutes(15), (None, 1.7976931348623157e308)),  # past the largest double: +Infinity
            Event(OP_CORRECT_FROM, minutes(15), (None, 1.7976931348623157e308)),
            Event(OP_CORRECT_TO, minutes(15), (None, -1e308)),  # back below it
            Event(OP_APPEND, minutes(16), ("s", 5e-324)), Event(OP_APPEND, minutes(17), ("s", 5e-324)),
            Event(OP_APPEND, minutes(18), ("s", -2.2250738585072014e-308)),  # a subnormal result
            Event(OP_APPEND, minutes(19), ("t", math.inf)), Event(OP_APPEND, minutes(20), ("t", 2.0)),
            Event(OP_APPEND, minutes(21), ("t", -math.inf)),  # +Inf and -Inf: NaN
            Event(R, minutes(21), ("t", -math.inf))])  # back to +Inf
FIXED_SPLIT = [Txn({"a": 3}), Txn({"a": 4}), Txn({"a": 5}), Txn({"a": 5}), Txn({"a": 2}), Txn({"a": 2})]


def test_any_values_and_split_give_the_exact_sum_rounded_once(spark, tmp_path_factory):
    """The fixed chain, then the profile's generated examples (tests/hypothesis_profiles.py), each cut into at least
    two transactions with rows: some generated step must have been incremental."""
    generated = PathLog()

    @spark_property("exact sums", scale=4)
    @example(data=None)
    @given(data=hst.data())
    def check(data):
        _check_exact_sums(spark, tmp_path_factory, data, generated)

    check()
    generated.assert_incremental("exact sums")


def _check_exact_sums(spark, tmp_path_factory, data, generated: PathLog) -> None:
    if data is None:
        events, split = FIXED, FIXED_SPLIT
        assert sum(t.rows["a"] for t in split) == len(events)
    else:
        events = data.draw(changelogs(), "events")
        split = data.draw(splits([InputSpec("a", FLOATS, events)], min_steps=2), "split")
    inc, inputs = _both(spark, tmp_path_factory.mktemp("exact"), events, split)
    if data is not None:
        generated.record(inc.result)
    reduced = got(inc.result.rows())
    assert reduced == expected(reduce_input(inputs[0]))
    if data is None:  # the explicit example's groups spelled out, where Spark's additions are not exact
        sums = {row[1]: row[2] for row in reduced}
        assert sums == {"p": bits(2.0 ** -8), "q": bits(1.0), None: bits(1.7976931348623157e308 - 1e308),
                        "s": bits(2 * 5e-324 - 2.2250738585072014e-308), "t": bits(math.inf)}, sums
        assert sum(reversed(CHAIN)) != 2.0 ** -8  # another order of additions loses it
    operators = inc.result.responses[-1].raw.diagnostics.operators
    detail = next(o.detail for o in operators if o.operator == "Aggregate")
    # sum(x) and avg(x) keep one exact sum; the FILTER clause's values another
    assert detail.startswith("state per group (1 key(s)): exact sum(a.x), exact sum(") and \
        detail.count("exact sum(") == 2, detail


def test_floats_are_summed_exactly_as_doubles(spark, tmp_path):
    """A FLOAT column's sum is a DOUBLE (Spark's type): each value exactly as a double, the sum rounded once."""
    query = ("SELECT k, sum(CAST(x AS FLOAT)) AS s, avg(CAST(x AS FLOAT)) AS a, max(event_time) AS event_time "
             "FROM a GROUP BY k")
    events = [Event(OP_APPEND, minutes(i), ("p", v)) for i, v in enumerate([0.1, 0.2, 0.3, 1e30, -1e30, 7.0])]
    inc, inputs = _both(spark, tmp_path, events, [Txn({"a": 2}), Txn({"a": 3}), Txn({"a": 1})], query)
    floats = [float(struct.unpack("f", struct.pack("f", v))[0]) for v in (0.1, 0.2, 0.3, 1e30, -1e30, 7.0)]
    live = reduce_output(inc.result.rows())
    [(row, n)] = live.items()  # (event_time, k, s, a)
    assert n == 1 and bits(row[2]) == bits(exact_sum(floats)) and bits(row[3]) == bits(exact_avg(floats)), row


@pytest.mark.parametrize("values", [
    CHAIN, [1e16, 1.0, -1e16], [0.1] * 10, [5e-324, 5e-324], [1.7976931348623157e308] * 2,
    [1.7976931348623157e308, 1.7976931348623157e308, -1.7976931348623157e308],
    [2.0 ** 53, 1.0, 2.0 ** -60],  # a tie broken by a bit far below: rounds up
    [2.0 ** 53, 1.0], [2.0 ** 53, 3.0],  # exact ties: to even
    [-(2.0 ** 53), -1.0, -(2.0 ** -60)], [-0.0, -0.0], [], [None], [math.nan, 1.0], [math.inf, -math.inf],
])
def test_the_batch_plan_sums_exactly(spark, values):
    """The canonical plan of a plain GROUP BY over a table, as the full path evaluates it (no state): one group's
    sum and average are the exact ones, also over no values, a NaN, infinities, ties and values beyond the range."""
    rows = [("g", v) for v in values] or [("h", 1.0)]
    df = spark.createDataFrame(rows, "k string, x double")
    df.createOrReplaceTempView("exact_values")
    out = canonical.frame(Catalyst(spark), spark.sql(
        "SELECT k, sum(x) AS s, avg(x) AS a, count(x) AS n FROM exact_values WHERE k = 'g' GROUP BY k"))
    found = out.collect()
    if not values:
        assert found == []
        return
    [row] = found
    assert (bits(row["s"]), bits(row["a"]), row["n"]) == (bits(exact_sum(values)), bits(exact_avg(values)),
                                                         sum(v is not None for v in values)), (row, values)


def test_a_full_path_checkpoint_of_an_older_engine_rebuilds_once_with_corrections(spark, tmp_path, monkeypatch):
    """A derivative whose DOUBLE sums took the full path (with Spark's sums: this engine before exact sums) keeps
    its output in the checkpoint. Its next step rebuilds the state once and corrects each group whose value the
    exact sum changes (-C/+C against the output kept), then updates the state; the changelog stays well formed and
    reduces to the exact sums."""
    values = [0.1, 0.2, 0.3, 3.0, 1e-3, 7.7]
    # q: Spark's additions in this order make its first four values 1.0, not 2.0 (1e16 + 1.0 rounds to 1e16)
    first = [("q", 1e16), ("q", 1.0), ("q", -1e16), ("q", 1.0), ("p", 0.1), ("p", 0.2), ("p", 0.3)]
    events = [Event(OP_APPEND, minutes(i), kx) for i, kx in enumerate(first)]
    events += [Event(OP_APPEND, minutes(i), ("pq"[(i * 7) % 3 % 2], values[(i * 5) % len(values)]))
               for i in range(len(first), 40)]
    inputs = [InputSpec("a", FLOATS, events)]
    from tests.spark_jobs.transform_support import MiniCoordinator

    spark.conf.set("spark.odf.incremental.enabled", "false")
    try:
        with monkeypatch.context() as m:  # the older engine: Spark's own sums
            m.setattr(exact_sums, "exact", lambda cat, plan, slots=None: plan)
            coord = MiniCoordinator(spark, tmp_path, sql(QUERY), inputs, watermarks=True)
            for n in (20, 5):
                coord.step(Txn({"a": n}))
    finally:
        spark.conf.unset("spark.odf.incremental.enabled")
    old = {k: s for k, s in ((r["k"], r["s"]) for r in coord.result.rows() if r["op"] in (0, 3))}
    for n in (5, 5, 5):
        coord.step(Txn({"a": n}))
    responses = coord.result.responses
    assert [r.diagnostics["path"] for r in responses] == ["full", "full", "rebuild", "incremental", "incremental"]
    assert "written by the full path" in " ".join(responses[2].diagnostics["warnings"]), responses[2].diagnostics
    assert got(coord.result.rows()) == expected(reduce_input(inputs[0]))
    exact = {k: exact_sum([e.data[1] for e in events[:25] if e.data[0] == k]) for k in "pq"}
    assert any(bits(old[k]) != bits(exact[k]) for k in "pq"), (old, exact)  # the rebuild had a correction to make
    rebuilt = [r for r in coord.result.slices[2].to_pylist()]
    assert {r["op"] for r in rebuilt} <= {OP_CORRECT_FROM, OP_CORRECT_TO}, rebuilt


def test_a_distinct_sum_of_doubles_keeps_sparks_function_on_the_full_path(spark, tmp_path):
    """``sum(DISTINCT x)`` of DOUBLEs is not rewritten (its distinct values are summed by Spark): the full path."""
    query = "SELECT k, sum(DISTINCT x) AS s, max(event_time) AS event_time FROM a GROUP BY k"
    events = [Event(OP_APPEND, minutes(i), ("p", v)) for i, v in enumerate([0.5, 0.25, 0.5])]
    inc = _run(spark, tmp_path, sql(query), [InputSpec("a", FLOATS, events)], [Txn({"a": 2}), Txn({"a": 1})])
    diag = inc.result.responses[-1].diagnostics
    assert diag["path"] == "full" and "depends on the order Spark reads the rows in" in diag["reason"], diag
    assert got_plain(inc.result.rows()) == {("p", 0.75)}


def got_plain(rows: list[dict]) -> set:
    return {(r[1], r[2]) for r in reduce_output(rows)}
