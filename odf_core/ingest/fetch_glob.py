"""``FetchStep::FilesGlob``: ingest local files matching a glob, oldest first, never the same file twice.

Progress is the last ingested file *name* (base name, as the reference implementation records it) in an
``odf/etag`` state.  ``ByName``: pending files are those whose name sorts after it.  ``ByEventTime`` (needs a
``FromPath`` event time): files are ordered by (event time, name) and the recorded name's event time is recomputed
from the pattern, so later files are pending.  One file per transaction, or all pending with ``glob_batch``.
A pattern matching nothing is "up to date", but a missing base directory is an error (likely a typo).
Base-name caveat: with ``**`` two files with the same name in different directories count as one position.
"""
from __future__ import annotations

import glob
import logging
import os

from odf_core.ingest import event_time as et
from odf_core.ingest.errors import FetchError
from odf_core.ingest.fetch_url import up_to_date
from odf_core.ingest.manifest import FetchedFile, FetchResult
from odf_core.ingest.options import FetchOptions
from odf_core.ingest.source_state import etag_state, prev_etag
from odf_core.ingest.staging import link_or_copy, staged_name
from odf_core.metadata import FetchStepFilesGlob, SourceOrdering, SourceState, Timestamp

_log = logging.getLogger("odf.ingest")
_MAGIC = ("*", "?", "[")


def fetch_glob(
    step: FetchStepFilesGlob,
    *,
    out_dir: str,
    state: SourceState | None,
    system_time: Timestamp,
    options: FetchOptions,
) -> FetchResult:
    pattern = step.path
    if not os.path.isabs(pattern):
        raise FetchError(f"FilesGlob path {pattern!r} must be absolute")
    base = _base_dir(pattern)
    if not os.path.isdir(base):
        raise FetchError(f"FilesGlob path {pattern!r}: directory {base} does not exist")

    order = step.order or SourceOrdering.BY_NAME
    by_time = order == SourceOrdering.BY_EVENT_TIME
    if by_time and not isinstance(step.event_time, et.EventTimeSourceFromPath):
        raise FetchError(f"FilesGlob path {pattern!r}: order ByEventTime needs eventTime FromPath")

    matches = [p for p in glob.glob(pattern, recursive=True) if os.path.isfile(p)]
    # (sort key, name, path, event time)
    entries = []
    for path in matches:
        name = os.path.basename(path)
        when = _event_time(step, name, path, system_time)
        key = (when.epoch_ns if by_time and when else 0, name, path)
        entries.append((key, name, path, when))
    entries.sort(key=lambda e: e[0])

    last = prev_etag(state)
    if last is not None:
        if by_time:
            last_time = et.from_path(step.event_time, last)  # type: ignore[arg-type]
            bound = (last_time.epoch_ns, last)
            entries = [e for e in entries if (e[0][0], e[0][1]) > bound]
        else:
            entries = [e for e in entries if e[1] > last]
    _log.info("FilesGlob %s: %d matching files, %d pending after %r", pattern, len(matches), len(entries), last)
    if not entries:
        return up_to_date(state)

    chosen = entries if options.glob_batch else entries[:1]
    files = []
    total = 0
    for i, (_, name, path, when) in enumerate(chosen):
        dest = os.path.join(out_dir, staged_name(i, name))
        try:
            total += link_or_copy(path, dest, allow_link=options.hardlink)
        except OSError as e:
            raise FetchError(f"FilesGlob {pattern!r}: cannot copy {path} into staging: {e.strerror or e}") from None
        files.append(FetchedFile(path=dest, event_time=when, name=path))
    return FetchResult(
        up_to_date=False,
        files=tuple(files),
        new_source_state=etag_state(chosen[-1][1]),
        has_more=len(chosen) < len(entries),
        bytes_fetched=total,
    )


def _event_time(step: FetchStepFilesGlob, name: str, path: str, system_time: Timestamp) -> Timestamp | None:
    source = step.event_time
    if source is None or isinstance(source, et.EventTimeSourceFromSystemTime):
        return system_time  # the reference implementation's default for globs
    if isinstance(source, et.EventTimeSourceFromMetadata):
        return Timestamp.from_millis((os.stat(path).st_mtime_ns + 500_000) // 1_000_000)
    return et.from_path(source, name, path)


def _base_dir(pattern: str) -> str:
    """The longest leading directory of the pattern without glob characters."""
    parts = pattern.split(os.sep)
    fixed = []
    for part in parts[:-1]:
        if any(c in part for c in _MAGIC):
            break
        fixed.append(part)
    return os.sep.join(fixed) or os.sep
