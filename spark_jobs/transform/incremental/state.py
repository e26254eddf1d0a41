"""The state of an incremental transform: named tables in ONE parquet file (the transform checkpoint).

ODF stores a checkpoint as one object, so the tables share one wide schema: ``__odf_table`` (which table a row
belongs to; its field metadata holds the checkpoint's JSON description), ``__odf_bucket`` (a hash of the row's key
columns modulo :data:`BUCKETS`), then each table's columns prefixed ``t<id>_``. Rows are sorted by table, bucket and
then all columns (the same state gives the same bytes) and written in row groups of :data:`ROW_GROUP_BYTES`, so the
row groups' min/max statistics of ``__odf_table`` and ``__odf_bucket`` tell which row groups can hold a table's rows
of given keys (the role of Kartothek's partitions and secondary indices, inside one file). Today a step reads only
whole tables (filtered by ``__odf_table``, which skips other tables' row groups) and rewrites the file.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spark_jobs.parquet_files import write_single_parquet

TABLE, BUCKET = "__odf_table", "__odf_bucket"
META_KEY = "__odf_checkpoint"
BUCKETS = 128
ROW_GROUP_BYTES = 4 << 20


def stored_type(t: T.DataType) -> T.DataType:
    """How a state column is stored: timestamps (also inside structs and arrays) as microseconds since the epoch.
    Parquet output is set to millisecond timestamps (what slices store): a state written as timestamps would lose
    the microseconds of its keys and values, and two groups of one millisecond would become one."""
    if isinstance(t, (T.TimestampType, T.TimestampNTZType)):
        return T.LongType()
    if isinstance(t, T.StructType):
        return T.StructType([T.StructField(f.name, stored_type(f.dataType), f.nullable) for f in t.fields])
    if isinstance(t, T.ArrayType):  # its elements are converted by a lambda whose result Spark takes as nullable
        return T.ArrayType(stored_type(t.elementType), True)
    return t


def _convert(c: Column, t: T.DataType, store: bool) -> Column:
    """``c`` (of type ``t``) to its stored form, or (``store`` False) from its stored form back to ``t``."""
    if stored_type(t) == t:
        return c
    if isinstance(t, (T.TimestampType, T.TimestampNTZType)):
        if store:  # the session is in UTC (SQL_CONF): a wall-clock timestamp's micros are exact
            return F.unix_micros(c.cast(T.TimestampType()))
        return F.timestamp_micros(c).cast(t)
    if isinstance(t, T.StructType):
        fields = [_convert(c.getField(f.name), f.dataType, store).alias(f.name) for f in t.fields]
        return F.when(c.isNull(), F.lit(None)).otherwise(F.struct(*fields))
    assert isinstance(t, T.ArrayType)
    return F.transform(c, lambda x: _convert(x, t.elementType, store))


def bucket_of(keys: Sequence[str]) -> Column:
    if not keys:
        return F.lit(0)
    return F.pmod(F.xxhash64(*[F.col(k) for k in keys]), F.lit(BUCKETS)).cast("int")


def same_keys(left: DataFrame, right: DataFrame, keys: Sequence[str], right_keys: Sequence[str] | None = None
              ) -> Column | bool:
    """Null-safe equality of key columns (a NULL group key is a key like any other)."""
    cond: Column | None = None
    for a, b in zip(keys, right_keys or keys):
        c = left[a].eqNullSafe(right[b])
        cond = c if cond is None else cond & c
    return cond if cond is not None else F.lit(True)


def by_keys(df: DataFrame, wanted: DataFrame, keys: Sequence[str], how: str) -> DataFrame:
    """Rows of ``df`` whose keys (null-safe) are (``left_semi``) or are not (``left_anti``) among ``wanted``'s, a
    frame of the key columns (broadcast when the step marked it so: ``Step.broadcast``)."""
    w = wanted.toDF(*[f"w_{k}" for k in keys])
    return df.join(w, same_keys(df, w, keys, list(w.columns)), how)


class WindowColumns:
    """The columns a window operator's state and step frames name its partition keys (``k<i>``, one per PARTITION BY
    expression: the state's key columns) and its ORDER BY values (``o<i>``) by."""

    partition: tuple[Any, ...]
    order: tuple[Any, ...]

    @property
    def keys(self) -> list[str]:
        return [f"k{i}" for i in range(len(self.partition))]

    @property
    def order_columns(self) -> list[str]:
        return [f"o{i}" for i in range(len(self.order))]


@dataclass
class StateStore:
    """The tables of the previous checkpoint (read side)."""

    session: SparkSession
    path: str | None
    tables: Mapping[str, Mapping[str, Any]]
    schema: T.StructType | None

    def table(self, name: str) -> DataFrame | None:
        spec = self.tables.get(name)
        if spec is None or self.path is None:
            return None
        tid = int(spec["id"])
        df = self.session.read.schema(self.schema).parquet(self.path).where(F.col(TABLE) == tid)
        if "schema" not in spec:  # written before version 4: timestamps stored as they are
            return df.select(*[F.col(f"t{tid}_{c}").alias(c) for c in spec["columns"]])
        types = {f.name: f.dataType for f in T.StructType.fromJson(spec["schema"]).fields}
        return df.select(*[_convert(F.col(f"t{tid}_{c}"), types[c], store=False).alias(c) for c in spec["columns"]])


@dataclass
class StateWriter:
    """The tables of the new checkpoint (write side), written in one Spark job."""

    tables: dict[str, tuple[DataFrame, list[str]]] = field(default_factory=dict)

    def put(self, name: str, df: DataFrame, keys: Sequence[str]) -> None:
        self.tables[name] = (df, list(keys))

    def write(self, session: SparkSession, path: str, meta: dict[str, Any]) -> dict[str, int]:
        """Write all tables and ``meta`` (with each table's columns, keys and row count) to ``path``."""
        specs: dict[str, dict[str, Any]] = {}
        fields: list[T.StructField] = []
        for tid, (name, (df, keys)) in enumerate(sorted(self.tables.items())):
            specs[name] = {"id": tid, "columns": list(df.columns), "keys": keys, "schema": df.schema.jsonValue()}
            fields += [T.StructField(f"t{tid}_{f.name}", stored_type(f.dataType), True) for f in df.schema.fields]
        parts = []
        for name, (df, keys) in sorted(self.tables.items()):
            tid = specs[name]["id"]
            mine = {f"t{tid}_{f.name}": _convert(F.col(f.name), f.dataType, store=True) for f in df.schema.fields}
            parts.append(df.select(
                F.lit(tid).cast("int").alias(TABLE), bucket_of(keys).alias(BUCKET),
                *[(mine[f.name] if f.name in mine else F.lit(None)).cast(f.dataType).alias(f.name)
                  for f in fields]))
        schema = T.StructType([T.StructField(TABLE, T.IntegerType(), True),
                               T.StructField(BUCKET, T.IntegerType(), True), *fields])
        whole = session.createDataFrame(session.sparkContext.emptyRDD(), schema)
        for p in parts:
            whole = whole.unionByName(p)
        obs = Observation()
        whole = whole.observe(obs, F.count(F.lit(1)).alias("all"),
                              *[F.sum(F.when(F.col(TABLE) == s["id"], 1).otherwise(0)).alias(f"n{s['id']}")
                                for s in specs.values()])
        meta = dict(meta)
        meta["tables"] = specs
        # the description travels in the field metadata of __odf_table
        whole = whole.withMetadata(TABLE, {META_KEY: json.dumps(meta, sort_keys=True, separators=(",", ":"))})
        from spark_jobs.transform.inputs import orderable

        order = [F.col(TABLE), F.col(BUCKET),
                 *[F.col(f.name).asc_nulls_first() for f in fields if orderable(f.dataType)]]
        # every column keeps parquet's default encodings, dictionaries included, although most state values are
        # distinct (a dictionary is tried and dropped, ~15% of the write): a writer's own encoding settings reach the
        # writers running beside it in this JVM (parquet_files.SHARED_WRITER_SETTINGS), and the checkpoint's bytes
        # must not depend on what runs beside it
        write_single_parquet(whole, path, sort=order, options={"parquet.block.size": str(ROW_GROUP_BYTES)})
        got = obs.get
        return {name: int(got.get(f"n{s['id']}") or 0) for name, s in specs.items()}


def read_meta(schema: T.StructType) -> dict[str, Any] | None:
    if TABLE not in schema.names:
        return None
    raw = schema[TABLE].metadata.get(META_KEY)
    return json.loads(raw) if raw else None
