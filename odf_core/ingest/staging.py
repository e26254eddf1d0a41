"""File plumbing of the staging directory: step-owned sub-directories, atomic writes and streamed copies.

A step first empties the sub-directory it owns, so a retry overwrites its own earlier outputs and nothing else.
Data goes to ``<name>.part`` and is renamed into place when complete, so a file is never seen half-written.
"""
from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, BinaryIO, Protocol

from odf_core.storage.faults import write_fault

if TYPE_CHECKING:
    from odf_core.workspace import Workspace

CHUNK = 1 << 20  # 1 MiB: large enough for throughput, small enough to keep memory flat
_PROGRESS_BYTES = 64 << 20
_PROGRESS_SECONDS = 10.0

_log = logging.getLogger("odf.ingest")
_UNSAFE = re.compile(r"[^A-Za-z0-9._=-]+")


def staging_root(ws: "Workspace") -> str:
    """Local staging area: inside a local workspace, else ``$ODF_STAGING_DIR`` or the user's cache directory."""
    env = os.environ.get("ODF_STAGING_DIR")
    if env:
        return env
    local = ws.store.local_path("staging")
    if local:
        return local
    return os.path.join(os.path.expanduser("~"), ".cache", "odf", "staging")


def staging_name(txn_id: str) -> str:
    """The staging directory name of a transaction id (ingest and transform alike): the id itself when it is a safe
    name, else a cleaned-up prefix plus a digest, so that two different ids (say ``a/b`` and ``a_b``) never share a
    staging directory."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in txn_id)[:120].strip(".")
    if safe == txn_id:
        return safe
    return f"{safe[:100]}-{hashlib.sha256(txn_id.encode('utf-8', 'surrogatepass')).hexdigest()[:16]}"


def reset_dir(path: str) -> str:
    """Empty (or create) a directory owned by one step."""
    if os.path.lexists(path):
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.remove(path)
    os.makedirs(path)
    return path


def remove_file(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


@contextmanager
def part_file(dest: str) -> Iterator[str]:
    """A path ``<dest>.part`` to write to: renamed to ``dest`` when the block ends normally, removed when it raises."""
    tmp = f"{dest}.part"
    try:
        yield tmp
        write_fault(dest)
        os.replace(tmp, dest)
    except BaseException:
        remove_file(tmp)
        raise


def atomic_write_text(path: str, text: str) -> None:
    """Write a manifest: complete or not at all (a failed write, say on a full disk, leaves no ``.part`` file)."""
    tmp = f"{path}.part"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            write_fault(path)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        remove_file(tmp)
        raise


def source_basename(name: str) -> str:
    """Last path segment of a source-side name (a path, a URL without its query, or an image reference)."""
    if "://" in name:
        name = urllib.parse.unquote(urllib.parse.urlsplit(name).path)
    return os.path.basename(name.rstrip("/")) or "data"


def staged_name(index: int, source_name: str, default: str = "data") -> str:
    """``000003-report.csv``: ordered, unique, and never hidden from Spark (which skips names starting ``_``/``.``)."""
    base = _UNSAFE.sub("_", os.path.basename(source_name.rstrip("/"))).strip("._") or default
    return f"{index:06d}-{base[:120]}"


class Progress:
    """Logs bytes moved every 64 MiB or 10 s, and once at the end."""

    def __init__(self, what: str):
        self.what = what
        self.bytes = 0
        self._next_bytes = _PROGRESS_BYTES
        self._next_time = time.monotonic() + _PROGRESS_SECONDS

    def add(self, n: int) -> None:
        self.bytes += n
        if self.bytes >= self._next_bytes or time.monotonic() >= self._next_time:
            _log.info("%s: %d bytes so far", self.what, self.bytes)
            self._next_bytes = self.bytes + _PROGRESS_BYTES
            self._next_time = time.monotonic() + _PROGRESS_SECONDS

    def done(self) -> None:
        _log.info("%s: %d bytes", self.what, self.bytes)


class Readable(Protocol):
    """What copy_stream reads from: any binary file object (gzip and zip members included)."""

    def read(self, size: int, /) -> bytes: ...


def copy_stream(src: Readable, dst: BinaryIO, progress: Progress) -> int:
    """Copy in chunks (never the whole file in memory); returns the number of bytes copied."""
    total = 0
    while True:
        chunk = src.read(CHUNK)
        if not chunk:
            return total
        dst.write(chunk)
        total += len(chunk)
        progress.add(len(chunk))


def link_or_copy(src: str, dst: str, *, allow_link: bool) -> int:
    """Hard-link ``src`` to ``dst`` when allowed and possible (same file system), else copy it; returns its size.

    A hard link shares the inode, so a source rewritten *in place* would change the staged file too; sources that
    are replaced by rename (the usual way) are safe.
    """
    if allow_link:
        try:
            os.link(src, dst)
            size = os.path.getsize(dst)
            _log.info("linked %s into staging (%d bytes)", src, size)
            return size
        except OSError:
            pass
    progress = Progress(f"copy {src}")
    with part_file(dst) as tmp, open(src, "rb") as fin, open(tmp, "wb") as fout:
        size = copy_stream(fin, fout, progress)
    progress.done()
    return size
