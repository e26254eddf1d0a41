"""Unwrapping an engine's answer: the one place where its failures become the coordinator's errors.

Every request kind comes back in an envelope (``IngestResult``, ``OdfTransformResponse``, ``ValidateQueryResult``,
``SqlResult``) holding a success, the user's mistake (invalid input or query) or the engine's own failure. Callers
name what they asked for and how the user's mistake reads; the engine's failure always reads the same way: one line,
the trace in a log file it names, a full disk located where the engine was writing.
"""
from __future__ import annotations

from typing import Any, Callable

from odf_core.engine.base import DISK_CLASS_PREFIX, EngineError, internal_error
from odf_core.engine.protocol import (
    DISK_ERROR_CLASSES,
    EngineInternalError,
    IngestResponseInvalidInput,
    OdfTransformResponse,
    QueryResponseInvalidQuery,
)
from odf_core.metadata.engine_ops import TransformResponseInternalError, TransformResponseInvalidQuery

#: The user's mistake: the data, the read step, the merge strategy or the query is wrong.
USER_ERRORS = (IngestResponseInvalidInput, QueryResponseInvalidQuery, TransformResponseInvalidQuery)
#: The engine's own failure (a bug, a crash of Spark, a full disk).
ENGINE_ERRORS = (EngineInternalError, TransformResponseInternalError)


def unwrap(answer: Any, envelope: type[Any], what: str, *, invalid: Callable[[str], Exception],
           success: type | tuple[type, ...] | None = None, where: str | None = None) -> Any:
    """The success inside ``answer``. The user's mistake raises ``invalid(message)``; the engine's failure an
    :class:`EngineError` for ``what`` (``where``: the directory it was writing to); any other answer (an engine of
    another build, a wrong envelope) an :class:`EngineError` naming what came back."""
    if not isinstance(answer, envelope):
        raise EngineError(f"{what}: the engine answered with {type(answer).__name__}")
    value = answer.response if isinstance(answer, OdfTransformResponse) else answer.value
    if isinstance(value, USER_ERRORS):
        raise invalid(value.message)
    if isinstance(value, ENGINE_ERRORS):
        message, error_class = value.message, getattr(value, "error_class", None)
        if isinstance(value, TransformResponseInternalError):  # the spec's type has no class: it leads the message
            prefix = DISK_CLASS_PREFIX.match(message)
            if prefix and prefix.group(1) in DISK_ERROR_CLASSES:
                message, error_class = message[prefix.end():], prefix.group(1)
        raise internal_error(what, message, error_class, value.backtrace, where=where)
    if success is not None and not isinstance(value, success):
        raise EngineError(f"{what}: unexpected engine response {type(value).__name__}")
    return value
