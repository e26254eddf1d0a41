"""Typed access to the JVM Catalyst objects of one session (through py4j): why the transform engine needs a classic
Spark driver, not a Spark Connect client."""
from __future__ import annotations

from typing import Any, Iterator, Sequence

from pyspark.sql import DataFrame, SparkSession

#: Field metadata on each input's op column: the input's index, so a plan leaf can be traced to its input.
INPUT_MARKER = "__odf_input"
INPUT_LEAF_CLASSES = frozenset({"LogicalRelation", "LogicalRDD"})


_EXPRESSIONS = "org.apache.spark.sql.catalyst.expressions"
#: JVM classes and Scala objects by (gateway, name). ``jvm.org.apache...X`` costs one py4j round trip per package
#: name; an incremental step builds hundreds of expressions, and those lookups were a large part of its fixed cost.
_REFS: dict[tuple[int, str], Any] = {}


class Catalyst:
    def __init__(self, session: SparkSession) -> None:
        self.session = session
        self.jvm = session._jvm
        self.jss = session._jsparkSession

    def jclass(self, name: str) -> Any:
        """A JVM class by its full name (cached: no package traversal)."""
        from py4j.java_gateway import JavaClass

        client = self.jvm._gateway_client
        key = (id(client), name)
        if key not in _REFS:
            _REFS[key] = JavaClass(name, client)
        return _REFS[key]

    def scala_object(self, name: str) -> Any:
        """A Scala object (``name$.MODULE$``), cached."""
        key = (id(self.jvm._gateway_client), name + "$")
        if key not in _REFS:
            _REFS[key] = getattr(self.jclass(name + "$"), "MODULE$")
        return _REFS[key]

    @staticmethod
    def items(seq: Any) -> list[Any]:
        return [seq.apply(i) for i in range(seq.size())]

    def static(self, cls: str, name: str) -> Any:
        """A static method of a JVM class, cached: looking a member up by name is a round trip of its own."""
        key = (id(self.jvm._gateway_client), f"{cls}#{name}")
        if key not in _REFS:
            _REFS[key] = getattr(self.jclass(cls), name)
        return _REFS[key]

    def seq(self, values: Sequence[Any]) -> Any:
        """A Scala ``List`` of ``values``; the empty one is ``Nil`` (no round trip: an Alias takes two of them). A few
        values are consed onto ``Nil`` (a round trip each; through a Java list it takes three more)."""
        if not values:
            return self.scala_object("scala.collection.immutable.Nil")
        if len(values) <= 3:
            out = self.scala_object("scala.collection.immutable.Nil")
            for v in reversed(values):
                out = getattr(out, "$colon$colon")(v)
            return out
        lst = self.jclass("java.util.ArrayList")()
        for v in values:
            lst.add(v)
        return self.static("scala.jdk.javaapi.CollectionConverters", "asScala")(lst).toList()

    @staticmethod
    def cls(obj: Any) -> str:
        return obj.getClass().getSimpleName()

    def parse_query(self, sql: str) -> DataFrame:
        """Parse with the query-only grammar (no DDL, SET, INSERT...) and analyse."""
        plan = self.jss.sessionState().sqlParser().parseQuery(sql)
        return self.dataframe(plan)

    def dataframe(self, plan: Any) -> DataFrame:
        return DataFrame(self.jclass("org.apache.spark.sql.classic.Dataset").ofRows(self.jss, plan), self.session)

    def project(self, exprs: Sequence[Any], child: Any) -> Any:
        return self.jclass("org.apache.spark.sql.catalyst.plans.logical.Project")(self.seq(exprs), child)

    def none(self) -> Any:
        return self.scala_object("scala.None")

    def alias(self, expr: Any, name: str, expr_id: Any | None = None, metadata: Any | None = None) -> Any:
        """``expr AS name`` with a chosen expression id: spliced rows then bind where the original attribute did."""
        if expr_id is None:
            expr_id = self.scala_object(f"{_EXPRESSIONS}.NamedExpression").newExprId()
        md = self.jclass("scala.Some")(metadata) if metadata is not None else self.none()
        return self.jclass(f"{_EXPRESSIONS}.Alias")(expr, name, expr_id, self.seq([]), md, self.seq([]))

    def null_unless(self, cond: Any, expr: Any) -> Any:
        """``IF(cond, expr, NULL)``."""
        null = self.jclass(f"{_EXPRESSIONS}.Literal")(None, expr.dataType())
        return self.jclass(f"{_EXPRESSIONS}.If")(cond, expr, null)

    def with_children(self, node: Any, children: Sequence[Any]) -> Any:
        return node.withNewChildren(self.seq(children))

    def physical_aggregation(self, node: Any) -> tuple[list[Any], list[Any], list[Any], Any] | None:
        """Spark's own split of an Aggregate: (grouping named expressions, distinct aggregate expressions, result
        expressions over the grouping attributes and each aggregate's result attribute, child)."""
        pattern = self.scala_object("org.apache.spark.sql.catalyst.planning.PhysicalAggregation")
        found = pattern.unapply(node)
        if not found.isDefined():
            return None
        t = found.get()
        return self.items(t._1()), self.items(t._2()), self.items(t._3()), t._4()

    def walk(self, plan: Any) -> Iterator[Any]:
        """All plan nodes, including subquery plans hidden in expressions."""
        stack = [plan]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(self.items(node.children()))
            stack.extend(self.items(node.subqueries()))

    @staticmethod
    def marker(attr: Any) -> int | None:
        md = attr.metadata()
        return int(md.getLong(INPUT_MARKER)) if md.contains(INPUT_MARKER) else None

    def input_index(self, node: Any) -> int | None:
        """Index of the transform input a leaf reads (our marker on its op column), else None."""
        if self.cls(node) not in INPUT_LEAF_CLASSES:
            return None
        for a in self.items(node.output()):
            m = self.marker(a)
            if m is not None:
                return m
        return None
