"""The read phase: every prepared file read, preprocessed and given its event time, unioned by column name.

Per input file the read step runs, then the preprocess query (:mod:`spark_jobs.ingest.preprocess`) or, for a source
without read schema and preprocess query, the inference rules of :mod:`spark_jobs.ingest.infer`; then the event time
is filled in from the source's time where the data has none. The hidden boolean column
``__odf_event_time_from_source`` remembers where that happened: Snapshot must not count a filled-in time as a change
of the row.

An empty file is no rows of the read schema; without a read schema it is nothing at all (as in the reference
implementation): it is skipped, and when every input is, the read has no frame and the transaction commits only its
new source state.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DateType

from odf_core.engine.protocol import ReadPhase
from odf_core.metadata import DatasetVocabulary
from spark_jobs.columns import col, is_timestamp, normalize_timestamps, type_ddl
from spark_jobs.errors import InputRejected
from spark_jobs.ingest import infer
from spark_jobs.ingest.preprocess import apply_preprocess, check_preprocess
from spark_jobs.ingest.readers import SourceInfo, WorkDir, read_input, schema_of

ET_FILLED = "__odf_event_time_from_source"
ROW_ID = "__odf_row_id"
HIDDEN = (ROW_ID, ET_FILLED)


@dataclass
class ReadFrame:
    df: DataFrame | None  # event time + data columns (+ hidden columns), lazy; None: every input was empty
    sources: list[SourceInfo]


def apply_event_time(df: DataFrame, column: str, fallback_ms: int | None, file: str) -> DataFrame:
    """Add the event-time column from the source time, or fill its nulls from it (see the module docstring)."""
    fallback = F.timestamp_millis(F.lit(fallback_ms)) if fallback_ms is not None else None
    if column not in df.columns:
        if fallback is None:
            raise InputRejected(f"{file}: the data has no event-time column '{column}' and the source gave no event"
                                f" time (columns: {df.columns})", file=file)
        return df.select(fallback.alias(column), *[col(c) for c in df.columns], F.lit(True).alias(ET_FILLED))
    dt = df.schema[column].dataType
    if not (is_timestamp(dt) or isinstance(dt, DateType)):
        raise InputRejected(f"{file}: event-time column '{column}' has type {type_ddl(dt)}; declare it as TIMESTAMP"
                            f" or DATE in the read schema or convert it in the preprocess query", file=file)
    if fallback is None:
        return df.withColumn(ET_FILLED, F.lit(False))
    fill = F.to_date(fallback) if isinstance(dt, DateType) else fallback
    return df.withColumn(ET_FILLED, col(column).isNull()).withColumn(column, F.coalesce(col(column), fill))


def _is_empty(path: str) -> bool:
    return os.path.isfile(path) and os.path.getsize(path) == 0


def build_read_frame(spark: SparkSession, phase: ReadPhase, vocab: DatasetVocabulary, work: WorkDir) -> ReadFrame:
    """All inputs read, preprocessed and event-timed (lazily), unioned by name in input order."""
    frames, sources = [], []
    schema = schema_of(phase.read_step)
    inferred = infer.applies(phase.read_step, phase.preprocess)
    if phase.preprocess is not None:
        check_preprocess(phase.preprocess)
    for inp in phase.inputs:
        if _is_empty(inp.path):
            if schema is None:
                continue
            df = spark.createDataFrame([], schema)
            src = SourceInfo(inp.display_name, inp.path, "other")
        else:
            df, src = read_input(spark, phase.read_step, inp, work)
        sources.append(src)
        if phase.preprocess is not None:
            df = apply_preprocess(spark, df, phase.preprocess, inp.display_name)
        elif inferred:
            df = infer.apply_inference_rules(df, vocab, phase.dataset_schema, inp.display_name)
        df = normalize_timestamps(df)
        fallback = inp.event_time.millis if inp.event_time is not None else None
        frames.append(apply_event_time(df, vocab.event_time, fallback, inp.display_name))
    if not frames:
        return ReadFrame(None, sources)
    result = frames[0]
    for df, src in zip(frames[1:], sources[1:]):
        if sorted(df.columns) != sorted(result.columns):
            raise InputRejected(f"{src.display_path} has columns {df.columns} but {sources[0].display_path} has"
                                f" {result.columns}; all inputs of one ingest must have the same columns",
                                file=src.display_path)
        result = result.unionByName(df)
    return ReadFrame(result, sources)
