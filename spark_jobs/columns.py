"""Column names, DDL text and type conversions shared by ingest and transform."""
from __future__ import annotations

import functools
import re

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    DataType,
    MapType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from spark_jobs.errors import InputRejected


def quote(name: str) -> str:
    """A back-quoted identifier (dataset aliases such as ``com.example.trips`` contain dots)."""
    return "`" + name.replace("`", "``") + "`"


def col(name: str) -> Column:
    """A column reference that survives dots, spaces and backticks in the name."""
    return F.col(quote(name))


@functools.lru_cache(maxsize=4096)
def ident(name: str) -> str:
    """A column name as DDL text, quoted only when Spark's DDL parser would not read it back unquoted."""
    quoted = quote(name)
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        return quoted
    try:
        return name if StructType.fromDDL(f"{name} STRING").names == [name] else quoted
    except Exception:  # noqa: BLE001 - any parse failure: quote the name
        return quoted


def type_ddl(dt: DataType) -> str:
    if isinstance(dt, StructType):
        return "STRUCT<" + ", ".join(f"{ident(f.name)}: {type_ddl(f.dataType)}" for f in dt.fields) + ">"
    if isinstance(dt, ArrayType):
        return f"ARRAY<{type_ddl(dt.elementType)}>"
    if isinstance(dt, MapType):
        return f"MAP<{type_ddl(dt.keyType)}, {type_ddl(dt.valueType)}>"
    return dt.simpleString().upper()


def schema_ddl_list(schema: StructType) -> list[str]:
    """Spark schema -> ODF-style list of DDL column strings."""
    return [f"{ident(f.name)} {type_ddl(f.dataType)}" for f in schema.fields]


def parse_ddl(ddl: str, where: str) -> StructType:
    from spark_jobs.errors import user_message

    try:
        return StructType.fromDDL(ddl)
    except Exception as e:  # noqa: BLE001 - ParseException and friends
        raise InputRejected(f"{where}: invalid DDL schema {ddl!r}: {user_message(e)}") from None


def is_timestamp(dt: DataType) -> bool:
    return isinstance(dt, (TimestampType, TimestampNTZType))


def normalize_timestamps(df: DataFrame) -> DataFrame:
    """Every top-level timestamp column becomes TIMESTAMP (UTC) truncated to milliseconds, as slices store it."""
    if not any(is_timestamp(f.dataType) for f in df.schema.fields):
        return df
    cols = []
    for f in df.schema.fields:
        if is_timestamp(f.dataType):
            cols.append(F.timestamp_millis(F.unix_millis(col(f.name).cast("timestamp"))).alias(f.name))
        else:
            cols.append(col(f.name))
    return df.select(*cols)


def is_string(dt: DataType) -> bool:
    return isinstance(dt, StringType)
