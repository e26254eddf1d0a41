"""Transform planning: run the SQL steps (:mod:`spark_jobs.sql_steps`), check the query is pure, and classify its
analysed/optimised plan.

* **stateless**: every plan node is row-wise (projections, filters, unions, generators such as ``explode``, sorts)
  over the inputs: the query runs over the new rows only.
* **stateful**: anything else (aggregates, windows, joins, distinct, limits, subqueries, constant sources): the query
  runs over the inputs' state and its output is diffed against the previous output state.

Every step passes :mod:`spark_jobs.sql_gate` first (one query, no command, no Java-calling function, only views
read). Non-deterministic expressions (``rand``, ``uuid``, ``current_timestamp``...), TABLESAMPLE and reads of anything
but the inputs are refused, as are outputs that hold the offset or system_time column, lack a
timestamp/date event time, or use the reserved ``__odf_`` prefix.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from odf_core.metadata import DatasetVocabulary, TransformSql
from spark_jobs import sql_steps  # not its names: sql_steps imports sql_gate, which imports this package
from spark_jobs.errors import QueryRejected, is_user_error, user_message
from spark_jobs.transform.catalyst import Catalyst

STATELESS, STATEFUL = "stateless", "stateful"
RESERVED_PREFIX = "__odf_"

# Catalyst nodes that keep a stateless plan row-wise; all but Project/Union/Generate pass rows through.
ROW_WISE_PASS_THROUGH = frozenset(
    {"Filter", "Sort", "Repartition", "RepartitionByExpression", "RebalancePartitions", "SubqueryAlias", "View",
     "ResolvedHint"})
ROW_WISE = ROW_WISE_PASS_THROUGH | {"Project", "Union", "Generate"}
# Leaves a query may use besides the inputs (constants).
_CONSTANT_LEAVES = frozenset({"LocalRelation", "OneRowRelation", "Range", "CTERelationRef", "ResolvedInlineTable"})
# Expressions Spark calls deterministic although their value depends on when/where the query runs.
_CLOCK_EXPRESSIONS = frozenset(
    {"CurrentTimestamp", "Now", "CurrentDate", "LocalTimestamp", "CurrentTime", "CurrentBatchTimestamp",
     "CurrentUser", "CurrentTimestampNTZ"})


def _nondeterministic_in(cat: Catalyst, expr: Any) -> str | None:
    """Name of a function that makes ``expr`` non-deterministic (subquery plans are walked separately)."""
    name = cat.cls(expr)
    if name in _CLOCK_EXPRESSIONS:
        return str(expr.prettyName())
    children = cat.items(expr.children())
    for child in children:
        found = _nondeterministic_in(cat, child)
        if found:
            return found
    if "Subquery" in name or name in ("Exists", "ListQuery") or expr.deterministic():
        return None
    if any(not c.deterministic() for c in children):
        return None  # inherited from a subquery below
    return str(expr.prettyName())


def check_purity(cat: Catalyst, analyzed: Any) -> None:
    """Reject non-deterministic functions, sampling and reads of anything but the inputs."""
    for node in cat.walk(analyzed):
        name = cat.cls(node)
        if name == "Sample":
            raise QueryRejected("TABLESAMPLE is not deterministic and is not allowed in transformations")
        if node.children().size() == 0 and name not in _CONSTANT_LEAVES and cat.input_index(node) is None:
            raise QueryRejected(f"the query reads a source other than its inputs ({node.nodeName()})")
        for expr in cat.items(node.expressions()):
            bad = _nondeterministic_in(cat, expr)
            if bad:
                raise QueryRejected(f"non-deterministic function {bad}() is not allowed: a transformation must give "
                                    "the same result every time it runs")


def classify(cat: Catalyst, optimized: Any) -> tuple[str, str]:
    """(plan class, reason): stateless iff every node is row-wise and every leaf is an input."""
    for node in cat.walk(optimized):
        name = cat.cls(node)
        if node.subqueries().size() > 0:
            return STATEFUL, f"subquery in {name}"
        if cat.input_index(node) is not None:
            continue
        if name not in ROW_WISE:
            return STATEFUL, name
    return STATELESS, ""


def inputs_reading_op(cat: Catalyst, optimized: Any) -> frozenset[int]:
    """Inputs whose op column the (column-pruned) plan really uses."""
    found: set[int] = set()
    for node in cat.walk(optimized):
        if cat.input_index(node) is not None:
            continue
        for attr in cat.items(node.references().toSeq()):
            m = cat.marker(attr)
            if m is not None:
                found.add(m)
    return frozenset(found)


def natural_key(cat: Catalyst, optimized: Any) -> tuple[str, ...] | None:
    """Output columns carrying all grouping expressions of a top-level aggregate, else None."""
    out = cat.items(optimized.output())
    names = [a.name() for a in out]
    ids: list[int | None] = [a.exprId().id() for a in out]
    node = optimized
    while True:
        name = cat.cls(node)
        if name in ("Filter", "Sort", "SubqueryAlias", "View", "Repartition", "RepartitionByExpression"):
            node = node.children().apply(0)
            continue
        if name == "Project":
            mapping: dict[int, int] = {}
            for e in cat.items(node.projectList()):
                if cat.cls(e) == "AttributeReference":
                    mapping[e.exprId().id()] = e.exprId().id()
                elif cat.cls(e) == "Alias" and cat.cls(e.child()) == "AttributeReference":
                    mapping[e.exprId().id()] = e.child().exprId().id()
            ids = [mapping.get(i) if i is not None else None for i in ids]
            node = node.children().apply(0)
            continue
        if name != "Aggregate":
            return None
        groups = cat.items(node.groupingExpressions())
        covered: dict[int, int] = {}  # output attribute id -> grouping index
        for e in cat.items(node.aggregateExpressions()):
            target = e.child() if cat.cls(e) == "Alias" else e
            for gi, g in enumerate(groups):
                if target.semanticEquals(g):
                    covered[e.exprId().id()] = gi
                    break
        key = [n for n, i in zip(names, ids) if i is not None and i in covered]
        got = {covered[i] for i in ids if i is not None and i in covered}
        if len(got) != len(groups):
            return None
        return tuple(key)


@dataclass(frozen=True)
class OutputLayout:
    """Where the system columns are in the query output."""

    columns: tuple[str, ...]  # query output columns, in order
    event_time: str  # actual name in the query output
    op: str | None  # actual name of an op column the query produced
    data: tuple[str, ...]  # the other columns


def layout_of(schema: T.StructType, vocab: DatasetVocabulary, plan_class: str) -> OutputLayout:
    names = [f.name for f in schema.fields]
    lower = [n.lower() for n in names]
    dup = sorted({n for n in lower if lower.count(n) > 1})
    if dup:
        raise QueryRejected(f"the query output has duplicate column names: {dup}")
    reserved = [n for n in names if n.lower().startswith(RESERVED_PREFIX)]
    if reserved:
        raise QueryRejected(f"column names starting with {RESERVED_PREFIX!r} are reserved: {reserved}")
    for sys_col in (vocab.offset, vocab.system_time):
        if sys_col.lower() in lower:
            raise QueryRejected(f"the query output must not contain the system column {sys_col!r}: the engine assigns "
                                "it (select the data columns explicitly)")
    if vocab.event_time.lower() not in lower:
        raise QueryRejected(f"the query output has no {vocab.event_time!r} column (columns: {names})")
    et = schema.fields[lower.index(vocab.event_time.lower())]
    if not isinstance(et.dataType, (T.TimestampType, T.TimestampNTZType, T.DateType)):
        raise QueryRejected(f"the output column {et.name!r} must be a timestamp or date, got "
                            f"{et.dataType.simpleString()}")
    op_name = None
    if vocab.op.lower() in lower:
        op_field = schema.fields[lower.index(vocab.op.lower())]
        if plan_class == STATEFUL:
            raise QueryRejected(f"the query outputs the {vocab.op!r} column but is not row-wise (it is {plan_class}); "
                                "only projections/filters/unions can pass the operation type through")
        if not isinstance(op_field.dataType, (T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
            raise QueryRejected(f"the output column {op_field.name!r} must be an integer operation type")
        op_name = op_field.name
    data = tuple(n for n in names if n not in (et.name, op_name))
    return OutputLayout(tuple(names), et.name, op_name, data)


@dataclass(frozen=True)
class PlanInfo:
    plan_class: str
    reason: str
    op_read: frozenset[int]  # indices of inputs whose op column the query reads
    key: tuple[str, ...] | None  # natural key of a stateful output
    layout: OutputLayout


def inspect_plan(session: SparkSession, out: DataFrame, vocab: DatasetVocabulary) -> PlanInfo:
    cat = Catalyst(session)
    qe = out._jdf.queryExecution()
    check_purity(cat, qe.analyzed())
    try:
        optimized = qe.optimizedPlan()
    except Exception as e:
        if is_user_error(e):
            raise QueryRejected(f"the query fails: {user_message(e)}") from None
        raise
    plan_class, reason = classify(cat, optimized)
    layout = layout_of(out.schema, vocab, plan_class)
    key = natural_key(cat, optimized) if plan_class == STATEFUL else None
    return PlanInfo(plan_class, reason, inputs_reading_op(cat, optimized), key, layout)


def query_over(session: SparkSession, transform: TransformSql, views: Mapping[str, DataFrame]) -> DataFrame:
    """The transform's query over ``views`` (its steps through the SQL gate), analysed, nothing executed."""
    return sql_steps.run_steps(session, transform, views, sql_steps.TRANSFORM)


def prepare(session: SparkSession, transform: TransformSql, views: Mapping[str, DataFrame],
            vocab: DatasetVocabulary) -> tuple[DataFrame, PlanInfo]:
    out = query_over(session, transform, views)
    return out, inspect_plan(session, out, vocab)


def output_schema(out: DataFrame, layout: OutputLayout, vocab: DatasetVocabulary) -> T.StructType:
    """The Spark schema of the output slice: system columns first, timestamps as TIMESTAMP."""
    types = {f.name: f for f in out.schema.fields}

    def norm(name: str, as_name: str) -> T.StructField:
        f = types[name]
        t = T.TimestampType() if isinstance(f.dataType, T.TimestampNTZType) else f.dataType
        return T.StructField(as_name, t, f.nullable)

    return T.StructType([
        T.StructField(vocab.offset, T.LongType(), False),
        T.StructField(vocab.op, T.IntegerType(), True),
        T.StructField(vocab.system_time, T.TimestampType(), False),
        norm(layout.event_time, vocab.event_time),
        *[norm(n, n) for n in layout.data],
    ])
