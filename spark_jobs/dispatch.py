"""One entry for every engine request, whichever way it arrived (spark-submit file, gRPC call, in-process call)."""
from __future__ import annotations

from pyspark.sql import SparkSession

from odf_core.engine.protocol import (
    EngineRequest,
    EngineResponse,
    HealthRequest,
    HealthResponse,
    IngestRequest,
    IngestResult,
    OdfTransformRequest,
    SqlRequest,
    SqlResult,
    ValidateQueryRequest,
    ValidateQueryResult,
)
from odf_core.metadata import RawQueryRequest, RawQueryResponseRoot
from spark_jobs.ingest.kept import KeptReads


def engine_version() -> str:
    from odf_core.engine.version import engine_version as version

    return version()


def handle(spark: SparkSession, request: EngineRequest, *, kept: KeptReads | None = None) -> EngineResponse:
    """Run ``request`` on ``spark``; always answers (failures are responses, never exceptions)."""
    if isinstance(request, IngestRequest):
        from spark_jobs.ingest import execute_ingest

        return IngestResult(value=execute_ingest(spark, request, kept))
    if isinstance(request, OdfTransformRequest):
        from spark_jobs.transform import execute_transform

        return execute_transform(spark, request)
    if isinstance(request, ValidateQueryRequest):
        from spark_jobs.transform import validate_query

        return ValidateQueryResult(value=validate_query(spark, request))
    if isinstance(request, SqlRequest):
        from spark_jobs.queries import run_sql

        return SqlResult(value=run_sql(spark, request))
    if isinstance(request, RawQueryRequest):
        from spark_jobs.queries import raw_query

        return RawQueryResponseRoot(value=raw_query(spark, request))
    if isinstance(request, HealthRequest):
        import pyspark

        return HealthResponse(engine_version=engine_version(), spark_version=pyspark.__version__,
                              master=spark.sparkContext.master, running=0, queued=0, max_concurrency=1, uptime_s=0)
    raise TypeError(f"unknown engine request {type(request).__name__}")
