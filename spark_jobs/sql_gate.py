"""The SQL gate: every SQL text a client sends (``odf sql``, the spec's raw query, transform and preprocess steps) is
parsed and checked here before anything runs.

``SparkSession.sql`` runs a command (``INSERT OVERWRITE DIRECTORY``, ``SET``, ``ADD JAR``, ``CACHE TABLE``...) the
moment it is called, so no check of its result can stop one. The gate instead

1. parses the text with Spark's query-only grammar (a command cannot parse; when the full grammar names one, the
   error says which);
2. checks the unresolved plan against allow-lists: of query operators (no ``TRANSFORM ... USING`` program), of
   table functions (no path-reading ones), and refuses functions that call Java methods (``reflect``,
   ``java_method``, ``try_reflect``) or read files, before analysis could load a class;
3. analyses the plan (a query is lazy: analysis executes nothing) and checks the analysed plan: no such function
   and no user-defined function under any name, and every relation it reads comes from a temp view the engine
   registered for the request (no file paths such as ``parquet.`/x```, no catalog tables).
"""
from __future__ import annotations

from typing import Any, Iterator

from pyspark.sql import DataFrame, SparkSession

from spark_jobs.errors import QueryRejected, innermost
from spark_jobs.transform.catalyst import Catalyst

#: Operators of a parsed query (unresolved plan): anything else, a command in particular, is refused.
QUERY_OPERATORS = frozenset({
    "Project", "Filter", "Aggregate", "Join", "LateralJoin", "Union", "Intersect", "Except", "Distinct", "Sort",
    "GlobalLimit", "LocalLimit", "Offset", "Tail", "SubqueryAlias", "UnresolvedRelation", "UnresolvedWith",
    "UnresolvedSubqueryColumnAliases", "UnresolvedHaving", "UnresolvedQualify", "OneRowRelation", "LocalRelation",
    "UnresolvedInlineTable", "UnresolvedTableValuedFunction", "UnresolvedTVFAliases", "UnresolvedHint", "Generate",
    "Pivot", "Unpivot", "WithWindowDefinition", "Window", "Sample", "Repartition", "RepartitionByExpression",
    "RebalancePartitions", "PipeOperator", "PlanWithUnresolvedIdentifier", "Range", "UnionLoop", "UnionLoopRef",
    "CTERelationDef", "CTERelationRef", "WithCTE"})
#: Table functions that compute rows from their arguments only (``read_files``-like ones are not listed).
TABLE_FUNCTIONS = frozenset({
    "range", "explode", "explode_outer", "inline", "inline_outer", "posexplode", "posexplode_outer", "json_tuple",
    "stack", "variant_explode", "variant_explode_outer", "sql_keywords", "collations"})
#: Functions that reach the JVM or the file system, by SQL name, with the reason given to the user.
REFUSED_FUNCTIONS = {
    "reflect": "it calls Java methods", "java_method": "it calls Java methods", "try_reflect": "it calls Java methods",
    "from_protobuf": "it can read a descriptor file", "to_protobuf": "it can read a descriptor file"}
#: The same in an analysed plan, by Catalyst class (a name given through ``IDENTIFIER(...)`` resolves to these).
_REFUSED_EXPRESSIONS = {"CallMethodViaReflection": "reflect", "TryReflect": "try_reflect",
                        "ProtobufDataToCatalyst": "from_protobuf", "CatalystDataToProtobuf": "to_protobuf"}
#: Leaves of an analysed plan that read nothing; any other leaf must be inside a temp view of the request.
_CONSTANT_LEAVES = frozenset({"LocalRelation", "OneRowRelation", "Range", "CTERelationRef", "UnionLoopRef",
                              "ResolvedInlineTable", "EmptyRelation"})
_LOGICAL_PLAN = "org.apache.spark.sql.catalyst.plans.logical.LogicalPlan"


def gated_query(session: SparkSession, text: str, what: str = "statement 1") -> DataFrame:
    """The DataFrame of ``text`` (analysed, nothing executed) if it is one query that passes the gate; else
    :class:`QueryRejected` naming ``what`` (``statement 1``, ``query step 2``...). Spark's own parse and analysis
    errors (unknown columns...) propagate unchanged."""
    cat = Catalyst(session)
    plan = _parse(cat, text, what)
    _check_parsed(cat, plan, what, files_readable=session.conf.get("spark.sql.runSQLOnFiles") == "true")
    df = cat.dataframe(plan)  # analysis only: a query is lazy
    _check_analysed(cat, df._jdf.queryExecution().analyzed(), what)
    return df


def _parse(cat: Catalyst, text: str, what: str) -> Any:
    parser = cat.jss.sessionState().sqlParser()
    body = text.strip().rstrip(";").strip()
    try:
        return parser.parseQuery(body)
    except Exception as e:  # noqa: BLE001 - explained below when it is a command or several statements
        failure = e
    try:
        plan = parser.parsePlan(body)
    except Exception:  # noqa: BLE001 - several statements, or not a statement at all: Spark's own parse error
        from odf_core.engine.sql_text import split_statements

        done, rest = split_statements(body)
        statements = done + ([rest.strip()] if rest.strip() else [])
        if len(statements) > 1:
            raise QueryRejected(f"only one statement is allowed: {what} is followed by {_short(statements[1])!r}") \
                from None
        raise failure from None
    command = next((n for n, _ in _plans(cat, plan) if Catalyst.cls(n) not in QUERY_OPERATORS), plan)
    err = innermost(failure)
    condition = f" [{err.condition}]" if err is not None else ""
    raise QueryRejected(f"only a query is allowed: {what} is a command ({Catalyst.cls(command)}){condition}") from None


def _short(text: str, n: int = 40) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[:n - 3] + "..."


def _plans(cat: Catalyst, plan: Any) -> Iterator[tuple[Any, bool]]:
    """Every plan node with whether it is inside a ``View``: children, subquery plans, CTE definitions."""
    is_plan = cat.jclass("java.lang.Class").forName(_LOGICAL_PLAN).isInstance
    stack = [(plan, False)]
    while stack:
        node, in_view = stack.pop()
        yield node, in_view
        inside = in_view or Catalyst.cls(node) == "View"
        nested = cat.items(node.children()) + cat.items(node.subqueries())
        inner = node.innerChildren()
        nested += [p for p in cat.items(inner) if is_plan(p)]
        stack.extend((p, inside) for p in nested)


def _expressions(cat: Catalyst, node: Any) -> Iterator[Any]:
    """Every expression of one plan node (subquery plans are walked as plans)."""
    stack = cat.items(node.expressions())
    while stack:
        expr = stack.pop()
        yield expr
        stack.extend(cat.items(expr.children()))


def _check_parsed(cat: Catalyst, plan: Any, what: str, files_readable: bool) -> None:
    for node, _ in _plans(cat, plan):
        name = Catalyst.cls(node)
        if name == "ScriptTransformation":
            raise QueryRejected(f"only a query is allowed: {what} runs an external program (TRANSFORM ... USING)")
        if name not in QUERY_OPERATORS:
            raise QueryRejected(f"only a query is allowed: {what} uses {node.nodeName()}, which is not a query "
                                "operator")
        if name == "UnresolvedTableValuedFunction":
            fn = str(cat.items(node.name())[-1]).lower()
            if fn not in TABLE_FUNCTIONS:
                raise QueryRejected(f"table function {fn}() is not allowed in {what}: only "
                                    f"{', '.join(sorted(TABLE_FUNCTIONS))} can be used")
        if files_readable and name in ("UnresolvedRelation", "PlanWithUnresolvedIdentifier") and (
                name != "UnresolvedRelation" or node.multipartIdentifier().size() > 1):
            raise QueryRejected(f"{what} reads {node.nodeName()} {_short(str(node.toString()))!r}: only the request's "
                                "views can be read")
        for expr in _expressions(cat, node):
            ename = Catalyst.cls(expr)
            if ename == "UnresolvedFunction":
                _check_function_name(str(cat.items(expr.nameParts())[-1]), what)
            elif ename == "ExpressionWithUnresolvedIdentifier":
                ident = expr.identifierExpr()
                if Catalyst.cls(ident) != "Literal":
                    raise QueryRejected(f"{what} names a function with a computed IDENTIFIER(...): only a literal "
                                        "name is allowed")
                _check_function_name(str(ident.value()).split(".")[-1].strip("`"), what)


def _check_function_name(name: str, what: str) -> None:
    reason = REFUSED_FUNCTIONS.get(name.lower())
    if reason:
        raise QueryRejected(f"function {name.lower()}() is not allowed in {what}: {reason}")


def _check_analysed(cat: Catalyst, plan: Any, what: str) -> None:
    for node, in_view in _plans(cat, plan):
        name = Catalyst.cls(node)
        if not in_view and node.children().size() == 0 and name not in _CONSTANT_LEAVES:
            raise QueryRejected(f"{what} reads {node.nodeName()} {_short(str(node.simpleString(2)))!r}, which is not "
                                "one of the request's views: only the views can be read")
        for expr in _expressions(cat, node):
            ename = Catalyst.cls(expr)
            if ename in _REFUSED_EXPRESSIONS:
                fn = _REFUSED_EXPRESSIONS[ename]
                raise QueryRejected(f"function {fn}() is not allowed in {what}: {REFUSED_FUNCTIONS[fn]}")
            if "UDF" in ename.upper() or "UDAF" in ename.upper() or ename == "SQLFunctionExpression":
                raise QueryRejected(f"function {expr.prettyName()}() is not allowed in {what}: user-defined "
                                    "functions cannot run in the engine")
