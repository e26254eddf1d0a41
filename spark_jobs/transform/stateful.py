"""The stateful path: the query over each input's reduced state, diffed against the previous output state.

Each input is read as of its new offset (its reduced state: a -R/-C removes the oldest equal live row, so a row
keeps the offset of the append that created it) or as its raw changelog when the query reads its op column. The new
output state, counted, is the new checkpoint; its multiset difference to the previous one is the output: removed
rows -R, added rows +A, and when the output has a natural key (all GROUP BY expressions of a top-level aggregate
appear as output columns, or a global aggregate) a removed and an added row of one key become -C then +C.
Cost: O(history) per transaction.
"""
from __future__ import annotations

import os
import shutil
import time
from typing import Any, Mapping, Sequence

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from odf_core.errors import SchemaEvolutionError
from odf_core.metadata import DatasetVocabulary, OffsetInterval, TransformRequest, TransformSql
from spark_jobs import sql_steps  # not its names: sql_steps imports sql_gate, which imports this package
from spark_jobs.columns import col
from spark_jobs.errors import EngineFailure, QueryRejected
from spark_jobs.parquet_files import local_path, write_single_parquet
from spark_jobs.session import side_by_side
from spark_jobs.transform.checkpoint import COUNT, Checkpoint, count_field, query_hash, read_checkpoint, stateful_meta
from spark_jobs.transform.inputs import (
    OP_APPEND,
    OP_CORRECT_FROM,
    OP_CORRECT_TO,
    OP_RETRACT,
    QueryInput,
    history_rows,
    orderable,
    output_watermark,
    remember_schema,
)
from spark_jobs.transform.output import finalize, normalize, normalized, plain_alias, sort_columns, write_output
from spark_jobs.transform.planning import STATEFUL, OutputLayout, PlanInfo, layout_of


def input_ends(inputs: Sequence[QueryInput], prev: Checkpoint | None) -> dict[str, int | None]:
    """Last offset of each input to include; checks the request continues the checkpoint."""
    stored = (prev.meta.get("inputs") or {}) if prev is not None else {}
    ends: dict[str, int | None] = {}
    for inp in inputs:
        s = stored.get(inp.alias)
        did = inp.request.dataset_id.to_did_odf()
        last = s.get("lastOffset") if isinstance(s, Mapping) and s.get("datasetId") == did else None
        iv = inp.request.offset_interval
        if iv is not None:
            expected = 0 if last is None else last + 1
            if last is not None and iv.start != expected:
                raise EngineFailure(
                    f"input {inp.alias!r}: the previous checkpoint covers offsets up to {last} but the request "
                    f"starts at {iv.start} (expected {expected}): wrong previous checkpoint?")
            ends[inp.alias] = iv.end
        else:
            ends[inp.alias] = last
    return ends


def align_old_state(old: DataFrame, new_schema: T.StructType, names: Sequence[str]) -> DataFrame:
    """Previous state in the new output's columns (added columns null), by the chain's schema-evolution rule."""
    from pyspark.sql.pandas.types import to_arrow_schema

    from odf_core.metadata.schema_evolution import check_schema_evolution

    old_fields = T.StructType([f for f in old.schema.fields if f.name != COUNT])
    new_fields = T.StructType([f for f in new_schema.fields if f.name != COUNT])
    try:
        check_schema_evolution(to_arrow_schema(old_fields, timezone="UTC"), to_arrow_schema(new_fields, timezone="UTC"),
                               where="the query output")
    except SchemaEvolutionError as e:
        raise QueryRejected(f"{e} (the previous output state has these columns)") from None
    old_types = {f.name for f in old_fields.fields}
    new_types = {f.name: f.dataType for f in new_fields.fields}
    cols = [col(n) if n in old_types else F.lit(None).cast(new_types[n]).alias(n) for n in names]
    return old.select(*cols, F.col(COUNT))


DELTA = "__odf_d"  # a row's signed change of multiplicity


def diff(old: DataFrame, new: DataFrame, names: Sequence[str], key: tuple[str, ...] | None
         ) -> tuple[DataFrame, Column, list[Column]]:
    """Rows that changed between two counted states, with their op and canonical order."""
    cols = [col(n) for n in names]
    both = old.select(*cols, (-F.col(COUNT)).alias(DELTA)).unionByName(new.select(*cols, F.col(COUNT).alias(DELTA)))
    both = both.coalesce(1)  # two single files: grouping, windows and numbering run without a shuffle
    return signed_diff(both.groupBy(*cols).agg(F.sum(DELTA).alias(DELTA)), names, key)


def signed_diff(delta: DataFrame, names: Sequence[str], key: tuple[str, ...] | None
                ) -> tuple[DataFrame, Column, list[Column]]:
    """The changed rows of ``delta`` (distinct rows with a signed count ``__odf_d``: lost < 0 < gained), with their
    op and canonical order."""
    cols = [col(n) for n in names]
    delta = delta.coalesce(1).where(F.col(DELTA) != 0)
    rows = delta.select(
        *cols,
        F.when(F.col(DELTA) < 0, 0).otherwise(1).alias("__odf_side"),
        F.explode(F.sequence(F.lit(1).cast("long"), F.abs(F.col(DELTA)))).alias("__odf_copy"),
    )
    side = F.col("__odf_side")
    values = sort_columns(rows, names)
    if key is None:
        op = F.when(side == 0, OP_RETRACT).otherwise(OP_APPEND)
        return rows, op, [side, *values]
    kcols = [col(k) for k in key] or [F.lit(0)]
    # the k-th lost row of a key pairs with its k-th gained row (-C/+C); unpaired rows are -R or +A. The counts per
    # key use the rank window's sort (key, side, values): one sort for both windows
    rank = F.col("__odf_rank")
    rows = rows.withColumn("__odf_rank", F.row_number().over(Window.partitionBy(*kcols, side).orderBy(*values)))
    per_key = Window.partitionBy(*kcols)
    rows = (rows.withColumn("__odf_lost", F.sum(F.when(side == 0, 1).otherwise(0)).over(per_key))
            .withColumn("__odf_gained", F.sum(F.when(side == 1, 1).otherwise(0)).over(per_key)))
    op = (F.when(side == 0, F.when(F.col("__odf_gained") >= rank, OP_CORRECT_FROM).otherwise(OP_RETRACT))
          .otherwise(F.when(F.col("__odf_lost") >= rank, OP_CORRECT_TO).otherwise(OP_APPEND)))
    block = F.when(op == OP_RETRACT, 0).when(op == OP_APPEND, 2).otherwise(1)
    order = [block, *[col(k).asc_nulls_first() for k in key], rank, side, *values]
    return rows, op, order


def _nested_float(t: T.DataType) -> bool:
    """A float/double inside a struct or array (outputs hold no maps): netting normalises its -0.0 and NaNs, which
    :func:`paired_diff` does for top-level columns only."""
    if isinstance(t, T.StructType):
        return any(isinstance(f.dataType, (T.FloatType, T.DoubleType)) or _nested_float(f.dataType)
                   for f in t.fields)
    if isinstance(t, T.ArrayType):
        return isinstance(t.elementType, (T.FloatType, T.DoubleType)) or _nested_float(t.elementType)
    return False


def _canonical(c: Column, dtype: T.DataType) -> Column:
    """A float/double as grouping writes it: one NaN, and 0.0 for -0.0 (the netting of :func:`diff` groups by it)."""
    if not isinstance(dtype, (T.FloatType, T.DoubleType)):
        return c
    zero, nan = F.lit(0.0).cast(dtype), F.lit(float("nan")).cast(dtype)
    return F.when(F.isnan(c), nan).when(c == zero, zero).otherwise(c)


def paired_diff(pairs: DataFrame, out_columns: Sequence[str], names: Sequence[str], key: tuple[str, ...],
                types: Mapping[str, T.DataType]) -> tuple[DataFrame, Column, list[Column]]:
    """The changed rows when each output key has at most one row before and one after the change (a top-level
    aggregate whose output carries its keys: :func:`.incremental.group_pairs`): a group's old row is -C, or -R when
    the group is gone, its new row +C, or +A when the group is new, and a group whose two rows are equal changes
    nothing. The same rows, ops and order as :func:`signed_diff` over the netted change, without netting all rows by
    value (each key's pair rank is 1)."""
    from spark_jobs.transform.incremental import AFTER, BEFORE

    pos = {n: i for i, n in enumerate(out_columns)}

    def side(prefix: str, n: str) -> Column:
        return _canonical(normalize(F.col(f"{prefix}{pos[n]}"), types[n]), types[n])

    before, after = F.col(BEFORE), F.col(AFTER)
    norm = pairs.select(*[side("b", n).alias(f"b{pos[n]}") for n in names],
                        *[side("a", n).alias(f"a{pos[n]}") for n in names], before, after)
    same: Column = before & after
    for n in names:
        same = same & F.col(f"b{pos[n]}").eqNullSafe(F.col(f"a{pos[n]}"))

    def row(prefix: str, side: int, present: Column, op: Column) -> Column:
        return F.struct(*[F.col(f"{prefix}{pos[n]}").alias(n) for n in names], F.lit(side).alias("__odf_side"),
                        op.alias("__odf_op"), present.alias("__odf_present"))

    # one pass over the groups (a union of two would read them twice and need a shuffle to order the slice)
    rows = norm.where(~same).select(F.inline(F.array(
        row("b", 0, before, F.when(after, OP_CORRECT_FROM).otherwise(OP_RETRACT)),
        row("a", 1, after, F.when(before, OP_CORRECT_TO).otherwise(OP_APPEND)))))
    rows = rows.where(F.col("__odf_present")).drop("__odf_present")
    op = F.col("__odf_op")
    block = F.when(op == OP_RETRACT, 0).when(op == OP_APPEND, 2).otherwise(1)
    order = [block, *[col(k).asc_nulls_first() for k in key], F.col("__odf_side"), *sort_columns(rows, names)]
    return rows, op, order


def first_diff(rows: DataFrame, names: Sequence[str], key: tuple[str, ...] | None
               ) -> tuple[DataFrame, Column, list[Column]] | None:
    """The changed rows when there is no previous output (``rows``: the query's output): every row is +A, in the
    order :func:`signed_diff` gives them over the counted rows (by key, then all columns), without counting them
    first: a rebuild's first step then sorts and writes the output once, not also a counted state to read back.
    Floats are normalised as grouping does (:func:`_canonical`); None when a float lies inside a struct or array
    (grouping normalises those too: the rows are counted)."""
    types = {f.name: f.dataType for f in rows.schema.fields}
    if any(_nested_float(types[n]) for n in names):
        return None
    side = F.when(F.spark_partition_id() >= 0, 1).otherwise(0)  # gained: 1, but not foldable (:func:`_as_read_back`)
    out = rows.select(*[_canonical(col(n), types[n]).alias(n) for n in names], side.alias("__odf_side"))
    order = [*[col(k).asc_nulls_first() for k in key or ()], *sort_columns(out, names)]
    return _as_read_back(out, names, types), F.lit(OP_APPEND), order


def previous_checkpoint(session: SparkSession, request: TransformRequest, warnings: list[str]) -> Checkpoint | None:
    prev = read_checkpoint(session, request.prev_checkpoint_path) if request.prev_checkpoint_path else None
    if prev is None and request.next_offset > 0:
        raise EngineFailure(f"a stateful query needs the previous checkpoint: the next offset is "
                            f"{request.next_offset} but the request names no previous checkpoint")
    if prev is not None and not prev.stateful:
        warnings.append("previous checkpoint is stateless: the stateful output starts from an empty state")
    return prev


def counted_output(session: SparkSession, transform: TransformSql, vocab: DatasetVocabulary,
                   inputs: Sequence[QueryInput], op_read: frozenset[int], schemas: Sequence[T.StructType],
                   ends: Mapping[str, int | None], modes: dict[str, str]) -> tuple[list[str], DataFrame]:
    """The query over the inputs' state as of ``ends``: its output columns and rows, counted."""
    names, rows = output_rows(session, transform, vocab, inputs, op_read, schemas, ends, modes)
    return names, rows.groupBy(*[col(n) for n in names]).agg(F.count(F.lit(1)).alias(COUNT))


def output_rows(session: SparkSession, transform: TransformSql, vocab: DatasetVocabulary,
                inputs: Sequence[QueryInput], op_read: frozenset[int], schemas: Sequence[T.StructType],
                ends: Mapping[str, int | None], modes: dict[str, str]) -> tuple[list[str], DataFrame]:
    """The query over the inputs' state as of ``ends``: its output columns and rows, normalised as states keep
    them."""
    views = {}
    for idx, (inp, schema) in enumerate(zip(inputs, schemas)):
        changelog = idx in op_read
        modes[inp.alias] = "changelog" if changelog else "reduced"
        views[inp.alias] = history_rows(session, inp, schema, ends[inp.alias], changelog)
    out = sql_steps.run_steps(session, transform, views, sql_steps.TRANSFORM)
    from spark_jobs.transform.catalyst import Catalyst
    from spark_jobs.transform.incremental import canonical

    out = canonical.frame(Catalyst(session), out)  # the plan the incremental path evaluates
    query_layout = layout_of(out.schema, vocab, STATEFUL)
    types = {f.name: f.dataType for f in out.schema.fields}
    bad = [n for n in query_layout.columns if not orderable(types[n])]
    if bad:
        raise QueryRejected(f"stateful query outputs cannot contain map/variant columns: {bad}")
    names = [query_layout.event_time, *query_layout.data]
    return names, out.select(*[normalized(n, types[n]).alias(n) for n in names])


def write_state(session: SparkSession, request: TransformRequest, inputs: Sequence[QueryInput], info: PlanInfo,
                schemas: Sequence[T.StructType], ends: Mapping[str, int | None], modes: dict[str, str],
                target: str | None = None) -> tuple[OutputLayout, T.StructType]:
    """Evaluate the query over the inputs' state and write it, counted, as the new checkpoint (or to ``target``)."""
    names, counted = counted_output(session, request.transform, request.vocab, inputs, info.op_read, schemas, ends,
                                    modes)
    meta = stateful_meta(request, ends)
    counted = counted.select(*[plain_alias(col(n), n) for n in names],
                             F.col(COUNT).alias(COUNT, metadata=count_field(meta).metadata))
    path = target or request.new_checkpoint_path
    write_single_parquet(counted, path, sort=sort_columns(counted, names))
    remember_schema(path, counted.schema)  # the next transaction reads it back
    return OutputLayout(tuple(names), names[0], None, tuple(names[1:])), counted.schema


def previous_output(session: SparkSession, request: TransformRequest, inputs: Sequence[QueryInput],
                    schemas: Sequence[T.StructType], prev: Checkpoint) -> DataFrame:
    """The previous output state: stored in full-path checkpoints; an incremental checkpoint (version 4 on) keeps
    only operator states, so the query it was written for is evaluated again over the inputs as of its ends."""
    if prev.state is not None:
        return prev.state
    from odf_core.metadata.yaml_serde import from_data
    from spark_jobs.transform.inputs import read_rows
    from spark_jobs.transform.planning import prepare

    stored = prev.meta.get("transform")
    if not isinstance(stored, Mapping):
        raise EngineFailure("the previous checkpoint records neither its output state nor its query")
    transform = from_data(TransformSql, dict(stored))
    views = {inp.alias: read_rows(session, schema, ()) for inp, schema in zip(inputs, schemas)}
    _, info = prepare(session, transform, views, request.vocab)
    recorded = prev.meta.get("inputs") or {}
    ends = {inp.alias: (recorded.get(inp.alias) or {}).get("lastOffset") for inp in inputs}
    ends = {a: (-1 if e is None else e) for a, e in ends.items()}
    return counted_output(session, transform, request.vocab, inputs, info.op_read, schemas, ends, {})[1]


def run_stateful(session: SparkSession, request: TransformRequest, inputs: Sequence[QueryInput], info: PlanInfo,
                 schemas: Sequence[T.StructType], diag: dict[str, Any], planned: Any = None
                 ) -> tuple[OffsetInterval | None, dict[str, int]]:
    """One stateful transaction; ``planned`` (:class:`.incremental.plan.Planned`) with a plan makes it incremental
    when the previous checkpoint holds that plan's states, else a full step that builds them."""
    warnings: list[str] = diag.setdefault("warnings", [])
    qhash = query_hash(request.transform)
    prev = previous_checkpoint(session, request, warnings)
    ends = input_ends(inputs, prev)
    unchanged = prev is not None and prev.stateful and prev.meta.get("queryHash") == qhash
    if unchanged and all(i.request.offset_interval is None for i in inputs):
        shutil.copyfile(local_path(request.prev_checkpoint_path or ""), local_path(request.new_checkpoint_path))
        warnings.append("no new input data: the checkpoint is carried over")
        return None, {}
    plan = planned.plan if planned is not None else None
    if plan is None:
        diag["path"] = "full"
        return _full(session, request, inputs, info, schemas, diag, prev, ends, unchanged)
    from odf_core.engine.spark_conf import INCREMENTAL_SQL_CONF
    from spark_jobs.transform import incremental
    from spark_jobs.transform.catalyst import Catalyst

    for k, v in INCREMENTAL_SQL_CONF.items():  # the request's own session: no other request sees it
        session.conf.set(k, v)
    step = incremental.Step(session, Catalyst(session), inputs, schemas, ends, info.op_read, plan)
    try:
        why = incremental.reusable(prev.meta if prev is not None else None, plan, qhash)
        step.evicted, step.evict = incremental.eviction(prev.meta if prev is not None and why is None else None,
                                                        output_watermark(inputs))
        states = None
        if why is None and prev is not None:
            states, missing = incremental.load_states(prev.store, plan)
            if missing is not None:
                why = f"the previous checkpoint has no state table {missing} (an earlier engine kept none for it)"
        if why is None and prev is not None and states is not None:
            diag["path"] = "incremental"
            return _incremental(step, request, info, planned.out_schema, prev, states, diag)
        diag["path"] = "rebuild"
        if why != "first transaction":
            warnings.append(f"incremental state rebuilt from the inputs' history: {why}")
        return _full(session, request, inputs, info, schemas, diag, prev, ends, unchanged, step)
    finally:
        step.release()


def _full(session: SparkSession, request: TransformRequest, inputs: Sequence[QueryInput], info: PlanInfo,
          schemas: Sequence[T.StructType], diag: dict[str, Any], prev: Checkpoint | None,
          ends: Mapping[str, int | None], unchanged: bool, step: Any = None
          ) -> tuple[OffsetInterval | None, dict[str, int]]:
    """The query over the inputs' whole state, diffed against the previous output state; with ``step`` the
    operators' states are computed too and the checkpoint is an incremental one (then, without a previous output,
    the query's rows are the slice as they are: :func:`first_diff`)."""
    from spark_jobs.transform.incremental.sizing import interpret_small_history

    warnings: list[str] = diag.setdefault("warnings", [])
    diag.setdefault("timings", {})
    modes = diag.setdefault("modes", {})
    interpret_small_history(session, sum(end + 1 for end in ends.values() if end is not None))
    # the incremental checkpoint keeps operator states only: the output state goes to a file next to it, for the diff
    target = None if step is None else local_path(request.new_checkpoint_path) + ".output.parquet"

    def output_slice() -> tuple[OffsetInterval | None, dict[str, int]]:
        t0 = time.monotonic()
        first = None
        if step is not None and (prev is None or not prev.stateful):  # no previous output: every row is new
            names, rows = output_rows(session, request.transform, request.vocab, inputs, info.op_read, schemas, ends,
                                      modes)
            first = first_diff(rows, names, info.key)
            layout = OutputLayout(tuple(names), names[0], None, tuple(names[1:]))
        if first is not None:
            diag["timings"]["evaluate"] = time.monotonic() - t0
            diag["slice"] = "all new"
            rows, op, order = first
        else:
            layout, schema = write_state(session, request, inputs, info, schemas, ends, modes, target)
            new_state = session.read.schema(schema).parquet(target or local_path(request.new_checkpoint_path))
            diag["timings"]["evaluate"] = time.monotonic() - t0
            if prev is not None and prev.stateful:
                old_state = align_old_state(previous_output(session, request, inputs, schemas, prev), schema,
                                            layout.columns)
                if not unchanged:
                    warnings.append("query changed: diffing against the previous query's state")
            else:
                old_state = session.createDataFrame(session.sparkContext.emptyRDD(), schema)
            rows, op, order = diff(old_state, new_state, layout.columns, info.key)
        diag["correction_key"] = list(info.key) if info.key is not None else None
        return write_output(finalize(rows, op, order, layout, request), request)

    try:
        if step is None:
            return output_slice()
        # the operators' states and the output slice read the same history for different results: side by side,
        # one uses the cores the other leaves idle (the slice is numbered and written in one task)
        return side_by_side(output_slice,
                            lambda: _write_checkpoint(step, request, _rebuild_states(step, diag), diag))[0]
    finally:
        if target is not None and os.path.exists(target):
            os.remove(target)


def _write_checkpoint(step: Any, request: TransformRequest, states: Mapping[str, DataFrame],
                      diag: dict[str, Any]) -> None:
    """The incremental checkpoint from the operators' states, timed and counted in the step's diagnostics."""
    from spark_jobs.transform import incremental

    t0 = time.monotonic()
    sizes = incremental.write_checkpoint(step, request, states)
    diag["timings"]["checkpoint"] = time.monotonic() - t0
    diag["state_rows"] = sum(sizes.values())


def _rebuild_states(step: Any, diag: dict[str, Any]) -> dict[str, DataFrame]:
    """Every operator's state from the inputs' whole history (leaves: the checkpoint is written from them)."""
    from spark_jobs.transform import incremental

    states: dict[str, Any] = {}
    t0 = time.monotonic()
    for op in step.plan.ops:  # children first: an operator's table may derive from those below it
        if incremental.state_tables(op):  # (operators by key keep none)
            states.update({name: step.keep(df)[0]
                           for name, df in incremental.initial_states(step, op, states).items()})
    diag["timings"]["states"] = time.monotonic() - t0
    return states


def _incremental(step: Any, request: TransformRequest, info: PlanInfo, out_schema: T.StructType, prev: Checkpoint,
                 states: Mapping[str, DataFrame], diag: dict[str, Any]
                 ) -> tuple[OffsetInterval | None, dict[str, int]]:
    """The output's change from the inputs' new slices and the operators' states; the output slice is that change,
    ordered and labelled exactly as the full path's difference of the old and new output states would be."""
    from spark_jobs.transform import incremental
    from spark_jobs.transform.incremental import sizing

    t0 = time.monotonic()
    step.sizing = sizing.size_step(step.session, step.inputs, prev.store.path if prev.store is not None else None)
    query_layout = layout_of(out_schema, request.vocab, STATEFUL)
    names = [query_layout.event_time, *query_layout.data]
    types = {f.name: f.dataType for f in out_schema.fields}
    # a top-level aggregate whose output carries its keys can give each group's old and new row (paired_diff)
    paired = info.key is not None and not any(_nested_float(types[n]) for n in names)
    top, new_states, pairs = incremental.output_change(step, out_schema.names, states, paired)
    diag.setdefault("timings", {})["evaluate"] = time.monotonic() - t0
    layout = OutputLayout(tuple(names), query_layout.event_time, None, query_layout.data)

    def output_slice() -> tuple[OffsetInterval | None, dict[str, int]]:
        if pairs is not None and info.key is not None:
            diag["slice"] = "per group"
            rows, op, order = paired_diff(pairs, out_schema.names, names, info.key, types)
        else:
            diag["slice"] = "netted"
            assert top is not None  # output_change gives the change whenever it gives no pairs
            # counted_change nets the rows: one row per distinct output row, its signed count the change
            change = incremental.counted_change(top, out_schema.names, names, types)
            rows, op, order = signed_diff(change.withColumnRenamed(incremental.WEIGHT, DELTA), names, info.key)
        # numbered in one partition: a small step's rows are one partition's (no shuffle to gather them)
        return write_output(finalize(step.narrow(_as_read_back(rows, names, types)), op, order, layout, request),
                            request)

    # both are written in one task each (one file each), from the same change: side by side they take the time of
    # the longer one (neither carries encoding settings the other could take: parquet_files.SHARED_WRITER_SETTINGS)
    written = side_by_side(output_slice, lambda: _write_checkpoint(step, request, new_states, diag))[0]
    kept = step.kept()
    diag["sizing"] = step.sizing.describe() + (f"; {kept}" if kept else "")
    diag["history"] = step.history_read()
    diag["correction_key"] = list(info.key) if info.key is not None else None
    return written


def _nullable(t: T.DataType) -> T.DataType:
    """``t`` with every nested field, element and value nullable (what a parquet read makes of it)."""
    if isinstance(t, T.StructType):
        return T.StructType([T.StructField(f.name, _nullable(f.dataType), True, f.metadata) for f in t.fields])
    if isinstance(t, T.ArrayType):
        return T.ArrayType(_nullable(t.elementType), True)
    return t


def _as_read_back(rows: DataFrame, names: Sequence[str], types: Mapping[str, T.DataType]) -> DataFrame:
    """The output columns nullable throughout, as the full path has them (it reads its output states back from
    parquet): a column Spark knows is never NULL (``named_struct(...)``, ``coalesce(x, 0)``) would otherwise be
    REQUIRED in an incremental slice and OPTIONAL in the full path's, and the bytes would depend on the path. A CASE
    without ELSE is nullable; its condition (a row's side is 0 or 1) is always true but not foldable."""
    always = F.col("__odf_side") >= 0
    return rows.withColumns({n: F.when(always, col(n) if _nullable(types[n]) == types[n]
                                       else col(n).cast(_nullable(types[n]))) for n in names})
