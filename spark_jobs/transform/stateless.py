"""The stateless path: a row-wise query over the new rows only, O(new data).

The op of the input row an output row came from is carried through the plan (hidden source columns added by
rewriting the optimised plan), so a retraction upstream becomes a retraction downstream and a -C/+C pair stays a pair
(a pair whose two output rows are equal is dropped; a half pair becomes -R or +A). If the query outputs the op column
itself it is kept as produced. If it reads an input's op column, that input is its raw changelog and every output
row derived from it is an append.
"""
from __future__ import annotations

from typing import Any, Sequence

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from odf_core.metadata import DatasetVocabulary, OffsetInterval, TransformRequest
from spark_jobs.columns import col
from spark_jobs.errors import EngineFailure
from spark_jobs.transform.catalyst import Catalyst
from spark_jobs.transform.inputs import OP_APPEND, OP_CORRECT_FROM, OP_CORRECT_TO, OP_RETRACT
from spark_jobs.transform.output import finalize, sort_columns, write_output
from spark_jobs.transform.planning import ROW_WISE_PASS_THROUGH, OutputLayout, PlanInfo

SRC, SRC_OFFSET, SRC_OP = "__odf_src", "__odf_src_offset", "__odf_src_op"


class SourceColumns:
    """Rewrites a row-wise optimised plan so every output row also carries (input index, offset, op)."""

    def __init__(self, cat: Catalyst, vocabs: Sequence[DatasetVocabulary]) -> None:
        self.cat = cat
        self.vocabs = vocabs

    def _aliases(self, index: int) -> list[Any]:
        tmpl = self.cat.session.range(1).select(
            F.lit(index).alias(SRC), F.col("id").alias(SRC_OFFSET), F.col("id").cast("int").alias(SRC_OP))
        return self.cat.items(tmpl._jdf.queryExecution().analyzed().projectList())

    def rewrite(self, node: Any) -> Any:
        """A plan whose output is the node's output followed by the three source columns."""
        cat = self.cat
        index = cat.input_index(node)
        if index is not None:
            out = cat.items(node.output())
            vocab = self.vocabs[index]
            off = next(a for a in out if a.name() == vocab.offset)
            op = next(a for a in out if cat.marker(a) is not None)
            src, soff, sop = self._aliases(index)
            return cat.project(out + [src.newInstance(), soff.withNewChildren(cat.seq([off])).newInstance(),
                                      sop.withNewChildren(cat.seq([op])).newInstance()], node)
        name = cat.cls(node)
        kids = [self.rewrite(c) for c in cat.items(node.children())]
        if name == "Project":
            hidden = cat.items(kids[0].output())[-3:]
            return cat.project(cat.items(node.projectList()) + hidden, kids[0])
        if name == "Union":
            return node.withNewChildren(cat.seq(kids))
        if name in ROW_WISE_PASS_THROUGH or name == "Generate":
            hidden = cat.items(kids[0].output())[-3:]
            return cat.project(cat.items(node.output()) + hidden, node.withNewChildren(cat.seq(kids)))
        raise EngineFailure(f"cannot carry source columns through {name}")


def pair_corrections(df: DataFrame, layout: OutputLayout, values: list[Column]
                     ) -> tuple[DataFrame, Column, list[Column]]:
    """Op and order of stateless output rows given the effective op of their source row (``__odf_eff``).

    The k-th row (by value) produced from a -C source row at offset n pairs with the k-th row produced from
    the +C at n+1: both present -> -C/+C (dropped if equal), alone -> -R or +A.
    """
    src, soff, eff = F.col(SRC), F.col(SRC_OFFSET), F.col("__odf_eff")
    side = F.when(eff == OP_CORRECT_TO, 1).otherwise(0)
    df = df.withColumn("__odf_pair", F.when(eff == OP_CORRECT_TO, soff - 1).otherwise(soff))
    pair = F.col("__odf_pair")
    # One partition: the slice is written as one file anyway, and every window below (and the global offset
    # numbering) then runs without any shuffle; the new slices are few files.
    df = df.coalesce(1)
    df = df.withColumn("__odf_rank", F.row_number().over(Window.partitionBy(src, pair, side).orderBy(*values)))
    w = Window.partitionBy(src, pair, F.col("__odf_rank"))
    df = (df.withColumn("__odf_from", F.sum(F.when(eff == OP_CORRECT_FROM, 1).otherwise(0)).over(w))
          .withColumn("__odf_to", F.sum(F.when(eff == OP_CORRECT_TO, 1).otherwise(0)).over(w)))
    has_from, has_to = F.col("__odf_from") > 0, F.col("__odf_to") > 0
    if len(values) == len(layout.columns):  # all comparable: drop corrections that change nothing visible
        distinct = F.size(F.collect_set(F.struct(*[col(n) for n in layout.columns])).over(w))
        df = df.withColumn("__odf_distinct", distinct)
        noop = (eff.isin(OP_CORRECT_FROM, OP_CORRECT_TO) & (F.col("__odf_from") == 1) & (F.col("__odf_to") == 1)
                & (F.col("__odf_distinct") == 1))
        df = df.where(~noop)
    op = (F.when(eff == OP_CORRECT_FROM, F.when(has_to, OP_CORRECT_FROM).otherwise(OP_RETRACT))
          .when(eff == OP_CORRECT_TO, F.when(has_from, OP_CORRECT_TO).otherwise(OP_APPEND))
          .otherwise(eff))
    return df, op, [src, pair, F.col("__odf_rank"), side, *values]


def run_stateless(session: SparkSession, request: TransformRequest, out: DataFrame, info: PlanInfo
                  ) -> tuple[OffsetInterval | None, dict[str, int]]:
    """Run the row-wise query over the new rows only, each output row keeping its source row's op."""
    cat = Catalyst(session)
    optimized = out._jdf.queryExecution().optimizedPlan()
    rewritten = SourceColumns(cat, [i.vocab for i in request.query_inputs]).rewrite(optimized)
    df = cat.dataframe(rewritten)
    layout = info.layout
    src, soff = F.col(SRC), F.col(SRC_OFFSET)
    values = sort_columns(df, layout.columns)
    if layout.op is not None:
        # The query produced the op column: keep it, order by source row.
        order = [src, soff, *values]
        return write_output(finalize(df, col(layout.op), order, layout, request), request)
    # Op of the source row, or append for inputs seen as raw changelog (the query reads their op).
    raw_inputs = sorted(info.op_read)
    eff = F.when(src.isin(*raw_inputs), F.lit(OP_APPEND)).otherwise(F.col(SRC_OP)) if raw_inputs else F.col(SRC_OP)
    df, op, order = pair_corrections(df.withColumn("__odf_eff", eff), layout, values)
    return write_output(finalize(df, op, order, layout, request), request)
