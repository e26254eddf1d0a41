"""Exactly-once pushes: find the block a push with a given idempotency key already committed.

A keyed push records its key in its block (:func:`~odf_core.ingest.source_state.push_key_state`), so "was this
push ingested?" is answered by the chain alone, whatever happened to the staging directory.  Walking the whole chain
would cost O(history) for every push, so the walk from the head stops at a bound below which the key cannot be:

* **the verified base** — a transaction plan records the head it was planned on (``base_head``) only after this
  walk found the key in none of the blocks down to there; blocks never change, so a retry that still has its plan
  only needs to look at the blocks appended since (usually none or a few);
* **the first attempt's time** — without a plan (a first attempt, or a retry on another machine), the walk stops
  at the first block older than ``not_before``.  Block system times never decrease along a chain (a chain rule) and
  a push's block is stamped no earlier than the start of the attempt that made it, so no block of this key is older
  than its first attempt.  The caller says when that was if it knows (the Airflow operator: its DAG run's
  ``run_after``, less a clock-skew margin); otherwise it is taken to be at most :data:`KEY_WINDOW` ago — a retry
  more than a week after the first attempt, with its plan gone, ingests again.

Two attempts running at once cannot both commit: each commits by compare-and-swap on the head it searched from, so
the second finds the head moved, fails, and its retry finds the first one's block.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from odf_core.chain import MetadataChain
from odf_core.identity import Multihash
from odf_core.ingest.errors import IngestError
from odf_core.ingest.source_state import KIND_PUSH_KEY
from odf_core.metadata import AddData, MetadataBlock, Timestamp

KEY_WINDOW = dt.timedelta(days=7)
MAX_KEY_LENGTH = 256


@dataclass(frozen=True)
class CommittedPush:
    """The block that holds a push key."""

    block_hash: Multihash
    block: MetadataBlock


def check_key(key: str) -> str:
    """A key must be printable text (it is stored verbatim as a FlatBuffers string and shown by ``odf log``)."""
    ok = 0 < len(key) <= MAX_KEY_LENGTH and key.isprintable() and key == key.strip()
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        ok = False
    if not ok:
        raise IngestError(
            f"idempotency key {key!r}: expected 1 to {MAX_KEY_LENGTH} printable characters without surrounding spaces"
        )
    return key


def default_not_before(now: Timestamp | None = None) -> Timestamp:
    """The oldest first attempt a retry without its plan is recognised for (:data:`KEY_WINDOW`)."""
    now = now or Timestamp.now()
    return Timestamp(now.epoch_ns - int(KEY_WINDOW.total_seconds()) * 1_000_000_000)


def find_push(
    chain: MetadataChain,
    source_name: str,
    key: str,
    *,
    start: Multihash | None,
    stop: Multihash | None = None,
    not_before: Timestamp | None = None,
) -> CommittedPush | None:
    """The block at or below ``start`` that recorded ``key`` for ``source_name``, looking down to ``stop``
    (excluded) or to the first block older than ``not_before``, whichever comes first."""
    for block_hash, block in chain.iter_blocks(start=start, stop=stop):
        if not_before is not None and block.system_time < not_before:
            return None
        ev = block.event
        if isinstance(ev, AddData) and ev.new_source_state is not None:
            st = ev.new_source_state
            if st.kind == KIND_PUSH_KEY and st.source_name == source_name and st.value == key:
                return CommittedPush(block_hash, block)
    return None
