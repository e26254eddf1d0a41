"""Incremental stateful transforms: a step costs its new input rows and the state, not the inputs' history.

The query's optimised plan is cut into segments and operators (:mod:`.plan`). A step turns each input's new slice
into a change (added rows; for a reduced input, -R/-C rows are removed rows), pushes it through the segments as two
ordinary evaluations and through each operator with its state (:mod:`.aggregate`), and ends with the change of the
query's output. The output state (the counted current output rows, as the full path keeps it) plus that change is
the new output state; the output slice is the difference of the two, written exactly as the full path writes it, so
the bytes of a slice do not depend on the path. All states are tables of the one checkpoint file (:mod:`.state`).

The first step, a checkpoint of the full path or of another plan (the query, the input schemas or this engine's
state layout changed) *rebuild*: the full path computes the output and the operators' states are computed from the
inputs' history, once.
"""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from pyspark.sql import Column, DataFrame, Observation, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from odf_core.metadata import TransformRequest
from spark_jobs.columns import col
from spark_jobs.parquet_files import local_path, num_rows
from spark_jobs.transform.catalyst import Catalyst
from spark_jobs.transform.checkpoint import stateful_meta
from spark_jobs.transform.incremental import aggregate, key_ranges, keyed, reissued, running, top
from spark_jobs.transform.incremental.delta import Delta, cancel, weighted
from spark_jobs.transform.incremental.frames import (WEIGHT, as_frame, empty, evaluate, expand, node_at, project, splice,
                                                    spark_type)
from spark_jobs.transform.incremental.plan import IncrementalPlan, Op, Path, Segment
from spark_jobs.transform.incremental.sizing import StepSizing
from spark_jobs.transform.incremental.state import StateStore, StateWriter, same_keys
from spark_jobs.transform.inputs import (OP_CORRECT_FROM, OP_RETRACT, KeyBound, QueryInput, append_only,
                                        history_paths, rows_of, slice_rows)
from spark_jobs.transform.output import normalized

ENABLED_CONF = "spark.odf.incremental.enabled"
REVIVE = "__odf_revive"
CHECKPOINT_VERSION = 5


def enabled(session: SparkSession) -> bool:
    return str(session.conf.get(ENABLED_CONF, "true")).lower() != "false"


def op_table(op: Op) -> str:
    return f"{op.kind}:{op.id}"


def tail_table(op_id: str) -> str:
    """The name (in the checkpoint and in a step's states) of a running window's tail table: its partitions' last
    rows, for a lag, a lead or a frame (:func:`.running.tail_rows`)."""
    return f"{op_id}/tail"


def values_table(op_id: str, j: int) -> str:
    """The name (in the checkpoint and in a step's states) of an aggregate's value table for its ``j``-th function,
    a count DISTINCT (:func:`.aggregate.value_changes`)."""
    return f"{op_id}/values{j}"


def state_tables(op: Op) -> list[tuple[str, str, list[str]]]:
    """An operator's state tables: (name in a step's states, name in the checkpoint, key columns)."""
    if op.kind == keyed.KIND:
        return []
    found = [(op.id, op_table(op), op.spec.keys)]
    if op.kind == running.KIND and op.spec.has_tail:
        found.append((tail_table(op.id), tail_table(op_table(op)), op.spec.keys))
    if op.kind == running.KIND and op.spec.reads:
        found.append((reissued.table(op.id), reissued.table(op_table(op)), op.spec.keys))
    if op.kind == "aggregate":
        found += [(values_table(op.id, j), values_table(op_table(op), j), op.spec.keys)
                  for j in aggregate.value_tables(op.spec)]
    return found


@dataclass
class Step:
    """What one transaction knows: its inputs (new slices and histories up to the new ends) and the plan."""

    session: SparkSession
    cat: Catalyst
    inputs: Sequence[QueryInput]
    schemas: Sequence[T.StructType]
    ends: Mapping[str, int | None]
    changelog: frozenset[int]
    plan: IncrementalPlan
    sizing: StepSizing | None = None  # incremental steps: their shuffle plan (histories add to it when read)
    evicted: int | None = None  # the watermark (µs) through which the previous states dropped closed windows
    evict: int | None = None  # the watermark (µs) through which the new states drop them
    _leaves: list[DataFrame] = field(default_factory=list)  # local checkpoints: frames several queries read
    _read: dict[int, set[str]] = field(default_factory=dict)  # per input, the history slices the step has read

    # -- inputs -------------------------------------------------------------------------------------------------
    def input_change(self, idx: int) -> Delta:
        inp, schema = self.inputs[idx], self.schemas[idx]
        if inp.request.offset_interval is None:
            nothing = as_frame(self.session.createDataFrame(self.session.sparkContext.emptyRDD(), schema))
            return Delta(nothing, nothing, empty=True)
        rows = slice_rows(self.session, inp, schema)
        if idx in self.changelog:  # the query reads the changelog itself: every row is a new row
            return Delta(as_frame(rows), as_frame(rows.limit(0)), gains_only=True)
        removed = col(inp.vocab.op).isin(OP_RETRACT, OP_CORRECT_FROM)
        return Delta(as_frame(rows.where(~removed)), as_frame(rows.where(removed)),
                     gains_only=append_only(inp.request.data_paths, inp.vocab))

    def history(self, idx: int, old: bool = False, bounds: Sequence[KeyBound] = ()) -> DataFrame:
        """An input's rows up to its new end, or with ``old`` up to where the previous step ended; with ``bounds``
        only from the slices that can hold rows within them (:mod:`.key_ranges`)."""
        inp = self.inputs[idx]
        end = self.ends[inp.alias]
        iv = inp.request.offset_interval
        if old and iv is not None:
            end = iv.start - 1
        paths, straddle = history_paths(inp, end, bounds)
        seen = self._read.setdefault(idx, set())
        if self.sizing is not None:
            self.sizing.cover(sum(num_rows(p) for p in paths if p not in seen))
        seen.update(paths)
        return as_frame(rows_of(self.session, inp, self.schemas[idx], paths, end if straddle else None,
                                idx in self.changelog, bounds))

    def history_read(self) -> str | None:
        """What the step read of the inputs' history: ``a 2 of 40 slice(s)`` per input (None: nothing)."""
        if not self._read:
            return None
        parts = []
        for idx in sorted(self._read):
            inp = self.inputs[idx]
            total = len(history_paths(inp, self.ends[inp.alias])[0])
            parts.append(f"{inp.alias} {len(self._read[idx])} of {total} slice(s)")
        return ", ".join(parts)

    def replay(self, node: Any, old: bool = False, bounds: Mapping[Path, Sequence[KeyBound]] | None = None
               ) -> DataFrame:
        """The rows of a plan node over the inputs' whole history (for rebuilds and recomputed groups or keys),
        as of this step's end or, with ``old``, the previous step's; ``bounds``: per leaf, ranges its rows are
        needed within."""
        leaves: dict[Path, DataFrame] = {}

        def walk(n: Any, path: Path) -> None:
            idx = self.cat.input_index(n)
            if idx is not None:
                leaves[path] = self.history(idx, old, (bounds or {}).get(path, ()))
                return
            for i, c in enumerate(self.cat.items(n.children())):
                walk(c, path + (i,))

        walk(node, ())
        return evaluate(self.cat, node, leaves)

    def keep(self, df: DataFrame, *stats: Column) -> tuple[DataFrame, Row]:
        """Materialise a frame that several later jobs read, as a local checkpoint (:meth:`leaf`, released at the end
        of the step); the one job that fills it also computes ``stats`` (aggregate columns) over it, observed.

        Not ``persist()``: a later frame joins frames derived from a kept one (the new rows with their partitions'
        state rows, both from the change), Spark renames one side's attributes, no longer finds the cached plan, and
        computes the kept frame again, with the broadcasts inside it, in every query that reads it. A tiny step of
        a window over a window with late rows ran 76 Spark jobs so (57 broadcasts), 41 as leaves
        (docs/transforms.md)."""
        obs = Observation()
        leaf = self.leaf(df.observe(obs, F.count(F.lit(1)).alias("__odf_rows"), *stats))
        return leaf, Row(**obs.get)

    def broadcast(self, df: DataFrame, rows: int | None = None) -> DataFrame:
        """``df``, a frame derived from the step's change that joins look up (keys, hashes of rows), marked to be
        broadcast when it is known to be small (:meth:`.sizing.StepSizing.broadcastable`; ``rows``: its count, or a
        bound on it, when known). Past the step's rows it is counted first (kept: one job): a step over a big state
        or history often still touches few keys, and shuffling the state or history to find them would cost more. A
        frame as big as a history is not broadcast (the driver and every executor would hold it whole); its joins
        shuffle."""
        if self.sizing is None:  # not an incremental step: nothing bounds the frame
            return df
        fits = self.sizing.broadcastable(rows)
        if fits is None:
            df, row = self.keep(df)
            rows = row["__odf_rows"]
            fits = self.sizing.broadcastable(rows)
        return F.broadcast(df) if fits else df

    def passed_up(self, change: Delta) -> Delta:
        """An operator's change as the operator above it reads it: netted (a row both gained and lost is no change:
        a min/max above would recompute a group for an unchanged row) and computed once, into a local checkpoint.
        The operator above derives many frames from it, and Spark analyses the whole plan of every derived frame
        again: with the plans of the operators below inlined, the driver's analysis grew with the nesting and took
        most of a stacked operator's step."""
        if change.empty:
            return change
        if change.gains_only:  # nothing to net (the lost rows are a known empty frame)
            return Delta(self.leaf(change.pos), change.neg, gains_only=True)
        return cancel(change, self.leaf)

    def leaf(self, df: DataFrame) -> DataFrame:
        """A frame computed once into a local checkpoint (released at the end of the step): a plan that joins two
        frames derived from one persisted frame recomputes it (the join renames one side's attributes, and the
        renamed plan no longer matches the cached one); a checkpointed leaf has no plan to recompute."""
        leaf = df.localCheckpoint(eager=True)
        self._leaves.append(leaf)
        return leaf

    def release(self) -> None:
        for leaf in self._leaves:  # the checkpointed blocks (else kept until the JVM collects the frames)
            leaf._jdf.queryExecution().logical().rdd().unpersist(False)
        self._leaves.clear()


def segment_change(step: Step, seg: Segment, changes: Mapping[str, Delta]) -> Delta:
    """The change of a segment's rows from the changes of its frontiers (constant relations do not change)."""
    pos: dict[Path, DataFrame] = {}
    neg: dict[Path, DataFrame] = {}
    any_change = False
    gains_only = True
    for f in seg.frontiers:
        if f.kind == "constant":
            continue
        d = step.input_change(f.input) if f.kind == "input" else changes[f.op.id]  # type: ignore[union-attr,arg-type]
        any_change = any_change or not d.empty
        gains_only = gains_only and (d.empty or d.gains_only)
        pos[f.path], neg[f.path] = d.pos, d.neg
    if not any_change:
        attrs = step.cat.items(seg.node.output())
        nothing = empty(step.session, attrs)
        return Delta(nothing, nothing, empty=True)
    # constants stay in place: they appear in both evaluations, and cancel where changes are summed up (a row both
    # added and removed is a change that nets to nothing: aggregates sum it away, the output is netted at the end)
    return Delta(evaluate(step.cat, seg.node, pos), evaluate(step.cat, seg.node, neg), gains_only=gains_only)


def _rows(step: Step, op: Op, frame: DataFrame) -> DataFrame:
    """A weighted frame of the operator's child as the aggregate's argument columns plus ``__odf_w``."""
    spec = op.spec
    attrs = step.cat.items(spec.child.output())
    return project(step.cat, frame, attrs, aggregate.arguments(spec), keep=[WEIGHT])


def _restrict(df: DataFrame, keys_df: DataFrame, keys: Sequence[str]) -> DataFrame:
    """Rows of ``df`` whose keys (null-safe) appear in ``keys_df``."""
    if not keys:
        return df
    wanted = keys_df.select(*[F.col(k).alias(f"__odf_key{i}") for i, k in enumerate(keys)]).distinct()
    return df.join(wanted, same_keys(df, wanted, keys, list(wanted.columns)), "left_semi")


def initial_states(step: Step, op: Op, below: Mapping[str, DataFrame]) -> dict[str, DataFrame]:
    """An operator's state tables (by their names in a step's states) from its child's whole history (``below``:
    the tables of the operators below it)."""
    if op.kind == top.KIND:
        return {op.id: top.initial(step.cat, op.spec, step.replay(op.spec.child))}
    if op.kind == running.KIND:
        rows = step.replay(op.spec.child)
        tail = {tail_table(op.id): running.tail_rows(step.cat, op.spec, running.with_values(step.cat, op.spec, op.node,
                                                                                             rows))
                } if op.spec.has_tail else {}
        if op.spec.reads:
            tail[reissued.table(op.id)] = reissued.initial(step.cat, op.spec, op.node, rows,
                                                           reissued.reissuable(step.cat, op, below))
        return {op.id: running.initial(step.cat, op.spec, rows), **tail}
    rows = _rows(step, op, step.replay(op.spec.child).withColumn(WEIGHT, F.lit(1).cast("long")))
    values = aggregate.value_tables(op.spec)
    if values:  # read and projected once for the group states and each value table
        rows, _ = step.keep(rows)
    states = aggregate.initial(op.spec, aggregate.changes(op.spec, rows))
    return {op.id: _open(op.spec, states, step.evict),
            **{values_table(op.id, j): _open(op.spec, aggregate.value_counts(op.spec, j, rows), step.evict,
                                             aggregate.COUNT) for j in values}}


def _open(spec: aggregate.AggregateSpec, table: DataFrame, through_us: int | None,
          count: str = aggregate.ROWS) -> DataFrame:
    """A state table without the rows of groups whose event-time window closed through ``through_us``."""
    closed = aggregate.closed(spec, through_us, count)
    return table if closed is None else table.where(~closed)


def _recomputed(step: Step, op: Op, groups: DataFrame, old: bool = False) -> DataFrame:
    """The states of some groups from their rows in the inputs' history (as of the previous step with ``old``)."""
    spec = op.spec
    history = step.replay(spec.child, old=old, bounds=key_ranges.own(step, spec.child, spec.grouping))
    rows = _rows(step, op, history.withColumn(WEIGHT, F.lit(1).cast("long")))
    return aggregate.initial(spec, aggregate.changes(spec, _restrict(rows, groups, spec.keys)))


def aggregate_step(step: Step, op: Op, old_tables: Mapping[str, DataFrame], changes: Mapping[str, Delta],
                   paired: bool = False) -> tuple[Delta, dict[str, DataFrame], DataFrame | None]:
    """The change of an aggregate's output, its new state tables and, with ``paired`` (the query's top aggregate)
    when every touched group was updated from its state, :func:`group_pairs`."""
    spec = op.spec
    old = old_tables[op.id]
    child = segment_change(step, op.children[0], changes)
    if child.empty:
        nothing = empty(step.session, step.cat.items(op.node.output()))
        return Delta(nothing, nothing, empty=True), {name: old_tables[name] for name, _, _ in state_tables(op)}, None
    rows = _rows(step, op, weighted(expand(child.pos), expand(child.neg)))
    tables: dict[str, DataFrame] = {}
    distinct = aggregate.distinct_adapters(spec)
    if distinct:  # each count DISTINCT: its value table first, then the change of each group's number of values
        rows, _ = step.keep(rows)
        counted_by: dict[int, DataFrame] = {}
        for j in aggregate.value_tables(spec):
            name = values_table(op.id, j)
            counted_by[j], _ = step.keep(aggregate.value_changes(spec, j, old_tables[name], rows))
            # a closed window's counts leave with its group; a revived group's (counted from the changed rows only)
            # leave at once: its state is recomputed from the history and leaves too
            tables[name] = _open(spec, aggregate.values_after(spec, j, counted_by[j]), step.evict, aggregate.COUNT)
        deltas = [aggregate.distinct_changes(spec, j, counted_by[aggregate.value_table(spec, j)]) for j in distinct]
        for d in deltas:
            rows = rows.unionByName(d, allowMissingColumns=True)
    changed = rows
    for j in aggregate.exact_adapters(spec):  # each exact sum: the change of its number, one row per group
        rows = rows.unionByName(aggregate.exact_change(spec, j, changed), allowMissingColumns=True)
    # a group left without rows is gone, unless it is a global aggregate's one group (then it is recomputed too)
    recompute = F.col(aggregate.RECOMPUTE) & aggregate.alive(spec)
    # a change to a group whose window closed and left the state: the group is recomputed, before and after
    closed = aggregate.closed(spec, step.evicted)
    revive = F.lit(False) if closed is None else (F.col(aggregate.PRESENT) == 0) & closed
    stats = [F.sum(F.when(recompute, 1).otherwise(0)).alias("flagged"),
             F.sum(F.when(F.col(REVIVE), 1).otherwise(0)).alias("revived")]
    fine = _finer_than_ms(spec) if paired else None
    if fine is not None:
        stats.append(F.sum(F.when(F.col(aggregate.TOUCHED) & fine, 1).otherwise(0)).alias("fine"))
    combined, seen = step.keep(aggregate.update(spec, old, rows).withColumn(REVIVE, revive), *stats)
    pairs = None
    if paired and not (seen["flagged"] or seen["revived"] or (fine is not None and seen["fine"])):
        pairs = group_pairs(step, op, combined.where(F.col(aggregate.TOUCHED)))
    state_cols = [*spec.keys, *aggregate.state_columns(spec)]
    kept = ~F.col(aggregate.RECOMPUTE) & ~F.col(REVIVE)
    new = combined.where(kept).select(*state_cols)
    touched = combined.where(F.col(aggregate.TOUCHED))
    after = touched.where(kept).select(*state_cols)
    if seen["flagged"] or seen["revived"]:  # a removed row reached a group's min/max, or a closed window changed
        recomputed, _ = step.keep(_recomputed(step, op, combined.where(recompute | F.col(REVIVE))).select(*state_cols))
        new, after = new.unionByName(recomputed), after.unionByName(recomputed)
    new = new.where(aggregate.alive(spec))
    after = after.where(aggregate.alive(spec))
    before = aggregate.old_states(spec, touched).where(aggregate.alive(spec))
    if seen["revived"]:
        gone = _recomputed(step, op, combined.where(F.col(REVIVE)), old=True).select(*state_cols)
        before = before.unionByName(gone.where(aggregate.alive(spec)))
    new = _open(spec, new, step.evict)  # final windows leave the state (their rows were written when they changed)
    attrs = aggregate.finals_attrs(spec)
    results = [(f"c{i}", r) for i, r in enumerate(spec.results)]
    out = Delta(project(step.cat, aggregate.finals(spec, after), attrs, results),
                project(step.cat, aggregate.finals(spec, before), attrs, results))
    tables[op.id] = new
    return out, tables, pairs


BEFORE, AFTER = "__odf_before", "__odf_after"


def _finer_than_ms(spec: aggregate.AggregateSpec) -> Column | None:
    """Whether a group's timestamp key has a sub-millisecond part (None: no timestamp key). Output rows store
    timestamps in ms, so two such groups could share an output key: their rows must be netted and paired by key."""
    found: Column | None = None
    for k, g in zip(spec.keys, spec.grouping):
        if isinstance(spark_type(g), (T.TimestampType, T.TimestampNTZType)):
            fine = F.unix_micros(F.col(k).cast(T.TimestampType())) % 1000 != 0
            found = fine if found is None else (found | fine)
    return found


def group_pairs(step: Step, op: Op, touched: DataFrame) -> DataFrame:
    """Per touched group of an aggregate whose rows are the query's output: its output row before the change
    (``b<i>``, by output position) and after it (``a<i>``), and whether the group had a row (``__odf_before``) and
    has one (``__odf_after``). Both rows come from the one state row that holds the old and the new states, so the
    output's change needs no netting of all its rows by value: a group's two rows are equal or a correction."""
    spec = op.spec
    attrs = aggregate.finals_attrs(spec)
    results = [(f"c{i}", r) for i, r in enumerate(spec.results)]
    n_keys, n_values, n_out = len(spec.keys), len(spec.adapters), len(spec.results)
    old_keys = [f"__odf_k{i}" for i in range(n_keys)]
    old_values = [f"__odf_f{j}" for j in range(n_values)]
    flags = [BEFORE, AFTER]
    frame = touched.select(*[F.col(k) for k in spec.keys], *aggregate.final_values(spec),
                           *[F.col(k).alias(o) for k, o in zip(spec.keys, old_keys)],
                           *[v.alias(o) for v, o in zip(aggregate.final_values(spec, "o_"), old_values, strict=True)],
                           ((F.col(aggregate.PRESENT) == 1) & aggregate.alive(spec, "o_")).alias(BEFORE),
                           aggregate.alive(spec).alias(AFTER))
    after = project(step.cat, frame, attrs, results, keep=[*old_keys, *old_values, *flags])
    after = after.select(*[F.col(c) for c in old_keys + old_values],
                         *[F.col(f"c{i}").alias(f"a{i}") for i in range(n_out)], *[F.col(c) for c in flags])
    both = project(step.cat, after, attrs, results, keep=[*[f"a{i}" for i in range(n_out)], *flags])
    return both.select(*[F.col(f"c{i}").alias(f"b{i}") for i in range(n_out)],
                       *[F.col(f"a{i}") for i in range(n_out)], *[F.col(c) for c in flags])


def output_change(step: Step, out_columns: Sequence[str], old_states: Mapping[str, DataFrame], paired: bool = False
                  ) -> tuple[Delta, dict[str, DataFrame], DataFrame | None]:
    """The change of the query's output (frames by position), every operator's new states and, with ``paired`` when
    the query's top node is an aggregate that updated every touched group from its state, :func:`group_pairs`."""
    changes: dict[str, Delta] = {}
    states: dict[str, DataFrame] = {}
    pairs = None
    below_top = _under_projections(step.cat, step.plan.root)
    for op in step.plan.ops:  # children first
        # the plan's top node itself (an operator's id is its path), or the one operator under projections only
        top_node = op.id == "root" or (below_top is not None and op is below_top[0])
        if op.kind == keyed.KIND:
            change = keyed.step(step, op, changes)
        elif op.kind == top.KIND:
            change, states[op.id] = top.step(step, op, old_states[op.id], changes)
        elif op.kind == running.KIND:
            again = None
            if op.spec.reads:  # the window below's new tail is read here and written to the checkpoint: once
                below = reissued.below(op.children[0])
                assert below is not None
                states[tail_table(below.id)] = step.leaf(states[tail_table(below.id)])
                again = (old_states[reissued.table(op.id)], reissued.reissuable(step.cat, op, states))
            change, states[op.id], tail, values = running.step(step, op, old_states[op.id], changes,
                                                               old_states.get(tail_table(op.id)), again)
            if tail is not None:
                states[tail_table(op.id)] = tail
            if values is not None:
                states[reissued.table(op.id)] = values
        else:
            change, tables, found = aggregate_step(step, op, old_states, changes, paired and top_node)
            states.update(tables)
            pairs = found if top_node else pairs
        changes[op.id] = change if top_node else step.passed_up(change)
    if pairs is not None and below_top is not None:  # each group's two rows through the projections above it
        op, path = below_top
        pairs = _pairs_through(step.cat, step.plan.root.node, path, pairs, step.cat.items(op.node.output()))
    out = segment_change(step, step.plan.root, changes)
    if len(out.pos.columns) - (1 if "__odf_n" in out.pos.columns else 0) != len(out_columns):
        raise AssertionError("the incremental plan's output does not match the query's columns")
    return out, states, pairs


def _under_projections(cat: Catalyst, root: Segment) -> tuple[Op, Path] | None:
    """The aggregate whose rows the query's top projections map one to one to output rows (a top aggregate under the
    projection that computes its exact sums, :mod:`.exact_sums`), with its path: its change is the top node's (not
    netted and kept for an operator above) and its groups' old and new rows pair as a top aggregate's do. None when
    the top node is the operator itself or anything but projections lies above it."""
    if len(root.frontiers) != 1 or root.frontiers[0].kind != "op" or not root.frontiers[0].path:
        return None
    frontier = root.frontiers[0]
    if frontier.op is None or frontier.op.kind != "aggregate":  # (only an aggregate pairs its groups' rows)
        return None
    node = root.node
    for i in frontier.path:
        if cat.cls(node) != "Project":
            return None
        node = node.children().apply(i)
    return frontier.op, frontier.path  # type: ignore[return-value]


def _pairs_through(cat: Catalyst, top_node: Any, path: Path, pairs: DataFrame, attrs: Sequence[Any]) -> DataFrame:
    """:func:`group_pairs` of the operator at ``path`` (its output ``attrs``) as the rows the projections above it
    make of them: each side evaluated by the projections, the other side passed through them."""
    width = len(attrs)
    chain = [node_at(cat, top_node, path[:i]) for i in range(len(path))]  # top .. the operator's parent
    flags = [BEFORE, AFTER]

    def side(df: DataFrame, mine: str, other: str, n_other: int) -> DataFrame:
        keep = [f"{other}{i}" for i in range(n_other)] + flags
        plan = splice(cat, df.select(*[F.col(f"{mine}{i}") for i in range(width)], *keep), attrs, keep)
        passed = cat.items(plan.output())[width:]
        for n in reversed(chain):
            plan = cat.project(cat.items(n.projectList()) + passed, plan)
        out = cat.dataframe(plan)
        n_out = len(out.columns) - len(keep)
        return out.toDF(*[f"{mine}{i}" for i in range(n_out)], *keep)

    after = side(pairs, "a", "b", width)
    n_out = len(after.columns) - width - len(flags)
    return side(after, "b", "a", n_out).select(*[F.col(f"b{i}") for i in range(n_out)],
                                               *[F.col(f"a{i}") for i in range(n_out)], *[F.col(c) for c in flags])


def counted_change(top: Delta, out_columns: Sequence[str], names: Sequence[str], types: Mapping[str, T.DataType]
                   ) -> DataFrame:
    """The output change as output columns (normalised as the state stores them) with a signed count."""
    w = weighted(top.pos, top.neg)
    named = w.toDF(*out_columns, WEIGHT)
    return (named.select(*[normalized(n, types[n]).alias(n) for n in names], F.col(WEIGHT))
            .groupBy(*[col(n) for n in names]).agg(F.sum(WEIGHT).alias(WEIGHT)))


def write_checkpoint(step: Step, request: TransformRequest, op_states: Mapping[str, DataFrame]) -> dict[str, int]:
    """The new checkpoint: each operator's states, the plan's fingerprint and the query (a rebuild evaluates it to
    get the output state). Written next to its target and renamed, so no reader sees half of it."""
    writer = StateWriter()
    for op in step.plan.ops:
        for name, stored, keys in state_tables(op):
            if name in op_states:
                writer.put(stored, op_states[name], keys)
    transform = request.transform
    meta = {**stateful_meta(request, step.ends), "version": CHECKPOINT_VERSION, "path": "incremental",
            "fingerprint": step.plan.fingerprint, "evictedThrough": step.evict,
            "transform": {"engine": transform.engine,
                          "queries": [{"alias": q.alias, "query": q.query} if q.alias else {"query": q.query}
                                      for q in transform.steps()]}}
    target = local_path(request.new_checkpoint_path)
    parent = os.path.dirname(os.path.abspath(target))
    os.makedirs(parent, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".checkpoint-", suffix=".parquet", dir=parent)
    os.close(fd)
    try:
        sizes = writer.write(step.session, tmp, meta)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return sizes


def reusable(prev_meta: Mapping[str, Any] | None, plan: IncrementalPlan, query_hash: str) -> str | None:
    """Why the previous checkpoint's states cannot be updated (None: they can)."""
    if prev_meta is None:
        return "first transaction"
    if prev_meta.get("path") != "incremental":
        return "the previous checkpoint has no operator state (written by the full path)"
    if prev_meta.get("version") != CHECKPOINT_VERSION:
        return (f"the previous checkpoint has the state layout of version {prev_meta.get('version')} (this engine "
                f"writes {CHECKPOINT_VERSION})")
    if prev_meta.get("queryHash") != query_hash:
        return "the query changed"
    if prev_meta.get("fingerprint") != plan.fingerprint:
        return "the plan, an input schema or the layout of an operator's state changed"
    return None


def eviction(prev_meta: Mapping[str, Any] | None, watermark: Any) -> tuple[int | None, int | None]:
    """(the watermark through which the previous states dropped closed windows, the one for the new states), in
    microseconds. Watermarks only grow; a step whose request carries none keeps the previous bound."""
    before = prev_meta.get("evictedThrough") if prev_meta is not None else None
    now = watermark.epoch_ns // 1000 if watermark is not None else None
    bounds = [b for b in (before, now) if b is not None]
    return before, (max(bounds) if bounds else None)


def load_states(store: StateStore, plan: IncrementalPlan) -> tuple[dict[str, DataFrame] | None, str | None]:
    """The previous checkpoint's state tables by their names in a step's states, or (None, the name in the
    checkpoint of a table it lacks)."""
    found = {}
    for op in plan.ops:
        for name, stored, _ in state_tables(op):
            df = store.table(stored)
            if df is None:
                return None, stored
            found[name] = df
    return found, None
