"""A running window over a window that outputs rows again: the values it gave the rows the window below can retract.

A window whose rows are output again (a ``lead``, a frame reaching FOLLOWING rows: :attr:`.running.RunningSpec.
looks_ahead`) retracts a row it output and outputs it with new values. For the running window above it that is a
removal and a new row, and a removal recomputes the partition from its history (:mod:`.running`): every step would
read the history. But the row comes back with the same values of every column the upper window reads (its PARTITION
BY, ORDER BY and arguments: the lower window's values change, and the upper one reads other columns), so the upper
window's values at it do not change, nor anywhere else: only the columns it passes through do. So the upper window
keeps, in a table of its state, the values it gave each row the lower window can still output again (its tail's rows
that new rows can change, :attr:`.running.CHANGED`, through the row-wise nodes between the two), and a retraction
that matches one of them, with a new row that has the same values of the columns the upper window reads, is a
*reissued* row: retracted with its kept values, output again with them, and no partition is recomputed.

Other retractions (a late row or a removal below recomputes the lower window's partitions), and rows that read
different values now, keep the recomputation by key. An upper window whose own rows are output again is not
eligible: its tail would keep the rows' old columns.
"""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Mapping

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from spark_jobs.transform.catalyst import Catalyst
from spark_jobs.transform.incremental import running
from spark_jobs.transform.incremental.frames import evaluate, expand
from spark_jobs.transform.incremental.running import RunningSpec
from spark_jobs.transform.incremental.running_tails import evaluated, row_columns
from spark_jobs.transform.incremental.step import tail_table

if TYPE_CHECKING:
    from spark_jobs.transform.incremental.plan import Op, Segment

ROW, NTH, READ, HASH = "__odf_row", "__odf_nth", "__odf_read", "__odf_hash"
LOST, GAINED, MATCHED = "__odf_lost", "__odf_gained", "__odf_matched"


def table(op_id: str) -> str:
    """The name (in the checkpoint and in a step's states) of a running window's table of the values it gave the
    rows the window below it can output again."""
    return f"{op_id}/reissued"


def below(seg: "Segment") -> "Op | None":
    """The running window that outputs rows again under a segment of row-wise nodes, if it is the segment's only
    source of rows."""
    if len(seg.frontiers) != 1 or seg.frontiers[0].kind != "op":
        return None
    op = seg.frontiers[0].op
    return op if op is not None and op.kind == running.KIND and op.spec.looks_ahead else None


def annotate(cat: Catalyst, node: Any, spec: RunningSpec, child: "Segment") -> RunningSpec:
    """``spec`` marked to keep the values of reissued rows (:attr:`.running.RunningSpec.reads`: the child's columns
    the window reads) when the window below it outputs rows again and its own rows are not."""
    if spec.looks_ahead or below(child) is None:
        return spec
    nodes = [node, node.child()] if spec.peers else [node]  # (a pair's two Window nodes)
    ids = {a.exprId().id() for n in nodes for a in cat.items(n.references().toSeq())}
    reads = tuple(i for i, a in enumerate(cat.items(spec.child.output())) if a.exprId().id() in ids)
    detail = (f"{spec.detail}; a row the window below outputs again with the same {len(reads)} column(s) this one "
              "reads keeps the values this window gave it (kept while the window below can change the row)")
    return replace(spec, reads=reads, detail=detail)


def reissuable(cat: Catalyst, op: "Op", states: Mapping[str, DataFrame]) -> DataFrame:
    """The rows of ``op``'s child (by position) that the window below can output again after this step: its new
    tail's rows that new rows can change, as it output them, through the row-wise nodes between."""
    seg = op.children[0]
    frontier = seg.frontiers[0]
    lower = frontier.op
    assert lower is not None
    width = len(cat.items(lower.spec.child.output()))
    tail = states[tail_table(lower.id)].where(F.col(running.CHANGED))
    rows = tail.select(*[f"c{i}" for i in range(width)],
                       *[F.col(f"v{j}").alias(f"c{width + j}") for j in range(len(lower.spec.functions))])
    return evaluate(cat, seg.node, {frontier.path: rows})


def _row(width: int) -> Column:
    return F.struct(*[F.col(f"c{i}") for i in range(width)])


def _values(spec: RunningSpec) -> list[str]:
    return [f"v{j}" for j in range(len(spec.functions))]


def kept(cat: Catalyst, spec: RunningSpec, out: DataFrame) -> DataFrame:
    """Output rows of the window (by position: its child's columns, then its values) as the table keeps them: the
    partition keys, the child's columns ``c<i>`` and the values ``v<j>``."""
    attrs = cat.items(spec.child.output())
    width = len(attrs)
    rows = out.select(*[f"c{i}" for i in range(width)],
                      *[F.col(f"c{width + j}").alias(f"v{j}") for j in range(len(spec.functions))])
    return row_columns(cat, spec, rows, attrs, rows=True, args=False, keep=_values(spec)).select(
        *spec.keys, *[f"c{i}" for i in range(width)], *_values(spec))


def pair(cat: Catalyst, spec: RunningSpec, pos: DataFrame, neg: DataFrame, table: DataFrame,
         broadcast: Callable[[DataFrame], DataFrame]) -> DataFrame:
    """The rows of a change (``pos``, ``neg``: the child's rows gained and lost) tagged as reissued or not, in one
    frame to materialise. A lost row takes the kept entry of the same row (the table has at most one: identical rows
    have none, :func:`updated`; of identical lost rows only the first); a gained row with the same values of the
    columns the window reads takes a lost row that has one (the n-th the n-th). A row of the frame is a pair
    (:data:`LOST` and :data:`GAINED`: the lost row ``c<i>`` and its ``__odf_row``, the gained row ``g<i>``, the keys
    and the kept values ``v<j>``), or a lost or a gained row left (:func:`rest`). ``broadcast`` marks the lost rows'
    hashes to be broadcast when they are few (``Step.broadcast``: a recomputed partition below can retract millions
    of rows, more than a broadcast holds)."""
    width = len(cat.items(spec.child.output()))
    rows = [f"c{i}" for i in range(width)]
    values = _values(spec)
    read = F.struct(*[F.col(f"c{i}") for i in spec.reads])
    lost = expand(neg).select(*rows).withColumn(ROW, _row(width))
    lost = lost.withColumn(NTH, F.row_number().over(Window.partitionBy(ROW).orderBy(ROW)))
    # the entries of the lost rows, found by a hash of the row (the join below matches them exactly)
    wanted = broadcast(lost.select(_row_hash(width).alias("l_hash")))
    entries = table.join(wanted, _row_hash(width) == F.col("l_hash"), "left_semi")
    e = entries.select(_row(width).alias("e_row"), *spec.keys, *values, F.lit(True).alias(MATCHED))
    tagged = lost.join(e, lost[ROW].eqNullSafe(e["e_row"]) & (lost[NTH] == 1), "left") \
        .drop("e_row").withColumn(READ, read).withColumn(LOST, F.lit(True))
    tagged = tagged.withColumn(MATCHED, F.coalesce(F.col(MATCHED), F.lit(False)))
    tagged = tagged.withColumn(NTH, F.row_number().over(Window.partitionBy(READ, MATCHED).orderBy(ROW, NTH)))
    gained = expand(pos).select(*[F.col(c).alias(f"g{i}") for i, c in enumerate(rows)])
    gained = gained.withColumn("g_read", F.struct(*[F.col(f"g{i}") for i in spec.reads]))
    gained = gained.withColumn("g_nth", F.row_number().over(Window.partitionBy("g_read").orderBy(
        F.struct(*[F.col(f"g{i}") for i in range(width)])))).withColumn(GAINED, F.lit(True))
    both = tagged.join(gained, tagged[READ].eqNullSafe(gained["g_read"]) & (tagged[NTH] == gained["g_nth"])
                       & tagged[MATCHED], "full_outer")
    return both.select(*spec.keys, *rows, *[f"g{i}" for i in range(width)], *values, ROW,
                       F.coalesce(F.col(LOST), F.lit(False)).alias(LOST),
                       F.coalesce(F.col(GAINED), F.lit(False)).alias(GAINED))


def pairs_of(tagged: DataFrame) -> DataFrame:
    return tagged.where(F.col(LOST) & F.col(GAINED))


def rest(tagged: DataFrame, width: int) -> tuple[DataFrame, DataFrame]:
    """The gained rows and the lost rows (by position) of a tagged change (:func:`pair`) that are not reissued."""
    gained = tagged.where(~F.col(LOST)).select(*[F.col(f"g{i}").alias(f"c{i}") for i in range(width)])
    lost = tagged.where(~F.col(GAINED)).select(*[f"c{i}" for i in range(width)])
    return gained, lost


def output(spec: RunningSpec, pairs: DataFrame, width: int, gained: bool) -> DataFrame:
    """The window's output rows of reissued rows (by position): the gained rows, or the lost ones, with the kept
    values."""
    cols = [F.col(f"g{i}" if gained else f"c{i}").alias(f"c{i}") for i in range(width)]
    return pairs.select(*cols, *[F.col(f"v{j}").cast(f.result_type).alias(f"c{width + j}")
                                 for j, f in enumerate(spec.functions)])


def updated(cat: Catalyst, spec: RunningSpec, old: DataFrame, pairs: DataFrame | None,
            recomputed: DataFrame | None, out: DataFrame, reissuable: DataFrame,
            broadcast: Callable[[DataFrame], DataFrame]) -> DataFrame:
    """The new table: the old entries but those ``pairs`` used and those of ``recomputed`` partitions (keys), then the
    window's output rows of this step (``out``, by position: reissued rows with their kept values), as far as the
    window below can still output them again (``reissuable``, the child's rows). Identical rows keep no entry: a
    row's values are then ambiguous (rows tied on the ORDER BY can have different running values), and its
    retraction recomputes the partition. ``broadcast`` marks the frames of the step's change the entries are looked
    up by to be broadcast when they are few (``Step.broadcast``).

    Rows are matched by a hash of the row (:func:`_row_hash`; one long join key is cheaper than the rows: a stacked
    step 4.32 -> 3.96 s). A collision only drops an entry, or keeps one longer (:func:`_still_reissuable`): a
    row without an entry recomputes its partition when it is retracted, which is correct, only slower."""
    from spark_jobs.transform.incremental.state import by_keys

    width = len(cat.items(spec.child.output()))
    cols = [*spec.keys, *[f"c{i}" for i in range(width)], *_values(spec), HASH]
    entries = old.withColumn(HASH, _row_hash(width))
    if pairs is not None:
        used = broadcast(pairs.select(_row_hash(width).alias("p_hash")))
        entries = entries.join(used, F.col(HASH) == F.col("p_hash"), "left_anti")
    if recomputed is not None:
        entries = by_keys(entries, recomputed, spec.keys, "left_anti")
    new = kept(cat, spec, out).withColumn(HASH, _row_hash(width))
    rows = broadcast(new.select(F.col(HASH).alias("n_hash")))
    clash = entries.join(rows, F.col(HASH) == F.col("n_hash"), "left_semi").select(F.col(HASH).alias("x_hash"))
    entries = entries.join(rows, F.col(HASH) == F.col("n_hash"), "left_anti")
    new = _unique(new).join(broadcast(clash), F.col(HASH) == F.col("x_hash"), "left_anti")
    return _still_reissuable(entries.select(*cols).unionByName(new.select(*cols)), reissuable, width).drop(HASH)


def _unique(entries: DataFrame) -> DataFrame:
    """The entries of rows that occur once (by :data:`HASH`)."""
    counted = entries.withColumn("__odf_same", F.count(F.lit(1)).over(Window.partitionBy(HASH)))
    return counted.where(F.col("__odf_same") == 1).drop("__odf_same")


def _row_hash(width: int) -> Column:
    """A 64-bit hash of a row's columns ``c<i>`` and of which of them are NULL (Spark's hashes skip NULLs)."""
    cols = [F.col(f"c{i}") for i in range(width)]
    return F.xxhash64(*cols, *[c.isNull() for c in cols])


def _still_reissuable(entries: DataFrame, reissuable: DataFrame, width: int) -> DataFrame:
    """The entries (with their :data:`HASH`) of rows the window below can still output again, matched by the hash:
    a collision keeps an entry longer, which is harmless (an entry holds the values this window gave a row it still
    outputs: those of a row that can no longer come back are never used)."""
    wanted = reissuable.select(_row_hash(width).alias("w_hash"))
    return entries.join(wanted, F.col(HASH) == F.col("w_hash"), "left_semi")


def initial(cat: Catalyst, spec: RunningSpec, node: Any, rows: DataFrame, reissuable: DataFrame) -> DataFrame:
    """The table from the child's whole history (``rows``, by position)."""
    width = len(cat.items(spec.child.output()))
    entries = kept(cat, spec, evaluated(cat, spec, node, rows)).withColumn(HASH, _row_hash(width))
    return _unique(_still_reissuable(entries, reissuable, width)).drop(HASH)
