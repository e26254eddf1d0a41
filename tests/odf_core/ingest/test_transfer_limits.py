"""TransferWatch on a hand-driven clock: the sliding window, the deadline, and next_breach_at agreeing with breach."""
from __future__ import annotations

import random

from odf_core.ingest.transfer_limits import TransferLimits, TransferWatch


def _watch(deadline: float = 1000.0, rate: int = 100, window: float = 10.0) -> TransferWatch:
    return TransferWatch(TransferLimits(deadline, rate, window), started=0.0, body_started=0.0)


def test_the_window_slides() -> None:
    w = _watch()  # needs 1000 bytes in any 10 s
    w.add(5000, 1.0)  # a burst early on ...
    assert w.breach(10.5) is None  # ... carries the first window
    assert w.received_in_window(10.5) == 5000
    w.add(100, 11.0)
    # at 12 s the burst is more than 10 s old: only 100 bytes in the window
    assert w.breach(12.0) == "stalled: 100 bytes in the last 10 s, below the minimum of 100 bytes/s"


def test_no_stall_verdict_before_one_window_has_passed() -> None:
    w = _watch()
    assert w.breach(9.9) is None and w.breach(10.0) is not None


def test_deadline_and_disabled_stall_rule() -> None:
    w = _watch(deadline=5.0, rate=0)
    w.add(1, 1.0)
    assert w.breach(4.9) is None
    assert w.breach(5.0) == "not finished within the deadline of 5 s"
    assert w.next_breach_at() == 5.0


def test_next_breach_at_is_exactly_when_breach_starts_if_nothing_more_arrives() -> None:
    rng = random.Random(7)
    for _ in range(200):
        w = _watch(deadline=rng.uniform(20, 200), rate=rng.choice([0, 10, 100]), window=rng.uniform(1, 10))
        now = 0.0
        for _ in range(rng.randrange(1, 300)):
            now += rng.expovariate(10.0)
            if w.breach(now):
                break
            w.add(rng.randrange(0, 200), now)
        if w.breach(now):
            continue
        fail_at = w.next_breach_at()
        assert fail_at > now and w.breach(fail_at) is not None
        assert w.breach((now + fail_at) / 2) is None and w.breach(fail_at - 1e-9) is None


def test_memory_stays_bounded() -> None:
    w = _watch(window=1.0)
    for i in range(100_000):
        w.add(10, i * 1e-4)
    assert len(w._samples) <= 70
