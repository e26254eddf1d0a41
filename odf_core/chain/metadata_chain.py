"""A dataset's metadata chain on an :class:`~odf_core.storage.ObjectStore`.

Appends are validated against the folded :class:`ChainState` (cross-checked with the head block), written
content-addressed, then published by a compare-and-swap of ``refs/head``; a crash at any step leaves the dataset at
its old or its new head.

The chain is the only truth. With a summary key (the workspace's, see ``odf_core.chain.summary``) the current state
costs two storage reads (head ref + authenticated summary) whatever the chain length; a summary that fails its check
is logged and rebuilt from the blocks. Without a key the summary is never trusted: the state is folded from the
blocks once per process and then caught up incrementally from an in-process memo.
"""
from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from typing import Any, Iterator

from odf_core.chain.rules import validate_append
from odf_core.chain.state import ChainState, fold
from odf_core.chain.summary import SUMMARY_KEY, StoredSummary, decode_summary, encode_summary
from odf_core.errors import DecodeError, IntegrityError, InvalidIdentifier, OdfError
from odf_core.identity import Multihash
from odf_core.metadata import (
    AddData,
    AddPushSource,
    ExecuteTransform,
    MetadataBlock,
    MetadataEvent,
    Seed,
    SetDataSchema,
    SetPollingSource,
    SetTransform,
    Timestamp,
    decode_block,
    encode_block,
)
from odf_core.metadata.manifests import BLOCK_VERSION_ALIGNED
from odf_core.storage import DatasetLayout, ObjectNotFound, ObjectStore, crash_point

log = logging.getLogger("odf.chain")

_MEMO_SIZE = 256
_memo: "OrderedDict[str, ChainState]" = OrderedDict()  # store URL -> last state folded from its blocks here
_memo_lock = threading.Lock()

#: Points where crash-injection tests kill an appending process (see ``odf_core.storage.faults``).
CHAIN_CRASH_POINTS = ("chain.after_block_write", "chain.after_head_update", "chain.after_summary_write")


class MetadataChain:
    def __init__(self, store: ObjectStore, summary_key: bytes | None = None):
        """``summary_key``: the secret that authenticates ``info/summary`` (None: never trust or write it)."""
        self.store = store
        self.summary_key = summary_key

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
        """Current state, derived from the chain: an authentic summary at the head, else folded from blocks."""
        head = self.head()
        if head is None:
            return ChainState()
        if self.summary_key is None:
            return self._memo_state(head)
        stored = self.read_summary()
        base = None
        if stored is not None:
            if stored.authentic:
                assert stored.state is not None  # authentic means read and verified
                if stored.state.head == head:
                    return stored.state
                base = stored.state  # authentic but older: catch up from there
            else:
                log.log(logging.WARNING if stored.suspicious else logging.INFO,
                        "%s: ignoring %s: %s; rebuilding it from the blocks", self.store.url, SUMMARY_KEY,
                        stored.problem)
        state = self._catch_up(base, head)
        self._write_summary(state)
        return state

    def read_summary(self) -> StoredSummary | None:
        """The stored summary as found (None if there is none), checked against this chain's key."""
        try:
            raw = self.store.get(SUMMARY_KEY)
        except ObjectNotFound:
            return None
        except OdfError as e:  # e.g. info/ is a symlink out of the store: never read it
            return StoredSummary(None, False, str(e), True)
        return decode_summary(raw, self.summary_key)

    def _memo_state(self, head: Multihash) -> ChainState:
        url = self.store.url
        with _memo_lock:
            known = _memo.get(url)
        if known is not None and known.head == head:
            return known
        state = self._catch_up(known, head)
        with _memo_lock:
            _memo[url] = state
            _memo.move_to_end(url)
            while len(_memo) > _MEMO_SIZE:
                _memo.popitem(last=False)
        return state

    def _catch_up(self, base: ChainState | None, head: Multihash) -> ChainState:
        """Fold the blocks after ``base`` (a state derived from this chain earlier) up to ``head``; from the Seed
        when ``base`` is None or not an ancestor of ``head``."""
        pending: list[tuple[Multihash, MetadataBlock]] = []
        state = ChainState()
        for h, block in self.iter_blocks(head):
            if base is not None and h == base.head:
                state = base
                break
            pending.append((h, block))
        for h, block in reversed(pending):
            state = fold(state, block, h)
        return state

    def _write_summary(self, state: ChainState) -> None:
        if self.summary_key is None:
            return  # nobody could trust it: an authentic older summary (caught up incrementally) is worth more
        try:
            self.store.put(SUMMARY_KEY, encode_summary(state, self.summary_key))
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
        """Validate and append ``block`` (encoded in its manifest version); :class:`~odf_core.errors.RefConflict` if
        the head moved meanwhile."""
        return self._append(block, encode_block(block), state)

    def append_bytes(self, raw: bytes, *, state: ChainState | None = None) -> Multihash:
        """Validate and append a block received as bytes, stored and hashed exactly as received: never re-encoded,
        so another writer's layout, a newer manifest version and fields this version does not know all survive."""
        raw = bytes(raw)
        return self._append(decode_block(raw, "block to append"), raw, state)

    def _append(self, block: MetadataBlock, raw: bytes, state: ChainState | None) -> Multihash:
        state = state if state is not None else self.state()
        self._check_against_head(state)
        validate_append(state, block)
        block_hash = Multihash.sha3_256(raw)
        key = DatasetLayout.block_key(block_hash)
        published = self.store.put_if_absent(key, raw)
        crash_point("chain.after_block_write")
        self.store.compare_and_swap_ref(
            DatasetLayout.head_ref, str(state.head) if state.head else None, str(block_hash)
        )
        if not published and not self.store.exists(key):  # an orphan of an earlier attempt, collected meanwhile
            self.store.put_if_absent(key, raw)  # (odf_core.gc)
        crash_point("chain.after_head_update")
        self._write_summary(fold(state, block, block_hash))
        crash_point("chain.after_summary_write")
        return block_hash

    def _check_against_head(self, state: ChainState) -> None:
        """The state an append is validated against must agree with the head block it names (one block read).

        Catches a state that did not come from this chain (a stale or edited cache, a caller's bug) before a block
        built on it is linked in; the compare-and-swap then makes sure that head is still the head.
        """
        if state.head is None:
            return
        block = self.get_block(state.head)
        facts: dict[str, Any] = {"sequence_number": block.sequence_number, "system_time": block.system_time}
        ev = block.event
        if isinstance(ev, Seed):
            facts.update(dataset_id=ev.dataset_id, kind=ev.dataset_kind)
        elif isinstance(ev, (AddData, ExecuteTransform)):
            facts["last_offset"] = ev.new_data.offset_interval.end if ev.new_data is not None else ev.prev_offset
            facts["last_checkpoint"] = ev.new_checkpoint
            if ev.new_watermark is not None:
                facts["last_watermark"] = ev.new_watermark
            if isinstance(ev, AddData) and ev.new_source_state is not None:
                facts["source_state"] = ev.new_source_state
        elif isinstance(ev, SetDataSchema):
            from odf_core.metadata.data_schema_arrow import arrow_schema_bytes

            facts["schema"] = arrow_schema_bytes(ev)
        elif isinstance(ev, SetPollingSource):
            facts["polling_source"] = ev
        elif isinstance(ev, SetTransform):
            facts["transform"] = ev
        for name, expected in facts.items():
            actual = state.source_state(expected.source_name) if name == "source_state" else getattr(state, name)
            if actual != expected:
                raise IntegrityError(
                    f"{self.store.url}: refusing to append: the state to append on says {name} is {actual}, but "
                    f"the head block {state.head} (sequence number {block.sequence_number}) gives {expected}"
                )
        if isinstance(ev, AddPushSource) and state.push_source(ev.source_name) != ev:
            raise IntegrityError(f"{self.store.url}: refusing to append: the state to append on disagrees with "
                                 f"the head block {state.head} about push source {ev.source_name!r}")

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
        if block.manifest_version >= BLOCK_VERSION_ALIGNED:  # written as the current reference writes
            from odf_core.metadata.data_schema_arrow import with_data_schema

            block = block.replace(event=with_data_schema(event))
        return self.append(block, state=state)
