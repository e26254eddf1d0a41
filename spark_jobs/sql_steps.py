"""Running a ``Transform::Sql``'s steps: the one implementation behind a transform, the spec's raw query and an
ingest's preprocess query.

The given views (a transform's inputs, ``input`` for a raw or preprocess query) and every aliased step become temp
views, named with :func:`spark_jobs.columns.quote` (an alias such as ``com.example.trips`` is one name, not a
catalog path); each step passes :func:`spark_jobs.sql_gate.gated_query` (one query, nothing executed) in the order
written; the step without alias is the result. Messages name a step by its number from 1 and its alias (or
``(output)``): ``query step 2 (alias 'totals')``. A Spark error in a step that is the user's, like every refusal,
is a :class:`spark_jobs.errors.QueryRejected`; the caller answers it as its protocol says.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from pyspark.sql import DataFrame, SparkSession

from odf_core.metadata import TransformSql
from spark_jobs import sql_gate  # not its names: sql_gate imports spark_jobs.transform, which imports this module
from spark_jobs.columns import quote
from spark_jobs.errors import QueryRejected, is_user_error, user_message


@dataclass(frozen=True)
class StepsOwner:
    """What the steps belong to, as messages name it (the request's field and one of its steps)."""

    name: str
    step_noun: str


TRANSFORM = StepsOwner("transform", "query step")
RAW_QUERY = StepsOwner("raw query", "query step")
PREPROCESS = StepsOwner("preprocess", "preprocess query")


def step_label(owner: StepsOwner, number: int, alias: str | None) -> str:
    """A step as messages name it: its number from 1, in the order written, and its alias or ``(output)``."""
    return f"{owner.step_noun} {number} " + (f"(alias {alias!r})" if alias else "(output)")


def check_steps(transform: TransformSql, owner: StepsOwner) -> None:
    """Refuse what the Spark engine cannot run: another engine, Flink's temporal tables, not exactly one output."""
    if transform.engine.lower() != "spark":
        raise QueryRejected(f"{owner.name} engine {transform.engine!r} is not supported by the Spark engine; use "
                            "engine 'spark'")
    if transform.temporal_tables:
        raise QueryRejected(f"{owner.name}.temporalTables is a Flink-specific extension and is not supported by the "
                            "Spark engine; use a join instead")
    steps = transform.steps()
    outputs = [s for s in steps if s.alias is None]
    if len(outputs) != 1:
        raise QueryRejected(f"{owner.name}: exactly one query step must have no alias (the output), found "
                            f"{len(outputs)} of {len(steps)}")


def run_steps(session: SparkSession, transform: TransformSql, views: Mapping[str, DataFrame], owner: StepsOwner,
              *, drop_views: bool = False) -> DataFrame:
    """The output step's DataFrame (analysed, nothing executed), after :func:`check_steps`. ``drop_views`` drops the
    temp views registered here afterwards (the returned plan keeps what it read), for a session that runs more."""
    check_steps(transform, owner)
    registered: list[str] = []
    try:
        for alias, df in views.items():
            _register(df, alias, registered)
        output: DataFrame | None = None
        for number, step in enumerate(transform.steps(), 1):
            label = step_label(owner, number, step.alias)
            if step.alias is not None and step.alias.lower() in {v.lower() for v in registered}:
                raise QueryRejected(f"{label}: alias {step.alias!r} is already used by an input or another step")
            df = _gated_step(session, step.query, label)
            if step.alias is None:
                output = df
            else:
                _register(df, step.alias, registered)
    finally:
        if drop_views:
            for alias in registered:
                session.catalog.dropTempView(alias)  # the view's name itself, not SQL text to parse
    assert output is not None  # check_steps: exactly one step without alias
    return output


def _register(df: DataFrame, alias: str, registered: list[str]) -> None:
    df.createOrReplaceTempView(quote(alias))
    registered.append(alias)


def _gated_step(session: SparkSession, query: str, label: str) -> DataFrame:
    try:
        return sql_gate.gated_query(session, query, label)
    except QueryRejected:
        raise
    except Exception as e:
        if is_user_error(e):
            raise QueryRejected(f"{label} failed: {user_message(e)}") from None
        raise
