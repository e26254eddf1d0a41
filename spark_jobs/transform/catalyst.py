"""Typed access to the JVM Catalyst objects of one session (through py4j): why the transform engine needs a classic
Spark driver, not a Spark Connect client."""
from __future__ import annotations

from typing import Any, Iterator, Sequence

from pyspark.sql import DataFrame, SparkSession

#: Field metadata on each input's op column: the input's index, so a plan leaf can be traced to its input.
INPUT_MARKER = "__odf_input"
INPUT_LEAF_CLASSES = frozenset({"LogicalRelation", "LogicalRDD"})


class Catalyst:
    def __init__(self, session: SparkSession) -> None:
        self.session = session
        self.jvm = session._jvm
        self.jss = session._jsparkSession

    @staticmethod
    def items(seq: Any) -> list[Any]:
        return [seq.apply(i) for i in range(seq.size())]

    def seq(self, values: Sequence[Any]) -> Any:
        lst = self.jvm.java.util.ArrayList()
        for v in values:
            lst.add(v)
        return self.jvm.scala.jdk.javaapi.CollectionConverters.asScala(lst).toList()

    @staticmethod
    def cls(obj: Any) -> str:
        return obj.getClass().getSimpleName()

    def parse_query(self, sql: str) -> DataFrame:
        """Parse with the query-only grammar (no DDL, SET, INSERT...) and analyse."""
        plan = self.jss.sessionState().sqlParser().parseQuery(sql)
        return self.dataframe(plan)

    def dataframe(self, plan: Any) -> DataFrame:
        return DataFrame(self.jvm.org.apache.spark.sql.classic.Dataset.ofRows(self.jss, plan), self.session)

    def project(self, exprs: Sequence[Any], child: Any) -> Any:
        return self.jvm.org.apache.spark.sql.catalyst.plans.logical.Project(self.seq(exprs), child)

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
