"""Rows of a plan node as DataFrames ("frames"), and plans with some of their nodes replaced by such rows.

Inside the incremental path the rows of a plan node travel as a *frame*: a DataFrame whose columns are the node's
output attributes by position, named ``c0..cN`` (names in a plan may repeat; positions do not), optionally followed
by a multiplicity column ``__odf_n``. :func:`splice` turns a frame back into a plan that outputs exactly the node's
attributes (same expression ids, names and types), so the original operators above it run over it unchanged, with
their original expressions: the engine never re-implements what a query computes, only what it must remember.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spark_jobs.transform.catalyst import Catalyst

COUNT = "__odf_n"  # multiplicity of a row in a counted frame
WEIGHT = "__odf_w"  # +1 / -1 of a row in a weighted frame

Path = tuple[int, ...]


def names(width: int) -> list[str]:
    return [f"c{i}" for i in range(width)]


def spark_type(attr: Any) -> T.DataType:
    """The pyspark type of a JVM attribute or expression."""
    return T._parse_datatype_json_string(attr.dataType().json())


def schema_of(attrs: Sequence[Any]) -> T.StructType:
    return T.StructType([T.StructField(f"c{i}", spark_type(a), True) for i, a in enumerate(attrs)])


def empty(session: SparkSession, attrs: Sequence[Any]) -> DataFrame:
    return session.createDataFrame(session.sparkContext.emptyRDD(), schema_of(attrs))


def as_frame(df: DataFrame) -> DataFrame:
    """Columns renamed to positions (a node's output may repeat names)."""
    return df.toDF(*names(len(df.columns)))


def local_relation(checkpoint: DataFrame) -> DataFrame:
    """A local checkpoint's rows as a local relation with the same output attributes: Spark's own rows, collected from
    the checkpoint's blocks as they are (no conversion to and from Java values, which would move dates before the
    Gregorian calendar's start). The optimizer knows a local relation's rows: an empty one drops out of the plans
    that read it, a small one is broadcast without a job. For small frames only: the driver holds every row."""
    jdf = checkpoint._jdf
    jvm = checkpoint.sparkSession._jvm
    plan = jdf.queryExecution().analyzed()  # the checkpoint's LogicalRDD
    rows = jvm.scala.collection.immutable.ArraySeq.unsafeWrapArray(plan.rdd().collect())
    relation = jvm.org.apache.spark.sql.catalyst.plans.logical.LocalRelation(plan.output(), rows, False,
                                                                               jvm.scala.Option.empty())
    return DataFrame(jvm.org.apache.spark.sql.classic.Dataset.ofRows(jdf.sparkSession(), relation),
                     checkpoint.sparkSession)


def expand(df: DataFrame) -> DataFrame:
    """A counted frame as plain rows: a row with ``__odf_n`` = 3 appears three times."""
    if COUNT not in df.columns:
        return df
    rest = [F.col(c) for c in df.columns if c != COUNT]
    return df.select(*rest, F.explode(F.sequence(F.lit(1).cast("long"), F.col(COUNT).cast("long"))).alias("__odf_i")) \
        .drop("__odf_i")


def splice(cat: Catalyst, df: DataFrame, attrs: Sequence[Any], extra: Sequence[str] = ()) -> Any:
    """A plan over ``df`` (one column per attribute, by position) whose output is exactly ``attrs``, followed by the
    columns named in ``extra`` passed through as they are."""
    cols = [c for c in df.columns if c not in extra]
    if len(cols) != len(attrs):
        raise AssertionError(f"splice: {len(cols)} columns for {len(attrs)} attributes")
    wanted = [spark_type(a) for a in attrs]
    have = {f.name: f.dataType for f in df.schema.fields}
    df = df.select(*[F.col(c) if have[c] == w else F.col(c).cast(w).alias(c) for c, w in zip(cols, wanted)],
                   *[F.col(x) for x in extra])
    plan = df._jdf.queryExecution().analyzed()
    out = cat.items(plan.output())
    return cat.project([cat.alias(o, a.name(), a.exprId(), a.metadata()) for o, a in zip(out, attrs)]
                       + out[len(attrs):], plan)


def node_at(cat: Catalyst, plan: Any, path: Path) -> Any:
    for i in path:
        plan = plan.children().apply(i)
    return plan


def replace(cat: Catalyst, plan: Any, replacements: Mapping[Path, Any], path: Path = ()) -> Any:
    """``plan`` with the nodes at the given paths (child indices from ``plan``) replaced by other plans."""
    if path in replacements:
        return replacements[path]
    if not any(p[:len(path)] == path for p in replacements):
        return plan
    kids = [replace(cat, c, replacements, path + (i,)) for i, c in enumerate(cat.items(plan.children()))]
    return cat.with_children(plan, kids)


def evaluate(cat: Catalyst, node: Any, rows: Mapping[Path, DataFrame]) -> DataFrame:
    """The frame of ``node`` computed over the given frames in place of the nodes at ``rows``' paths."""
    if () in rows:
        return rows[()]
    plan = replace(cat, node, {p: splice(cat, expand(df), cat.items(node_at(cat, node, p).output()))
                               for p, df in rows.items()})
    return as_frame(cat.dataframe(plan))


def project(cat: Catalyst, df: DataFrame, attrs: Sequence[Any], exprs: Sequence[tuple[str, Any]],
            keep: Sequence[str] = ()) -> DataFrame:
    """Catalyst expressions written against ``attrs`` (a node's output), evaluated over ``df`` (that node's rows, by
    position):
    one named column per expression, then the columns of ``df`` named in ``keep`` (e.g. the count or weight)."""
    data = [c for c in df.columns if c not in keep]
    plan = splice(cat, df.select(*[F.col(c).alias(n) for c, n in zip(data, names(len(attrs)))], *keep), attrs, keep)
    passed = cat.items(plan.output())[len(attrs):]
    top = cat.project([cat.alias(e, n) for n, e in exprs] + passed, plan)
    return cat.dataframe(top).toDF(*[n for n, _ in exprs], *keep)
