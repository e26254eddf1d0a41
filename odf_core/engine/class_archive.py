"""A class-data-sharing archive for the Spark drivers this package starts in a fresh JVM (a command without an
engine, a spark-submit step): a JVM maps the classes a step loads (Spark's, Scala's, ours) from the archive instead
of loading and verifying them one by one — ~3 s less per start on 2 cores, 0.67x a bare session's start
(benchmarks/RESULTS.md ``bench_cold_start``).

JDK 13+ writes such an archive as a JVM exits (``-XX:ArchiveClassesAtExit``, a dynamic archive over the JDK's own
base archive): the first driver of a given Java, Spark and package version writes one into a temporary file, which
is put in place (one rename) only after that JVM has exited; later drivers map it (``-XX:SharedArchiveFile``). One
driver writes at a time (a lock file; others run without it meanwhile). The JVM checks an archive's header before it
maps it and runs without sharing, silently, when it does not match (another JDK, a changed class path); a file cut
short is ours to catch (its size is recorded beside it) and is written again.

Each package upgrade makes a new archive (~150-180 MB) and the old version's is never mapped again: a driver that maps
an archive marks it used (the mtime of its size file), and a driver about to write one first removes the archives
nobody has used for ``UNUSED_DAYS`` and what dead writers left, so the directory holds what is in use, not every
version ever installed.

``$ODF_JVM_ARCHIVE_DIR`` sets where archives live (default ``$XDG_CACHE_HOME/odf/jvm``, else ``~/.cache/odf/jvm``);
``ODF_JVM_ARCHIVE=off`` turns them off.
"""
from __future__ import annotations

import hashlib
import logging
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("odf.engine")

DIR_ENV = "ODF_JVM_ARCHIVE_DIR"
SWITCH_ENV = "ODF_JVM_ARCHIVE"
#: a lock older than this is a writer that died before it finished: the next driver takes over
STALE_LOCK_S = 600.0
#: an archive no driver has mapped for this long is removed when the next one is written (another version's, mostly)
UNUSED_DAYS = 7.0
#: the JVM's notes on the classes it cannot archive (signed jars, failed verifications) go to the driver's stdout,
#: the user's console: off
QUIET = "-Xlog:cds*=off"


def directory() -> Path:
    given = os.environ.get(DIR_ENV)
    if given:
        return Path(given).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "odf" / "jvm"


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return os.path.realpath(found) if found else ""


def archive_key() -> str:
    """What an archive is valid for: this Java, this Spark, this package's engine code and this interpreter."""
    from odf_core.engine.version import engine_version

    return hashlib.sha256("\n".join([_java(), engine_version(), sys.executable]).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class ArchiveUse:
    """What one driver does with the archive: map it, or write it (``writing``) for the next ones."""

    options: str  # JVM options for the driver
    final: Path
    writing: Path | None = None  # the file this driver's JVM writes as it exits
    lock: Path | None = None

    def finish(self, ok: bool) -> None:
        """After the driver's JVM has exited: put what it wrote in place (``ok``), or drop it."""
        if self.writing is None:
            return
        try:
            if ok and self.writing.exists() and self.writing.stat().st_size > 0:
                _size_file(self.final).write_text(str(self.writing.stat().st_size))
                os.replace(self.writing, self.final)
                log.info("wrote the JVM class archive %s", self.final)
            else:
                self.writing.unlink(missing_ok=True)
        except OSError as e:
            log.info("could not keep the JVM class archive %s: %s", self.final, e)
        finally:
            if self.lock is not None:
                self.lock.unlink(missing_ok=True)


def for_driver(write: bool = True) -> ArchiveUse | None:
    """The archive options for a driver about to start (None: archives off, or another driver is writing one).
    ``write=False``: map an archive that exists, never write one (a long-lived engine, whose exit may be hours away
    while its lock would look stale after ``STALE_LOCK_S``)."""
    if os.environ.get(SWITCH_ENV, "").strip().lower() in ("off", "0", "false", "no"):
        return None
    d, key = directory(), archive_key()
    final = d / f"spark-{key}.jsa"
    if final.exists():
        if _intact(final):
            _mark_used(final)
            return ArchiveUse(f"-XX:SharedArchiveFile={final} -Xshare:auto {QUIET}", final)
        log.info("the JVM class archive %s is damaged: written again", final)
        final.unlink(missing_ok=True)
    if not write:
        return None
    lock = final.with_suffix(".lock")
    try:
        d.mkdir(parents=True, exist_ok=True)
        if lock.exists() and time.time() - lock.stat().st_mtime > STALE_LOCK_S:
            lock.unlink(missing_ok=True)
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return None  # another driver writes it now: this one runs without
    except OSError as e:
        log.info("no JVM class archive in %s: %s", d, e)
        return None
    os.close(fd)
    prune(d, keep=final)
    writing = d / f"spark-{key}.{os.getpid()}.jsa.tmp"
    writing.unlink(missing_ok=True)
    return ArchiveUse(f"-XX:ArchiveClassesAtExit={writing} {QUIET}", final, writing, lock)


def prune(d: Path, keep: Path, now: float | None = None) -> list[Path]:
    """Remove the archives in ``d`` unused for ``UNUSED_DAYS`` (other versions', other Javas') and the partial files
    and locks of writers that died; what was removed. Never fails: another driver may be removing the same files."""
    now = time.time() if now is None else now
    gone: list[Path] = []
    for path in d.glob("spark-*"):
        if path in (keep, _size_file(keep), keep.with_suffix(".lock")):
            continue
        try:
            if path.suffix == ".jsa":
                old = now - _last_used(path) > UNUSED_DAYS * 86400
            elif path.name.endswith((".jsa.tmp", ".lock")):  # a dead writer's
                old = now - path.stat().st_mtime > STALE_LOCK_S
            elif path.suffix == ".size":  # an archive removed by hand
                old = now - path.stat().st_mtime > STALE_LOCK_S and not path.with_suffix(".jsa").exists()
            else:
                continue
            if old:
                path.unlink()
                if path.suffix == ".jsa":
                    _size_file(path).unlink(missing_ok=True)
                gone.append(path)
        except OSError:
            continue  # removed by another driver meanwhile, or not ours to remove
    if gone:
        log.info("removed %d unused JVM class archive file(s) from %s", len(gone), d)
    return gone


def _last_used(archive: Path) -> float:
    """When a driver last mapped ``archive`` (its size file's mtime; the archive's own when that is missing)."""
    for path in (_size_file(archive), archive):
        try:
            return path.stat().st_mtime
        except OSError:
            continue
    return time.time()  # gone meanwhile: nothing to remove


def _mark_used(final: Path) -> None:
    try:
        os.utime(_size_file(final))
    except OSError:
        pass  # read-only cache: the archive is still mapped, only its age is not kept


def _size_file(final: Path) -> Path:
    return final.with_suffix(".size")


def _intact(final: Path) -> bool:
    """Whether the archive has the size it was written with. The JVM checks an archive's header, not its length: one
    cut short (a full disk, a partial copy) crashes every JVM that maps it (SIGBUS), so it is never handed over."""
    try:
        return final.stat().st_size == int(_size_file(final).read_text())
    except (OSError, ValueError):
        return False


def with_options(conf: dict[str, str], use: ArchiveUse | None) -> dict[str, str]:
    """``conf`` with the archive's options added to the driver's Java options."""
    if use is None:
        return conf
    key = "spark.driver.extraJavaOptions"
    return {**conf, key: f"{conf.get(key, '')} {use.options}".strip()}
