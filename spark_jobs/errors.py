"""Errors of the engine and how a Spark failure is classified: the user's to fix, or the engine's.

Classification reads Spark's structured error information (``getCondition()``, ``getSqlState()``,
``getMessageParameters()`` of every ``SparkThrowable`` in the cause chain), never the message text: the innermost
Spark error decides. SQLSTATE classes 22 (data exception), 42 (syntax or access rule), 0A (feature not supported),
KD (data source: an unreadable input file) and P0 (raised by the query) are the user's; anything else is internal.
"""
from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar

from odf_core.engine.protocol import EngineInternalError

USER_SQLSTATE_CLASSES = ("22", "42", "0A", "KD", "P0")
#: ``raise_error`` messages starting with this are the engine's own checks, e.g. a duplicate Snapshot key.
ENGINE_CHECK_PREFIX = "ODF_CHECK:"


class InputRejected(Exception):
    """The engine refuses an ingest's input: bad data or a read/merge setting that does not fit it. Answered as the
    protocol's ``IngestResponseInvalidInput`` (with file and line); not ``odf_core``'s ``InvalidInput``, which the
    coordinator raises from that answer."""

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None,
                 record: int | None = None):
        super().__init__(message)
        self.message, self.file, self.line, self.record = message, file, line, record


class QueryRejected(Exception):
    """The engine refuses a query: it (or its output) breaks the engine contract. Answered as the protocol's
    ``InvalidQuery`` response; not ``odf_core``'s ``InvalidQuery``, which the coordinator raises from that answer."""


class EngineFailure(Exception):
    """A coordinator bug or an unusable checkpoint: an internal error with a clear message, no user fault."""


@dataclass(frozen=True)
class SparkError:
    """One ``SparkThrowable`` of a failure's cause chain."""

    condition: str
    sql_state: str | None
    params: dict[str, str] = field(default_factory=dict)
    message: str = ""  # Spark's message without the SQLSTATE suffix, first line


def _java_throwable(exc: BaseException) -> Any:
    java = getattr(exc, "java_exception", None)  # Py4JJavaError (failed jobs)
    return java if java is not None else getattr(exc, "_origin", None)  # CapturedException


def _clean(message: str | None) -> str:
    text = (message or "").strip().splitlines()[0] if message and message.strip() else ""
    head, sep, _ = text.partition(" SQLSTATE:")
    return (head if sep else text).strip().rstrip(";").strip()


def spark_errors(exc: BaseException) -> list[SparkError]:
    """The Spark errors of ``exc``'s cause chain, outermost first (empty when it did not come from Spark)."""
    found: list[SparkError] = []
    throwable = _java_throwable(exc)
    seen = 0
    while throwable is not None and seen < 20:
        seen += 1
        try:
            condition = throwable.getCondition()
        except Exception:  # noqa: BLE001 - not a SparkThrowable (py4j: no such method)
            condition = None
        if condition:
            try:
                params = {str(k): str(v) for k, v in dict(throwable.getMessageParameters()).items()}
            except Exception:  # noqa: BLE001 - py4j: any failure means no parameters
                params = {}
            try:
                state = throwable.getSqlState()
            except Exception:  # noqa: BLE001 - py4j: any failure means no state
                state = None
            found.append(SparkError(str(condition), str(state) if state else None, params,
                                    _clean(throwable.getMessage())))
        try:
            throwable = throwable.getCause()
        except Exception:  # noqa: BLE001 - py4j: the end of the cause chain
            break
    if not found and hasattr(exc, "getCondition"):  # a Python-side PySparkException
        condition = exc.getCondition()  # type: ignore[attr-defined]
        if condition:
            found.append(SparkError(condition, exc.getSqlState(),  # type: ignore[attr-defined]
                                    dict(exc.getMessageParameters() or {}),  # type: ignore[attr-defined]
                                    _clean(str(exc))))
    return found


def innermost(exc: BaseException) -> SparkError | None:
    errors = spark_errors(exc)
    return errors[-1] if errors else None


def is_user_error(exc: BaseException) -> bool:
    err = innermost(exc)
    return err is not None and (err.sql_state or "").startswith(USER_SQLSTATE_CLASSES)


def engine_check(exc: BaseException) -> str | None:
    """The message of one of the engine's own ``raise_error`` checks, if that is what failed."""
    for err in spark_errors(exc):
        if err.condition == "USER_RAISED_EXCEPTION":
            text = err.params.get("errorMessage", "")
            if text.startswith(ENGINE_CHECK_PREFIX):
                return text[len(ENGINE_CHECK_PREFIX):]
    return None


def failed_file(exc: BaseException) -> str | None:
    """The input file Spark names when reading it failed (``FAILED_READ_FILE``), as a local path."""
    from urllib.parse import unquote

    for err in spark_errors(exc):
        if err.condition.startswith("FAILED_READ_FILE") and err.params.get("path"):
            path = unquote(err.params["path"])
            for prefix in ("file://", "file:"):
                if path.startswith(prefix):
                    return path[len(prefix):]
            return path
    return None


def user_message(exc: BaseException) -> str:
    """What the user reads: the innermost Spark error that is not a mere wrapper, with its condition."""
    errors = [e for e in spark_errors(exc) if not e.condition.startswith("FAILED_READ_FILE")]
    if errors:
        err = errors[-1]
        text = err.message
        if not text.startswith("["):
            text = f"[{err.condition}] {text}"
        return text
    return _clean(str(exc)) or type(exc).__name__


#: How the JVM words the operating-system errors a full or read-only disk gives (Java has no errno).
_JAVA_OS_ERRORS = {"No space left on device": "ENOSPC", "Disk quota exceeded": "EDQUOT",
                   "Read-only file system": "EROFS"}


def os_error(exc: BaseException) -> tuple[str, str] | None:
    """``(errno name, reason)`` when a failure comes down to the disk (full, over quota, read-only): an ``OSError`` in
    the Python cause chain (pyarrow, our own writes) or an ``IOException`` in the Java one (Spark's writers)."""
    import errno as errno_mod

    from odf_core.errors import disk_error, os_error_reason

    e = disk_error(exc)
    if e is not None:
        reason = os_error_reason(e)
        return errno_mod.errorcode[e.errno], f"{reason}: {e.filename}" if e.filename else reason
    throwable, depth = _java_throwable(exc), 0
    while throwable is not None and depth < 20:
        depth += 1
        try:
            message = str(throwable.getMessage() or "")
        except Exception:  # noqa: BLE001 - not a throwable after all
            break
        for text, name in _JAVA_OS_ERRORS.items():
            if text in message:
                return name, text[:1].lower() + text[1:]
        try:
            throwable = throwable.getCause()
        except Exception:  # noqa: BLE001
            break
    return None


def internal_error_response(exc: BaseException) -> EngineInternalError:
    """The engine's answer to a failure that is not the user's: the protocol's ``InternalError`` response (the
    coordinator's exception made from it is ``odf_core.engine.internal_error``). A full disk is named as such (message
    ``no space left on device``, error class ``ENOSPC``: one of ``DISK_ERROR_CLASSES``), so the coordinator can say
    where it was writing."""
    backtrace = "".join(traceback.format_exception(exc))
    disk = os_error(exc)
    if disk is not None:
        return EngineInternalError(message=disk[1], error_class=disk[0], backtrace=backtrace)
    err = innermost(exc)
    message = user_message(exc) if err is not None else f"{type(exc).__name__}: {_clean(str(exc))}"
    return EngineInternalError(message=message, error_class=err.condition if err else None, backtrace=backtrace)


R = TypeVar("R")


def always_answer(run: Callable[[], R], *, invalid: Callable[[Exception], R],
                  internal: Callable[[EngineInternalError], R] = lambda e: e,  # type: ignore[assignment,return-value]
                  rejected: tuple[type[Exception], ...] = (QueryRejected,), user_errors: str | None = "",
                  explain: Callable[[Exception], R | None] | None = None) -> R:
    """``run()``, or the answer to its failure: the engine never raises out of a request. ``rejected`` (our own checks)
    and, unless ``user_errors`` is None, a Spark error that is the user's (its message after the ``user_errors``
    prefix, as an :class:`QueryRejected`) answer ``invalid``; ``explain`` may name the user's mistake behind any other
    failure first; everything else is the engine's own failure (:func:`internal_error_response`: one line and a
    trace)."""
    try:
        return run()
    except rejected as e:
        return invalid(e)
    except EngineFailure as e:
        return internal(EngineInternalError(message=str(e)))
    except Exception as e:  # noqa: BLE001 - the engine always answers
        if explain is not None:
            try:
                explained = explain(e)
            except Exception:  # noqa: BLE001 - explaining is best effort: the failure itself is reported
                explained = None
            if explained is not None:
                return explained
        if user_errors is not None and is_user_error(e):
            return invalid(QueryRejected(user_errors + user_message(e)))
        return internal(internal_error_response(e))
