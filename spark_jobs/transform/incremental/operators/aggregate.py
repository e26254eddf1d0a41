"""The aggregate operator: a state per group (:mod:`..aggregate` holds its algebra), updated by each step's rows.

A step sums the signed rows of its child's change into the touched groups' states; a group whose min/max lost its
value, or whose event-time window had closed and left the state, is recomputed from the inputs' history. A count
DISTINCT keeps a table of each group's values and their counts. The query's top aggregate pairs each touched group's
old and new output row (:func:`group_pairs`), so the output's change needs no netting by value.
"""
from __future__ import annotations

from typing import Any, Mapping, MutableMapping

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spark_jobs.transform.catalyst import Catalyst
from spark_jobs.transform.incremental import aggregate, key_ranges
from spark_jobs.transform.incremental.delta import Delta, weighted
from spark_jobs.transform.incremental.frames import WEIGHT, empty, expand, project, spark_type
from spark_jobs.transform.incremental.operator import OperatorBase, OperatorStep, StateTable
from spark_jobs.transform.incremental.plan import Op, Path, Unsupported
from spark_jobs.transform.incremental.step import Step, op_table, restrict_keys, segment_change, values_table

REVIVE = "__odf_revive"


class AggregateOperator(OperatorBase):
    kind = "aggregate"
    nodes = frozenset({"Aggregate"})

    def analyze(self, cat: Catalyst, node: Any, why: Unsupported | None) -> aggregate.AggregateSpec:
        return aggregate.analyze(cat, node)

    def describe(self, cat: Catalyst, node: Any, spec: aggregate.AggregateSpec) -> tuple[str, str]:
        return aggregate.label(cat, node), aggregate.describe(spec)

    def children(self, cat: Catalyst, node: Any, spec: aggregate.AggregateSpec) -> list[tuple[Any, Path]]:
        return [(spec.child, (0,))]

    def state_tables(self, op: Op) -> list[StateTable]:
        return [(op.id, op_table(op), op.spec.keys),
                *[(values_table(op.id, j), values_table(op_table(op), j), op.spec.keys)
                  for j in aggregate.value_tables(op.spec)]]

    def initial_states(self, step: Step, op: Op, below: Mapping[str, DataFrame]) -> dict[str, DataFrame]:
        rows = _rows(step, op, step.replay(op.spec.child).withColumn(WEIGHT, F.lit(1).cast("long")))
        values = aggregate.value_tables(op.spec)
        if values:  # read and projected once for the group states and each value table
            rows, _ = step.keep(rows)
        states = aggregate.initial(op.spec, aggregate.changes(op.spec, rows))
        return {op.id: _open(op.spec, states, step.evict),
                **{values_table(op.id, j): _open(op.spec, aggregate.value_counts(op.spec, j, rows), step.evict,
                                                 aggregate.COUNT) for j in values}}

    def step(self, step: Step, op: Op, old: Mapping[str, DataFrame], new: MutableMapping[str, DataFrame],
             changes: Mapping[str, Delta], top: bool) -> OperatorStep:
        return OperatorStep(*aggregate_step(step, op, old, changes, top))


AGGREGATE = AggregateOperator()


def _rows(step: Step, op: Op, frame: DataFrame) -> DataFrame:
    """A weighted frame of the operator's child as the aggregate's argument columns plus ``__odf_w``."""
    spec = op.spec
    attrs = step.cat.items(spec.child.output())
    return project(step.cat, frame, attrs, aggregate.arguments(spec), keep=[WEIGHT])


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
    return aggregate.initial(spec, aggregate.changes(spec, restrict_keys(rows, groups, spec.keys)))


def aggregate_step(step: Step, op: Op, old_tables: Mapping[str, DataFrame], changes: Mapping[str, Delta],
                   paired: bool = False) -> tuple[Delta | None, dict[str, DataFrame], DataFrame | None]:
    """The change of an aggregate's output, its new state tables and, with ``paired`` (the query's top aggregate)
    when every touched group was updated from its state, :func:`group_pairs` (then instead of the change: nothing
    reads it, and building its plans was a tenth of a tiny step, issue #64)."""
    spec = op.spec
    old = old_tables[op.id]
    child = segment_change(step, op.children[0], changes)
    if child.empty:
        nothing = empty(step.session, step.cat.items(op.node.output()))
        unchanged = {name: old_tables[name] for name, _, _ in AGGREGATE.state_tables(op)}
        return Delta(nothing, nothing, empty=True), unchanged, None
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
    combined, seen = step.keep(aggregate.update(spec, old, rows, step.narrow).withColumn(REVIVE, revive), *stats)
    pairs = None
    if paired and not (seen["flagged"] or seen["revived"] or (fine is not None and seen["fine"])):
        pairs = group_pairs(step, op, combined.where(F.col(aggregate.TOUCHED)))
    state_cols = [*spec.keys, *aggregate.state_columns(spec)]
    kept = ~F.col(aggregate.RECOMPUTE) & ~F.col(REVIVE)
    new = combined.where(kept).select(*state_cols)
    recomputed = None
    if seen["flagged"] or seen["revived"]:  # a removed row reached a group's min/max, or a closed window changed
        recomputed, _ = step.keep(_recomputed(step, op, combined.where(recompute | F.col(REVIVE))).select(*state_cols))
        new = new.unionByName(recomputed)
    # final windows leave the state (their rows were written when they changed)
    tables[op.id] = _open(spec, new.where(aggregate.alive(spec)), step.evict)
    if pairs is not None:  # (no group flagged or revived) the output's change is read from the pairs: no plans
        return None, tables, pairs  # for the groups' rows before and after
    touched = combined.where(F.col(aggregate.TOUCHED))
    after = touched.where(kept).select(*state_cols)
    if recomputed is not None:
        after = after.unionByName(recomputed)
    after = after.where(aggregate.alive(spec))
    before = aggregate.old_states(spec, touched).where(aggregate.alive(spec))
    if seen["revived"]:
        gone = _recomputed(step, op, combined.where(F.col(REVIVE)), old=True).select(*state_cols)
        before = before.unionByName(gone.where(aggregate.alive(spec)))
    attrs = aggregate.finals_attrs(spec)
    results = [(f"c{i}", r) for i, r in enumerate(spec.results)]
    out = Delta(project(step.cat, aggregate.finals(spec, after), attrs, results),
                project(step.cat, aggregate.finals(spec, before), attrs, results))
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


