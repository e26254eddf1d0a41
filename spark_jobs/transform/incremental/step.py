"""One step of the incremental engine: what a transaction knows (its inputs, their histories, the plan) and the
helpers every operator's step uses — a segment's change from its frontiers', the rows of the keys a change touches, the
names of the state tables.

Operators (:mod:`.operators`) import this module and the plan's types (:mod:`.plan`); nothing here imports an
operator.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from pyspark.sql import Column, DataFrame, Observation, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spark_jobs.columns import col
from spark_jobs.parquet_files import num_rows
from spark_jobs.transform.catalyst import Catalyst
from spark_jobs.transform.incremental.delta import Delta, cancel
from spark_jobs.transform.incremental.frames import COUNT, as_frame, empty, evaluate, local_relation, project
from spark_jobs.transform.incremental.plan import IncrementalPlan, Op, Path, Segment
from spark_jobs.transform.incremental.sizing import LOCAL_ROWS, StepSizing
from spark_jobs.transform.incremental.state import same_keys
from spark_jobs.transform.inputs import (
    OP_CORRECT_FROM,
    OP_RETRACT,
    KeyBound,
    QueryInput,
    append_only,
    history_paths,
    rows_of,
    slice_rows,
)

KEY = "__odf_key"
#: The row count :meth:`Step.keep` observes in the one job that fills a kept frame.
KEPT_ROWS = "__odf_rows"


# -- the names of state tables (in a step's states and in the checkpoint) --------------------------------------------

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



# -- the step ---------------------------------------------------------------------------------------------------------

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
    _kept: list[bool] = field(default_factory=list)  # per materialised frame: whether it became a local relation

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
        """Materialise a frame that several later jobs read (:meth:`leaf`, released at the end of the step); the one
        job that fills it also computes ``stats`` (aggregate columns) over it, observed, and its row count
        (``KEPT_ROWS``).

        Not ``persist()``: a later frame joins frames derived from a kept one (the new rows with their partitions'
        state rows, both from the change), Spark renames one side's attributes, no longer finds the cached plan, and
        computes the kept frame again, with the broadcasts inside it, in every query that reads it. A tiny step of
        a window over a window with late rows ran 76 Spark jobs so (57 broadcasts), 41 as leaves
        (docs/transforms.md)."""
        obs = Observation()
        leaf = self._checkpoint(df.observe(obs, F.count(F.lit(1)).alias(KEPT_ROWS), *stats))
        row = Row(**obs.get)
        kept = self._localise(leaf, row[KEPT_ROWS])
        self._kept.append(kept is not leaf)
        return kept, row

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
            rows = row[KEPT_ROWS]
            fits = self.sizing.broadcastable(rows)
        return F.broadcast(df) if fits else df

    def narrow(self, df: DataFrame) -> DataFrame:
        """``df`` in one partition when the step's shuffles run in one (a small step): a frame of several parts (a
        union of the old states and the changed rows, each its own scan) that an aggregation then shuffles into one
        partition is read by one task instead, and the aggregation needs no shuffle (Spark sees one partition: it
        satisfies every distribution). A tiny GROUP BY step's aggregation ran three tasks and a shuffle stage so."""
        if self.sizing is None or self.sizing.partitions != 1:
            return df
        return df.coalesce(1)

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
        """A frame computed once (released at the end of the step): a plan that joins two frames derived from one
        persisted frame recomputes it (the join renames one side's attributes, and the renamed plan no longer matches
        the cached one); a materialised leaf has no plan to recompute."""
        if self.sizing is None or not self.sizing.local_leaves:
            self._kept.append(False)
            return self._checkpoint(df)
        return self.keep(df)[0]

    def _checkpoint(self, df: DataFrame) -> DataFrame:
        leaf = df.localCheckpoint(eager=True)
        self._leaves.append(leaf)
        return leaf

    def _localise(self, leaf: DataFrame, rows: int) -> DataFrame:
        """A checkpointed leaf of at most :data:`.sizing.LOCAL_ROWS` rows in a small step, as a local relation of
        the same rows (:func:`.frames.local_relation`): Spark's optimizer sees its rows, so a frame that is
        empty drops out of the plans that read it and a small one is broadcast without a job of its own (tiny steps:
        ~0.9x the CPU, benchmarks/RESULTS.md ``bench_local_leaves``). Past that the checkpoint stays."""
        if self.sizing is None or not self.sizing.local_leaves or rows > LOCAL_ROWS:
            return leaf
        local = local_relation(leaf)
        self._leaves.remove(leaf)
        _unpersist(leaf)
        return local

    def kept(self) -> str | None:
        """What the step materialised: ``7 frame(s) kept, 5 as local relations`` (None: nothing)."""
        if not self._kept:
            return None
        return f"{len(self._kept)} frame(s) kept, {sum(self._kept)} as local relations"

    def release(self) -> None:
        for leaf in self._leaves:  # the checkpointed blocks (else kept until the JVM collects the frames)
            _unpersist(leaf)
        self._leaves.clear()


def _unpersist(checkpoint: DataFrame) -> None:
    checkpoint._jdf.queryExecution().logical().rdd().unpersist(False)


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



# -- rows of the keys a change touches ----------------------------------------------------------------------------

def restrict_keys(df: DataFrame, keys_df: DataFrame, keys: Sequence[str]) -> DataFrame:
    """Rows of ``df`` whose keys (null-safe) appear in ``keys_df``."""
    if not keys:
        return df
    wanted = keys_df.select(*[F.col(k).alias(f"__odf_key{i}") for i, k in enumerate(keys)]).distinct()
    return df.join(wanted, same_keys(df, wanted, keys, list(wanted.columns)), "left_semi")


def _with_keys(cat: Catalyst, df: DataFrame, attrs: Sequence[Any], keys: Sequence[Any]) -> DataFrame:
    """The frame (positional columns ``c0..``) with the key expressions added as ``__odf_key<i>``."""
    df = df.drop(COUNT) if COUNT in df.columns else df
    exprs = [(f"c{i}", a) for i, a in enumerate(attrs)] + [(f"{KEY}{j}", k) for j, k in enumerate(keys)]
    return project(cat, df, attrs, exprs)


def touched_keys(cat: Catalyst, delta: "Delta", attrs: Sequence[Any], keys: Sequence[Any]) -> DataFrame:
    rows = delta.pos.drop(COUNT).unionByName(delta.neg.drop(COUNT))
    return _with_keys(cat, rows, attrs, keys).select(*[f"{KEY}{j}" for j in range(len(keys))]).distinct()


def restrict(cat: Catalyst, df: DataFrame, attrs: Sequence[Any], keys: Sequence[Any], wanted: DataFrame | None
             ) -> DataFrame:
    """The rows of a frame whose keys (null-safe) are among ``wanted`` (None: all rows; broadcast when the step
    marked it so: ``Step.broadcast``)."""
    if wanted is None:
        return df
    from spark_jobs.transform.incremental.state import same_keys

    names = [f"{KEY}{j}" for j in range(len(keys))]
    w = wanted.toDF(*[f"__odf_want{j}" for j in range(len(keys))])
    keyed = _with_keys(cat, df, attrs, keys)
    kept = keyed.join(w, same_keys(keyed, w, names, list(w.columns)), "left_semi")
    return kept.drop(*names)


def union_frames(frames: list[DataFrame]) -> DataFrame:
    """The rows of several frames of one node (plain: counts expanded away)."""
    out = frames[0].drop(COUNT) if COUNT in frames[0].columns else frames[0]
    for f in frames[1:]:
        out = out.unionByName(f.drop(COUNT) if COUNT in f.columns else f)
    return out
