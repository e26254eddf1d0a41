"""The running-window operator: a state per window partition (:mod:`..running` holds its algebra), so a new row's
output is computed from its partition's state instead of the partition's history.

A lag, a lead or a frame keeps the partitions' last rows as a tail table; a window over a window that outputs rows
again keeps the values of the rows the window below can output again (:mod:`..reissued`). A late row or a removal
recomputes its partition from the inputs' history.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, MutableMapping, Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_jobs.transform.catalyst import Catalyst
from spark_jobs.transform.incremental import key_ranges, reissued, running
from spark_jobs.transform.incremental.delta import Delta
from spark_jobs.transform.incremental.frames import empty, expand
from spark_jobs.transform.incremental.operator import OperatorBase, OperatorStep, StateTable
from spark_jobs.transform.incremental.plan import Op, Segment, Unsupported
from spark_jobs.transform.incremental.running import CHANGED, POSITION, ROWS, RunningSpec
from spark_jobs.transform.incremental.running_tails import (
    evaluated,
    extended,
    extended_tail,
    initial,
    last_order,
    merged,
    over_tail,
    row_columns,
    tail_rows,
    with_values,
)
from spark_jobs.transform.incremental.state import by_keys, same_keys
from spark_jobs.transform.incremental.step import (
    KEPT_ROWS,
    Step,
    op_table,
    restrict,
    segment_change,
    tail_table,
    union_frames,
)


class RunningOperator(OperatorBase):
    kind = running.KIND
    nodes = frozenset({"Window"})

    def analyze(self, cat: Catalyst, node: Any, why: Unsupported | None) -> RunningSpec:
        try:
            pair = running.analyze_pair(cat, node)
        except Unsupported:  # each of the two on its own
            pair = None
        # a window split for its ties: one state; else the window alone (Unsupported: no running state)
        return pair if pair is not None else running.analyze(cat, node)

    def annotate(self, cat: Catalyst, node: Any, spec: RunningSpec, children: Sequence[Segment]) -> RunningSpec:
        return reissued.annotate(cat, node, spec, children[0])  # over a window that outputs rows again

    def state_tables(self, op: Op) -> list[StateTable]:
        found = [(op.id, op_table(op), op.spec.keys)]
        if op.spec.has_tail:
            found.append((tail_table(op.id), tail_table(op_table(op)), op.spec.keys))
        if op.spec.reads:
            found.append((reissued.table(op.id), reissued.table(op_table(op)), op.spec.keys))
        return found

    def initial_states(self, step: Step, op: Op, below: Mapping[str, DataFrame]) -> dict[str, DataFrame]:
        rows = step.replay(op.spec.child)
        tail = {tail_table(op.id): tail_rows(step.cat, op.spec, with_values(step.cat, op.spec, op.node, rows))
                } if op.spec.has_tail else {}
        if op.spec.reads:
            tail[reissued.table(op.id)] = reissued.initial(step.cat, op.spec, op.node, rows,
                                                           reissued.reissuable(step.cat, op, below))
        return {op.id: initial(step.cat, op.spec, rows), **tail}

    def step(self, step: Step, op: Op, old: Mapping[str, DataFrame], new: MutableMapping[str, DataFrame],
             changes: Mapping[str, Delta], top: bool) -> OperatorStep:
        again = None
        if op.spec.reads:  # the window below's new tail is read here and written to the checkpoint: once
            lower = reissued.below(op.children[0])
            assert lower is not None
            new[tail_table(lower.id)] = step.leaf(new[tail_table(lower.id)])
            again = (old[reissued.table(op.id)], reissued.reissuable(step.cat, op, new))
        change, state, tail, values = running_step(step, op, old[op.id], changes, old.get(tail_table(op.id)), again)
        tables = {op.id: state}
        if tail is not None:
            tables[tail_table(op.id)] = tail
        if values is not None:
            tables[reissued.table(op.id)] = values
        return OperatorStep(change, tables)


RUNNING = RunningOperator()


# -- a step ---------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Reach:
    """The rows a step's change reaches, as the window child's rows by position (``c0``...) with their partition key
    and ORDER BY values."""

    gained: DataFrame  # the gained rows (kept)
    touched: DataFrame  # the keys of every partition the change reaches
    states: DataFrame  # those partitions' old state rows (kept)
    state_count: int
    late: DataFrame  # the keys of the partitions recomputed from their history: a late row or a removal
    recomputes: bool  # whether there is such a partition
    appended: DataFrame  # the gained rows of the other partitions: after their partition's last row

    def kept_apart(self, frame: DataFrame, keys: Sequence[str]) -> DataFrame:
        """``frame`` without the rows of recomputed partitions (their output and state come from their history)."""
        return by_keys(frame, self.late, keys, "left_anti") if self.recomputes else frame


@dataclass
class _Parts:
    """The parts of a step's result, unioned at the end in the order they were found."""

    gained: list[DataFrame] = field(default_factory=list)  # output rows gained
    lost: list[DataFrame] = field(default_factory=list)  # output rows lost
    states: list[DataFrame] = field(default_factory=list)  # new state rows of the touched partitions
    tails: list[DataFrame] = field(default_factory=list)  # new tail rows of the touched partitions (lag/lead/frames)


def running_step(step: Step, op: Op, old: DataFrame, changes: Mapping[str, Delta], old_tail: DataFrame | None = None,
                 reissue: tuple[DataFrame, DataFrame] | None = None
                 ) -> tuple[Delta, DataFrame, DataFrame | None, DataFrame | None]:
    """The change of the window's output, the new states, (a lag or lead) the new tail table and (over a window that
    outputs rows again, ``reissue``: the old table of :mod:`.reissued` and the child's rows the window below can
    output again after this step) the new table of reissued rows' values."""
    spec: RunningSpec = op.spec
    cat = step.cat
    child_attrs = cat.items(spec.child.output())
    width = len(child_attrs)
    row_cols = [f"c{i}" for i in range(width)]
    change = segment_change(step, op.children[0], changes)
    if change.empty:
        nothing = empty(step.session, cat.items(op.node.output()))
        return Delta(nothing, nothing, empty=True), old, old_tail, None if reissue is None else reissue[0]
    change, reissued_pairs = _split_reissued(step, spec, change, reissue, width)
    reach = _reach(step, spec, change, old, child_attrs)
    appended_states = initial(cat, spec, reach.appended.select(*row_cols))
    parts = _appended(step, op, reach, old_tail, appended_states, row_cols)
    parts.states.append(merged(spec, reach.states, appended_states))
    if reach.recomputes:  # late rows or removals: those partitions are recomputed from their history
        before, after = _history_slices(step, op, reach, change.gains_only, child_attrs, row_cols)
        _recompute(step, op, before, after, parts)
    new_state = _replaced(old, reach.touched, spec.keys, parts.states)
    new_tail = None
    if spec.has_tail:
        assert old_tail is not None
        new_tail = _replaced(old_tail, reach.touched, spec.keys, parts.tails)
    if reissued_pairs is not None:  # a reissued row of a recomputed partition is output with the partition
        now = reach.kept_apart(reissued_pairs, spec.keys)
        parts.gained.append(reissued.output(spec, now, width, gained=True))
        parts.lost.append(reissued.output(spec, now, width, gained=False))
    out_gained = union_frames(parts.gained)
    new_values = None
    if reissue is not None:  # the output rows are read twice: by the operator above and by the table's update
        out_gained = step.leaf(out_gained)
        new_values = reissued.updated(cat, spec, reissue[0], reissued_pairs, reach.late if reach.recomputes else None,
                                      out_gained, reissue[1], step.broadcast)
    out_lost = union_frames(parts.lost) if parts.lost else empty(step.session, cat.items(op.node.output()))
    gains_only = (change.gains_only and not reach.recomputes and not spec.looks_ahead
                  and reissued_pairs is None)
    return Delta(out_gained, out_lost, gains_only=gains_only), new_state, new_tail, new_values


def _split_reissued(step: Step, spec: RunningSpec, change: Delta, reissue: tuple[DataFrame, DataFrame] | None,
                    width: int) -> tuple[Delta, DataFrame | None]:
    """The change without the rows the window below output again with the same values here, and those rows paired
    (lost with gained); None when there can be none."""
    if reissue is None or change.gains_only:
        return change, None
    tagged = step.leaf(reissued.pair(step.cat, spec, change.pos, change.neg, reissue[0], step.broadcast))
    return Delta(*reissued.rest(tagged, width)), reissued.pairs_of(tagged)


def _reach(step: Step, spec: RunningSpec, change: Delta, old: DataFrame, child_attrs: Sequence[Any]) -> _Reach:
    """The partitions the change touches, their old states, and which of them must be recomputed."""
    cat, keys = step.cat, spec.keys
    gained, _ = step.keep(row_columns(cat, spec, expand(change.pos), child_attrs, rows=True, args=False))
    lost_keys = None if change.gains_only else \
        row_columns(cat, spec, expand(change.neg), child_attrs, args=False).select(*keys)
    touched = gained.select(*keys)
    touched = step.broadcast((touched if lost_keys is None else touched.unionByName(lost_keys)).distinct())
    states, state_stats = step.keep(by_keys(old, touched, keys, "left_semi"))
    late_rows = _late_rows(spec, gained, states)
    late, late_stats = step.keep((late_rows if lost_keys is None else late_rows.unionByName(lost_keys)).distinct())
    late = step.broadcast(late, late_stats[KEPT_ROWS])
    recomputes = bool(late_stats[KEPT_ROWS])
    appended = by_keys(gained, late, keys, "left_anti") if recomputes else gained
    return _Reach(gained, touched, states, state_stats[KEPT_ROWS], late, recomputes, appended)


def _late_rows(spec: RunningSpec, gained: DataFrame, states: DataFrame) -> DataFrame:
    """The partition keys of gained rows that do not come after their partition's last row."""
    keys = spec.keys
    prefixed = states.select(*[F.col(c).alias(f"m_{c}") for c in states.columns])
    with_state = gained.join(prefixed, same_keys(gained, prefixed, keys, [f"m_{k}" for k in keys]), "left")
    return with_state.where(F.col(f"m_{ROWS}").isNotNull()
                            & ~(last_order(spec, peers=True) > last_order(spec, "m_l", peers=True))).select(*keys)


def _appended(step: Step, op: Op, reach: _Reach, old_tail: DataFrame | None, appended_states: DataFrame,
              row_cols: list[str]) -> _Parts:
    """The output of the rows appended to their partitions, from the partitions' states and (a lag, a lead or a
    frame) tails, and the partitions' new tails."""
    spec, cat, keys = op.spec, step.cat, op.spec.keys
    appended_rows = reach.appended.select(*row_cols)
    if not spec.has_tail:
        return _Parts(gained=[extended(cat, spec, op.node, evaluated(cat, spec, op.node, appended_rows),
                                       reach.states)])
    assert old_tail is not None
    width = len(row_cols)
    tailed = reach.kept_apart(reach.states, keys)
    # the partitions' keys (one state row each): as many as the touched ones
    kept, _ = step.keep(by_keys(old_tail, step.broadcast(tailed.select(*keys), reach.state_count), keys,
                                "left_semi"))
    extra = spec.tail_columns
    tails = kept.select(*row_cols, POSITION, *extra)
    types = {f.name: f.dataType for f in kept.schema.fields}
    new_rows = reach.appended.select(*row_cols, *[F.lit(None).cast(types[c]).alias(c) for c in (POSITION, *extra)])
    looks_ahead = spec.looks_ahead
    over = over_tail(cat, spec, op.node, new_rows.unionByName(tails), tailed, tails, not looks_ahead)
    if not looks_ahead:
        return _Parts(gained=[over.drop(POSITION)],
                      tails=[extended_tail(cat, spec, kept, appended_rows, appended_states)])
    # the tails' rows new rows can change, retracted as they were output and output with their new values (those
    # whose output is the same cancel out); the new tail from the tails' rows and the new rows, with the values they
    # are output with now
    return _Parts(
        gained=[over.where(F.col(POSITION).isNull() | F.col(CHANGED)).drop(POSITION, CHANGED)],
        lost=[tails.where(F.col(CHANGED)).select(
            *row_cols, *[F.col(f"v{j}").cast(f.result_type).alias(f"c{width + j}")
                         for j, f in enumerate(spec.functions)])],
        tails=[tail_rows(cat, spec, over.select(*row_cols, *[F.col(f"c{width + j}").alias(f"v{j}")
                                                             for j in spec.stored]))])


def _history_slices(step: Step, op: Op, reach: _Reach, gains_only: bool, child_attrs: Sequence[Any],
                    row_cols: list[str]) -> tuple[DataFrame, DataFrame]:
    """The recomputed partitions' rows before and after the step, from the history of the window's child; read once
    when the change only gains (after = before + the gained rows: leaves, as many queries read them)."""
    cat, spec = step.cat, op.spec
    child = op.children[0].node
    ranged = key_ranges.own(step, child, spec.partition)
    before = restrict(cat, step.replay(child, old=True, bounds=ranged), child_attrs, spec.partition, reach.late)
    if gains_only:
        before = step.leaf(before)
        gained = restrict(cat, reach.gained.select(*row_cols), child_attrs, spec.partition, reach.late)
        after = before.unionByName(gained)
    else:
        after = restrict(cat, step.replay(child, bounds=ranged), child_attrs, spec.partition, reach.late)
    return before, step.leaf(after)


def _recompute(step: Step, op: Op, before: DataFrame, after: DataFrame, parts: _Parts) -> None:
    """Add the recomputed partitions' parts: their whole output again (lost as it was, gained as it is now), their
    states and tails."""
    cat, spec = step.cat, op.spec
    parts.gained.append(evaluated(cat, spec, op.node, after))
    parts.lost.append(evaluated(cat, spec, op.node, before))
    parts.states.append(initial(cat, spec, after))
    if spec.has_tail:
        parts.tails.append(tail_rows(cat, spec, with_values(cat, spec, op.node, after)))


def _replaced(old: DataFrame, touched: DataFrame, keys: Sequence[str], parts: list[DataFrame]) -> DataFrame:
    """``old`` (a state or tail table) with the touched partitions' rows replaced by ``parts``."""
    new = by_keys(old, touched, keys, "left_anti")
    for part in parts:
        new = new.unionByName(part.select(*old.columns))
    return new
