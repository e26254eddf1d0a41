"""Ingest transactions end to end on real Spark, real files and a real HTTP server."""
from __future__ import annotations

import gzip
import subprocess
import sys
from datetime import datetime, timezone

import pyarrow.parquet as pq
import pytest

from odf_core.chain.integrity import verify_integrity
from odf_core.engine import LocalEngine
from odf_core.errors import OdfError
from odf_core.ingest import FetchError
from odf_core.ingest import transaction as tx
from odf_core.metadata import (
    AddData,
    AddPushSource,
    DatasetKind,
    DatasetSnapshot,
    FetchStepFilesGlob,
    FetchStepUrl,
    MergeStrategyAppend,
    MergeStrategyLedger,
    MergeStrategySnapshot,
    PrepStepDecompress,
    ReadStepCsv,
    ReadStepNdJson,
    SetPollingSource,
    SetVocab,
    TransformSql,
    decode_block,
)
from odf_core.metadata.fragments import CompressionFormat, EventTimeSourceFromPath, SourceOrdering
from odf_core.storage import DatasetLayout, crash_env, was_killed
from odf_core.workspace import Workspace
from tests.odf_core.ingest.http_server import Resource

pytestmark = pytest.mark.spark


@pytest.fixture
def engine(spark):
    return LocalEngine.with_session(spark)


@pytest.fixture
def ws(tmp_path):
    return Workspace.init(tmp_path / ".odf")


def _root(ws, name, *events):
    return ws.create(DatasetSnapshot(name=name, kind=DatasetKind.ROOT, metadata=events))


def _rows(h):
    """All records of a dataset in offset order, as dicts without system_time."""
    out = []
    for _, b in reversed(list(h.chain.iter_blocks())):
        nd = getattr(b.event, "new_data", None)
        if nd:
            t = pq.read_table(h.store.local_path(f"data/{nd.physical_hash}")).drop(["system_time"])
            out += t.to_pylist()
    return out


def _cities_source(url):
    return SetPollingSource(
        fetch=FetchStepUrl(url=url),
        read=ReadStepCsv(header=True, schema=("city STRING", "population BIGINT")),
        merge=MergeStrategySnapshot(primary_key=("city",)),
    )


def test_snapshot_cdc_over_http_rounds(ws, engine, http_server):
    http_server.resources["/c.csv"] = Resource(b"city,population\nA,10\nB,20\nC,30\n", etag='"v1"',
                                               last_modified="Mon, 01 Jan 2024 00:00:00 GMT")
    h = _root(ws, "cities", _cities_source(http_server.url("/c.csv")))
    r1 = tx.pull(ws, "cities", engine)
    assert [r.offset_interval for r in r1] == [(0, 2)]
    http_server.resources["/c.csv"] = Resource(b"city,population\nA,10\nC,35\nD,40\nE,50\n", etag='"v2"',
                                               last_modified="Tue, 02 Jan 2024 00:00:00 GMT")
    tx.pull(ws, "cities", engine)
    head = h.chain.head()
    assert tx.pull(ws, "cities", engine)[0].up_to_date  # 304: no block
    assert h.chain.head() == head
    assert http_server.requests[-1].headers.get("if-none-match") == '"v2"'
    changes = [(r["op"], r["city"], r["population"]) for r in _rows(h)][3:]
    assert changes == [(1, "B", 20), (2, "C", 30), (3, "C", 35), (0, "D", 40), (0, "E", 50)]
    st = h.state()
    assert st.source_state("default").value == '"v2"' and str(st.last_watermark) == "2024-01-02T00:00:00Z"
    assert verify_integrity(h.store).ok


def test_files_glob_ledger_from_path_one_file_per_transaction(ws, engine, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    days = {"2024-01-02": "id,v\n1,a\n2,b\n", "2024-01-01": "id,v\n1,a\n", "2024-01-03": "id,v\n2,b\n3,c\n"}
    for day, text in days.items():
        (src / f"data-{day}.csv.gz").write_bytes(gzip.compress(text.encode()))
    h = _root(ws, "ledger", SetPollingSource(
        fetch=FetchStepFilesGlob(path=str(src / "data-*.csv.gz"), order=SourceOrdering.BY_NAME,
                                 event_time=EventTimeSourceFromPath(pattern=r"data-(\d{4}-\d{2}-\d{2})\.csv\.gz")),
        prepare=(PrepStepDecompress(format=CompressionFormat.GZIP),),
        read=ReadStepCsv(header=True, schema=("id BIGINT", "v STRING")),
        merge=MergeStrategyLedger(primary_key=("id",)),
    ))
    results = tx.pull(ws, "ledger", engine)
    assert [r.num_records for r in results if not r.up_to_date] == [1, 1, 1]
    rows = _rows(h)
    assert [(r["offset"], r["id"], str(r["event_time"].date())) for r in rows] == [
        (0, 1, "2024-01-01"), (1, 2, "2024-01-02"), (2, 3, "2024-01-03")]
    assert h.state().source_state("default").value == "data-2024-01-03.csv.gz"
    assert tx.pull(ws, "ledger", engine)[0].up_to_date
    assert verify_integrity(h.store).ok


def test_push_ndjson_files_share_offsets(ws, engine, tmp_path):
    h = _root(ws, "pushed", AddPushSource(source_name="app", read=ReadStepNdJson(
        schema=("ts TIMESTAMP", "city STRING", "rating INT")), merge=MergeStrategyAppend()),
        SetVocab(event_time_column="ts"))
    pushed = []
    for i in range(3):
        f = tmp_path / f"p{i}.ndjson"
        # within a file the records arrive newest first: Append orders each slice by the event time column
        records = [(datetime(2024, 1, i + 1, j, tzinfo=timezone.utc), f"c{j}", j) for j in reversed(range(i + 1))]
        f.write_text("".join(f'{{"ts": "{ts:%Y-%m-%dT%H:%M:%SZ}", "city": "{c}", "rating": {r}}}\n'
                             for ts, c, r in records))
        tx.push(ws, "pushed", str(f), source="app", engine=engine)
        pushed += sorted(records)
    rows = _rows(h)
    # SetVocab maps the event time to "ts": the slices carry no "event_time" column of their own
    assert [list(r) for r in rows] == [["offset", "op", "ts", "city", "rating"]] * 6
    assert [(r["offset"], r["op"], r["ts"], r["city"], r["rating"]) for r in rows] == [
        (i, 0, ts, c, r) for i, (ts, c, r) in enumerate(pushed)]
    st = h.state()
    assert st.vocab.event_time_column == "ts" and str(st.last_watermark) == "2024-01-03T02:00:00Z"
    assert verify_integrity(h.store).ok


def test_steps_resume_and_commit_is_idempotent(ws, engine, http_server):
    http_server.resources["/c.csv"] = Resource(b"city,population\nA,1\n", etag='"e1"')
    h = _root(ws, "cities", _cities_source(http_server.url("/c.csv")))
    txn = tx.begin(ws, "cities", txn_id="run-1")
    assert tx.begin(ws, "cities", txn_id="run-1") == txn  # an Airflow retry gets the same plan
    tx.fetch(ws, txn)
    tx.fetch(ws, txn)  # retried fetch overwrites its own staging only
    tx.prepare(ws, txn)
    tx.read(ws, txn, engine)
    tx.merge(ws, txn, engine)
    tx.merge(ws, txn, engine)  # retried merge: same slice
    first = tx.commit(ws, txn)
    second = tx.commit(ws, tx.IngestTransaction.from_ref(ws, txn.to_ref()))
    assert first == second and first.block_hash
    assert sum(isinstance(b.event, AddData) for _, b in h.chain.iter_blocks()) == 1


def _event_kinds(h) -> list[str]:
    return [type(b.event).__name__ for _, b in reversed(list(h.chain.iter_blocks()))]


def _blocks_off_the_chain(h) -> list[str]:
    """Event kinds of blocks stored under blocks/ that the chain from the head does not reach."""
    on_chain = {DatasetLayout.block_key(bh) for bh, _ in h.chain.iter_blocks()}
    return [type(decode_block(h.store.get(k)).event).__name__ for k in h.store.list("blocks") if k not in on_chain]


def test_crash_inside_commit_then_retry_commits_once(ws, engine, http_server):
    http_server.resources["/c.csv"] = Resource(b"city,population\nA,1\nB,2\n", etag='"e1"')
    h = _root(ws, "cities", _cities_source(http_server.url("/c.csv")))
    txn = tx.begin(ws, "cities", txn_id="run-2")
    tx.fetch(ws, txn)
    tx.prepare(ws, txn)
    tx.merge(ws, txn, engine, with_read=True)
    before = _event_kinds(h)
    assert before == ["Seed", "SetPollingSource"]
    code = ("import sys; from odf_core.workspace import Workspace; from odf_core.ingest import transaction as tx; "
            "ws = Workspace.open(sys.argv[1]); tx.commit(ws, tx.IngestTransaction.load(sys.argv[2]))")

    def commit_in_child(point: str, nth: int) -> None:
        r = subprocess.run([sys.executable, "-c", code, ws.store.root, txn.staging_dir],
                           env=crash_env(point, nth), capture_output=True, text=True, timeout=120)
        assert was_killed(r.returncode), f"the commit did not die at {point}@{nth}: rc={r.returncode} {r.stderr}"
        report = verify_integrity(h.store)
        assert report.ok, report.summary()

    # 1st attempt: SetDataSchema is committed, the AddData block is written (2nd block write), the head never moves
    # to it: the dataset is valid at the schema block and the orphan block is not part of it.
    commit_in_child("chain.after_block_write", 2)
    assert _event_kinds(h) == [*before, "SetDataSchema"]
    assert _blocks_off_the_chain(h) == ["AddData"]
    # 2nd attempt: the schema is already there, so the AddData append is this attempt's first; it dies right after
    # moving the head, before the summary and the transaction's commit record are written.
    commit_in_child("chain.after_head_update", 1)
    assert _event_kinds(h) == [*before, "SetDataSchema", "AddData"]
    assert _blocks_off_the_chain(h) == []
    committed = h.chain.head()
    # The retry finds its block already committed: nothing is appended, and it reports that block.
    result = tx.commit(ws, txn)
    assert _event_kinds(h) == [*before, "SetDataSchema", "AddData"] and h.chain.head() == committed
    assert result.block_hash == str(committed) and result.offset_interval == (0, 1) and result.num_records == 2
    assert h.chain.state() == h.chain.rebuild_state()
    assert sorted((r["city"], r["population"]) for r in _rows(h)) == [("A", 1), ("B", 2)]


def test_bad_inputs_leave_the_dataset_unchanged(ws, engine, http_server):
    http_server.resources["/c.csv"] = Resource(b"city,population\nA,1\n", etag='"e1"')
    h = _root(ws, "cities", _cities_source(http_server.url("/c.csv")))
    tx.pull(ws, "cities", engine)
    head = h.chain.head()
    http_server.fail["/c.csv"] = 500
    with pytest.raises(FetchError, match="500"):
        tx.pull(ws, "cities", engine)
    del http_server.fail["/c.csv"]
    http_server.resources["/c.csv"] = Resource(b"city,population\nA,1\nB,not-a-number\n", etag='"e2"')
    with pytest.raises(tx.InvalidInput) as ei:
        tx.pull(ws, "cities", engine)
    assert "not-a-number" in str(ei.value) or "line 3" in str(ei.value)
    assert h.chain.head() == head
    assert verify_integrity(h.store).ok


def test_missing_primary_key_column(ws, engine, http_server):
    http_server.resources["/c.csv"] = Resource(b"name,population\nA,1\n", etag='"e1"')
    h = _root(ws, "cities", SetPollingSource(
        fetch=FetchStepUrl(url=http_server.url("/c.csv")), read=ReadStepCsv(header=True),
        merge=MergeStrategySnapshot(primary_key=("city",))))
    head = h.chain.head()
    with pytest.raises(tx.InvalidInput, match="city"):
        tx.pull(ws, "cities", engine)
    assert h.chain.head() == head


def test_schema_change_breaking_evolution_is_refused(ws, engine, http_server):
    http_server.resources["/c.csv"] = Resource(b"city,population\nA,1\n", etag='"e1"')
    h = _root(ws, "cities", SetPollingSource(
        fetch=FetchStepUrl(url=http_server.url("/c.csv")), read=ReadStepCsv(header=True),
        merge=MergeStrategyAppend()))
    tx.pull(ws, "cities", engine)
    head = h.chain.head()
    http_server.resources["/c.csv"] = Resource(b"town,population\nA,1\n", etag='"e2"')
    with pytest.raises(OdfError, match="city"):
        tx.pull(ws, "cities", engine)
    assert h.chain.head() == head
    # adding a column at the end is fine
    http_server.resources["/c.csv"] = Resource(b"city,population,area\nB,2,3\n", etag='"e3"')
    tx.pull(ws, "cities", engine)
    assert h.state().num_records == 2


def test_empty_file_adds_only_the_new_source_state(ws, engine, http_server):
    # (with Snapshot an empty snapshot would rightly retract every row; Append has nothing to add)
    http_server.resources["/c.csv"] = Resource(b"city,population\nA,1\n", etag='"e1"')
    h = _root(ws, "cities", SetPollingSource(
        fetch=FetchStepUrl(url=http_server.url("/c.csv")),
        read=ReadStepCsv(header=True, schema=("city STRING", "population BIGINT")), merge=MergeStrategyAppend()))
    tx.pull(ws, "cities", engine)
    http_server.resources["/c.csv"] = Resource(b"", etag='"e2"')
    tx.pull(ws, "cities", engine)
    last = h.chain.get_block(h.chain.head()).event
    assert isinstance(last, AddData) and last.new_data is None and last.new_source_state.value == '"e2"'
    head = h.chain.head()
    http_server.resources["/c.csv"] = Resource(b"", etag='"e2"', last_modified=None)
    http_server.ignore_conditional = True  # a server that always answers 200 with the same empty body
    tx.pull(ws, "cities", engine)
    assert h.chain.head() == head  # nothing changed: no block


def test_empty_file_without_read_schema_commits_only_the_source_state_in_separate_steps(ws, engine, http_server):
    # no read schema: an empty file has no columns at all, not even those the preprocess query selects; the read
    # step writes nothing and the merge step (run apart from it, as Airflow runs them) must not ask for its output
    http_server.resources["/c.csv"] = Resource(b"", etag='"e1"')
    h = _root(ws, "cities", SetPollingSource(
        fetch=FetchStepUrl(url=http_server.url("/c.csv")), read=ReadStepCsv(header=False),
        preprocess=TransformSql(engine="spark", query="select city, population from input"),
        merge=MergeStrategyAppend()))
    txn = tx.begin(ws, "cities", txn_id="run-1")
    tx.fetch(ws, txn)
    tx.prepare(ws, txn)
    assert tx.read(ws, txn, engine).num_records == 0
    assert tx.merge(ws, txn, engine).num_records == 0
    assert tx.commit(ws, txn).block_hash
    last = h.chain.get_block(h.chain.head()).event
    assert isinstance(last, AddData) and last.new_data is None and last.new_source_state.value == '"e1"'
    assert "SetDataSchema" not in _event_kinds(h)


def test_has_new_data_probe(ws, engine, http_server, tmp_path):
    from odf_core.ingest.probe import has_new_data

    http_server.resources["/c.csv"] = Resource(b"city,population\nA,1\n", etag='"e1"')
    _root(ws, "cities", _cities_source(http_server.url("/c.csv")))
    assert has_new_data(ws, "cities")
    tx.pull(ws, "cities", engine)
    assert not has_new_data(ws, "cities")  # HEAD with If-None-Match -> 304
    http_server.resources["/c.csv"] = Resource(b"city,population\nA,2\n", etag='"e2"')
    assert has_new_data(ws, "cities")
    src = tmp_path / "g"
    src.mkdir()
    (src / "a-1.csv").write_text("city,population\nA,1\n")
    _root(ws, "globbed", SetPollingSource(fetch=FetchStepFilesGlob(path=str(src / "a-*.csv")),
                                          read=ReadStepCsv(header=True), merge=MergeStrategyAppend()))
    assert has_new_data(ws, "globbed")
    tx.pull(ws, "globbed", engine)
    assert not has_new_data(ws, "globbed")
    (src / "a-2.csv").write_text("city,population\nB,1\n")
    assert has_new_data(ws, "globbed")


@pytest.mark.parametrize("body, message", [
    (b"<html><body>Service temporarily unavailable</body></html>\n",
     "line 1: the header has 1 field(s) but the read schema declares 2 column(s): '<html><body>Service"),
    (b"city,population,area\nA,1,2\n", "line 1: the header has 3 field(s) but the read schema declares 2"),
    (b"city,population\nA,1\nB\n", "line 3: expected 2 columns, found 1"),
    (b"city,population\nA,1\nB,2,3\n", "line 3: expected 2 columns, found 3"),
    (b'city,population\nA,1\n"B,2\nC,3\n', "line 3"),
    (b"city,population\nA,1\nZ\xfcrich,2\n", "line 3: bytes b'\\xfcric' are not valid utf-8 text"),
])
def test_malformed_snapshot_is_refused_and_nothing_is_retracted(ws, engine, http_server, body, message):
    """A 200 answer that is not the data (an HTML error page, a changed layout, broken bytes) must not become an
    empty snapshot that retracts every row: an error naming the URL and line, the dataset untouched."""
    http_server.resources["/c.csv"] = Resource(b"city,population\nA,1\nB,2\n", etag='"e1"')
    h = _root(ws, "cities", _cities_source(http_server.url("/c.csv")))
    tx.pull(ws, "cities", engine)
    head = h.chain.head()
    http_server.resources["/c.csv"] = Resource(body, etag='"e2"')
    with pytest.raises(tx.InvalidInput) as ei:
        tx.pull(ws, "cities", engine)
    assert http_server.url("/c.csv") in str(ei.value) and message in str(ei.value), str(ei.value)
    assert h.chain.head() == head and h.state().num_records == 2
    assert verify_integrity(h.store).ok


def test_an_empty_snapshot_with_its_header_is_legal(ws, engine, http_server):
    http_server.resources["/c.csv"] = Resource(b"city,population\nA,1\nB,2\n", etag='"e1"')
    h = _root(ws, "cities", _cities_source(http_server.url("/c.csv")))
    tx.pull(ws, "cities", engine)
    http_server.resources["/c.csv"] = Resource(b"city,population\n", etag='"e2"')
    tx.pull(ws, "cities", engine)
    assert [(r["op"], r["city"]) for r in _rows(h)[-2:]] == [(1, "A"), (1, "B")]  # everything retracted, on purpose


def test_a_tampered_checkpoint_is_never_built_on(ws, engine, http_server):
    """The Snapshot state is read from the checkpoint: an edited one would corrupt every slice after it."""
    http_server.resources["/c.csv"] = Resource(b"city,population\nA,1\nB,2\n", etag='"e1"')
    h = _root(ws, "cities", _cities_source(http_server.url("/c.csv")))
    tx.pull(ws, "cities", engine)
    head = h.chain.head()
    ckpt = h.store.local_path(f"checkpoints/{h.state().last_checkpoint.physical_hash}")
    with open(ckpt, "r+b") as f:
        f.seek(-20, 2)
        b = f.read(4)
        f.seek(-4, 1)
        f.write(bytes(x ^ 0xFF for x in b))  # flipped, so the bytes always change
    http_server.resources["/c.csv"] = Resource(b"city,population\nA,1\nB,3\n", etag='"e2"')
    with pytest.raises(OdfError, match=r"checkpoint .* is corrupted: its bytes hash to"):
        tx.pull(ws, "cities", engine)
    assert h.chain.head() == head


# -- staging never outlives its use (#12.6) ---------------------------------------------------------------------


def _staged_files(ws):
    import os

    root = ws.store.local_path("staging")
    return sorted(os.path.relpath(os.path.join(d, n), root) for d, _, fs in os.walk(root) for n in fs)


def test_a_cli_pull_leaves_nothing_in_staging_committed_or_failed(ws, engine, http_server):
    http_server.resources["/c.csv"] = Resource(b"city,population\nA,1\nB,2\n", etag='"e1"')
    _root(ws, "cities", _cities_source(http_server.url("/c.csv")))
    tx.pull(ws, "cities", engine)
    assert _staged_files(ws) == []  # no second copy of the slice, its checkpoint or the manifests
    http_server.resources["/c.csv"] = Resource(b"<html>oops</html>\n", etag='"e2"')
    with pytest.raises(tx.InvalidInput):
        tx.pull(ws, "cities", engine)
    assert _staged_files(ws) == []


def test_a_failed_merge_leaves_nothing_a_commit_could_take_for_its_output(ws, engine, tmp_path):
    """A retried Merge that fails must not leave the earlier try's merge.json for Commit to commit without a slice."""
    h = _root(ws, "events", AddPushSource(source_name="app", read=ReadStepNdJson(schema=("k STRING", "v BIGINT")),
                                          merge=MergeStrategyAppend()))
    head = h.chain.head()
    txn = tx.begin(ws, "events", txn_id="af-run-9")
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text('{"k": "a", "v": 1}\n')
    bad.write_text('{"k": "a", "v": "not a number"}\n')
    tx.stage_push_file(txn, str(good))
    tx.merge(ws, txn, engine, with_read=True)
    tx.stage_push_file(txn, str(bad))  # the input changed between two tries of the Merge task
    with pytest.raises(tx.InvalidInput):
        tx.merge(ws, txn, engine, with_read=True)
    with pytest.raises(OdfError, match="the merge step's output is missing: run merge again"):
        tx.commit(ws, txn)
    assert h.chain.head() == head


def test_a_full_disk_in_a_step_is_one_line_and_removes_the_steps_output(ws, engine, tmp_path):
    from odf_core.errors import FileSystemError
    from odf_core.storage.faults import inject_enospc

    h = _root(ws, "events", AddPushSource(source_name="app", read=ReadStepNdJson(schema=("k STRING", "v BIGINT")),
                                          merge=MergeStrategyAppend()))
    txn = tx.begin(ws, "events", txn_id="af-run-10")
    src = tmp_path / "in.json"
    src.write_text('{"k": "a", "v": 1}\n')
    tx.stage_push_file(txn, str(src))
    with pytest.raises(FileSystemError) as ei, inject_enospc(1, only="merge.json"):
        tx.merge(ws, txn, engine, with_read=True)
    assert str(ei.value) == f"no space left on device while merging into {txn.path('merge.json')}"
    assert sorted(f.rsplit("/", 1)[1] for f in _staged_files(ws)) == ["data", "prepare.json", "transaction.json"]
    tx.merge(ws, txn, engine, with_read=True)  # the disk is free again: the retry of the task goes through
    assert tx.commit(ws, txn).num_records == 1 and h.state().num_records == 1
