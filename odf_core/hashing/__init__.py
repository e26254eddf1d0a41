"""Hashes of data files: physical (SHA3-256 of the bytes) and logical (arrow-digest V0 of the records).

The names load on first use (PEP 562): a physical hash needs only ``hashlib``, and the commands that hash no records
(a warm engine's client, checkpoints) should not pay for importing pyarrow's compute functions.
"""
from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from odf_core.hashing.errors import HashingError, SchemaMismatchError, UnsupportedTypeError
    from odf_core.hashing.logical import RecordsDigest, logical_hash_file, logical_hash_table
    from odf_core.hashing.physical import physical_hash

_WHERE = {
    "physical_hash": "physical",
    "logical_hash_file": "logical",
    "logical_hash_table": "logical",
    "RecordsDigest": "logical",
    "HashingError": "errors",
    "UnsupportedTypeError": "errors",
    "SchemaMismatchError": "errors",
}

__all__ = [
    "physical_hash",
    "logical_hash_file",
    "logical_hash_table",
    "RecordsDigest",
    "HashingError",
    "UnsupportedTypeError",
    "SchemaMismatchError",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
