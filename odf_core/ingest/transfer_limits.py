"""The limits one download runs under: a total deadline and a minimum rate over a sliding window.

A per-read socket timeout alone never ends a server that trickles a byte every few seconds. :class:`TransferWatch`
says when either limit is broken (:meth:`~TransferWatch.breach`) and how long the next read may block before one
would be (:meth:`~TransferWatch.next_breach_at`), so the caller can tighten the socket timeout and a silent or trickling
server is cut off on time, not one read timeout later.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass

_RESOLUTION = 64  # samples per window: the window is measured to within window_s / 64


@dataclass(frozen=True)
class TransferLimits:
    """``deadline_s``: the whole download (connect to last byte).  Stall rule: fewer than ``min_bytes_per_s``
    bytes per second over the last ``window_s`` seconds aborts (``min_bytes_per_s = 0`` turns it off)."""

    deadline_s: float
    min_bytes_per_s: int
    window_s: float


class TransferWatch:
    """Bytes received over time for one transfer, checked against its :class:`TransferLimits`.

    Times are ``time.monotonic()`` seconds given by the caller.  The deadline counts from ``started`` (before
    connecting); the stall rule from ``body_started`` (the response headers), so a server that takes a while to
    answer is the read timeout's business, one that stops sending is the stall rule's.
    """

    def __init__(self, limits: TransferLimits, *, started: float, body_started: float):
        self.limits = limits
        self.total = 0
        self._deadline_at = started + limits.deadline_s
        self._body_started = body_started
        # (time, total bytes) at least window/64 apart, except the last one, which is always the latest read
        self._samples: deque[tuple[float, int]] = deque([(body_started, 0)])

    def add(self, n: int, now: float) -> None:
        self.total += n
        s = self._samples
        if len(s) >= 2 and now - s[-2][0] < self.limits.window_s / _RESOLUTION:
            s[-1] = (now, self.total)
        else:
            s.append((now, self.total))
        while len(s) >= 2 and s[1][0] + self.limits.window_s <= now:
            s.popleft()

    def _stall_rule_on(self) -> bool:
        return self.limits.min_bytes_per_s > 0

    def _needed(self) -> float:
        return self.limits.min_bytes_per_s * self.limits.window_s

    def received_in_window(self, now: float) -> int:
        """Bytes received in the last ``window_s`` seconds (to within the window's resolution, never fewer)."""
        base = 0
        for t, total in self._samples:
            if t + self.limits.window_s > now:  # (not `t > now - window`: next_breach_at must be exact)
                break
            base = total
        return self.total - base

    def breach(self, now: float) -> str | None:
        """What limit is broken at ``now`` (a phrase for an error message), or None."""
        if now >= self._deadline_at:
            return f"not finished within the deadline of {self.limits.deadline_s:g} s"
        if self._stall_rule_on() and now - self._body_started >= self.limits.window_s:
            got = self.received_in_window(now)
            if got < self._needed():
                return (f"stalled: {got} bytes in the last {self.limits.window_s:g} s, below the minimum of "
                        f"{self.limits.min_bytes_per_s} bytes/s")
        return None

    def next_breach_at(self) -> float:
        """When a limit breaks if no further byte arrives (the deadline, or the stall rule's verdict)."""
        at = self._deadline_at
        if self._stall_rule_on():
            floor = self.total - self._needed()
            # the window falls short once it no longer reaches back to the first sample holding more than `floor`
            for t, total in self._samples:
                if total > floor:
                    at = min(at, t + self.limits.window_s)
                    break
        return at
