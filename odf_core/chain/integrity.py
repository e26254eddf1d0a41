"""Integrity verification of a dataset: blocks, links, chain rules and every data/checkpoint file.

Walks the chain from the Seed forward so the report names the *first* bad block or file and what differs. The cached
state (``info/summary``) must agree with the state folded from the blocks at the head it names.
This is the cheap check; verification by reproducing transformations lives with the transform engine.
"""
from __future__ import annotations

from dataclasses import dataclass

from odf_core.chain.metadata_chain import MetadataChain
from odf_core.chain.rules import validate_append
from odf_core.chain.state import ChainState, first_difference, fold
from odf_core.chain.summary import SUMMARY_KEY
from odf_core.errors import OdfError
from odf_core.hashing.sources import open_parquet
from odf_core.identity import Multihash
from odf_core.metadata import AddData, DataSlice, ExecuteTransform, MetadataBlock
from odf_core.storage import DatasetLayout, ObjectStore


@dataclass
class IntegrityReport:
    ok: bool = True
    problem: str | None = None  # the first problem found
    block: Multihash | None = None  # the block it concerns
    sequence_number: int | None = None
    blocks_checked: int = 0
    files_checked: int = 0
    records_checked: int = 0

    def fail(self, problem: str, block: Multihash | None = None, seq: int | None = None) -> "IntegrityReport":
        self.ok, self.problem, self.block, self.sequence_number = False, problem, block, seq
        return self

    def summary(self) -> str:
        if self.ok:
            return (f"ok: {self.blocks_checked} blocks, {self.files_checked} files, "
                    f"{self.records_checked} records verified")
        where = f"block {self.sequence_number} ({self.block}): " if self.block is not None else ""
        return f"integrity check failed: {where}{self.problem}"


def verify_integrity(store: ObjectStore, *, check_data: bool = True) -> IntegrityReport:
    from odf_core.hashing import logical_hash_file, physical_hash

    report = IntegrityReport()
    chain = MetadataChain(store)
    stored = chain.read_summary()  # before the head: a summary written since is then at an ancestor of it
    try:
        head = chain.head()
    except OdfError as e:
        return report.fail(str(e))
    if head is None:
        return report.fail("the dataset has no head (refs/head is missing)")

    # Walk back checking hashes and links, then replay forward checking the rules.
    blocks: list[tuple[Multihash, MetadataBlock]] = []
    expected: Multihash | None = head
    while expected is not None:
        try:
            block = chain.get_block(expected)
        except OdfError as e:
            return report.fail(str(e), expected, None)
        blocks.append((expected, block))
        expected = block.prev_block_hash
    blocks.reverse()

    state = ChainState()
    for h, block in blocks:
        report.blocks_checked += 1
        try:
            validate_append(state, block)
        except OdfError as e:
            return report.fail(f"breaks a chain rule: {e}", h, block.sequence_number)
        ev = block.event
        if check_data and isinstance(ev, (AddData, ExecuteTransform)):
            try:
                problem = _check_files(store, ev, state, physical_hash, logical_hash_file, report)
            except OdfError as e:  # unreadable file, a symlink out of the store, ...
                problem = str(e)
            if problem:
                return report.fail(problem, h, block.sequence_number)
        state = fold(state, block, h)
        if stored is not None and stored.state is not None and stored.state.head == h:
            diff = first_difference(stored.state, state)
            if diff:
                return report.fail(f"{SUMMARY_KEY} disagrees with the chain at this block: {diff} (summary vs "
                                   f"blocks); it is only a cache: {_REBUILD}", h, block.sequence_number)
            stored = None
    if stored is not None:
        what = (f"cannot be used: {stored.problem}" if stored.state is None
                else f"is at block {stored.state.head}, which is not in this chain")
        return report.fail(f"{SUMMARY_KEY} {what}; it is only a cache: {_REBUILD}")
    return report


_REBUILD = "delete it, or let any command that reads the dataset through its workspace rebuild it"


def _check_files(store, ev, state: ChainState, physical_hash, logical_hash_file, report) -> str | None:
    if ev.new_checkpoint is not None:
        key = DatasetLayout.checkpoint_key(ev.new_checkpoint.physical_hash)
        problem = _check_physical(store, key, ev.new_checkpoint.physical_hash, ev.new_checkpoint.size, physical_hash)
        if problem:
            return problem
        report.files_checked += 1
    if ev.new_data is None:
        return None
    ds: DataSlice = ev.new_data
    key = DatasetLayout.data_key(ds.physical_hash)
    problem = _check_physical(store, key, ds.physical_hash, ds.size, physical_hash)
    if problem:
        return problem
    with store.readable(key) as src:
        actual = logical_hash_file(src)
    if actual != ds.logical_hash:
        return f"data file {key}: logical hash is {actual}, the block records {ds.logical_hash}"
    offset_col = state.vocab.offset_column
    with store.readable(key) as src, open_parquet(src) as pf:
        offsets = pf.read(columns=[offset_col]).column(offset_col).to_numpy()
    iv = ds.offset_interval
    n = iv.end - iv.start + 1
    if len(offsets) != n or (n and (offsets[0] != iv.start or offsets[-1] != iv.end)):
        first, last = (offsets[0], offsets[-1]) if len(offsets) else ("-", "-")
        got = f"{len(offsets)} rows, offsets {first}..{last}"
        return f"data file {key}: holds {got}, the block records [{iv.start}, {iv.end}]"
    if n > 1 and not (offsets[1:] - offsets[:-1] == 1).all():
        return f"data file {key}: offsets are not consecutive"
    report.files_checked += 1
    report.records_checked += n
    return None


def missing_file(key: str) -> str:
    """The problem of a file a block names that the store lacks."""
    return f"file {key} is missing"


def missing_file_error(dataset: str, key: str, block: Multihash, sequence_number: int) -> OdfError:
    """What ``odf verify --integrity`` says of a missing file, for the commands that find it while reading it
    (``odf tail``, ``odf sql``): one line, the same words."""
    return OdfError(f"{dataset}: {IntegrityReport().fail(missing_file(key), block, sequence_number).summary()}")


def _check_physical(store: ObjectStore, key: str, expected: Multihash, size: int, physical_hash) -> str | None:
    if not store.exists(key):
        return missing_file(key)
    actual_size = store.size(key)
    if actual_size != size:
        return f"file {key} is {actual_size} bytes, the block records {size}"
    with store.readable(key) as src:
        actual = physical_hash(src)
    if actual != expected:
        return f"file {key}: physical hash is {actual}, the block records {expected}"
    return None
