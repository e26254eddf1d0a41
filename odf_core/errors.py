"""Error types of the protocol library.

Every error a user can cause derives from :class:`OdfError`, so the CLI and the Airflow operators can turn it into
one clear line without a stack trace.
"""
from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class OdfError(Exception):
    """Base of every error caused by input, data or dataset state (not by a bug)."""


class MetadataError(OdfError):
    """Malformed metadata: names the source file (and line, when read from YAML), the property path and the
    offending value: ``FILE:LINE: PATH: problem (got VALUE)``."""

    def __init__(self, problem: str, *, file: str | None = None, path: str = "", value: Any = ...,
                 line: int | None = None):
        self.problem = problem
        self.file = file
        self.path = path
        self.value = value
        self.line = line
        super().__init__(self._format())

    def _format(self) -> str:
        where = self.file or "<input>"
        if self.line is not None:
            where += f":{self.line}"
        if self.path:
            where += f": {self.path}"
        msg = f"{where}: {self.problem}"
        if self.value is not ...:
            msg += f" (got {self.value!r})"
        return msg

    def with_file(self, file: str) -> "MetadataError":
        return MetadataError(self.problem, file=file, path=self.path, value=self.value, line=self.line)

    def with_line(self, line: int | None) -> "MetadataError":
        return MetadataError(self.problem, file=self.file, path=self.path, value=self.value, line=line)


class InvalidIdentifier(OdfError, ValueError):
    """Malformed multihash, DID, dataset name, alias or reference text."""


class DecodeError(OdfError):
    """Binary metadata that is truncated, corrupted or not of the expected kind."""


class ChainError(OdfError):
    """A block that would break a rule of the metadata chain."""


class RefConflict(OdfError):
    """The head moved while we were appending: retry on top of the new head."""

    def __init__(self, ref: str, expected: str | None, actual: str | None):
        self.ref, self.expected, self.actual = ref, expected, actual
        super().__init__(
            f"concurrent update of {ref}: expected it at {expected or '<none>'}, found {actual or '<none>'}; retry"
        )


class DatasetChanged(RefConflict):
    """Another writer committed to the dataset after this transaction was planned on its old head."""

    def __init__(self, dataset: str, expected: str | None, actual: str | None):
        super().__init__("refs/head", expected, actual)
        self.dataset = dataset
        self.args = (f"dataset '{dataset}' changed concurrently (head now {actual or '<none>'}); retry",)

    def __str__(self) -> str:
        return self.args[0]


class DatasetNotFound(OdfError):
    pass


class DatasetExists(OdfError):
    pass


class IntegrityError(OdfError):
    """Stored blocks, refs or files that do not match what the chain records."""


class SchemaEvolutionError(ChainError):
    """A new data schema that is not a backward-compatible evolution of the previous one (only adding columns is)."""

    def __init__(self, where: str, problems: list[str]):
        self.where, self.problems = where, list(problems)
        prefix = f"{where}: " if where else ""
        super().__init__(
            f"{prefix}schema change not allowed (only new columns may be added, after the existing ones): "
            + "; ".join(self.problems)
        )


_REASONS = {
    errno.ENOSPC: "no space left on device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EIO: "input/output error",
    errno.EFBIG: "file too large",
}


def os_error_reason(error: OSError) -> str:
    """What went wrong in a few lower-case words (``no space left on device``), without Python's ``[Errno N]``."""
    if error.errno in _REASONS:
        return _REASONS[error.errno]
    text = error.strerror or (os.strerror(error.errno) if error.errno else "") or str(error) or type(error).__name__
    return text[:1].lower() + text[1:]


#: Errors that say the disk is full, over quota or read-only: the machine's state, never a bug of ours.
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})


def disk_error(exc: BaseException) -> OSError | None:
    """The :class:`OSError` of a full, over-quota or read-only disk behind ``exc`` (itself or in its cause chain)."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, OSError) and e.errno in DISK_ERRNOS:
            return e
        e = e.__cause__ or e.__context__
    return None


class FileSystemError(OdfError):
    """The operating system refused a read or write: a full disk, a quota, a read-only mount, an I/O error.

    Not a bug, so it is reported like every other :class:`OdfError`: one line naming the operation and the path
    (``no space left on device while writing /ws/datasets/x/data/f1220…``), never a stack trace.
    """

    def __init__(self, operation: str, path: str | None, error: OSError):
        self.operation, self.path, self.errno = operation, path, error.errno
        self.reason = os_error_reason(error)
        where = f" {path}" if path else ""
        super().__init__(f"{self.reason} while {operation}{where}")


@contextmanager
def os_errors(operation: str, path: str | os.PathLike[str] | None = None, *, exact: bool = False
              ) -> Iterator[None]:
    """Turn an :class:`OSError` raised inside the block into a :class:`FileSystemError` naming ``operation`` and the
    file the error names, else ``path`` (always ``path`` when ``exact``: e.g. an object's key rather than the temp
    file it was being written through). Errors that already are :class:`OdfError` pass through unchanged."""
    try:
        yield
    except OdfError:
        raise
    except OSError as e:
        named = e.filename if isinstance(e.filename, (str, bytes, os.PathLike)) and not exact else None
        target = os.fsdecode(named) if named is not None else (os.fspath(path) if path is not None else None)
        raise FileSystemError(operation, target, e) from e
