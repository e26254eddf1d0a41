"""How each kind of store makes writes atomic: the only part of the storage layer that differs between backends.

Reads, listings and deletes go through fsspec for every backend (see ``object_store``). Writes need guarantees that
fsspec does not give uniformly, so they are implemented here per backend kind:

* ``LocalBackend`` (plain paths, ``file://``): temp file + fsync + ``link``/``rename`` and an ``flock``-guarded
  compare-and-swap. Safe across threads and processes on one host (and on NFS where ``flock`` is honoured).
* ``MemoryBackend`` (``memory://``): one process-wide lock; the store itself lives in this process only.
* ``S3Backend`` (``s3://``, in ``odf_core.storage.s3``): conditional PUTs (``If-None-Match: *`` to create,
  ``If-Match: <etag>`` to move a ref): a real compare-and-swap on the store, safe across hosts.
* ``RemoteBackend`` (``gs://``, … any other fsspec file system): objects are written with one PUT, which
  object stores make visible atomically. ``put_if_absent`` is check-then-PUT: two writers racing on the same
  content-addressed key both write identical bytes, which is harmless. There is no atomic compare-and-swap here
  (it would need conditional writes, ``If-Match``/``If-None-Match``, which fsspec does not expose uniformly), so
  ``compare_and_swap`` raises :class:`UnsafeRefUpdate` unless the store was opened with ``unsafe_ref_updates=True``,
  in which case it does read-compare-PUT and is only correct with a single writer per dataset.

Crash points (see ``faults``) reached by the local backend, in order:
``object.after_temp_write``, ``object.after_publish`` (``put_if_absent``/``put_file_if_absent``);
``put.after_temp_write``, ``put.after_replace`` (``put``);
``ref.locked``, ``ref.after_temp_write``, ``ref.after_replace`` (``compare_and_swap``).
"""
from __future__ import annotations

import errno
import os
import threading
from typing import TYPE_CHECKING, Protocol

from odf_core.errors import IntegrityError, RefConflict
from odf_core.storage import local_fs
from odf_core.storage.errors import UnsafeRefUpdate
from odf_core.storage.faults import crash_point, write_fault

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

STORAGE_CRASH_POINTS: tuple[str, ...] = (
    "object.after_temp_write",
    "object.after_publish",
    "put.after_temp_write",
    "put.after_replace",
    "ref.locked",
    "ref.after_temp_write",
    "ref.after_replace",
)


def decode_ref(raw: bytes, where: str) -> str:
    """Ref file bytes -> value. A trailing newline written by other tools is tolerated; nothing else is."""
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        raise IntegrityError(f"ref {where} is not ASCII text: {raw[:80]!r}") from None
    text = text.rstrip("\n").rstrip("\r")
    if not text or not all("!" <= c <= "~" for c in text):
        raise IntegrityError(f"ref {where} holds an invalid value {text[:80]!r}: expected one non-empty token")
    return text


class Backend(Protocol):
    """Write-side operations; ``path`` is the backend path of the key, ``name`` the key (for messages)."""

    def put_if_absent(self, path: str, data: bytes, private: bool = False) -> bool: ...

    def put_file_if_absent(self, path: str, src: str, move: bool) -> bool: ...

    def put(self, path: str, data: bytes, private: bool = False) -> None: ...

    def read_ref(self, name: str, path: str) -> str | None: ...

    def compare_and_swap(self, name: str, path: str, expected: str | None, new: str) -> None: ...


def _mode(private: bool) -> int:
    """File mode of a new local object: private ones (keys) are readable by their owner only, from creation on."""
    return 0o600 if private else 0o644


class LocalBackend:
    """Crash-safe writes on a local POSIX file system."""

    def put_if_absent(self, path: str, data: bytes, private: bool = False) -> bool:
        tmp = local_fs.write_temp(path, local_fs.write_bytes(data), _mode(private))
        return self._publish_temp(tmp, path)

    def put_file_if_absent(self, path: str, src: str, move: bool) -> bool:
        if not move:
            return self._publish_temp(local_fs.write_temp(path, local_fs.copy_from(src)), path)
        # Moving: the source is complete, so after an fsync it can be linked in place without a copy.
        local_fs.fsync_file(src)
        directory = os.path.dirname(path)
        local_fs.ensure_dir(directory)
        try:
            published = local_fs.link_no_replace(src, path)
        except OSError as e:
            if e.errno != errno.EXDEV:
                raise
            published = self._publish_temp(local_fs.write_temp(path, local_fs.copy_from(src)), path)
        else:
            if published:
                crash_point("object.after_publish")
                local_fs.fsync_dir(directory)
            else:
                local_fs.touch_quietly(path)
        local_fs.unlink_quietly(src)
        return published

    def _publish_temp(self, tmp: str, path: str) -> bool:
        try:
            crash_point("object.after_temp_write")
            published = local_fs.link_no_replace(tmp, path)
            if published:
                crash_point("object.after_publish")
                local_fs.fsync_dir(os.path.dirname(path))
            else:
                local_fs.touch_quietly(path)
            return published
        finally:
            local_fs.unlink_quietly(tmp)

    def put(self, path: str, data: bytes, private: bool = False) -> None:
        tmp = local_fs.write_temp(path, local_fs.write_bytes(data), _mode(private))
        try:
            crash_point("put.after_temp_write")
            write_fault(path)
            os.replace(tmp, path)
        except BaseException:
            local_fs.unlink_quietly(tmp)
            raise
        crash_point("put.after_replace")
        local_fs.fsync_dir(os.path.dirname(path))

    def read_ref(self, name: str, path: str) -> str | None:
        raw = local_fs.read_optional(path)
        return None if raw is None else decode_ref(raw, path)

    def compare_and_swap(self, name: str, path: str, expected: str | None, new: str) -> None:
        directory, base = os.path.split(path)
        with local_fs.exclusive_lock(os.path.join(directory, f".{base}.lock")):
            crash_point("ref.locked")
            actual = self.read_ref(name, path)
            if actual != expected:
                raise RefConflict(name, expected, actual)
            tmp = local_fs.write_temp(path, local_fs.write_bytes(new.encode("ascii")))
            try:
                crash_point("ref.after_temp_write")
                write_fault(path)
                os.replace(tmp, path)
            except BaseException:
                local_fs.unlink_quietly(tmp)
                raise
            crash_point("ref.after_replace")
            local_fs.fsync_dir(directory)


_MEMORY_LOCK = threading.RLock()  # memory:// lives in this process, so a process-wide lock is a real CAS


class MemoryBackend:
    """Writes on fsspec's in-process ``memory://`` file system, serialized by one lock."""

    def __init__(self, fs: AbstractFileSystem):
        self.fs = fs

    def put_if_absent(self, path: str, data: bytes, private: bool = False) -> bool:
        with _MEMORY_LOCK:
            if self.fs.exists(path):
                return False
            write_fault(path)
            self.fs.pipe_file(path, data)
            return True

    def put_file_if_absent(self, path: str, src: str, move: bool) -> bool:
        with open(src, "rb") as f:
            published = self.put_if_absent(path, f.read())
        if move:
            os.unlink(src)
        return published

    def put(self, path: str, data: bytes, private: bool = False) -> None:
        with _MEMORY_LOCK:
            write_fault(path)
            self.fs.pipe_file(path, data)

    def read_ref(self, name: str, path: str) -> str | None:
        try:
            raw = self.fs.cat_file(path)
        except FileNotFoundError:
            return None
        return decode_ref(raw, self.fs.unstrip_protocol(path))

    def compare_and_swap(self, name: str, path: str, expected: str | None, new: str) -> None:
        with _MEMORY_LOCK:
            actual = self.read_ref(name, path)
            if actual != expected:
                raise RefConflict(name, expected, actual)
            write_fault(path)
            self.fs.pipe_file(path, new.encode("ascii"))


class RemoteBackend:
    """Writes on object stores through fsspec: one PUT per object; no atomic ref CAS (see module docstring)."""

    def __init__(self, fs: AbstractFileSystem, unsafe_ref_updates: bool):
        self.fs = fs
        self.unsafe_ref_updates = unsafe_ref_updates

    def put_if_absent(self, path: str, data: bytes, private: bool = False) -> bool:
        if self.fs.exists(path):
            return False
        write_fault(path)
        self.fs.pipe_file(path, data)
        return True

    def put_file_if_absent(self, path: str, src: str, move: bool) -> bool:
        published = not self.fs.exists(path)
        if published:
            write_fault(path)
            self.fs.put_file(src, path)
        if move:
            os.unlink(src)
        return published

    def put(self, path: str, data: bytes, private: bool = False) -> None:
        write_fault(path)
        self.fs.pipe_file(path, data)

    def read_ref(self, name: str, path: str) -> str | None:
        try:
            raw = self.fs.cat_file(path)
        except FileNotFoundError:
            return None
        return decode_ref(raw, self.fs.unstrip_protocol(path))

    def compare_and_swap(self, name: str, path: str, expected: str | None, new: str) -> None:
        if not self.unsafe_ref_updates:
            raise UnsafeRefUpdate(
                f"cannot move ref {name!r} at {self.fs.unstrip_protocol(path)} atomically: "
                f"{type(self.fs).__name__} offers no compare-and-swap through fsspec; a concurrent writer could "
                "lose commits. Use a local or mounted file system, or open the store with unsafe_ref_updates=True "
                "if exactly one writer per dataset is guaranteed."
            )
        actual = self.read_ref(name, path)
        if actual != expected:
            raise RefConflict(name, expected, actual)
        write_fault(path)
        self.fs.pipe_file(path, new.encode("ascii"))
