"""Key/value store of immutable objects and mutable refs rooted at a URL: the storage under every dataset.

One implementation on top of fsspec serves local directories (plain paths and ``file://``), ``memory://`` and object
stores (``s3://`` …). Keys are relative ``/`` paths checked by :mod:`odf_core.storage.keys`, so no key names anything
outside the root; on local stores every read, write and listing also checks where the path *resolves*, so a symlink (a
``data/`` directory or a single file) pointing out of the store's root is refused with :class:`StoreEscape` instead of
followed. Symlinks that stay inside the root are followed; the root itself (and its parents) may be symlinks. A child
store (:meth:`ObjectStore.child`, e.g. one dataset of a workspace) is confined to its own root, which must itself
resolve inside its parent's. Deleting never follows a symlink: it removes the link. An operating-system failure (a full
disk, no permission, an I/O error) surfaces as :class:`~odf_core.errors.FileSystemError`, one line naming the operation
and the path. Objects are published atomically (a reader sees no object or a complete one) and refs move only through
:meth:`ObjectStore.compare_and_swap_ref`, which on local and memory stores is a real compare-and-swap. What each backend
guarantees for writes is documented in :mod:`odf_core.storage.backends`.
"""
from __future__ import annotations

import builtins
import os
import stat
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO, Iterator

from odf_core.errors import OdfError, os_errors
from odf_core.storage.backends import Backend, LocalBackend, MemoryBackend, RemoteBackend, decode_ref
from odf_core.storage import local_fs
from odf_core.storage.errors import ObjectNotFound, StoreEscape
from odf_core.storage.keys import TEMP_PREFIX, is_internal_name, validate_key, validate_prefix, validate_ref_value

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

_Bytes = bytes | bytearray | memoryview


@dataclass(frozen=True)
class StoredFile:
    """One object as a listing sees it: its key, size in bytes and modification time (None: unknown)."""

    key: str
    size: int
    modified: float | None


class ObjectStore:
    """Objects and refs under one root. Create with :meth:`open`; :meth:`child` gives the sub-store of a dataset."""

    def __init__(self, fs: "AbstractFileSystem | None", root: str, backend: Backend, *,
                 parent: "ObjectStore | None" = None):
        # None: a local store whose fsspec file system is made on first use. Most commands on local disk never need
        # one (reads, writes and listings of local stores go to the OS directly), and fsspec's import is ~60 ms of
        # every command (issue #64).
        self._fs_value = fs
        self._root = root
        self._backend = backend
        self._parent = parent  # a child store must resolve inside its parent's root
        self._real_root: str | None = None

    # -- construction -------------------------------------------------------------------------------------------

    @classmethod
    def open(cls, url_or_path: str | os.PathLike[str], *, unsafe_ref_updates: bool = False,
             **storage_options: Any) -> "ObjectStore":
        """Open the store at a local path, ``file://``, ``memory://``, ``s3://`` or any fsspec URL.

        ``storage_options`` go to the fsspec file system (credentials, endpoint, …); for ``s3://`` they are
        ``endpoint_url``, ``key``, ``secret``, ``token``, ``region`` (unset: the standard ``AWS_*`` variables).
        ``unsafe_ref_updates`` allows non-atomic ref updates on backends without compare-and-swap (object stores);
        see ``backends``.
        """
        text = os.fspath(url_or_path) if isinstance(url_or_path, (str, os.PathLike)) else None
        if not isinstance(text, str) or not text:
            raise OdfError(f"invalid store location {url_or_path!r}: expected a non-empty path or URL")
        if "://" not in text and "::" not in text:
            if not storage_options:
                return cls(None, os.path.abspath(text), LocalBackend())
            from fsspec.implementations.local import LocalFileSystem

            fs: AbstractFileSystem = LocalFileSystem(**storage_options)
            root = text
        elif text.startswith(("s3://", "s3a://")):  # conditional writes: a real CAS on refs (see storage.s3)
            from odf_core.storage.s3 import S3Backend, S3FileSystem, S3Settings

            s3 = S3FileSystem(S3Settings.from_options(storage_options))
            root = s3._strip_protocol(text).rstrip("/")
            return cls(s3, root, S3Backend(s3))
        else:
            from fsspec.core import url_to_fs

            try:
                fs, root = url_to_fs(text, **storage_options)
            except (ImportError, ValueError) as e:
                raise OdfError(f"cannot open store {text!r}: {e}") from e
        from fsspec.implementations.local import LocalFileSystem
        from fsspec.implementations.memory import MemoryFileSystem

        backend: Backend
        if isinstance(fs, LocalFileSystem):
            root = os.path.abspath(root)
            backend = LocalBackend()
        elif isinstance(fs, MemoryFileSystem):
            root = root.rstrip("/") or "/"
            backend = MemoryBackend(fs)
        else:
            root = root.rstrip("/") if root.strip("/") else root
            backend = RemoteBackend(fs, unsafe_ref_updates)
        return cls(fs, root, backend)

    def child(self, prefix: str) -> "ObjectStore":
        """The store rooted at ``prefix`` inside this one (same file system and write guarantees)."""
        prefix = validate_prefix(prefix)
        if not prefix:
            return self
        return ObjectStore(self._fs_value, self._join(prefix), self._backend, parent=self)

    # -- naming -----------------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """URL of the root, e.g. ``file:///data/ws/ds`` or ``memory:///ws``."""
        return self._unstrip(self._root)

    @property
    def fs(self) -> "AbstractFileSystem":
        """The underlying fsspec file system (for readers such as pyarrow that accept one)."""
        return self._fs

    @property
    def _fs(self) -> "AbstractFileSystem":
        if self._fs_value is None:
            from fsspec.implementations.local import LocalFileSystem

            self._fs_value = LocalFileSystem()
        return self._fs_value

    @property
    def root(self) -> str:
        """Root path as the file system names it (no protocol)."""
        return self._root

    @property
    def is_local(self) -> bool:
        return isinstance(self._backend, LocalBackend)

    def url_of(self, key: str) -> str:
        """Full URL of ``key`` (it need not exist), e.g. for Spark or pyarrow."""
        path = self._path(key)
        if self.is_local:
            self._check_resolved(key, path)
        return self._unstrip(path)

    def _unstrip(self, path: str) -> str:
        """``path`` with the file system's protocol; on a local store without its fsspec file system yet, what
        fsspec's ``LocalFileSystem`` gives for an absolute path (``file://`` and the path without a trailing ``/``)."""
        if self._fs_value is None:
            return "file://" + (path.rstrip("/") or "/")
        return self._fs.unstrip_protocol(path)

    def local_path(self, key: str) -> str | None:
        """Path of ``key`` on local disk when the store is local, else None (it need not exist).

        Checked to resolve inside the store, since callers hand it to readers (Spark, pyarrow) that follow links.
        """
        if not self.is_local:
            return None
        path = self._path(key)
        self._check_resolved(key, path)
        return path

    def _join(self, rel: str) -> str:
        if not rel:
            return self._root
        base = self._root.rstrip("/")
        if not base:  # the file system's own root: "/" (local, memory) or "" (e.g. a bucket-relative fs)
            return f"/{rel}" if self._root.startswith("/") else rel
        return f"{base}/{rel}"

    def _path(self, key: str) -> str:
        return self._join(validate_key(key))

    def _not_found(self, key: str) -> ObjectNotFound:
        return ObjectNotFound(key, self.url)

    # -- confinement (local stores: the only ones with symlinks) --------------------------------------------------

    def _resolved_root(self) -> str:
        """The root with every symlink resolved, checked to lie inside the parent's (computed once per store)."""
        if self._real_root is None:
            real = os.path.realpath(self._root)
            if self._parent is not None:
                outer = self._parent._resolved_root()
                if not local_fs.is_within(real, outer):
                    rel = self._root[len(self._parent._root.rstrip("/")) + 1:]
                    raise StoreEscape(rel, self._parent.url, real, outer)
            self._real_root = real
        return self._real_root

    def _check_real(self, key: str, real: str) -> None:
        root = self._resolved_root()
        if not local_fs.is_within(real, root):
            raise StoreEscape(key, self.url, real, root)

    def _check_resolved(self, key: str, path: str) -> None:
        """``path`` (existing or not: what exists is resolved) must resolve inside the root."""
        self._check_real(key, os.path.realpath(path))

    def _read_local(self, key: str, path: str) -> bytes | None:
        """The bytes of a local object, or None; the open descriptor is checked, not the name, so no race."""
        try:
            f = open(path, "rb")
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None
        with f:
            self._check_real(key, local_fs.real_path_of_fd(f.fileno(), path))
            return f.read()

    def _stat_local(self, key: str, path: str) -> os.stat_result | None:
        found = local_fs.stat_real(path)
        if found is None:
            return None
        st, real = found
        self._check_real(key, real)
        return st

    # -- reads --------------------------------------------------------------------------------------------------

    def get(self, key: str) -> bytes:
        """The bytes of object ``key``; :class:`ObjectNotFound` if there is none."""
        path = self._path(key)
        with os_errors("reading", path, exact=True):
            return self._get(key, path)

    def _get(self, key: str, path: str) -> bytes:
        if self.is_local:  # the hot path of chain walks: skip fsspec's per-call overhead
            data = self._read_local(key, path)
            if data is None:
                raise self._not_found(key)
            return data
        try:
            return bytes(self._fs.cat_file(path))
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise self._not_found(key) from None

    def open_read(self, key: str) -> BinaryIO:
        """A binary stream over object ``key`` (use as a context manager); :class:`ObjectNotFound` if missing."""
        path = self._path(key)
        with os_errors("opening", path, exact=True):
            return self._open_read(key, path)

    def _open_read(self, key: str, path: str) -> BinaryIO:
        if self.is_local:
            try:
                f = open(path, "rb")
            except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
                raise self._not_found(key) from None
            try:
                self._check_real(key, local_fs.real_path_of_fd(f.fileno(), path))
            except BaseException:
                f.close()
                raise
            return f
        try:
            if not self._fs.isfile(path):
                raise FileNotFoundError(path)
            return self._fs.open(path, "rb")
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise self._not_found(key) from None

    @contextmanager
    def readable(self, key: str) -> Iterator[str | BinaryIO]:
        """``key`` as its checked local path when the store is local, else an open stream (for readers like pyarrow,
        which then read a local file natively, with no Python file object for their threads to hold on to)."""
        local = self.local_path(key)
        if local is not None:
            yield local
            return
        with self.open_read(key) as f:
            yield f

    def exists(self, key: str) -> bool:
        path = self._path(key)
        with os_errors("checking", path, exact=True):
            if self.is_local:
                st = self._stat_local(key, path)
                return st is not None and stat.S_ISREG(st.st_mode)
            return bool(self._fs.isfile(path))

    def size(self, key: str) -> int:
        path = self._path(key)
        with os_errors("checking", path, exact=True):
            return self._size(key, path)

    def _size(self, key: str, path: str) -> int:
        if self.is_local:
            st = self._stat_local(key, path)
            if st is None or not stat.S_ISREG(st.st_mode):
                raise self._not_found(key)
            return st.st_size
        try:
            info = self._fs.info(path)
        except (FileNotFoundError, NotADirectoryError):
            raise self._not_found(key) from None
        if info.get("type") != "file":
            raise self._not_found(key)
        return int(info["size"])

    def list(self, prefix: str = "") -> list[str]:
        """Sorted keys of all objects under the directory ``prefix`` (``""`` = everything), recursively.

        Temp and lock files are not listed.
        """
        prefix = validate_prefix(prefix)
        with os_errors("listing", self._join(prefix)):
            walked = self._walk(prefix)
        return sorted(rel for rel, _ in walked if not any(map(is_internal_name, rel.split("/"))))

    def list_dirs(self, prefix: str = "") -> builtins.list[str]:
        """Sorted names of the directories directly under ``prefix`` (one level, no recursion)."""
        prefix = validate_prefix(prefix)
        base = self._join(prefix)
        if self.is_local:
            if prefix:
                self._check_resolved(prefix, base)
            with os_errors("listing", base):
                try:
                    with os.scandir(base) as it:
                        names = [e.name for e in it if e.is_dir()]
                except (FileNotFoundError, NotADirectoryError):
                    return []
        else:
            try:
                entries = self._fs.ls(base, detail=True)
            except (FileNotFoundError, NotADirectoryError):
                return []
            names = [e["name"].rstrip("/").rsplit("/", 1)[-1] for e in entries if e.get("type") == "directory"]
        return sorted(n for n in names if not is_internal_name(n))

    def _walk(self, prefix: str) -> builtins.list[tuple[str, str]]:
        """(key relative to the root, backend path) of every file under ``prefix``, internal files included."""
        if self.is_local:
            return self._walk_local(prefix)
        base = self._join(prefix)
        try:
            found = self._fs.find(base)
        except (FileNotFoundError, NotADirectoryError):
            return []
        root_slash = self._join("x")[:-1]
        out = []
        for p in found:
            p = self._fs._strip_protocol(p)
            if p.startswith(root_slash):
                out.append((p[len(root_slash):], p))
        return out

    def _walk_local(self, prefix: str) -> builtins.list[tuple[str, str]]:
        """Like :meth:`_walk` on a local disk, following symlinks that stay inside the root and refusing others."""
        out: builtins.list[tuple[str, str]] = []

        def visit(path: str, rel: str, seen: frozenset[str]) -> None:
            try:
                it = os.scandir(path)
            except (FileNotFoundError, NotADirectoryError):
                return
            with it:
                for e in it:
                    key = f"{rel}/{e.name}" if rel else e.name
                    if e.is_symlink():
                        real = os.path.realpath(e.path)
                        self._check_real(key, real)
                        if os.path.isdir(real):
                            if real not in seen:  # a link back up would loop
                                visit(e.path, key, seen | {real})
                        elif os.path.isfile(real):
                            out.append((key, e.path))
                    elif e.is_dir(follow_symlinks=False):
                        visit(e.path, key, seen)
                    elif e.is_file(follow_symlinks=False):
                        out.append((key, e.path))

        base = self._join(prefix)
        if prefix:
            self._check_resolved(prefix, base)
        visit(base, prefix, frozenset({os.path.realpath(base)}))
        return out

    # -- writes -------------------------------------------------------------------------------------------------

    def put_if_absent(self, key: str, data: _Bytes, *, private: bool = False) -> bool:
        """Publish an immutable object atomically; False (and the existing object kept) if ``key`` exists.

        Meant for content-addressed keys, where an existing object has the same content by construction.
        ``private``: on a local disk the file is readable by its owner only (mode 0600) from its creation on.
        """
        path = self._write_path(key)
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"object data for {key!r} must be bytes, got {type(data).__name__}")
        with os_errors("writing", path, exact=True):
            return self._backend.put_if_absent(path, bytes(data), private)

    def put_file_if_absent(self, key: str, local_src_path: str | os.PathLike[str], move: bool = False) -> bool:
        """Like :meth:`put_if_absent` with the content of a local file.

        With ``move=True`` the source file is consumed (removed) whether or not the key already existed, and on a
        local store it is linked into place without copying when it is on the same file system.
        """
        path = self._write_path(key)
        src = os.fspath(local_src_path)
        if not os.path.isfile(src):
            raise OdfError(f"cannot store {key!r}: source file {src!r} does not exist or is not a regular file")
        with os_errors("writing", path, exact=True):
            return self._backend.put_file_if_absent(path, src, move)

    def put(self, key: str, data: _Bytes, *, private: bool = False) -> None:
        """Create or atomically replace ``key`` (for caches such as ``info/summary``, never for chain objects);
        ``private`` as for :meth:`put_if_absent`."""
        path = self._write_path(key)
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"object data for {key!r} must be bytes, got {type(data).__name__}")
        with os_errors("writing", path, exact=True):
            self._backend.put(path, bytes(data), private)

    def _write_path(self, key: str) -> str:
        """The path of ``key`` for a write: on local stores its directory (created later) must resolve inside."""
        path = self._path(key)
        if self.is_local:
            with os_errors("checking", path, exact=True):
                self._check_resolved(key, path)
        return path

    def delete(self, key: str) -> bool:
        """Remove object ``key``; False if there was none."""
        path = self._path(key)
        with os_errors("deleting", path, exact=True):
            if not self._fs.isfile(path):
                return False
            try:
                self._fs.rm_file(path)
            except FileNotFoundError:
                return False
        return True

    def delete_prefix(self, prefix: str) -> None:
        """Remove everything under the directory ``prefix`` (which must be non-empty: never the whole root)."""
        prefix = validate_prefix(prefix)
        if not prefix:
            raise OdfError(f"refusing to delete the whole store {self.url}: delete_prefix needs a non-empty prefix")
        path = self._join(prefix)
        with os_errors("deleting", path, exact=True):
            if self._fs.exists(path):
                self._fs.rm(path, recursive=True)

    # -- refs ---------------------------------------------------------------------------------------------------

    def get_ref(self, name: str) -> str | None:
        """Current value of ref ``name`` (e.g. ``refs/head``), or None if it was never set."""
        path = self._path(name)
        with os_errors("reading", path, exact=True):
            if self.is_local:
                raw = self._read_local(name, path)
                return None if raw is None else decode_ref(raw, path)
            return self._backend.read_ref(name, path)

    def compare_and_swap_ref(self, name: str, expected: str | None, new: str) -> None:
        """Set ref ``name`` to ``new`` if it currently holds ``expected`` (None = must not exist yet).

        Raises :class:`~odf_core.errors.RefConflict` (with the actual value) otherwise. The value is written with
        no trailing newline. Atomic across processes on local stores and S3 (conditional writes), across threads on
        ``memory://``; on other
        backends raises :class:`UnsafeRefUpdate` unless opened with ``unsafe_ref_updates=True``.
        """
        path = self._write_path(name)
        validate_ref_value(name, new)
        if expected is not None:
            validate_ref_value(name, expected)
        with os_errors("updating", path, exact=True):
            self._backend.compare_and_swap(name, path, expected, new)

    # -- maintenance --------------------------------------------------------------------------------------------

    def modified(self, key: str) -> float | None:
        """When object ``key`` was last written (or found again by a writer, see ``put_*_if_absent``), as a POSIX
        timestamp; None when it does not exist or the backend cannot tell."""
        path = self._path(key)
        with os_errors("checking", path, exact=True):
            if self.is_local:
                st = self._stat_local(key, path)
                return st.st_mtime if st is not None and stat.S_ISREG(st.st_mode) else None
            try:
                return self._fs.modified(path).timestamp()
            except (NotImplementedError, FileNotFoundError, NotADirectoryError):
                return None

    def files(self, prefix: str = "") -> builtins.list[StoredFile]:
        """Every object under ``prefix`` with its size and modification time (temp and lock files left out)."""
        out = []
        for key in self.list(prefix):
            try:
                size = self.size(key)
            except ObjectNotFound:
                continue  # removed since it was listed
            out.append(StoredFile(key, size, self.modified(key)))
        return out

    def remove_stale_temp(self, older_than_s: float) -> builtins.list[str]:
        """Delete temp files left by crashed writers, last modified more than ``older_than_s`` seconds ago.

        Returns the removed paths relative to the root. Pick ``older_than_s`` well above the longest write, since a
        live writer's temp file looks the same as a dead one's.
        """
        return [f.key for f in self.remove_stale_temp_files(older_than_s)]

    def remove_stale_temp_files(self, older_than_s: float, *, dry_run: bool = False) -> builtins.list[StoredFile]:
        """Like :meth:`remove_stale_temp`, with each file's size; ``dry_run`` only lists what would go."""
        cutoff = time.time() - older_than_s
        removed = []
        with os_errors("listing", self._root):
            walked = self._walk("")
        for rel, path in walked:
            if not rel.rsplit("/", 1)[-1].startswith(TEMP_PREFIX):
                continue
            with os_errors("deleting", path, exact=True):
                try:
                    modified = self._fs.modified(path).timestamp()
                    size = int(self._fs.size(path) or 0)
                except NotImplementedError:
                    continue  # the backend cannot tell its age; keep it
                except FileNotFoundError:
                    continue
                if modified > cutoff:
                    continue
                if not dry_run:
                    try:
                        self._fs.rm_file(path)
                    except FileNotFoundError:
                        continue
            removed.append(StoredFile(rel, size, modified))
        return sorted(removed, key=lambda f: f.key)

    def __repr__(self) -> str:
        return f"ObjectStore({self.url!r})"
