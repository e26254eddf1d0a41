"""Casts of values as they are read, failing with the file, the column and the value that does not fit.

ANSI casts already refuse what does not fit, but their error names neither the column nor the file. A checked cast
tries the cast and raises the engine's own check (see :func:`spark_jobs.errors.engine_check`) for the first value
that is not null yet does not convert.
"""
from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import DataType

from spark_jobs.columns import type_ddl
from spark_jobs.errors import ENGINE_CHECK_PREFIX


def checked_cast(value: Column, name: str, target: DataType, file: str) -> Column:
    """``value`` cast to ``target``; a value that does not convert fails the job with a message naming it."""
    cast = value.try_cast(target)
    message = F.concat(F.lit(f"{ENGINE_CHECK_PREFIX}cannot read {file}: column '{name}': value '"),
                       value.cast("string"), F.lit(f"' is not a valid {type_ddl(target)}"))
    return F.when(value.isNotNull() & cast.isNull(), F.raise_error(message)).otherwise(cast)
