"""Queries that produce no dataset block: the spec's raw query (a query over files) and read-only ad-hoc SQL."""
from __future__ import annotations

from pyspark.sql import SparkSession

from odf_core.engine.protocol import QueryResponseInvalidQuery, SqlRequest, SqlResponse, SqlResponseSuccess
from odf_core.metadata import (
    RawQueryRequest,
    RawQueryResponseInternalError,
    RawQueryResponseInvalidQuery,
    RawQueryResponseSuccess,
)
from spark_jobs.columns import quote
from spark_jobs.errors import always_answer
from spark_jobs.parquet_files import write_single_parquet
from spark_jobs.session import request_session
from spark_jobs.sql_gate import gated_query
from spark_jobs.sql_steps import RAW_QUERY, run_steps


def raw_query(spark: SparkSession, request: RawQueryRequest):
    """The query over the input files (a view named ``input``), written as one parquet file."""
    def run():
        import pyarrow.parquet as pq

        with request_session(spark) as session:
            inputs = session.read.parquet(*request.input_data_paths)
            out = run_steps(session, request.transform, {"input": inputs}, RAW_QUERY)
            write_single_parquet(out, request.output_data_path)
        return RawQueryResponseSuccess(num_records=pq.ParquetFile(request.output_data_path).metadata.num_rows)

    return always_answer(run, invalid=lambda e: RawQueryResponseInvalidQuery(message=str(e)),
                         internal=lambda err: RawQueryResponseInternalError(message=err.message,
                                                                            backtrace=err.backtrace))


def run_sql(spark: SparkSession, request: SqlRequest) -> SqlResponse:
    """One query (checked by :mod:`spark_jobs.sql_gate`) with every table as a view named after it; at most ``limit``
    rows, as Arrow IPC."""
    import pyarrow as pa

    def run() -> SqlResponse:
        with request_session(spark) as session:
            for t in request.tables:
                if t.data_paths:
                    session.read.parquet(*t.data_paths).createOrReplaceTempView(quote(t.name))
            table = gated_query(session, request.query).limit(request.limit + 1).toArrow()
        truncated = table.num_rows > request.limit
        table = table.slice(0, request.limit)
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        return SqlResponseSuccess(arrow_ipc=sink.getvalue().to_pybytes(), truncated=truncated or None)

    return always_answer(run, invalid=lambda e: QueryResponseInvalidQuery(message=str(e)))
