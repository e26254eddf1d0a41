"""Hashes of data files: physical (SHA3-256 of the bytes) and logical (arrow-digest V0 of the records)."""
from odf_core.hashing.errors import HashingError, SchemaMismatchError, UnsupportedTypeError
from odf_core.hashing.logical import RecordsDigest, logical_hash_file, logical_hash_table
from odf_core.hashing.physical import physical_hash

__all__ = [
    "physical_hash",
    "logical_hash_file",
    "logical_hash_table",
    "RecordsDigest",
    "HashingError",
    "UnsupportedTypeError",
    "SchemaMismatchError",
]
