"""What ingest does for a source that leaves the column types to inference: no read schema and no preprocess query.

The reference implementation does the first and the last of these; the middle one keeps a dataset's types stable
when inference (Spark's differs from the reference's) guesses differently from one file to the next:

* columns named like the system columns (the vocabulary's ``offset``, ``op`` and ``system_time``) are renamed with a
  leading underscore (``op`` -> ``_op``): data that has such a column can still be ingested;
* columns the dataset's schema (its latest ``SetDataSchema``) already has are cast to the recorded types — a text
  date where the dataset has a TIMESTAMP, a Spark INT where it has BIGINT; values that do not fit are errors;
* an event-time column that is still a whole number is read as Unix seconds, and one that is still text as a
  timestamp (RFC 3339 and the other forms Spark's cast accepts).
"""
from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ByteType,
    DataType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    TimestampType,
)

from odf_core.metadata import DatasetVocabulary
from spark_jobs.columns import col, is_timestamp
from spark_jobs.errors import InputRejected
from spark_jobs.ingest.coerce import checked_cast

_WHOLE = (ByteType, ShortType, IntegerType, LongType)


def applies(read_step: Any, preprocess: Any) -> bool:
    return preprocess is None and not getattr(read_step, "schema", None)


def rename_system_columns(df: DataFrame, vocab: DatasetVocabulary, file: str) -> DataFrame:
    """``offset``/``op``/``system_time`` (as the vocabulary names them) -> ``_offset``/``_op``/``_system_time``."""
    system = (vocab.offset, vocab.op, vocab.system_time)
    clashes = [c for c in df.columns if c in system]
    if not clashes:
        return df
    taken = [f"_{c}" for c in clashes if f"_{c}" in df.columns]
    if taken:
        raise InputRejected(f"cannot read {file}: column(s) {clashes} are named like system columns and would be "
                            f"renamed to {taken}, which the data already has; declare a read schema or a preprocess "
                            "query", file=file)
    return df.select(*[col(c).alias(f"_{c}" if c in system else c) for c in df.columns])


def _target_types(dataset_schema: bytes | None) -> dict[str, DataType]:
    if not dataset_schema:
        return {}
    from pyspark.sql.pandas.types import from_arrow_type

    from odf_core.metadata.arrow_schema import decode_arrow_schema

    out = {}
    for f in decode_arrow_schema(dataset_schema):
        try:
            out[f.name] = from_arrow_type(f.type)
        except Exception:  # noqa: BLE001 - a type Spark cannot hold: left to the schema check of the merge
            continue
    return out


def to_timestamp(value: Any, name: str, dt: DataType, file: str) -> Any:
    """A whole number as Unix seconds, anything else by a checked cast."""
    if isinstance(dt, _WHOLE):
        return F.timestamp_seconds(value)
    return checked_cast(value, name, TimestampType(), file)


def coerce_to_dataset(df: DataFrame, dataset_schema: bytes | None, file: str) -> DataFrame:
    """Cast the columns the dataset's schema has to the types it records."""
    targets = _target_types(dataset_schema)
    cols, changed = [], False
    for f in df.schema.fields:
        target = targets.get(f.name)
        if target is None or f.dataType == target or (is_timestamp(f.dataType) and is_timestamp(target)):
            cols.append(col(f.name))
            continue
        changed = True
        if is_timestamp(target):
            cols.append(to_timestamp(col(f.name), f.name, f.dataType, file).alias(f.name))
        else:
            cols.append(checked_cast(col(f.name), f.name, target, file).alias(f.name))
    return df.select(*cols) if changed else df


def coerce_event_time(df: DataFrame, vocab: DatasetVocabulary, file: str) -> DataFrame:
    et = vocab.event_time
    if et not in df.columns:
        return df
    dt = df.schema[et].dataType
    if not isinstance(dt, _WHOLE + (StringType,)):
        return df
    return df.withColumn(et, to_timestamp(col(et), et, dt, file))


def apply_inference_rules(df: DataFrame, vocab: DatasetVocabulary, dataset_schema: bytes | None,
                          file: str) -> DataFrame:
    """The three rules of the module docstring, in that order, for one input file."""
    df = rename_system_columns(df, vocab, file)
    df = coerce_to_dataset(df, dataset_schema, file)
    return coerce_event_time(df, vocab, file)
