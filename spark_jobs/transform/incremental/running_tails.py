"""The running window's tail algebra: a partition's state and tail rows, and the window's values for new rows from
them (:mod:`.running` analyses the window; :mod:`.operators.running` runs a step)."""
from __future__ import annotations

from typing import Any, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.window import Window

from spark_jobs.transform.catalyst import Catalyst
from spark_jobs.transform.incremental.frames import COUNT, evaluate, project, splice
from spark_jobs.transform.incremental.frames import replace as replaced
from spark_jobs.transform.incremental.running import (
    _OFFSETS,
    CHANGED,
    DISTINCT,
    POSITION,
    ROWS,
    RunningFunction,
    RunningSpec,
)
from spark_jobs.transform.incremental.state import same_keys


def row_columns(cat: Catalyst, spec: RunningSpec, frame: DataFrame, attrs: Sequence[Any], rows: bool = False,
             args: bool = True, keep: Sequence[str] = (), skips: bool = False) -> DataFrame:
    """Of a frame of the child's rows: with ``rows`` the rows themselves (``c0..``), then their key and order
    columns, then with ``args`` each function's argument (``a<j>``), with ``skips`` the arguments whose non-NULL
    values a tail counts (``__odf_x<j>``), then ``frame``'s columns named in ``keep``."""
    exprs = [(f"c{i}", a) for i, a in enumerate(attrs)] if rows else []
    exprs += [(k, e) for k, e in zip(spec.keys, spec.partition)]
    exprs += [(o, e) for o, e in zip(spec.order_columns, spec.order)]
    if args:
        exprs += [(f"a{j}", f.arg) for j, f in enumerate(spec.functions) if f.arg is not None]
        exprs += [(f"__odf_by{j}", f.key) for j, f in enumerate(spec.functions) if f.key is not None]
    if skips:
        exprs += [(f"__odf_x{j}", f.skips) for j, f in spec.counted.items()]
    return project(cat, frame, attrs, exprs, keep=keep)


def known_after(spec: RunningSpec, frame: DataFrame, latest_first: Any) -> tuple[DataFrame, dict[int, Column]]:
    """``frame`` (rows with the ``__odf_x<j>`` arguments of :attr:`RunningSpec.counted`) with, per such function,
    how many non-NULL values of its argument lie from its ``after``-th row after each row on, in the order
    ``latest_first`` (a partition's rows from its last; the row's own place comes from the same ordering)."""
    cols = {}
    for j, f in spec.counted.items():
        frame = frame.withColumn(f"__odf_n{j}", F.count(F.col(f"__odf_x{j}")).over(
            latest_first.rowsBetween(Window.unboundedPreceding, -f.after)))
        cols[j] = F.col(f"__odf_n{j}")
    return frame, cols


def last_order(spec: RunningSpec, prefix: str = "o", peers: bool = False) -> Column:
    """The ORDER BY values as a struct (with ``peers`` only those rows tied in the original ORDER BY share)."""
    n = spec.peer_count if peers else len(spec.order)
    return F.struct(*[F.col(f"{prefix}{i}").alias(f"o{i}") for i in range(n)])


def state_columns(spec: RunningSpec) -> list[str]:
    """The state's columns beside its keys: the partition's last ORDER BY value (of a pair, the values rows tied in
    the original ORDER BY share: all a step compares), its counts and each function's fold."""
    return [*[f"l{i}" for i in range(spec.peer_count)], *spec.counts,
            *[f"s{j}" for j, f in enumerate(spec.functions) if f.arg is not None]]


def initial(cat: Catalyst, spec: RunningSpec, rows: DataFrame) -> DataFrame:
    """States of the partitions of ``rows`` (the child's rows, by position), from all of their rows."""
    cols = row_columns(cat, spec, rows.drop(COUNT) if COUNT in rows.columns else rows, cat.items(spec.child.output()))
    aggs = [F.max(last_order(spec)).alias("__odf_last"), F.count(F.lit(1)).alias(ROWS),
            *([F.count_distinct(last_order(spec, peers=True)).alias(DISTINCT)] if DISTINCT in spec.counts else []),
            *[_fold(spec, f, F.col(f"a{j}"), F.col(f"__odf_by{j}") if f.key is not None else None).alias(f"s{j}")
              for j, f in enumerate(spec.functions) if f.arg is not None]]
    grouped = cols.groupBy(*spec.keys).agg(*aggs)
    return grouped.select(*spec.keys, *[F.col(f"__odf_last.o{i}").alias(f"l{i}") for i in range(spec.peer_count)],
                          *[c for c in state_columns(spec)[spec.peer_count:]])


def _fold(spec: RunningSpec, f: RunningFunction, a: Column, key: Column | None = None) -> Column:
    """A function's state over a partition's rows: the fold of its argument ``a`` (by ``key``, its column of
    :attr:`RunningFunction.key`)."""
    if key is not None:  # the value the function picks at the partition's last rows
        return (F.min_by if f.kind == "first" else F.max_by)(a, key)
    if f.kind in ("first", "last", "lag"):  # the value at the first / last ORDER BY value (of the non-NULL ones)
        order = F.when(a.isNotNull(), last_order(spec)) if f.ignore_nulls else last_order(spec)
        return (F.min_by if f.kind == "first" else F.max_by)(a, order)
    return {"sum": F.sum, "count": F.count, "min": F.min, "max": F.max}[f.kind](a)


def tail_rows(cat: Catalyst, spec: RunningSpec, rows: DataFrame) -> DataFrame:
    """The tail table of the partitions of ``rows`` (the child's rows, by position, then the values of
    :attr:`RunningSpec.stored_columns` they were output with): the rows :func:`tail_kept` keeps, numbered from the
    partition's last (``__odf_i`` = 1)."""
    attrs = cat.items(spec.child.output())
    return tail_kept(spec, _numbered(cat, spec, rows)).select(
        *spec.keys, POSITION, *[f"c{i}" for i in range(len(attrs))], *spec.tail_columns)


def _numbered(cat: Catalyst, spec: RunningSpec, rows: DataFrame) -> DataFrame:
    """``rows`` (the child's rows, then :attr:`RunningSpec.stored_columns`) with the columns :func:`tail_kept`
    reads, numbered from each partition's last (``__odf_i`` = 1)."""
    cols = row_columns(cat, spec, rows.drop(COUNT) if COUNT in rows.columns else rows, cat.items(spec.child.output()),
                    rows=True, args=False, keep=spec.stored_columns, skips=True)
    latest_first = Window.partitionBy(*spec.keys).orderBy(*[F.col(o).desc_nulls_last() for o in spec.order_columns])
    return cols.withColumn(POSITION, F.row_number().over(latest_first).cast("int"))


def tail_kept(spec: RunningSpec, numbered: DataFrame) -> DataFrame:
    """The rows of ``numbered`` (a run of each partition's last rows, numbered from its last by ``__odf_i``, with
    their ``o0`` ORDER BY value and the ``__odf_x<j>`` arguments of :attr:`RunningSpec.counted`) that a partition's
    tail keeps: the rows whose output new rows can change (:meth:`RunningSpec.changed`), which are output again,
    and every row that they or new rows read (:meth:`RunningSpec.read`), so that a row output again has the value it
    was output with. Each criterion keeps a run of the partition's last rows, so the rows of a run that holds the
    old tail give the same tail as all the partition's rows."""
    whole = Window.partitionBy(*spec.keys)
    numbered, known = known_after(spec, numbered, whole.orderBy(POSITION))
    position = F.col(POSITION)
    order = F.col("o0") if spec.values else None
    last = None
    if spec.values:
        numbered = numbered.withColumn("__odf_last", F.max("o0").over(whole))
        last = F.col("__odf_last")
    first, oldest, nulls = F.lit(0), last, F.lit(False)
    if spec.looks_ahead:  # the first row output again, from the last: how far back what it reads reaches
        numbered = numbered.withColumn(CHANGED, spec.changed(position, order, last, known))
        changed = F.col(CHANGED)
        numbered = numbered.withColumn("__odf_first", F.coalesce(F.max(F.when(changed, position)).over(whole),
                                                                 F.lit(0)))
        first = F.col("__odf_first")
        if spec.lowers:
            numbered = numbered.withColumn("__odf_oldest", F.least(F.min(F.when(changed, order)).over(whole), last))
            numbered = numbered.withColumn("__odf_nulls", F.coalesce(
                F.max(changed & order.isNull()).over(whole), F.lit(False)))
            oldest, nulls = F.col("__odf_oldest"), F.col("__odf_nulls")
    return numbered.where(spec.read(position, order, known, first, oldest, nulls))


def with_values(cat: Catalyst, spec: RunningSpec, node: Any, rows: DataFrame) -> DataFrame:
    """``rows`` (the child's rows of whole partitions, by position) followed by the values of
    :attr:`RunningSpec.stored_columns` the window gives them, as :func:`tail_rows` takes them."""
    if not spec.stored:
        return rows
    width = len(cat.items(spec.child.output()))
    out = evaluated(cat, spec, node, rows.drop(COUNT) if COUNT in rows.columns else rows)
    return out.select(*[f"c{i}" for i in range(width)], *[F.col(f"c{width + j}").alias(f"v{j}") for j in spec.stored])


def _plus(a: Column, b: Column, t: T.DataType) -> Column:
    """Null-aware sum of two running sums (NULL: no non-null value yet)."""
    return F.when(a.isNull(), b).when(b.isNull(), a).otherwise(a + b).cast(t)


def merged(spec: RunningSpec, old: DataFrame, new: DataFrame) -> DataFrame:
    """The states of ``new``'s partitions (from rows that all come after their old state) extended by their old
    state in ``old``, if any."""
    o = old.select(*[F.col(c).alias(f"old_{c}") for c in old.columns])
    joined = new.join(o, same_keys(new, o, spec.keys, [f"old_{k}" for k in spec.keys]), "left")
    types = {f.name: f.dataType for f in new.schema.fields}
    cols = [F.col(k) for k in spec.keys] + [F.col(f"l{i}") for i in range(spec.peer_count)]
    cols += [(F.coalesce(F.col(f"old_{c}"), F.lit(0)) + F.col(c)).cast("long").alias(c) for c in spec.counts]
    for j, f in enumerate(spec.functions):
        if f.arg is None:
            continue
        a, b = F.col(f"old_s{j}"), F.col(f"s{j}")
        if f.kind in ("first", "last", "lag"):  # the old rows come first; NULL old_ROWS: no old state
            older = F.coalesce(a, b) if f.ignore_nulls else F.when(F.col(f"old_{ROWS}").isNotNull(), a).otherwise(b)
            v = older if f.kind == "first" else (F.coalesce(b, a) if f.ignore_nulls else b)
        else:
            v = {"sum": _plus(a, b, types[f"s{j}"]), "count": (F.coalesce(a, F.lit(0)) + b).cast("long"),
                 "min": F.least(a, b), "max": F.greatest(a, b)}[f.kind]
        cols.append(v.cast(types[f"s{j}"]).alias(f"s{j}"))
    return joined.select(*cols)


def extended_tail(cat: Catalyst, spec: RunningSpec, old_tail: DataFrame, own: DataFrame, added: DataFrame
                   ) -> DataFrame:
    """The tails of partitions that got rows after their old tail, of a window whose rows are not output again
    (``own``: the new rows; ``added``: per partition the new last ORDER BY value ``l0`` and the number of new rows
    ``__odf_rows``): the old tail's rows moved back by the number of new rows, then the new rows, as far as
    :func:`tail_kept` keeps them. The old tail holds every row the new tail can keep. (Beside rows output again the
    new tail is taken from the rows the window ran over, with the values they are output with.)"""
    attrs = cat.items(spec.child.output())
    rows = [f"c{i}" for i in range(len(attrs))]
    a = added.select(*[F.col(k).alias(f"n_{k}") for k in spec.keys], F.col(ROWS).alias("n_rows"),
                     F.col("l0").alias("n_last"))
    moved = old_tail.join(a, same_keys(old_tail, a, spec.keys, [f"n_{k}" for k in spec.keys]), "inner")
    moved = moved.withColumn(POSITION, (F.col(POSITION) + F.col("n_rows")).cast("int"))
    moved = project(cat, moved, attrs, [*[(c, x) for c, x in zip(rows, attrs)],
                                        *[(o, e) for o, e in zip(spec.order_columns, spec.order)],
                                        *[(f"__odf_x{j}", f.skips) for j, f in spec.counted.items()]],
                    keep=[c for c in moved.columns if c not in rows])
    assert not spec.looks_ahead
    columns = [*spec.keys, POSITION, *rows]
    if not spec.counted:  # the tail reaches a fixed number of rows and values back from the partition's last: the
        # new rows' own tail, and the old rows within that reach
        keep = spec.read(F.col(POSITION), F.col("o0") if spec.values else None, {}, F.lit(0), F.col("n_last"),
                         F.lit(False))
        return tail_rows(cat, spec, own).unionByName(moved.where(keep).select(*columns))
    new = _numbered(cat, spec, own)
    return tail_kept(spec, new.unionByName(moved.select(*new.columns))).select(*columns)


def extended(cat: Catalyst, spec: RunningSpec, node: Any, window: DataFrame, states: DataFrame) -> DataFrame:
    """The window's output over new rows only (frame by position), each function's value combined with the state of
    the row's partition before them."""
    out_attrs = cat.items(node.output())
    width = len(out_attrs) - len(spec.functions)
    keyed = project(cat, window, out_attrs, [(f"c{i}", a) for i, a in enumerate(out_attrs)]
                    + [(k, e) for k, e in zip(spec.keys, spec.partition)])
    s = states.select(*[F.col(c).alias(f"st_{c}") for c in states.columns])
    joined = keyed.join(s, same_keys(keyed, s, spec.keys, [f"st_{k}" for k in spec.keys]), "left")
    cols = [F.col(f"c{i}") for i in range(width)]
    cols += [_continued(j, f, F.col(f"c{width + j}"), tail=False).cast(f.result_type).alias(f"c{width + j}")
             for j, f in enumerate(spec.functions)]
    return joined.select(*cols)


def _continued(j: int, f: RunningFunction, v: Column, tail: bool) -> Column:
    """The ``j``-th function's value at a row, from ``v``, its value over the rows the window ran over (the new
    rows; with ``tail`` the partition's tail before them, whose own fold ``t_*`` is taken off), continued from the
    partition's state ``st_*``. A lag's or lead's value is its own."""
    def off(c: str) -> Column:
        return v - F.coalesce(F.col(f"t_{c}"), F.lit(0)) if tail else v

    if f.kind == "lag" and f.ignore_nulls and f.arg is not None:  # (one row back) no earlier non-NULL value among
        # the rows run over: the old rows' last
        return F.coalesce(v, F.col(f"st_s{j}"))
    if f.kind in (*_OFFSETS.values(), "frame"):
        return v
    if f.kind == "sum":
        return _plus(F.col(f"st_s{j}"), off(f"s{j}"), f.result_type)
    if f.kind == "count":
        return F.coalesce(F.col(f"st_s{j}"), F.lit(0)) + off(f"s{j}")
    if f.kind == "first":  # the partition's old rows come first; over a tail too (it is part of them)
        st = F.col(f"st_s{j}")
        return F.coalesce(st, v) if f.ignore_nulls else F.when(F.coalesce(F.col(f"st_{ROWS}"), F.lit(0)) > 0, st) \
            .otherwise(v)
    if f.kind == "last":  # the row's own frame ends at it; IGNORE NULLS falls back to the old rows' last (no lead)
        return F.coalesce(v, F.col(f"st_s{j}")) if f.ignore_nulls else v
    if f.kind in ("min", "max"):  # the tail's rows are among the state's: an extreme over them again changes nothing
        return (F.least if f.kind == "min" else F.greatest)(F.col(f"st_s{j}"), v)
    counted = DISTINCT if f.kind == "dense_rank" else ROWS  # ranks: rows (distinct orders) before the row
    return F.coalesce(F.col(f"st_{counted}"), F.lit(0)) + off(counted)


def evaluated(cat: Catalyst, spec: RunningSpec, node: Any, rows: DataFrame) -> DataFrame:
    """The operator's node (one Window, or the two of a pair) over ``rows``, its child's rows by position."""
    return evaluate(cat, node, {spec.below: rows})


def _window(cat: Catalyst, spec: RunningSpec, node: Any, rows: DataFrame, extra: Sequence[str]) -> DataFrame:
    """The operator's node over ``rows`` (its child's rows by position, then the columns named in ``extra``, which
    a Window passes through like its child's own): its output by position, the ``extra`` columns after the child's
    by their names."""
    child = spec.child
    width = len(cat.items(child.output()))
    plan = replaced(cat, node, {spec.below: splice(cat, rows, cat.items(child.output()), extra)})
    out = cat.dataframe(plan)
    functions = len(out.columns) - width - len(extra)
    return out.toDF(*[f"c{i}" for i in range(width)], *extra, *[f"c{width + j}" for j in range(functions)])


def over_tail(cat: Catalyst, spec: RunningSpec, node: Any, rows: DataFrame, states: DataFrame, tails: DataFrame,
               new_only: bool) -> DataFrame:
    """The window's output over ``rows``: the ``tails`` (the last rows, by position, with their
    :attr:`RunningSpec.tail_columns`) of ``states``' partitions and the new rows after them (no position). Each
    running function's fold over the tail is replaced by the partition's state (the same shift for every row of a
    partition), and at a tail row a function that reads no row after it takes its stored value; with ``new_only``
    the tails' own rows are dropped (no lead: their output does not change)."""
    width = len(cat.items(spec.child.output()))
    row_cols = [f"c{i}" for i in range(width)]
    extra = [POSITION, *spec.tail_columns]
    window = _window(cat, spec, node, rows.select(*row_cols, *extra), extra)
    out_attrs = cat.items(node.output())
    keyed = project(cat, window, out_attrs, [(f"c{i}", a) for i, a in enumerate(out_attrs)]
                    + [(k, e) for k, e in zip(spec.keys, spec.partition)]
                    + [(o, e) for o, e in zip(spec.order_columns, spec.order)], keep=extra)
    s = states.select(*[F.col(c).alias(f"st_{c}") for c in states.columns])
    base = initial(cat, spec, tails.select(*row_cols))
    b = base.select(*[F.col(c).alias(f"t_{c}") for c in base.columns])
    joined = keyed.join(s, same_keys(keyed, s, spec.keys, [f"st_{k}" for k in spec.keys]), "left")
    joined = joined.join(b, same_keys(joined, b, spec.keys, [f"t_{k}" for k in spec.keys]), "left")
    if new_only:
        after = last_order(spec, peers=True) > last_order(spec, "st_l", peers=True)  # (a tail's rows are not)
        joined = joined.where(F.col(f"st_{ROWS}").isNull() | after)
    cols = [F.col(f"c{i}") for i in range(width)]
    for j, f in enumerate(spec.functions):
        v = _continued(j, f, F.col(f"c{width + j}"), tail=True)
        if j in spec.stored:  # a function reading rows after the row changes only at a row new rows can change
            tail = F.col(POSITION).isNotNull() & (~F.col(CHANGED) if f.forward else F.lit(True))
            v = F.when(tail, F.col(f"v{j}")).otherwise(v)
        cols.append(v.cast(f.result_type).alias(f"c{width + j}"))
    assert len(cols) == len(out_attrs)
    return joined.select(*cols, POSITION, *([CHANGED] if spec.looks_ahead else []))
