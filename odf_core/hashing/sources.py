"""Opening the data sources the hashers accept: local paths, open binary files, fsspec URLs and ``(fs, path)``."""
from __future__ import annotations

import contextlib
import os
from typing import IO, Any, Iterator, Union

from odf_core.hashing.errors import HashingError

DataSource = Union[str, "os.PathLike[str]", IO[bytes], tuple[Any, str]]


def describe(source: object) -> str:
    """A short human name of ``source`` for error messages."""
    if isinstance(source, tuple) and len(source) == 2:
        return str(source[1])
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    return str(getattr(source, "name", None) or type(source).__name__)


def is_url(source: object) -> bool:
    return isinstance(source, str) and "://" in source


@contextlib.contextmanager
def open_binary(source: DataSource) -> Iterator[IO[bytes]]:
    """Yield a readable binary file for ``source``; files we open are closed, a caller's file object is not.

    An ``OSError`` while opening becomes a :class:`HashingError` naming the source.
    """
    try:
        if isinstance(source, tuple) and len(source) == 2:
            fs, path = source
            cm = fs.open(path, "rb")
        elif is_url(source):
            import fsspec

            cm = fsspec.open(source, "rb")
        elif isinstance(source, (str, os.PathLike)):
            cm = open(source, "rb")
        elif hasattr(source, "read"):
            cm = contextlib.nullcontext(source)
        else:
            raise HashingError(
                f"cannot read data from {source!r}: expected a path, an fsspec URL, (filesystem, path) "
                "or a binary file object"
            )
        f = cm.__enter__()
    except OSError as e:
        raise HashingError(f"cannot open data file {describe(source)}: {e.strerror or e}") from e
    try:
        yield f
    except OSError as e:
        raise HashingError(f"cannot read data file {describe(source)}: {e.strerror or e}") from e
    finally:
        cm.__exit__(None, None, None)
