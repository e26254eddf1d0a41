"""The running-window operator: a state per window partition (:mod:`..running` holds its algebra), so a new row's
output is computed from its partition's state instead of the partition's history.

A lag, a lead or a frame keeps the partitions' last rows as a tail table; a window over a window that outputs rows
again keeps the values of the rows the window below can output again (:mod:`..reissued`). A late row or a removal
recomputes its partition from the inputs' history.
"""
from __future__ import annotations

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
from spark_jobs.transform.incremental.step import Step, op_table, restrict, segment_change, tail_table, union_frames


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

def running_step(step: Step, op: Op, old: DataFrame, changes: Mapping[str, Delta], old_tail: DataFrame | None = None,
         reissue: tuple[DataFrame, DataFrame] | None = None
         ) -> tuple[Delta, DataFrame, DataFrame | None, DataFrame | None]:
    """The change of the window's output, the new states, (a lag or lead) the new tail table and (over a window that
    outputs rows again, ``reissue``: the old table of :mod:`.reissued` and the child's rows the window below can
    output again after this step) the new table of reissued rows' values."""
    spec: RunningSpec = op.spec
    cat = step.cat
    attrs = cat.items(spec.child.output())
    width = len(attrs)
    keys = spec.keys
    d = segment_change(step, op.children[0], changes)
    if d.empty:
        nothing = empty(step.session, cat.items(op.node.output()))
        return Delta(nothing, nothing, empty=True), old, old_tail, None if reissue is None else reissue[0]
    pairs = None
    if reissue is not None and not d.gains_only:  # rows the window below output again, with the same values here
        tagged = step.leaf(reissued.pair(cat, spec, d.pos, d.neg, reissue[0], step.broadcast))
        pairs = reissued.pairs_of(tagged)
        d = Delta(*reissued.rest(tagged, width))
    gained, _ = step.keep(row_columns(cat, spec, expand(d.pos), attrs, rows=True, args=False))
    lost_keys = None if d.gains_only else row_columns(cat, spec, expand(d.neg), attrs, args=False).select(*keys)
    touched = gained.select(*keys)
    touched = step.broadcast((touched if lost_keys is None else touched.unionByName(lost_keys)).distinct())
    mine, mine_rows = step.keep(by_keys(old, touched, keys, "left_semi"))
    m = mine.select(*[F.col(c).alias(f"m_{c}") for c in mine.columns])
    tagged = gained.join(m, same_keys(gained, m, keys, [f"m_{k}" for k in keys]), "left")
    late_rows = tagged.where(F.col(f"m_{ROWS}").isNotNull()
                             & ~(last_order(spec, peers=True) > last_order(spec, "m_l", peers=True))).select(*keys)
    late, seen = step.keep((late_rows if lost_keys is None else late_rows.unionByName(lost_keys)).distinct())
    late = step.broadcast(late, seen["__odf_rows"])
    row_cols = [f"c{i}" for i in range(width)]
    appended = gained
    if seen["__odf_rows"]:
        appended = by_keys(gained, late, keys, "left_anti")
    neg: list[DataFrame] = []
    added = initial(cat, spec, appended.select(*row_cols))
    tail_parts: list[DataFrame] = []
    if spec.has_tail:
        assert old_tail is not None
        tailed = by_keys(mine, late, keys, "left_anti") if seen["__odf_rows"] else mine
        # the partitions' keys (one state row each): as many as the touched ones
        kept, _ = step.keep(by_keys(old_tail, step.broadcast(tailed.select(*keys), mine_rows["__odf_rows"]), keys,
                                    "left_semi"))
        extra = spec.tail_columns
        tails = kept.select(*row_cols, POSITION, *extra)
        types = {f.name: f.dataType for f in kept.schema.fields}
        new_rows = appended.select(*row_cols, *[F.lit(None).cast(types[c]).alias(c) for c in (POSITION, *extra)])
        lead = spec.looks_ahead
        over = over_tail(cat, spec, op.node, new_rows.unionByName(tails), tailed, tails, not lead)
        if lead:  # the tails' rows new rows can change, retracted as they were output and output with their new
            # values (those whose output is the same cancel out); the new tail from the tails' rows and the new rows,
            # with the values they are output with now
            pos = [over.where(F.col(POSITION).isNull() | F.col(CHANGED)).drop(POSITION, CHANGED)]
            neg.append(tails.where(F.col(CHANGED)).select(
                *row_cols, *[F.col(f"v{j}").cast(f.result_type).alias(f"c{width + j}")
                             for j, f in enumerate(spec.functions)]))
            tail_parts.append(tail_rows(cat, spec, over.select(
                *row_cols, *[F.col(f"c{width + j}").alias(f"v{j}") for j in spec.stored])))
        else:
            pos = [over.drop(POSITION)]
            tail_parts.append(extended_tail(cat, spec, kept, appended.select(*row_cols), added))
    else:
        pos = [extended(cat, spec, op.node, evaluated(cat, spec, op.node, appended.select(*row_cols)), mine)]
    grown = merged(spec, mine, added)
    parts = [grown]
    if seen["__odf_rows"]:  # late rows or removals: those partitions are recomputed from their history
        node = op.children[0].node
        ranged = key_ranges.own(step, node, spec.partition)
        before = restrict(cat, step.replay(node, old=True, bounds=ranged), attrs, spec.partition, late)
        if d.gains_only:  # after = before + the gained rows: one history read (leaves: many queries read them)
            before = step.leaf(before)
            mine_new = restrict(cat, gained.select(*row_cols), attrs, spec.partition, late)
            after = before.unionByName(mine_new)
        else:
            after = restrict(cat, step.replay(node, bounds=ranged), attrs, spec.partition, late)
        after = step.leaf(after)
        pos.append(evaluated(cat, spec, op.node, after))
        neg.append(evaluated(cat, spec, op.node, before))
        parts.append(initial(cat, spec, after))
        if spec.has_tail:
            tail_parts.append(tail_rows(cat, spec, with_values(cat, spec, op.node, after)))
    new = by_keys(old, touched, keys, "left_anti")
    for p in parts:
        new = new.unionByName(p.select(*old.columns))
    new_tail = None
    if spec.has_tail:
        new_tail = by_keys(old_tail, touched, keys, "left_anti")
        for p in tail_parts:
            new_tail = new_tail.unionByName(p.select(*old_tail.columns))
    new_table = None
    if pairs is not None:  # a reissued row of a recomputed partition is output with the partition
        now = by_keys(pairs, late, keys, "left_anti") if seen["__odf_rows"] else pairs
        pos.append(reissued.output(spec, now, width, gained=True))
        neg.append(reissued.output(spec, now, width, gained=False))
    out_pos = union_frames(pos)
    if reissue is not None:  # the output rows are read twice: by the operator above and by the table's update
        out_pos = step.leaf(out_pos)
        new_table = reissued.updated(cat, spec, reissue[0], pairs, late if seen["__odf_rows"] else None, out_pos,
                                     reissue[1], step.broadcast)
    out_neg = union_frames(neg) if neg else empty(step.session, cat.items(op.node.output()))
    gains_only = d.gains_only and not seen["__odf_rows"] and not spec.looks_ahead and pairs is None
    return Delta(out_pos, out_neg, gains_only=gains_only), new, new_tail, new_table
