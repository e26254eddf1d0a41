"""Logical hash of data (multihash code 0x300016, ``arrow0-sha3-256``, algorithm "arrow-digest V0").

The hash of the records as Arrow data, independent of the Parquet encoding and of how rows are split into batches
(conformance notes §4): a record hasher absorbs the schema (every field depth-first: ``u64le(len(name))``, name,
``u64le(level)``), each leaf column has its own SHA3-256 over its type and values (structs are flattened, a leaf's
validity is the AND of its parents'), and the column digests are fed into the record hasher in column order.
"""
from __future__ import annotations

import hashlib
import itertools
import os
from dataclasses import dataclass
from typing import Iterable, Iterator, Union

import pyarrow as pa
import pyarrow.types as pt

from odf_core.hashing.arrow_types import encode_type, logical_value_type, u64
from odf_core.hashing.arrow_values import executor, feed_column
from odf_core.hashing.errors import HashingError, SchemaMismatchError, UnsupportedTypeError
from odf_core.hashing.sources import DataSource, ParquetReader, describe, is_url, open_binary, open_parquet
from odf_core.identity.multihash import ARROW0_SHA3_256, Multihash

# Rows per batch read from Parquet: memory stays bounded by one batch whatever the file size.
FILE_BATCH_ROWS = 131072
# Below this many values per batch, hashing columns on worker threads costs more than it saves.
PARALLEL_MIN_VALUES = 262144

Batches = Union[pa.Table, pa.RecordBatch, Iterable[Union[pa.RecordBatch, pa.Table]]]


@dataclass(frozen=True)
class LeafColumn:
    """A column that gets its own hasher: ``path`` is the dotted field path, ``type_bytes`` its encoded type."""

    path: str
    data_type: pa.DataType
    type_bytes: bytes


def schema_plan(schema: pa.Schema) -> tuple[bytes, list[LeafColumn]]:
    """The bytes the record hasher absorbs for ``schema`` and its leaf columns in hashing order."""
    header = bytearray()
    leaves: list[LeafColumn] = []

    def walk(fields: Iterable[pa.Field], level: int, prefix: str) -> None:
        for field in fields:
            name = field.name.encode("utf-8")
            header.extend(u64(len(name)) + name + u64(level))
            path = prefix + field.name
            t = logical_value_type(field.type)
            if pt.is_struct(t):
                walk(t.fields, level + 1, path + ".")
            else:
                leaves.append(LeafColumn(path, field.type, encode_type(field.type, path)))

    walk(schema, 0, "")
    return bytes(header), leaves


def leaf_arrays(columns: Iterable[pa.Array]) -> Iterator[pa.Array]:
    """Leaf arrays in schema order; flattening a struct ANDs its validity into its children."""
    for arr in columns:
        while isinstance(arr.type, pa.ExtensionType):
            arr = arr.storage
        if pt.is_struct(arr.type):
            yield from leaf_arrays(arr.flatten())
        else:
            yield arr


class RecordsDigest:
    """Streaming logical hash: ``RecordsDigest(schema)``, ``update(batch)`` any number of times, ``finalize()``.

    Batches must have the schema's column names and (logical) types; nullability and metadata are ignored.
    With ``parallel`` the leaf columns of large batches are hashed on worker threads.
    """

    def __init__(self, schema: pa.Schema, *, parallel: bool = True):
        header, self._leaves = schema_plan(schema)
        self._schema = schema
        self._hasher = hashlib.sha3_256(header)
        self._columns = [hashlib.sha3_256(leaf.type_bytes) for leaf in self._leaves]
        self._parallel = parallel
        self._checked: pa.Schema | None = schema
        self._digest: bytes | None = None

    @property
    def schema(self) -> pa.Schema:
        return self._schema

    def update(self, batch: pa.RecordBatch | pa.Table) -> None:
        if self._digest is not None:
            raise HashingError("RecordsDigest.update() called after finalize()")
        if isinstance(batch, pa.Table):
            for b in batch.to_batches():
                self.update(b)
            return
        self._check_schema(batch.schema)
        arrays = list(leaf_arrays(batch.columns))
        if self._parallel and len(arrays) > 1 and batch.num_rows * len(arrays) >= PARALLEL_MIN_VALUES:
            pool = executor()
            futures = [pool.submit(feed_column, h, a, pipeline=False) for h, a in zip(self._columns, arrays)]
            for f in futures:
                f.result()
        else:
            for h, a in zip(self._columns, arrays):
                feed_column(h, a, pipeline=self._parallel)

    def finalize(self) -> bytes:
        """The 32-byte digest; further calls return the same value."""
        if self._digest is None:
            for column in self._columns:
                self._hasher.update(column.digest())
            self._digest = self._hasher.digest()
        return self._digest

    def _check_schema(self, schema: pa.Schema) -> None:
        if schema is self._checked or schema.equals(self._checked):
            return
        _, leaves = schema_plan(schema)
        if len(leaves) != len(self._leaves):
            raise SchemaMismatchError(
                f"record batch has {len(leaves)} leaf columns {[leaf.path for leaf in leaves]}, "
                f"the digest was created for {len(self._leaves)} {[leaf.path for leaf in self._leaves]}"
            )
        for got, want in zip(leaves, self._leaves):
            if got.path != want.path or got.type_bytes != want.type_bytes:
                raise SchemaMismatchError(
                    f"record batch column {got.path!r} ({got.data_type}) does not match "
                    f"column {want.path!r} ({want.data_type}) of the digest's schema"
                )
        self._checked = schema


def logical_hash_table(data: Batches, schema: pa.Schema | None = None, *, parallel: bool = True) -> Multihash:
    """Logical hash of a table, a record batch or an iterable of batches (``schema`` defaults to the first's)."""
    if isinstance(data, (pa.Table, pa.RecordBatch)):
        batches: Iterable[pa.RecordBatch | pa.Table] = [data]
        schema = schema or data.schema
    else:
        it = iter(data)
        if schema is None:
            first = next(it, None)
            if first is None:
                raise HashingError("cannot hash an empty sequence of record batches without a schema")
            schema = first.schema
            it = itertools.chain([first], it)
        batches = it
    digest = RecordsDigest(schema, parallel=parallel)
    for batch in batches:
        digest.update(batch)
    return Multihash(ARROW0_SHA3_256, digest.finalize())


def logical_hash_file(source: DataSource, *, batch_rows: int = FILE_BATCH_ROWS, parallel: bool = True) -> Multihash:
    """Logical hash of a Parquet file, read batch by batch (memory bounded by one batch).

    ``source`` is a local path, an fsspec URL, a ``(filesystem, path)`` pair or an open binary file object.
    """
    name = describe(source)
    try:
        if isinstance(source, (str, os.PathLike)) and not is_url(source):
            with open_parquet(source) as pf:
                return _hash_parquet(pf, batch_rows, parallel)
        with open_binary(source) as f, open_parquet(f) as pf:
            return _hash_parquet(pf, batch_rows, parallel)
    except UnsupportedTypeError as e:
        raise UnsupportedTypeError(e.column, e.data_type, e.detail, file=name) from None
    except FileNotFoundError as e:
        raise HashingError(f"cannot open data file {name}: no such file") from e
    except (pa.ArrowException, OSError) as e:
        raise HashingError(f"cannot read Parquet file {name}: {e}") from e


def _hash_parquet(pf: ParquetReader, batch_rows: int, parallel: bool) -> Multihash:
    digest = RecordsDigest(pf.schema_arrow, parallel=parallel)
    for batch in pf.iter_batches(batch_size=batch_rows):
        digest.update(batch)
    return Multihash(ARROW0_SHA3_256, digest.finalize())
