"""Event time of a fetched file from the step's ``EventTimeSource`` (conformance §7).

``FromPath.timestampFormat`` is documented by the spec as ``java.text.SimpleDateFormat``, while the reference
implementation parses it as a strftime format.  Both are accepted: a format containing a ``%`` directive is used
as a Python ``strptime`` format; otherwise SimpleDateFormat letters are translated (``yyyy yy M MM MMM MMMM d dd
D H HH h hh m mm s ss S.. a E EEEE Z X XX XXX``, ``'quoted literals'`` and ``''``); any other pattern letter is an
error.  ``rfc3339`` parses RFC 3339 text.  The default is ``%Y-%m-%d``.  Times without an offset are UTC.
"""
from __future__ import annotations

import datetime as dt
import re
from functools import lru_cache

from odf_core.ingest.errors import FetchError
from odf_core.metadata import (
    EventTimeSourceFromMetadata,
    EventTimeSourceFromPath,
    EventTimeSourceFromSystemTime,
    Timestamp,
)
from odf_core.metadata.timestamp import InvalidTimestamp

DEFAULT_FORMAT = "%Y-%m-%d"
_STRPTIME_DIRECTIVE = re.compile(r"%[A-Za-z%]")

EventTimeSource = EventTimeSourceFromMetadata | EventTimeSourceFromPath | EventTimeSourceFromSystemTime

# SimpleDateFormat letter runs -> strptime directives (None = the run length selects the directive below).
_JAVA_FIXED = {"d": "%d", "H": "%H", "h": "%I", "m": "%M", "s": "%S", "S": "%f", "a": "%p", "D": "%j"}


def _java_run(letter: str, count: int, fmt: str) -> str:
    if letter == "y":
        return "%y" if count == 2 else "%Y"
    if letter == "M":
        return "%m" if count <= 2 else ("%b" if count == 3 else "%B")
    if letter == "E":
        return "%A" if count >= 4 else "%a"
    if letter in ("Z", "X"):
        return "%z"
    if letter in _JAVA_FIXED:
        return _JAVA_FIXED[letter]
    raise FetchError(f"eventTime.timestampFormat {fmt!r}: pattern letter {letter!r} is not supported")


@lru_cache(maxsize=64)
def to_strptime(fmt: str) -> str:
    """Translate a timestampFormat to a strptime format (identity for strptime formats)."""
    if _STRPTIME_DIRECTIVE.search(fmt):
        return fmt
    out: list[str] = []
    i = 0
    while i < len(fmt):
        c = fmt[i]
        if c == "'":
            if fmt.startswith("''", i):  # '' is a literal quote, inside or outside quoted text
                out.append("'")
                i += 2
                continue
            i += 1
            while True:
                if i >= len(fmt):
                    raise FetchError(f"eventTime.timestampFormat {fmt!r}: unterminated quote")
                if fmt.startswith("''", i):
                    out.append("'")
                    i += 2
                elif fmt[i] == "'":
                    i += 1
                    break
                else:
                    out.append("%%" if fmt[i] == "%" else fmt[i])
                    i += 1
        elif c.isascii() and c.isalpha():
            j = i
            while j < len(fmt) and fmt[j] == c:
                j += 1
            out.append(_java_run(c, j - i, fmt))
            i = j
        else:
            out.append("%%" if c == "%" else c)
            i += 1
    return "".join(out)


def parse_timestamp(text: str, fmt: str | None) -> Timestamp:
    fmt = fmt or DEFAULT_FORMAT
    if fmt.lower() == "rfc3339":
        try:
            return Timestamp.parse(text)
        except InvalidTimestamp as e:
            raise FetchError(f"event time {text!r}: {e}") from None
    py_fmt = to_strptime(fmt)
    try:
        value = dt.datetime.strptime(text, py_fmt)
    except ValueError as e:
        raise FetchError(f"event time {text!r} does not match timestampFormat {fmt!r} ({py_fmt!r}): {e}") from None
    return Timestamp.from_datetime(value)


def from_path(source: EventTimeSourceFromPath, *candidates: str) -> Timestamp:
    """Group 1 of ``pattern`` searched in the first candidate that matches (file name first, then full path)."""
    try:
        regex = re.compile(source.pattern)
    except re.error as e:
        raise FetchError(f"eventTime.pattern {source.pattern!r} is not a valid regular expression: {e}") from None
    if regex.groups < 1:
        raise FetchError(f"eventTime.pattern {source.pattern!r} has no capture group for the timestamp")
    for text in candidates:
        m = regex.search(text)
        if m and m.group(1) is not None:
            return parse_timestamp(m.group(1), source.timestamp_format)
    raise FetchError(f"eventTime.pattern {source.pattern!r} does not match {' nor '.join(map(repr, candidates))}")
