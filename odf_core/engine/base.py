"""What every way of running the Spark engine offers the coordinator, and the errors it raises."""
from __future__ import annotations

import abc
import os
import re
import time
from pathlib import Path

from odf_core.engine.protocol import DISK_ERROR_CLASSES, EngineRequest, EngineResponse
from odf_core.errors import OdfError


class EngineError(OdfError):
    """The engine could not run or failed (not installed, crashed, killed, timed out, an internal error)."""


class EngineTimeout(EngineError):
    pass


class EngineBusy(EngineError):
    """A long-lived engine refused the request: its queue is full. Retrying later is safe."""


class EngineUnavailable(EngineError):
    """No engine answers at the configured address (not started, restarted, or killed mid-request)."""


def log_dir() -> Path:
    """Where engine and CLI failures leave their full traces: ``$ODF_LOG_DIR`` or ``~/.cache/odf/logs``."""
    return Path(os.environ.get("ODF_LOG_DIR") or Path.home() / ".cache" / "odf" / "logs")


#: a log a process appends to (the auto engine's, an in-process driver's) is set aside as ``<name>.1`` when it has
#: grown past this at the next start, replacing the previous ``.1``: the last two runs' worth stays, not every run's
ROTATE_BYTES = 10 * 1024 * 1024
#: trace files of failures (one per failure) older than this are removed when the next one is written
ERROR_LOG_DAYS = 30.0


def rotate_if_large(path: Path, limit: int = ROTATE_BYTES) -> None:
    """Before a process starts appending to ``path``: keep it below ``limit`` across starts (one older copy)."""
    try:
        if path.stat().st_size > limit:
            os.replace(path, path.with_name(path.name + ".1"))
    except OSError:
        pass  # no log yet, or one we cannot move: appending to it is still right


def _remove_old_error_logs(d: Path, now: float) -> None:
    for old in d.glob("[0-9]*T[0-9]*-*.log"):
        try:
            if now - old.stat().st_mtime > ERROR_LOG_DAYS * 86400:
                old.unlink()
        except OSError:
            continue


def write_error_log(what: str, text: str) -> Path | None:
    """Keep a trace (Python and Java) in a file of its own; the user's console gets one line naming it. Traces older
    than ``ERROR_LOG_DAYS`` go as a new one is written (a retried task writes one per failure)."""
    try:
        d = log_dir()
        d.mkdir(parents=True, exist_ok=True)
        _remove_old_error_logs(d, time.time())
        slug = re.sub(r"[^A-Za-z0-9._-]+", "-", what).strip("-")[:60] or "error"
        path = d / f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}-{slug}.log"
        path.write_text(text, encoding="utf-8")
        return path
    except OSError:
        return None


#: A disk error's class before its reason (``[ENOSPC] no space left on device``): what an engine of an earlier build
#: sent, and how a spec ``TransformResponse::InternalError`` (no error-class field) carries it.
DISK_CLASS_PREFIX = re.compile(r"\[([A-Z]+)\] ")


def internal_error(what: str, message: str, error_class: str | None = None, backtrace: str | None = None,
                   *, where: str | None = None) -> EngineError:
    """One line for the user: what failed, Spark's error class, the message, and where the trace is. A full disk
    reads ``no space left on device while writing under <where>`` (``where``: the directory the engine wrote to)."""
    if error_class in DISK_ERROR_CLASSES:
        reason = DISK_CLASS_PREFIX.sub("", message.strip(), count=1)
        message, error_class = reason + (f" while writing under {where}" if where else ""), None
    head = f"{what} failed" + (f" [{error_class}]" if error_class and error_class not in message else "")
    text = f"{head}: {message}"
    if backtrace:
        path = write_error_log(what, f"{text}\n\n{backtrace}")
        if path is not None:
            text += f" (trace in {path})"
    return EngineError(text)


class Engine(abc.ABC):
    """Runs engine requests: in this process, with one spark-submit per request, or on a long-lived engine."""

    #: A long-lived engine keeps an ingest's read rows for its merge request (see ``IngestRequest.keep_read_as``).
    keeps_reads: bool = False

    @abc.abstractmethod
    def execute(self, request: EngineRequest, *, what: str = "engine request") -> EngineResponse:
        """Run one request; failures of the engine itself raise :class:`EngineError`, everything the request's
        content causes comes back as a response."""

    def kill(self) -> None:  # noqa: B027 - optional: engines with nothing to stop keep this no-op
        """Stop the running request (Airflow's ``on_kill``); no request starts on this engine afterwards."""

    def close(self) -> None:  # noqa: B027 - optional: engines holding nothing keep this no-op
        """Release what the engine holds (a Spark session, a channel)."""

    @abc.abstractmethod
    def describe(self) -> str:
        """For logs: where requests run."""
