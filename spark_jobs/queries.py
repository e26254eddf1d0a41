"""Queries that produce no dataset block: the spec's raw query (a query over files) and read-only ad-hoc SQL."""
from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from odf_core.engine.protocol import QueryResponseInvalidQuery, SqlRequest, SqlResponse, SqlResponseSuccess
from odf_core.metadata import (
    RawQueryRequest,
    RawQueryResponseInternalError,
    RawQueryResponseInvalidQuery,
    RawQueryResponseSuccess,
    TransformSql,
)
from spark_jobs.columns import quote
from spark_jobs.errors import InvalidQuery, internal_error, is_user_error, user_message
from spark_jobs.parquet_files import write_single_parquet
from spark_jobs.session import request_session


def _run_steps(session: SparkSession, transform: TransformSql) -> DataFrame:
    if transform.engine.lower() != "spark":
        raise InvalidQuery(f"engine {transform.engine!r} is not supported by the Spark engine; use engine 'spark'")
    result = None
    steps = transform.steps()
    if sum(1 for s in steps if not s.alias) != 1:
        raise InvalidQuery("exactly one query step must have no alias (it is the result)")
    for i, step in enumerate(steps, 1):
        try:
            out = session.sql(step.query)
        except Exception as e:  # noqa: BLE001
            if is_user_error(e):
                raise InvalidQuery(f"query step {i} failed: {user_message(e)}") from None
            raise
        if step.alias:
            out.createOrReplaceTempView(quote(step.alias))
        else:
            result = out
    assert result is not None
    return result


def raw_query(spark: SparkSession, request: RawQueryRequest):
    """The query over the input files (a view named ``input``), written as one parquet file."""
    try:
        session = request_session(spark)
        session.read.parquet(*request.input_data_paths).createOrReplaceTempView("input")
        out = _run_steps(session, request.transform)
        write_single_parquet(out, request.output_data_path)
        import pyarrow.parquet as pq

        n = pq.ParquetFile(request.output_data_path).metadata.num_rows
        return RawQueryResponseSuccess(num_records=n)
    except InvalidQuery as e:
        return RawQueryResponseInvalidQuery(message=str(e))
    except Exception as e:  # noqa: BLE001
        if is_user_error(e):
            return RawQueryResponseInvalidQuery(message=user_message(e))
        err = internal_error(e)
        return RawQueryResponseInternalError(message=err.message, backtrace=err.backtrace)


def run_sql(spark: SparkSession, request: SqlRequest) -> SqlResponse:
    """A read-only query with every table as a view named after it; at most ``limit`` rows, as Arrow IPC."""
    import pyarrow as pa

    try:
        session = request_session(spark)
        for t in request.tables:
            if t.data_paths:
                session.read.parquet(*t.data_paths).createOrReplaceTempView(quote(t.name))
        try:
            df = session.sql(request.query)
        except Exception as e:  # noqa: BLE001
            if is_user_error(e):
                return QueryResponseInvalidQuery(message=user_message(e))
            raise
        if not df.isStreaming and df._jdf.queryExecution().analyzed().getClass().getSimpleName() in (
                "SetCommand", "ResetCommand"):
            return QueryResponseInvalidQuery(message="only read-only queries are allowed")
        table = df.limit(request.limit + 1).toArrow()
        truncated = table.num_rows > request.limit
        table = table.slice(0, request.limit)
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        return SqlResponseSuccess(arrow_ipc=sink.getvalue().to_pybytes(), truncated=truncated or None)
    except Exception as e:  # noqa: BLE001
        if is_user_error(e):
            return QueryResponseInvalidQuery(message=user_message(e))
        return internal_error(e)
