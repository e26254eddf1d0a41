"""Keyed pushes happen once: retries after other pushes, without staging, and after a kill at any commit step."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from odf_core.chain.integrity import verify_integrity
from odf_core.engine import LocalEngine
from odf_core.ingest import IngestError
from odf_core.ingest import transaction as tx
from odf_core.ingest.push_keys import default_not_before, find_push
from odf_core.ingest.source_state import KIND_PUSH_KEY
from odf_core.metadata import (
    AddData,
    AddPushSource,
    DatasetKind,
    DatasetSnapshot,
    MergeStrategyAppend,
    ReadStepNdJson,
    SourceState,
    Timestamp,
    decode_block,
    encode_block,
)
from odf_core.metadata.yaml_serde import dump_manifest
from odf_core.storage import DatasetLayout, crash_env, was_killed
from odf_core.workspace import Workspace

SOURCE = AddPushSource(source_name="app", read=ReadStepNdJson(schema=("city STRING", "rating INT")),
                       merge=MergeStrategyAppend())


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace.init(tmp_path / ".odf")


def _dataset(ws: Workspace, name: str = "ratings", created: Timestamp | None = None):
    return ws.create(DatasetSnapshot(name=name, kind=DatasetKind.ROOT, metadata=(SOURCE,)), system_time=created)


def _file(tmp_path: Path, name: str, *rows: tuple[str, int]) -> str:
    path = tmp_path / name
    path.write_text("".join(f'{{"city": "{c}", "rating": {r}}}\n' for c, r in rows))
    return str(path)


def _rows(handle) -> list[tuple[str, int]]:
    out = []
    for _, b in reversed(list(handle.chain.iter_blocks())):
        nd = getattr(b.event, "new_data", None)
        if nd:
            t = pq.read_table(handle.store.local_path(DatasetLayout.data_key(nd.physical_hash)))
            out += [(r["city"], r["rating"]) for r in t.to_pylist()]
    return out


def _keys(handle) -> list[str]:
    """The push keys of the chain, oldest first."""
    return [b.event.new_source_state.value for _, b in reversed(list(handle.chain.iter_blocks()))
            if isinstance(b.event, AddData) and b.event.new_source_state is not None]


# --- with Spark ----------------------------------------------------------------------------------------------------


@pytest.mark.spark
def test_a_retried_push_is_a_no_op_after_other_pushes_and_without_its_staging(ws, spark, tmp_path) -> None:
    engine = LocalEngine.with_session(spark)
    h = _dataset(ws)
    first_file = _file(tmp_path, "a.ndjson", ("Oslo", 4), ("Riga", 5))
    first = tx.push(ws, "ratings", first_file, engine=engine, txn_id="run-1/push")
    assert not first.already_ingested and first.offset_interval == (0, 1)
    tx.push(ws, "ratings", _file(tmp_path, "b.ndjson", ("Kyiv", 3)), engine=engine, txn_id="run-2/push")
    head = h.chain.head()

    again = tx.push(ws, "ratings", first_file, engine=engine, txn_id="run-1/push")
    assert again.already_ingested and again.block_hash == first.block_hash and again.head == str(head)
    assert (again.offset_interval, again.num_records) == ((0, 1), 2)

    shutil.rmtree(tx.staging_root(ws))  # another machine, or a cleaned cache: only the chain knows
    gone = tx.push(ws, "ratings", first_file, engine=engine, txn_id="run-1/push")
    assert gone.already_ingested and gone.block_hash == first.block_hash

    assert h.chain.head() == head
    assert _rows(h) == [("Oslo", 4), ("Riga", 5), ("Kyiv", 3)]
    assert _keys(h) == ["run-1/push", "run-2/push"]
    assert verify_integrity(h.store).ok


@pytest.mark.spark
def test_the_key_is_byte_valid_odf_source_state_of_the_push_source(ws, spark, tmp_path) -> None:
    h = _dataset(ws)
    r = tx.push(ws, "ratings", _file(tmp_path, "a.ndjson", ("Oslo", 4)), engine=LocalEngine.with_session(spark),
                txn_id="af-manual__2026-01-01-0123456789abcdef")
    raw = h.chain.get_block_bytes(h.chain.head())
    block = decode_block(raw)
    assert encode_block(block) == raw  # FlatBuffers round trip of the stored bytes
    assert block.event.new_source_state == SourceState(
        source_name="app", kind=KIND_PUSH_KEY, value="af-manual__2026-01-01-0123456789abcdef")
    assert "kind: odf-core/idempotency-key" in dump_manifest(block)
    assert r.block_hash == str(h.chain.head())
    assert h.state().source_state("app").value == "af-manual__2026-01-01-0123456789abcdef"


@pytest.mark.spark
def test_an_empty_keyed_push_records_its_key_once(ws, spark, tmp_path) -> None:
    engine = LocalEngine.with_session(spark)
    h = _dataset(ws)
    empty = _file(tmp_path, "empty.ndjson")
    first = tx.push(ws, "ratings", empty, engine=engine, txn_id="k-empty")
    assert first.block_hash and first.num_records == 0 and not first.already_ingested
    again = tx.push(ws, "ratings", empty, engine=engine, txn_id="k-empty")
    assert again.already_ingested and again.block_hash == first.block_hash
    assert _keys(h) == ["k-empty"] and _rows(h) == []


COMMIT = ("import sys; from odf_core.workspace import Workspace; from odf_core.ingest import transaction as tx; "
          "ws = Workspace.open(sys.argv[1]); tx.commit(ws, tx.IngestTransaction.load(sys.argv[2]))")


@pytest.mark.spark
@pytest.mark.parametrize("point, nth, committed", [
    ("commit.after_data_file", 1, False),  # files stored, no block
    ("chain.after_head_update", 1, False),  # only the SetDataSchema block committed
    ("chain.after_block_write", 2, False),  # the AddData block stored, not on the chain
    ("chain.after_head_update", 2, True),  # the AddData block committed, the attempt never learnt it
])
def test_a_push_killed_in_its_commit_then_retried_after_the_head_moved_is_ingested_exactly_once(
    ws, spark, tmp_path, point: str, nth: int, committed: bool
) -> None:
    engine = LocalEngine.with_session(spark)
    h = _dataset(ws)
    first_file = _file(tmp_path, "a.ndjson", ("Oslo", 4), ("Riga", 5))
    txn = tx.begin_push(ws, "ratings", "run-1")
    assert isinstance(txn, tx.IngestTransaction) and txn.push_key == "run-1"
    tx.stage_push_file(txn, first_file)
    tx.merge(ws, txn, engine, with_read=True)
    killed = subprocess.run([sys.executable, "-c", COMMIT, ws.store.root, txn.staging_dir],
                            env=crash_env(point, nth), capture_output=True, text=True, timeout=120)
    assert was_killed(killed.returncode), killed.stderr
    assert _keys(h) == (["run-1"] if committed else [])

    tx.push(ws, "ratings", _file(tmp_path, "b.ndjson", ("Kyiv", 3)), engine=engine, txn_id="run-2")  # head moves
    retried = tx.push(ws, "ratings", first_file, engine=engine, txn_id="run-1")
    assert retried.already_ingested is committed
    assert tx.push(ws, "ratings", first_file, engine=engine, txn_id="run-1").already_ingested  # and once more

    assert sorted(_rows(h)) == [("Kyiv", 3), ("Oslo", 4), ("Riga", 5)]
    assert sorted(_keys(h)) == ["run-1", "run-2"]
    assert verify_integrity(h.store).ok


# --- without Spark: the bound of the search, and bad keys ---------------------------------------------------------


def _key_block(handle, key: str, when: str):
    handle.chain.append_event(AddData(new_source_state=SourceState(source_name="app", kind=KIND_PUSH_KEY, value=key)),
                              Timestamp.parse(when))
    return handle.chain.head()


def test_the_search_stops_at_the_first_block_older_than_the_first_attempt(ws) -> None:
    h = _dataset(ws, created=Timestamp.parse("2025-12-01T00:00:00Z"))
    old = _key_block(h, "k-old", "2026-01-01T00:00:00Z")
    mid = _key_block(h, "k-mid", "2026-01-05T00:00:00Z")
    _key_block(h, "k-new", "2026-01-10T00:00:00Z")
    head = h.chain.head()
    assert find_push(h.chain, "app", "k-old", start=head, not_before=Timestamp.parse("2026-01-01T00:00:00Z")
                     ).block_hash == old
    assert find_push(h.chain, "app", "k-old", start=head, not_before=Timestamp.parse("2026-01-02T00:00:00Z")) is None
    assert find_push(h.chain, "other", "k-new", start=head) is None  # keys belong to their push source
    # the walk reads down to the first block older than its bound and no further: with the blocks below gone
    below = h.chain.get_block(old).prev_block_hash
    Path(h.store.local_path(DatasetLayout.block_key(below))).unlink()
    assert find_push(h.chain, "app", "k-mid", start=head, not_before=Timestamp.parse("2026-01-03T00:00:00Z")
                     ).block_hash == mid
    assert find_push(h.chain, "app", "k-x", start=head, not_before=Timestamp.parse("2026-01-03T00:00:00Z")) is None


def test_a_plan_bounds_the_search_to_the_blocks_appended_since(ws) -> None:
    h = _dataset(ws)
    plan = tx.begin_push(ws, "ratings", "k-plan")
    assert plan.base_head == str(h.chain.head())
    base = h.chain.head()
    _key_block(h, "k-other", Timestamp.now().isoformat())
    # everything at and below the plan's base was searched when it was made: losing those blocks changes nothing
    Path(h.store.local_path(DatasetLayout.block_key(base))).unlink()
    again = tx.begin_push(ws, "ratings", "k-plan")
    assert isinstance(again, tx.IngestTransaction) and again.base_head == str(h.chain.head())  # planned anew on top


def test_without_a_plan_a_key_is_recognised_for_a_week(ws) -> None:
    now = Timestamp.parse("2026-03-08T12:00:00Z")
    assert default_not_before(now) == Timestamp.parse("2026-03-01T12:00:00Z")


@pytest.mark.parametrize("key", ["", " padded", "two\nlines", "x" * 257, "bad\udcffbytes"])
def test_bad_keys_are_refused_in_one_line_before_anything_happens(ws, key: str) -> None:
    h = _dataset(ws)
    head = h.chain.head()
    with pytest.raises(IngestError) as info:
        tx.push(ws, "ratings", "/nonexistent", engine=LocalEngine(master="local[1]"), txn_id=key)
    assert str(info.value).startswith(f"idempotency key {key!r}: expected 1 to 256 printable characters")
    assert "\n" not in str(info.value) and h.chain.head() == head
    assert not list(Path(tx.staging_root(ws)).rglob("transaction.json"))


def test_keys_that_differ_only_in_unsafe_characters_get_their_own_staging(ws) -> None:
    _dataset(ws)
    a = tx.begin_push(ws, "ratings", "run/1")
    b = tx.begin_push(ws, "ratings", "run_1")
    assert a.staging_dir != b.staging_dir and (a.push_key, b.push_key) == ("run/1", "run_1")
    assert Path(a.staging_dir).parent == Path(b.staging_dir).parent  # both inside the dataset's staging
