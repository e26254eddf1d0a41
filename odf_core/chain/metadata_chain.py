"""A dataset's metadata chain on an :class:`~odf_core.storage.ObjectStore`.

Appends are validated against the folded :class:`ChainState`, written content-addressed, then published by a
compare-and-swap of ``refs/head``; a crash at any step leaves the dataset at its old or its new head. Reading the
current state costs two storage reads (head ref + summary) whatever the chain length.
"""
from __future__ import annotations

from typing import Iterator

from odf_core.chain.rules import validate_append
from odf_core.chain.state import ChainState, fold, from_json, to_json
from odf_core.errors import IntegrityError, OdfError
from odf_core.identity import Multihash
from odf_core.metadata import MetadataBlock, MetadataEvent, Timestamp, decode_block, encode_block
from odf_core.errors import DecodeError, InvalidIdentifier
from odf_core.storage import DatasetLayout, ObjectNotFound, ObjectStore, crash_point

SUMMARY_KEY = DatasetLayout.info_key("summary")

#: Points where crash-injection tests kill an appending process (see ``odf_core.storage.faults``).
CHAIN_CRASH_POINTS = ("chain.after_block_write", "chain.after_head_update", "chain.after_summary_write")


class MetadataChain:
    def __init__(self, store: ObjectStore):
        self.store = store

    # -- reads --------------------------------------------------------------------------------------------------

    def head(self) -> Multihash | None:
        text = self.store.get_ref(DatasetLayout.head_ref)
        if text is None:
            return None
        try:
            return Multihash.parse(text)
        except InvalidIdentifier as e:
            raise IntegrityError(f"{self.store.url}: refs/head holds an invalid block hash: {e}") from None

    def get_block_bytes(self, block_hash: Multihash) -> bytes:
        try:
            return self.store.get(DatasetLayout.block_key(block_hash))
        except ObjectNotFound:
            raise IntegrityError(f"{self.store.url}: block {block_hash} is missing") from None

    def get_block(self, block_hash: Multihash) -> MetadataBlock:
        """The block stored under ``block_hash``, checked to hash to its name."""
        raw = self.get_block_bytes(block_hash)
        actual = Multihash.sha3_256(raw)
        if actual != block_hash:
            raise IntegrityError(f"{self.store.url}: block {block_hash} is corrupted: its bytes hash to {actual}")
        try:
            return decode_block(raw, f"block {block_hash}")
        except DecodeError as e:
            raise IntegrityError(f"{self.store.url}: {e}") from None

    def iter_blocks(self, start: Multihash | None = None, stop: Multihash | None = None
                    ) -> Iterator[tuple[Multihash, MetadataBlock]]:
        """Blocks from ``start`` (default: head) back to the Seed, or until ``stop`` (excluded)."""
        h = start if start is not None else self.head()
        while h is not None and h != stop:
            block = self.get_block(h)
            yield h, block
            h = block.prev_block_hash

    def state(self) -> ChainState:
        """Current state in O(1) reads; a summary left behind by another writer is caught up incrementally."""
        head = self.head()
        if head is None:
            return ChainState()
        summary = self._read_summary()
        if summary is not None and summary.head == head:
            return summary
        state = self._catch_up(summary, head)
        self._write_summary(state)
        return state

    def _read_summary(self) -> ChainState | None:
        try:
            return from_json(self.store.get(SUMMARY_KEY))
        except ObjectNotFound:
            return None
        except Exception:  # a summary is only a cache: rebuild it if unreadable
            return None

    def _catch_up(self, summary: ChainState | None, head: Multihash) -> ChainState:
        pending: list[tuple[Multihash, MetadataBlock]] = []
        base = ChainState()
        for h, block in self.iter_blocks(head):
            if summary is not None and h == summary.head:
                base = summary
                break
            pending.append((h, block))
        else:
            base = ChainState()
        for h, block in reversed(pending):
            base = fold(base, block, h)
        return base

    def _write_summary(self, state: ChainState) -> None:
        try:
            self.store.put(SUMMARY_KEY, to_json(state))
        except OdfError:
            pass  # read-only stores still work, just without the cache

    def rebuild_state(self) -> ChainState:
        """Fold the whole chain from the Seed, ignoring any summary (used by verification)."""
        return self.state_at(self.head())

    def state_at(self, head: Multihash | None) -> ChainState:
        """The state as of an older head, folded from the Seed (rare paths: retries, verification)."""
        return self._catch_up(None, head) if head is not None else ChainState()

    # -- writes -------------------------------------------------------------------------------------------------

    def append(self, block: MetadataBlock, *, state: ChainState | None = None) -> Multihash:
        """Validate and append ``block``; :class:`~odf_core.errors.RefConflict` if the head moved meanwhile."""
        state = state if state is not None else self.state()
        validate_append(state, block)
        raw = encode_block(block)
        block_hash = Multihash.sha3_256(raw)
        self.store.put_if_absent(DatasetLayout.block_key(block_hash), raw)
        crash_point("chain.after_block_write")
        self.store.compare_and_swap_ref(
            DatasetLayout.head_ref, str(state.head) if state.head else None, str(block_hash)
        )
        crash_point("chain.after_head_update")
        self._write_summary(fold(state, block, block_hash))
        crash_point("chain.after_summary_write")
        return block_hash

    def append_event(self, event: MetadataEvent, system_time: Timestamp | None = None,
                     *, state: ChainState | None = None) -> Multihash:
        """Append ``event`` on top of the current head (sequence number and prev hash filled in)."""
        state = state if state is not None else self.state()
        system_time = system_time or Timestamp.now()
        if state.system_time is not None and system_time < state.system_time:
            system_time = state.system_time  # clocks may step back; the chain's time may not
        block = MetadataBlock(
            system_time=system_time,
            prev_block_hash=state.head,
            sequence_number=state.sequence_number + 1,
            event=event,
        )
        return self.append(block, state=state)
