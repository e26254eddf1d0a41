"""``ReadStep::Parquet``: the file's own schema, or the step's schema selected and cast from it."""
from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from odf_core.engine.protocol import IngestInputFile
from odf_core.metadata import ReadStepParquet
from spark_jobs.columns import col
from spark_jobs.errors import InputRejected
from spark_jobs.ingest.readers import SourceInfo, WorkDir, reader, schema_of


@reader(ReadStepParquet)
def read_parquet(spark: SparkSession, step: ReadStepParquet, inp: IngestInputFile, work: WorkDir
                 ) -> tuple[DataFrame, SourceInfo]:
    df = spark.read.parquet(inp.path)
    schema = schema_of(step)
    if schema is not None:
        missing = [f.name for f in schema.fields if f.name not in df.columns]
        if missing:
            raise InputRejected(f"cannot read {inp.display_name}: column(s) {missing} of the schema are not in the "
                                f"file (available: {df.columns})", file=inp.display_name)
        df = df.select(*[col(f.name).cast(f.dataType).alias(f.name) for f in schema.fields])
    return df, SourceInfo(inp.display_name, inp.path, "other")
