"""Nanosecond-precision UTC timestamps.

Blocks written by the reference implementation carry nanoseconds, which ``datetime`` cannot hold; re-encoding such a
block must reproduce its bytes, so the model keeps integer nanoseconds since the Unix epoch.
"""
from __future__ import annotations

import datetime as _dt
import re
import time
from dataclasses import dataclass

from odf_core.errors import OdfError

_NS = 1_000_000_000
_DAY_NS = 86_400 * _NS
_EPOCH_ORDINAL = _dt.date(1970, 1, 1).toordinal()
_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?([Zz]|[+-]\d{2}:\d{2})$"
)


class InvalidTimestamp(OdfError, ValueError):
    pass


@dataclass(frozen=True, order=True, slots=True)
class Timestamp:
    """A UTC instant as integer nanoseconds since 1970-01-01T00:00:00Z."""

    epoch_ns: int

    @classmethod
    def now(cls) -> "Timestamp":
        return cls(time.time_ns())

    @classmethod
    def parse(cls, text: str) -> "Timestamp":
        """Parse RFC 3339 text (any offset; converted to UTC)."""
        if isinstance(text, Timestamp):
            return text
        if isinstance(text, _dt.datetime):
            return cls.from_datetime(text)
        m = _RFC3339.match(text) if isinstance(text, str) else None
        if not m:
            raise InvalidTimestamp(f"invalid RFC 3339 timestamp {text!r}: expected e.g. 2020-01-01T12:00:00Z")
        y, mo, d, h, mi, s, frac, off = m.groups()
        try:
            day = _dt.date(int(y), int(mo), int(d))
        except ValueError as e:
            raise InvalidTimestamp(f"invalid RFC 3339 timestamp {text!r}: {e}") from None
        if int(h) > 23 or int(mi) > 59 or int(s) > 59:
            raise InvalidTimestamp(f"invalid RFC 3339 timestamp {text!r}: time out of range")
        ns = (day.toordinal() - _EPOCH_ORDINAL) * _DAY_NS + ((int(h) * 60 + int(mi)) * 60 + int(s)) * _NS
        if frac:
            ns += int(frac.ljust(9, "0"))
        if off not in ("Z", "z"):
            sign = 1 if off[0] == "+" else -1
            ns -= sign * (int(off[1:3]) * 3600 + int(off[4:6]) * 60) * _NS
        return cls(ns)

    @classmethod
    def from_datetime(cls, value: _dt.datetime) -> "Timestamp":
        """Aware datetimes are converted to UTC; naive ones are taken as UTC."""
        if value.tzinfo is not None:
            value = value.astimezone(_dt.timezone.utc).replace(tzinfo=None)
        days = value.date().toordinal() - _EPOCH_ORDINAL
        secs = value.hour * 3600 + value.minute * 60 + value.second
        return cls(days * _DAY_NS + secs * _NS + value.microsecond * 1000)

    @classmethod
    def from_millis(cls, ms: int) -> "Timestamp":
        return cls(ms * 1_000_000)

    @classmethod
    def from_parts(cls, year: int, ordinal: int, seconds_from_midnight: int, nanoseconds: int) -> "Timestamp":
        """Inverse of :meth:`parts` (the FlatBuffers ``Timestamp`` struct)."""
        if not 1 <= ordinal <= 366 or seconds_from_midnight >= 86_400 or nanoseconds >= _NS:
            raise InvalidTimestamp(
                f"invalid timestamp struct (year={year}, ordinal={ordinal}, "
                f"seconds={seconds_from_midnight}, nanos={nanoseconds})"
            )
        try:
            days = _dt.date(year, 1, 1).toordinal() + ordinal - 1 - _EPOCH_ORDINAL
        except ValueError:
            raise InvalidTimestamp(f"invalid timestamp struct year {year}") from None
        return cls(days * _DAY_NS + seconds_from_midnight * _NS + nanoseconds)

    def parts(self) -> tuple[int, int, int, int]:
        """(year, day of year 1..366, seconds from midnight, nanoseconds) in UTC."""
        days, rem = divmod(self.epoch_ns, _DAY_NS)
        day = _dt.date.fromordinal(days + _EPOCH_ORDINAL)
        secs, nanos = divmod(rem, _NS)
        return day.year, day.timetuple().tm_yday, secs, nanos

    def to_datetime(self) -> _dt.datetime:
        """Aware UTC datetime (sub-microsecond digits are truncated)."""
        days, rem = divmod(self.epoch_ns, _DAY_NS)
        base = _dt.datetime.combine(_dt.date.fromordinal(days + _EPOCH_ORDINAL), _dt.time(), _dt.timezone.utc)
        return base + _dt.timedelta(microseconds=rem // 1000)

    @property
    def millis(self) -> int:
        return self.epoch_ns // 1_000_000

    def isoformat(self) -> str:
        """RFC 3339 in UTC with ``Z``; fraction printed with 0, 3, 6 or 9 digits as needed."""
        days, rem = divmod(self.epoch_ns, _DAY_NS)
        day = _dt.date.fromordinal(days + _EPOCH_ORDINAL)
        secs, nanos = divmod(rem, _NS)
        h, r = divmod(secs, 3600)
        m, s = divmod(r, 60)
        text = f"{day.isoformat()}T{h:02d}:{m:02d}:{s:02d}"
        if nanos:
            if nanos % 1_000_000 == 0:
                text += f".{nanos // 1_000_000:03d}"
            elif nanos % 1000 == 0:
                text += f".{nanos // 1000:06d}"
            else:
                text += f".{nanos:09d}"
        return text + "Z"

    def __str__(self) -> str:
        return self.isoformat()
