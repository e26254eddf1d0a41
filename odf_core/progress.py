"""Progress of long work (pull, push, ingest, verify): a live bar on a terminal, plain log lines otherwise.

One implementation for every command, so they look and behave alike. On a terminal (stderr is a TTY) it draws a
rich progress bar with counts (files, objects, blocks, rows), bytes and bytes per second; piped or in an Airflow
task log, it writes a plain line at most every ``interval`` seconds while running and a summary at the end, so logs
stay short and greppable (and a failure's error stays one line). ``ODF_PROGRESS=never|always|auto`` overrides the
detection (tests use ``always``); ``ODF_PROGRESS_INTERVAL`` sets the seconds between plain lines (default 5).
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from typing import IO, Any, Iterator
from contextlib import contextmanager


def _human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"  # pragma: no cover - loop always returns


def wants_live_bar(stream: IO[str]) -> bool:
    """True when a live bar should be drawn on ``stream`` (a TTY, unless ``ODF_PROGRESS`` says otherwise)."""
    mode = os.environ.get("ODF_PROGRESS", "auto").strip().lower()
    if mode == "never":
        return False
    if mode == "always":
        return True
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


@dataclass
class Progress:
    """Counters of one piece of work; ``advance`` moves them, the renderer shows them.

    ``unit`` names what ``count`` counts ("objects", "files", "rows", "blocks"); totals are optional (unknown totals
    show a running count without a percentage).
    """

    label: str
    unit: str = "items"
    total: int | None = None
    total_bytes: int | None = None
    count: int = 0
    nbytes: int = 0
    started: float = field(default_factory=time.monotonic)
    _renderer: Any = None

    def advance(self, count: int = 1, nbytes: int = 0) -> None:
        self.count += count
        self.nbytes += nbytes
        if self._renderer is not None:
            self._renderer.update(self)

    def set_total(self, total: int | None = None, total_bytes: int | None = None) -> None:
        if total is not None:
            self.total = total
        if total_bytes is not None:
            self.total_bytes = total_bytes
        if self._renderer is not None:
            self._renderer.update(self)

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def summary(self) -> str:
        """One line: what was done, how much, how fast."""
        el = max(self.elapsed, 1e-9)
        total = f"/{self.total}" if self.total is not None else ""
        parts = [f"{self.label}: {self.count}{total} {self.unit}"]
        if self.nbytes or self.total_bytes:
            parts.append(f"{_human_bytes(self.nbytes)} ({_human_bytes(self.nbytes / el)}/s)")
        parts.append(f"{el:.1f}s")
        return ", ".join(parts)


class _LineRenderer:
    """Plain lines for logs and pipes: every ``interval`` seconds while running, and a summary when done. Work that
    fails prints no line of its own, so its error stays the one line a failure gives.

    A summary that would repeat the line just printed (the counts unchanged, less than a second later: work whose
    only ``advance`` comes at its end, after more than ``interval`` seconds) is not printed twice."""

    def __init__(self, stream: IO[str], interval: float) -> None:
        self.stream = stream
        self.interval = interval
        self._last = 0.0
        self._shown: tuple[int, int, int | None, int | None] | None = None  # the counts of the last line printed

    def start(self, p: Progress) -> None:
        self._last = time.monotonic()

    @staticmethod
    def _counts(p: Progress) -> tuple[int, int, int | None, int | None]:
        return p.count, p.nbytes, p.total, p.total_bytes

    def _print(self, p: Progress, now: float) -> None:
        self._last, self._shown = now, self._counts(p)
        print(p.summary(), file=self.stream, flush=True)

    def update(self, p: Progress) -> None:
        now = time.monotonic()
        if now - self._last >= self.interval:
            self._print(p, now)

    def stop(self, p: Progress, ok: bool) -> None:
        now = time.monotonic()
        if ok and not (self._shown == self._counts(p) and now - self._last < 1.0):
            self._print(p, now)


class _RichRenderer:
    """A live rich bar: count/total, bytes, bytes per second, elapsed time."""

    def __init__(self, stream: IO[str]) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress as RichProgress, TextColumn, TimeElapsedColumn

        self._console = Console(file=stream, force_terminal=True)
        self._bar = RichProgress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[unit]}"), TextColumn("{task.fields[bytes]}"),
                                 TimeElapsedColumn(), console=self._console, transient=False)
        self._task: Any = None

    @staticmethod
    def _bytes(p: Progress) -> str:
        if not (p.nbytes or p.total_bytes):
            return ""
        return f"{_human_bytes(p.nbytes)} {_human_bytes(p.nbytes / max(p.elapsed, 1e-9))}/s"

    def start(self, p: Progress) -> None:
        self._bar.start()
        self._task = self._bar.add_task(p.label, total=p.total, unit=p.unit, bytes=self._bytes(p))

    def update(self, p: Progress) -> None:
        self._bar.update(self._task, completed=p.count, total=p.total, bytes=self._bytes(p))

    def stop(self, p: Progress, ok: bool) -> None:
        self._bar.stop()
        print(p.summary() + ("" if ok else " (interrupted)"), file=self._console.file, flush=True)


def line_interval(default: float) -> float:
    """Seconds between plain progress lines: ``ODF_PROGRESS_INTERVAL`` when set (0: a line per step), else
    ``default``."""
    text = os.environ.get("ODF_PROGRESS_INTERVAL", "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value >= 0:
        from odf_core.errors import OdfError

        raise OdfError(f"ODF_PROGRESS_INTERVAL={text!r}: expected a number of seconds >= 0")
    return value


@contextmanager
def progress(label: str, *, unit: str = "items", total: int | None = None, total_bytes: int | None = None,
             stream: IO[str] | None = None, interval: float = 5.0) -> Iterator[Progress]:
    """Track a piece of work: ``with progress("pull", unit="objects", total=n) as p: ... p.advance(1, nbytes)``."""
    out = stream if stream is not None else sys.stderr
    p = Progress(label=label, unit=unit, total=total, total_bytes=total_bytes)
    renderer: Any = _RichRenderer(out) if wants_live_bar(out) else _LineRenderer(out, line_interval(interval))
    p._renderer = renderer
    renderer.start(p)
    ok = False
    try:
        yield p
        ok = True
    finally:
        renderer.stop(p, ok)
