"""An ingest's preprocess step: the read step's ``preprocess`` ``Transform::Sql`` applied to each file's read
DataFrame, a temp view named ``input``, by :mod:`spark_jobs.sql_steps` (the same steps runner as a transform's).

A refusal is the user's input to fix (:class:`spark_jobs.errors.InputRejected`): a preprocess the Spark engine cannot
run at all (another engine, temporal tables, not exactly one output step) once per request, before any file is read;
a step refused or failing over one file's data with that file named.
"""
from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from odf_core.metadata import TransformSql
from spark_jobs.errors import InputRejected, QueryRejected
from spark_jobs.sql_steps import PREPROCESS, check_steps, run_steps

#: The view the preprocess query reads the file's rows from (the ODF spec's name).
INPUT_VIEW = "input"


def check_preprocess(transform: TransformSql) -> None:
    """Refuse, for the whole request, a preprocess the Spark engine cannot run."""
    try:
        check_steps(transform, PREPROCESS)
    except QueryRejected as e:
        raise InputRejected(str(e)) from None


def apply_preprocess(session: SparkSession, df: DataFrame, transform: TransformSql, file: str) -> DataFrame:
    """The preprocess query over ``df`` (read from ``file``), analysed and lazy. Its views are dropped afterwards:
    the plan keeps what it read, and the session reads the next file under the same names."""
    try:
        return run_steps(session, transform, {INPUT_VIEW: df}, PREPROCESS, drop_views=True)
    except QueryRejected as e:
        raise InputRejected(f"{file}: {e}", file=file) from None
