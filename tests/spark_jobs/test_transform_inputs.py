"""How the engine reads an input's history: an append-only history (by the op column's footer statistics) is its own
reduced state, so no shuffle over the history is needed; anything else, or files without statistics, is reduced."""
from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from odf_core.metadata import DatasetVocabulary, TransformRequestInput
from odf_core.identity import DatasetID
from spark_jobs.parquet_files import ColumnStats, column_max, column_stats, merged_stats
from spark_jobs.transform.inputs import (KeyBound, QueryInput, append_only, history_rows, input_schema, overlapping,
                                        up_to, within)

TS = pa.timestamp("ms", tz="UTC")
T0 = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)


def slice_file(path, first: int, ops: list[int], names: list[str], statistics: bool = True) -> str:
    n = len(ops)
    table = pa.table({"offset": pa.array(range(first, first + n), pa.int64()), "op": pa.array(ops, pa.int32()),
                      "system_time": pa.array([T0] * n, TS), "event_time": pa.array([T0] * n, TS),
                      "name": pa.array(names, pa.string())})
    pq.write_table(table, path, write_statistics=statistics)
    return str(path)


def query_input(paths: list[str]) -> QueryInput:
    req = TransformRequestInput(dataset_id=DatasetID.parse("did:odf:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK"),
                                dataset_alias="src", query_alias="src", vocab=DatasetVocabulary.default(),
                                offset_interval=None, data_paths=(), schema_file=paths[0], explicit_watermarks=())
    return QueryInput(req, tuple(paths))


def plan_of(df) -> str:
    return df._jdf.queryExecution().optimizedPlan().toString()


def test_footer_statistics_tell_an_append_only_history(tmp_path):
    a = slice_file(tmp_path / "a.parquet", 0, [0, 0], ["x", "y"])
    b = slice_file(tmp_path / "b.parquet", 2, [1], ["x"])
    c = slice_file(tmp_path / "c.parquet", 3, [0], ["z"], statistics=False)
    vocab = DatasetVocabulary.default()
    assert [column_max(p, "op") for p in (a, b, c)] == [0, 1, None]
    assert append_only([a], vocab) and not append_only([a, b], vocab) and not append_only([a, c], vocab)
    assert column_max(str(tmp_path / "missing.parquet"), "op") is None


@pytest.mark.spark
def test_history_is_reduced_only_when_it_has_retractions(spark, tmp_path):
    a = slice_file(tmp_path / "a.parquet", 0, [0, 0, 0], ["x", "y", "x"])
    b = slice_file(tmp_path / "b.parquet", 3, [1], ["x"])
    for paths, reduced, names in (([a], False, ["x", "x", "y"]), ([a, b], True, ["x", "y"])):
        inp = query_input(paths)
        rows = history_rows(spark, inp, input_schema(spark, inp, 0), None, changelog=False)
        assert ("Window" in plan_of(rows)) == reduced
        assert sorted(r["name"] for r in rows.collect()) == names


@pytest.mark.spark
def test_footers_tell_which_slices_need_an_offset_filter(spark, tmp_path):
    """A filter on offsets that keeps every row of a file is left out (its moving bounds would be compiled into new
    code at every step); files entirely past the end are not read; a file without statistics keeps the filter."""
    a = slice_file(tmp_path / "a.parquet", 0, [0, 0, 0], ["x", "y", "z"])
    b = slice_file(tmp_path / "b.parquet", 3, [0, 0], ["u", "v"])
    c = slice_file(tmp_path / "c.parquet", 5, [0], ["w"], statistics=False)
    assert within([a, b], "offset", 0, 4) and not within([a, b], "offset", 1, 4) and not within([b, c], "offset", 3, 5)
    assert up_to([a, b], "offset", 2) == ([a], False)
    assert up_to([a, b], "offset", 3) == ([a, b], True)
    assert up_to([a, c], "offset", 2) == ([a, c], True)
    inp = query_input([a, b])
    schema = input_schema(spark, inp, 0)
    old = history_rows(spark, inp, schema, 2, changelog=False)
    assert "Filter" not in plan_of(old) and sorted(r["name"] for r in old.collect()) == ["x", "y", "z"]
    cut = history_rows(spark, inp, schema, 3, changelog=False)
    assert "Filter" in plan_of(cut) and sorted(r["name"] for r in cut.collect()) == ["u", "x", "y", "z"]


def test_key_ranges_leave_out_the_slices_that_cannot_hold_a_wanted_key(tmp_path):
    """overlapping: a slice is read when its footer's range of the key column meets the wanted range, or both have
    NULLs; a slice without statistics, or with a column that has no range (a string), is always read."""
    def keyed(name: str, ids: list, when: list, statistics: bool = True) -> str:
        table = pa.table({"offset": pa.array(range(len(ids)), pa.int64()), "id": pa.array(ids, pa.int32()),
                          "at": pa.array(when, TS),
                          "name": pa.array([None if i is None else str(i) for i in ids], pa.string()),
                          "raw": pa.array([b"x"] * len(ids), pa.binary())})
        pq.write_table(table, tmp_path / name, write_statistics=statistics)
        return str(tmp_path / name)

    minute = dt.timedelta(minutes=1)
    old = keyed("old.parquet", [1, 5], [T0, T0 + minute])
    mid = keyed("mid.parquet", [6, None], [T0 + 2 * minute, None])
    nulls = keyed("nulls.parquet", [None, None], [None, None])
    bare = keyed("bare.parquet", [100, 200], [T0, T0], statistics=False)
    new = keyed("new.parquet", [7, 9], [T0 + 3 * minute, T0 + 4 * minute])
    paths = [old, mid, nulls, bare, new]

    def names(found: list[str]) -> list[str]:
        return [p.rsplit("/", 1)[1] for p in found]

    def wanted(column: str, *files: str) -> list[str]:
        found = merged_stats(files, column)
        assert found is not None
        return names(overlapping(paths, [KeyBound(column, found)]))

    assert wanted("id", new) == ["bare.parquet", "new.parquet"]  # 7..9: only the slice that holds them
    assert wanted("id", mid) == ["mid.parquet", "nulls.parquet", "bare.parquet"]  # 6 and NULL
    assert wanted("id", nulls) == ["mid.parquet", "nulls.parquet", "bare.parquet"]  # NULL only
    assert wanted("id", old, new) == ["old.parquet", "mid.parquet", "bare.parquet", "new.parquet"]  # 1..9
    assert wanted("at", old) == ["old.parquet", "bare.parquet"]  # timestamps compare as instants
    # strings compare as text ("1" <= "10" <= "5"); a column without a range (binary) leaves nothing out
    assert names(overlapping(paths, [KeyBound("name", ColumnStats("10", "10", False))])) == ["old.parquet",
                                                                                             "bare.parquet"]
    assert overlapping(paths, [KeyBound("raw", ColumnStats(b"1", b"9", False))]) == paths
    assert column_stats(old, "id") == ColumnStats(1, 5, False) and column_stats(nulls, "id") == ColumnStats(
        None, None, True)
    both = [KeyBound("id", merged_stats([new], "id")), KeyBound("at", merged_stats([old], "at"))]
    assert overlapping(paths, both) == [bare]  # every bound must meet


def _scanned_rows(df) -> int:
    """Rows the parquet scans of an executed frame returned: the rows of the row groups they did not skip."""
    def nodes(n):  # through adaptive execution's query stages
        yield n
        inner = [n.executedPlan()] if n.nodeName() == "AdaptiveSparkPlan" else \
            [n.plan()] if n.nodeName().endswith("QueryStage") else []
        kids = n.children()
        for c in inner + [kids.apply(i) for i in range(kids.size())]:
            yield from nodes(c)

    plan = df._jdf.queryExecution().executedPlan()
    scans = [n for n in nodes(plan) if "parquet" in n.nodeName().lower()]
    assert scans, plan.toString()
    return sum(s.metrics().apply("numOutputRows").value() for s in scans)


@pytest.mark.spark
def test_a_bounded_read_skips_the_row_groups_outside_the_range(spark, tmp_path):
    """rows_of with key bounds (what a step reads of a big slice for the keys it touches): parquet skips the row
    groups whose statistics lie outside the range, rows outside it are dropped, a retraction goes with its row, and
    NULL keys are kept when the range has NULLs; timestamps and strings bound as their values."""
    from spark_jobs.transform.inputs import bounded, rows_of

    n = 12
    minute = dt.timedelta(minutes=1)
    ids = list(range(n))
    table = pa.table({"offset": pa.array(range(n), pa.int64()), "op": pa.array([0] * n, pa.int32()),
                      "system_time": pa.array([T0] * n, TS), "event_time": pa.array([T0 + i * minute for i in ids], TS),
                      "id": pa.array(ids[:-1] + [None], pa.int64()), "name": pa.array([f"n{i:02d}" for i in ids])})
    bulk = str(tmp_path / "bulk.parquet")
    pq.write_table(table, bulk, row_group_size=3)  # four row groups of 3 rows
    retract = str(tmp_path / "retract.parquet")
    pq.write_table(table.slice(8, 1).set_column(0, "offset", pa.array([n], pa.int64()))
                   .set_column(1, "op", pa.array([1], pa.int32())), retract)  # -R of the row with id 8
    inp = query_input([bulk, retract])
    schema = input_schema(spark, inp, 0)

    def read(bound: KeyBound, paths: list[str]) -> tuple[list, int]:
        rows = rows_of(spark, inp, schema, paths, None, changelog=False, bounds=[bound])
        got = sorted(r["name"] for r in rows.collect())
        return got, _scanned_rows(rows)

    assert read(KeyBound("id", ColumnStats(7, 9, False)), [bulk]) == (["n07", "n08", "n09"], 6)
    assert read(KeyBound("id", ColumnStats(7, 9, False)), [bulk, retract]) == (["n07", "n09"], 7)
    assert read(KeyBound("id", ColumnStats(None, None, True)), [bulk]) == (["n11"], 3)  # only the NULL id
    assert read(KeyBound("id", ColumnStats(1, 1, True)), [bulk]) == (["n01", "n11"], 6)
    micros = int((T0 - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)).total_seconds() * 1_000_000)
    at = KeyBound("event_time", ColumnStats(micros + 4 * 60_000_000, micros + 5 * 60_000_000, False))
    assert read(at, [bulk]) == (["n04", "n05"], 3)
    assert read(KeyBound("name", ColumnStats("n02", "n03", False)), [bulk]) == (["n02", "n03"], 6)
    assert bounded([], schema, [bulk]) is None
    # a bound every file lies inside filters nothing: no filter (its literals would compile new code per step)
    assert bounded([KeyBound("id", ColumnStats(0, 10, True))], schema, [bulk]) is None
    assert bounded([KeyBound("id", ColumnStats(0, 10, False))], schema, [bulk]) is not None  # the NULL id is out
    assert read(KeyBound("id", ColumnStats(-5, 50, True)), [bulk]) == ([f"n{i:02d}" for i in ids], n)
