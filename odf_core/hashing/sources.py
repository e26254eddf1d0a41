"""Opening the data sources the hashers accept: local paths, open binary files, fsspec URLs and ``(fs, path)``."""
from __future__ import annotations

import contextlib
import os
from typing import IO, TYPE_CHECKING, Any, Iterator, Union

from odf_core.hashing.errors import HashingError

if TYPE_CHECKING:
    import pyarrow.parquet as pq

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


@contextlib.contextmanager
def open_parquet(source: "str | os.PathLike[str] | IO[bytes]") -> Iterator["pq.ParquetFile"]:
    """A Parquet reader that is done with ``source`` when the block exits: read it only inside the block.

    Why not ``pq.read_table``: it scans through pyarrow's dataset layer, whose asynchronous scan can drop its last
    references to a Python file object (or to the Python buffers read from it) on an Arrow worker thread *after* the
    call returned. If that happens while the interpreter is shutting down, the thread is killed inside a C++
    destructor and the process aborts ("terminate called without an active exception", exit code 134) although it
    had finished its work. The plain Parquet reader reads synchronously on the calling thread's behalf, and closing
    it here releases the file before the block ends. ``pre_buffer`` is off so memory stays at about one row group.
    Pass a local path when there is one: Arrow then reads it natively, with no Python object involved at all.
    """
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(os.fspath(source) if isinstance(source, os.PathLike) else source, pre_buffer=False)
    try:
        yield pf
    finally:
        pf.close()
