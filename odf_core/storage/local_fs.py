"""POSIX primitives for crash-safe publication on a local file system.

Everything here follows one pattern: write the full content to a uniquely named temp file in the *same directory*
as the destination, ``fsync`` it, then make it visible in a single atomic directory operation (``link`` when the
destination must not be overwritten, ``rename`` when it must), then ``fsync`` the directory so the new name survives
a power loss. A reader therefore only ever sees no file or a complete one.
"""
from __future__ import annotations

import errno
import fcntl
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import BinaryIO

from odf_core.storage.faults import write_fault
from odf_core.storage.keys import TEMP_PREFIX

# errno values meaning "this file system has no hard links", where we fall back to check-then-rename
_NO_LINK_ERRNOS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK, errno.ENOSYS}


def temp_path_for(final: str) -> str:
    """A fresh temp path next to ``final`` (same directory, hence same file system, so link/rename is atomic)."""
    directory, name = os.path.split(final)
    return os.path.join(directory, f"{TEMP_PREFIX}{uuid.uuid4().hex}-{name}")


def fsync_dir(directory: str) -> None:
    """Persist the directory entry changes (new names, renames) of ``directory``."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def ensure_dir(directory: str) -> None:
    """Create ``directory`` and missing parents, fsyncing each parent whose entries changed."""
    if os.path.isdir(directory):
        return
    parent = os.path.dirname(directory)
    if parent and parent != directory:
        ensure_dir(parent)
    try:
        write_fault(directory)
        os.mkdir(directory)
    except FileExistsError:
        if not os.path.isdir(directory):
            raise
        return
    fsync_dir(parent or ".")


def is_within(path: str, root: str) -> bool:
    """True when the resolved ``path`` is ``root`` or below it (both absolute and resolved)."""
    return path == root or path.startswith(root if root.endswith("/") else root + "/")


def real_path_of_fd(fd: int, path: str) -> str:
    """Where an open file really is: the kernel's name for the descriptor, so no second walk of ``path`` races it."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:  # no /proc: resolve the name instead
        return os.path.realpath(path)


_O_PATH = getattr(os, "O_PATH", 0)


def stat_real(path: str) -> tuple[os.stat_result, str] | None:
    """``stat`` (links followed) and the resolved path of an existing ``path``; None if it does not exist."""
    if not _O_PATH:
        try:
            return os.stat(path), os.path.realpath(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
    try:
        fd = os.open(path, _O_PATH | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        return os.fstat(fd), real_path_of_fd(fd, path)
    finally:
        os.close(fd)


def write_temp(final: str, write: Callable[[BinaryIO], None], mode: int = 0o644) -> str:
    """Create a temp file next to ``final`` (with ``mode`` from the start), fill it with ``write``, fsync it and
    return its path."""
    ensure_dir(os.path.dirname(final))
    tmp = temp_path_for(final)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            write_fault(tmp)  # a full disk shows at the latest when the buffered data is flushed
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        unlink_quietly(tmp)
        raise
    return tmp


def write_bytes(data: bytes) -> Callable[[BinaryIO], None]:
    def write(f: BinaryIO) -> None:
        f.write(data)
    return write


def copy_from(src: str) -> Callable[[BinaryIO], None]:
    def write(f: BinaryIO) -> None:
        with open(src, "rb") as s:
            shutil.copyfileobj(s, f, 1 << 20)

    return write


def link_no_replace(src: str, final: str) -> bool:
    """Give ``src`` the name ``final`` unless ``final`` exists; True if published.

    ``link`` fails atomically with EEXIST if the destination exists, so concurrent writers of the same key never
    overwrite each other. On file systems without hard links we fall back to check-then-rename: two racing writers
    may both rename, which for content-addressed keys only replaces a file by an identical one.
    """
    try:
        write_fault(final)
        os.link(src, final)
        return True
    except FileExistsError:
        return False
    except OSError as e:
        if e.errno not in _NO_LINK_ERRNOS:
            raise
    if os.path.lexists(final):
        return False
    os.rename(src, final)
    return True


def fsync_file(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_optional(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def touch_quietly(path: str) -> None:
    """Mark an existing object as just used (its modification time), so ``odf gc`` sees it as young: a writer that
    found its content-addressed object already there is about to reference it."""
    try:
        os.utime(path)
    except OSError:
        pass


def unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass



@contextmanager
def exclusive_lock(lock_path: str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``lock_path`` (created if needed; never deleted, to avoid lock-file races).

    ``flock`` locks belong to the open file description, so they exclude other processes and other threads that
    open the file separately, and the kernel releases them when the holder dies (even by SIGKILL).
    """
    ensure_dir(os.path.dirname(lock_path))
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the last descriptor releases the lock
