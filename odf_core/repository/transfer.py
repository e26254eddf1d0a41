"""The Simple Transfer Protocol between two dataset locations: copy what the destination lacks, then move its head.

1. Read both heads. Walk the source's blocks from its head back, following ``prevBlockHash``, until the destination's
   head (a fast-forward): the walk costs the *new* blocks only. A source block at the destination head's sequence
   number that is not that head means the chains diverged; a source head the destination already has below its head
   means the destination is ahead. Both are refused unless ``force`` (then the whole source chain is walked and the
   destination's head replaced).
2. While the walk goes on, a thread pool copies each new block's data file and checkpoint, then the block itself —
   skipping objects the destination already has (so a killed transfer resumes where it stopped: objects are
   published atomically and only after their check). Every object is checked against its hash on arrival (SHA3-256
   multihash: the block hash, ``DataSlice::physicalHash``, ``Checkpoint::physicalHash``); a corrupt or missing one
   fails the transfer before anything is committed.
3. Optionally the new blocks are validated against the chain rules, on top of the destination's state.
4. Last, the destination's ``refs/head`` moves by compare-and-swap from the head read in step 1 (a concurrent writer
   makes the transfer fail instead of losing its update).
"""
from __future__ import annotations

import hashlib
import os
import tempfile
import threading
import time
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import BinaryIO, Callable, Protocol

from odf_core.chain import ChainState, fold, validate_append
from odf_core.errors import ChainError, DecodeError, IntegrityError, InvalidIdentifier, OdfError, RefConflict
from odf_core.identity import Multihash
from odf_core.identity.multihash import SHA3_256
from odf_core.metadata import AddData, ExecuteTransform, MetadataBlock, decode_block
from odf_core.progress import Progress, progress
from odf_core.storage import DatasetLayout, ObjectNotFound, ObjectStore, crash_point

HEAD = DatasetLayout.head_ref
WORKERS = 16
IN_MEMORY_BYTES = 64 << 20  # objects up to this size are copied through memory, larger ones through a temp file
CHUNK = 4 << 20
PREFETCH_MIN = 32  # new blocks from which a listing plus parallel block reads beat walking one block at a time
TRANSFER_CRASH_POINTS = ("transfer.after_object",)


class Source(Protocol):
    """What a transfer reads: an :class:`ObjectStore` or an HTTP dataset."""

    @property
    def url(self) -> str: ...

    @property
    def is_local(self) -> bool: ...

    def get(self, key: str) -> bytes: ...

    def get_ref(self, name: str) -> str | None: ...

    def open_read(self, key: str) -> BinaryIO: ...


class Diverged(OdfError):
    """The destination's head is not an ancestor of the source's (or the destination is ahead)."""


@dataclass(frozen=True)
class SyncResult:
    """What a transfer did: heads before and after, new blocks, objects copied and already present, bytes, time."""

    src: str
    dst: str
    old_head: str | None
    new_head: str
    new_blocks: int
    copied: int
    present: int
    nbytes: int
    seconds: float

    @property
    def up_to_date(self) -> bool:
        return self.old_head == self.new_head


@dataclass(frozen=True)
class _Object:
    key: str
    hash: Multihash
    size: int | None


def _parse_head(text: str | None, url: str) -> Multihash | None:
    if text is None:
        return None
    try:
        return Multihash.parse(text)
    except InvalidIdentifier as e:
        raise IntegrityError(f"{url}: refs/head holds an invalid block hash: {e}") from None


def _objects_of(block: MetadataBlock) -> list[_Object]:
    """The data and checkpoint files a block references (Simple Transfer Protocol steps 3 and 4)."""
    ev = block.event
    out = []
    if isinstance(ev, (AddData, ExecuteTransform)):
        if ev.new_data is not None:
            h = ev.new_data.physical_hash
            out.append(_Object(DatasetLayout.data_key(h), h, ev.new_data.size))
        if ev.new_checkpoint is not None:
            h = ev.new_checkpoint.physical_hash
            out.append(_Object(DatasetLayout.checkpoint_key(h), h, ev.new_checkpoint.size))
    return out


class _Transfer:
    def __init__(self, src: Source, dst: ObjectStore, label: str, workers: int):
        self.src, self.dst, self.label, self.workers = src, dst, label, workers
        self.lock = threading.Lock()
        self.copied = self.present = self.nbytes = 0
        self.scheduled: set[str] = set()
        self.progress: Progress | None = None
        self.prefetched: dict[str, Future] = {}
        self.known: dict[str, bytes] = {}  # blocks already read (the source's head)

    def prefetch(self, pool: ThreadPoolExecutor, src_seq: int, dst_seq: int) -> None:
        """Fetch the source's new blocks in parallel ahead of the walk, when there are many and the source can list
        its keys: the walk then costs one round trip per block no more (it still checks every hash)."""
        if src_seq - dst_seq < PREFETCH_MIN or self.src.is_local or not isinstance(self.src, ObjectStore):
            return
        have = set(self.dst.list(DatasetLayout.BLOCKS)) if dst_seq >= 0 else set()
        for key in self.src.list(DatasetLayout.BLOCKS):  # keys relative to the dataset: blocks/<hash>
            if key not in have and key not in self.known:
                self.prefetched[key] = pool.submit(self.src.get, key)

    # -- reading blocks ---------------------------------------------------------------------------------------------

    def read_block(self, store: Source | ObjectStore, h: Multihash) -> tuple[bytes, MetadataBlock]:
        key = DatasetLayout.block_key(h)
        raw = None
        if store is self.src and not self.src.is_local and self.dst.is_local:
            try:  # copied by an earlier, interrupted transfer: read it here, checked like any other
                raw = self.dst.get(key)
            except ObjectNotFound:
                pass
        fetched = self.prefetched.pop(key, None) if store is self.src else None
        if raw is None and store is self.src:
            raw = self.known.get(key)
        if raw is None and fetched is not None:
            try:
                raw = fetched.result()
            except ObjectNotFound:
                raw = None
        if raw is None:
            try:
                raw = store.get(key)
            except ObjectNotFound:
                raise IntegrityError(f"{store.url}: block {h} is missing; nothing was committed") from None
        actual = Multihash.sha3_256(raw)
        if actual != h:
            raise IntegrityError(f"{store.url}: block {h} is corrupt: its bytes hash to {actual}; nothing was "
                                 "committed")
        try:
            return raw, decode_block(raw, f"block {h}")
        except DecodeError as e:
            raise IntegrityError(f"{store.url}: {e}; nothing was committed") from None

    # -- copying objects --------------------------------------------------------------------------------------------

    def _done(self, copied: bool, nbytes: int) -> None:
        with self.lock:
            if copied:
                self.copied += 1
                self.nbytes += nbytes
            else:
                self.present += 1
            if self.progress is not None:
                self.progress.advance(1, nbytes if copied else 0)
        if copied:
            crash_point("transfer.after_object")

    def copy_object(self, obj: _Object, referenced_by: Multihash) -> None:
        if self.dst.exists(obj.key):
            self._done(False, 0)
            return
        if obj.hash.code != SHA3_256:
            raise IntegrityError(f"{self.src.url}: {obj.key}: unsupported hash function 0x{obj.hash.code:x} "
                                 f"(block {referenced_by})")
        try:
            if obj.size is not None and obj.size <= IN_MEMORY_BYTES:
                data = self.src.get(obj.key)
                self._check(obj, hashlib.sha3_256(data).digest(), len(data), referenced_by)
                self.dst.put_if_absent(obj.key, data)
                n = len(data)
            else:
                n = self._copy_via_file(obj, referenced_by)
        except ObjectNotFound:
            raise IntegrityError(f"{self.src.url}: {obj.key} (referenced by block {referenced_by}) is missing; "
                                 "nothing was committed") from None
        self._done(True, n)

    def _copy_via_file(self, obj: _Object, referenced_by: Multihash) -> int:
        fd, tmp = tempfile.mkstemp(prefix="odf-transfer-")
        try:
            hasher, n = hashlib.sha3_256(), 0
            with os.fdopen(fd, "wb") as out, self.src.open_read(obj.key) as f:
                while chunk := f.read(CHUNK):
                    hasher.update(chunk)
                    out.write(chunk)
                    n += len(chunk)
            self._check(obj, hasher.digest(), n, referenced_by)
            self.dst.put_file_if_absent(obj.key, tmp, move=True)
            return n
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def _check(self, obj: _Object, digest: bytes, size: int, referenced_by: Multihash) -> None:
        actual = Multihash(SHA3_256, digest)
        if actual != obj.hash:
            raise IntegrityError(f"{self.src.url}: {obj.key} is corrupt: its bytes hash to {actual} (block "
                                 f"{referenced_by} records {obj.hash}); nothing was committed")
        if obj.size is not None and size != obj.size:
            raise IntegrityError(f"{self.src.url}: {obj.key} has {size} bytes, block {referenced_by} records "
                                 f"{obj.size}; nothing was committed")

    def copy_block(self, h: Multihash, raw: bytes, block: MetadataBlock) -> None:
        """A block's files first, then the block: a block present in the destination has its files there too."""
        for obj in _objects_of(block):
            with self.lock:
                if obj.key in self.scheduled:  # a checkpoint carried over from an older block
                    continue
                self.scheduled.add(obj.key)
            self.copy_object(obj, h)
        key = DatasetLayout.block_key(h)
        published = self.dst.put_if_absent(key, raw)
        self._done(published, len(raw))


def _ancestor_at(store: ObjectStore | Source, t: _Transfer, head: Multihash, seq: int) -> Multihash | None:
    """The block of ``store``'s chain at sequence number ``seq`` below ``head`` (walks ``head.seq - seq`` blocks)."""
    h: Multihash | None = head
    while h is not None:
        _, block = t.read_block(store, h)
        if block.sequence_number == seq:
            return h
        if block.sequence_number < seq:
            return None
        h = block.prev_block_hash
    return None


def sync(src: Source, dst: ObjectStore, *, force: bool = False, workers: int = WORKERS, label: str = "sync",
         base_state: Callable[[Multihash | None], ChainState] | None = None) -> SyncResult:
    """Make ``dst`` hold ``src``'s chain (see the module docstring). ``base_state(head)``, when given, returns the
    destination's state at ``head`` (None: empty) and the new blocks are validated on top of it."""
    t0 = time.perf_counter()
    src_head = _parse_head(src.get_ref(HEAD), src.url)
    if src_head is None:
        raise OdfError(f"no dataset at {src.url}: it has no refs/head")
    dst_head = _parse_head(dst.get_ref(HEAD), dst.url)
    t = _Transfer(src, dst, label, workers)
    if src_head == dst_head:
        return SyncResult(src.url, dst.url, str(dst_head), str(src_head), 0, 0, 0, 0, time.perf_counter() - t0)
    dst_seq = t.read_block(dst, dst_head)[1].sequence_number if dst_head is not None else -1

    new: list[tuple[Multihash, MetadataBlock]] = []
    replace = False  # True: the destination's head is not an ancestor (forced): walk to the Seed
    with progress(label, unit="objects") as p, ThreadPoolExecutor(workers, thread_name_prefix="odf-transfer") as pool:
        t.progress = p
        src_head_raw, src_head_block = t.read_block(src, src_head)
        t.known[DatasetLayout.block_key(src_head)] = src_head_raw
        t.prefetch(pool, src_head_block.sequence_number, dst_seq)
        futures: list[Future] = []
        total = 0
        try:
            h: Multihash | None = src_head
            expected_seq: int | None = None
            while h is not None and h != dst_head:
                raw, block = t.read_block(src, h)
                if expected_seq is not None and block.sequence_number != expected_seq:
                    raise IntegrityError(f"{src.url}: block {h} has sequence number {block.sequence_number}, "
                                         f"expected {expected_seq}; nothing was committed")
                if not replace and dst_head is not None and block.sequence_number <= dst_seq:
                    _refuse_or_replace(t, h, block, src_head, dst_head, dst_seq, force)
                    replace = True
                    if _ancestor_at(dst, t, dst_head, block.sequence_number) == h:
                        break  # the destination is ahead and already holds everything: only the head moves back
                new.append((h, block))
                total += 1 + len(_objects_of(block))
                p.set_total(total)
                futures.append(pool.submit(t.copy_block, h, raw, block))  # copy while walking
                if len(futures) > 4 * workers:  # surface a failure early
                    futures = _reap(futures)
                expected_seq = block.sequence_number - 1
                h = block.prev_block_hash
            if h is None and new and new[-1][1].sequence_number != 0:
                raise IntegrityError(f"{src.url}: the chain ends at block {new[-1][0]} without a Seed")
            if base_state is not None and new:
                _validate(src.url, base_state(None if replace else dst_head), new)
            done, _ = wait(futures, return_when=FIRST_EXCEPTION)
            for f in done:
                f.result()
        except BaseException:
            for f in [*futures, *t.prefetched.values()]:
                f.cancel()
            raise
        for f in t.prefetched.values():  # blocks the walk did not need (older orphans): not waited for
            f.cancel()
        try:
            dst.compare_and_swap_ref(HEAD, str(dst_head) if dst_head else None, str(src_head))
        except RefConflict as e:
            raise OdfError(f"{dst.url} changed while syncing (head now {e.actual or '<none>'}); nothing was "
                           "overwritten: retry") from None
    return SyncResult(src.url, dst.url, str(dst_head) if dst_head else None, str(src_head), len(new), t.copied,
                      t.present, t.nbytes, time.perf_counter() - t0)


def _reap(futures: list[Future]) -> list[Future]:
    pending = []
    for f in futures:
        if f.done():
            f.result()
        else:
            pending.append(f)
    return pending


def _refuse_or_replace(t: _Transfer, h: Multihash, block: MetadataBlock, src_head: Multihash, dst_head: Multihash,
                       dst_seq: int, force: bool) -> None:
    """The source's walk reached the destination's height without meeting its head: ahead or diverged."""
    if force:
        return
    if _ancestor_at(t.dst, t, dst_head, block.sequence_number) == h:
        ahead = dst_seq - block.sequence_number
        raise Diverged(f"{t.dst.url} is {ahead} block(s) ahead of {t.src.url} (head {dst_head}); refusing to move "
                       "its head back (--force does)")
    raise Diverged(f"{t.dst.url} has diverged from {t.src.url}: its head {dst_head} (block {dst_seq}) is not in the "
                   f"source's chain (head {src_head}); refusing to overwrite it (--force replaces it)")


def _validate(url: str, state: ChainState, new: list[tuple[Multihash, MetadataBlock]]) -> None:
    for h, block in reversed(new):
        try:
            validate_append(state, block)
        except ChainError as e:
            raise IntegrityError(f"{url}: block {h} breaks the chain rules: {e}; nothing was committed") from None
        state = fold(state, block, h)
