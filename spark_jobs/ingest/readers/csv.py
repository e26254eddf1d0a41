"""``ReadStep::Csv`` with Spark's CSV reader in FAILFAST mode."""
from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from odf_core.engine.protocol import IngestInputFile
from odf_core.metadata import ReadStepCsv
from spark_jobs.errors import InvalidInput
from spark_jobs.ingest.readers import SourceInfo, WorkDir, encoding_of, reader, schema_of, time_format_options


@reader(ReadStepCsv)
def read_csv(spark: SparkSession, step: ReadStepCsv, inp: IngestInputFile, work: WorkDir
             ) -> tuple[DataFrame, SourceInfo]:
    encoding = encoding_of(step.encoding)  # validated here: Spark would only fail later, obscurely
    opts: dict[str, str] = {"mode": "FAILFAST", "header": str(bool(step.header)).lower()}
    if step.infer_schema:
        opts["inferSchema"] = "true"
    if step.separator == "":
        raise InvalidInput("readStep.separator must not be empty")
    for value, spark_name in ((step.separator, "sep"), (step.encoding, "encoding"), (step.quote, "quote"),
                              (step.escape, "escape"), (step.null_value, "nullValue")):
        if value is not None:
            # An empty quote turns quoting off (Spark's convention); an empty escape means "no escape character".
            opts[spark_name] = "\u0000" if spark_name == "escape" and value == "" else value
    opts.update(time_format_options(step))
    schema = schema_of(step)
    read = spark.read.options(**opts)
    if schema is not None:
        read = read.schema(schema)
    df = read.csv(inp.path)
    return df, SourceInfo(inp.display_name, inp.path, "csv", opts, df.schema, encoding)
