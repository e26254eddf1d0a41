"""Errors raised while hashing data files: all are :class:`~odf_core.errors.OdfError` so callers report one line."""
from __future__ import annotations

from odf_core.errors import OdfError


class HashingError(OdfError):
    """A data file or table that cannot be hashed (unreadable file, not Parquet, mismatching batches)."""


class UnsupportedTypeError(HashingError, TypeError):
    """A column whose Arrow type has no encoding in the logical hash (arrow-digest V0)."""

    def __init__(self, column: str, data_type: object, detail: str = "", *, file: str | None = None):
        self.column = column
        self.data_type = data_type
        self.detail = detail
        self.file = file
        msg = f"column {column!r}: Arrow type {data_type} is not supported by the logical hash (arrow-digest V0)"
        if detail:
            msg += f": {detail}"
        super().__init__(f"{file}: {msg}" if file else msg)


class SchemaMismatchError(HashingError):
    """A record batch whose columns differ from the schema the digest was created with."""
