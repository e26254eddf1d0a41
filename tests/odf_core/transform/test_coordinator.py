"""Derivative transactions through the coordinator on real Spark: chains, retractions, exactly-once, verification."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from odf_core.chain.integrity import verify_integrity
from odf_core.commit import commit_data, describe_slice
from odf_core.engine import EngineError, LocalEngine, SubmitEngine
from odf_core.errors import OdfError, SchemaEvolutionError
from odf_core.metadata import (
    AddPushSource,
    DatasetKind,
    DatasetSnapshot,
    ExecuteTransform,
    MergeStrategyAppend,
    ReadStepNdJson,
    SetTransform,
    Timestamp,
    TransformInput,
    TransformSql,
)
from odf_core.storage import DatasetLayout, crash_env, was_killed
from odf_core.transform import InvalidQuery, TransformError, run, set_transform, upstream_order, verify
from odf_core.workspace import Workspace

pytestmark = pytest.mark.spark
TS = pa.timestamp("ms", tz="UTC")


@pytest.fixture
def engine(spark):
    return LocalEngine.with_session(spark)


@pytest.fixture
def ws(tmp_path):
    return Workspace.init(tmp_path / ".odf")


def make_root(ws, name="root"):
    return ws.create(DatasetSnapshot(name=name, kind=DatasetKind.ROOT, metadata=(
        AddPushSource(source_name="s", read=ReadStepNdJson(), merge=MergeStrategyAppend()),)))


def add_rows(h, tmp_path, rows, ops=None, day=1):
    """Append records (k, v, event minute) straight through the commit path, like an ingest would."""
    st = h.state()
    n = len(rows)
    start = st.next_offset
    t = pa.table({
        "offset": pa.array(range(start, start + n), pa.int64()),
        "op": pa.array(ops or [0] * n, pa.int32()),
        "system_time": pa.array([1_704_067_200_000 + day] * n, TS),
        "event_time": pa.array([1_704_067_200_000 + m * 60_000 for _, _, m in rows], TS),
        "k": pa.array([k for k, _, _ in rows], pa.string()),
        "v": pa.array([v for _, v, _ in rows], pa.int64()),
    })
    path = str(tmp_path / f"{h.name}-{start}.parquet")
    pq.write_table(t, path)
    wm = Timestamp.from_millis(1_704_067_200_000 + max(m for _, _, m in rows) * 60_000)
    commit_data(h.chain, base_head=h.chain.head(), slice_file=describe_slice(path, "offset", start),
                checkpoint_path=None, system_time=Timestamp.parse(f"2024-02-{day:02d}T00:00:00Z"), new_watermark=wm)


def derivative(ws, name, query, *inputs):
    return ws.create(DatasetSnapshot(name=name, kind=DatasetKind.DERIVATIVE, metadata=(SetTransform(
        inputs=tuple(TransformInput(dataset_ref=i) for i in inputs),
        transform=TransformSql(engine="spark", query=query)),)))


def reduced(h):
    """Current rows of a changelog dataset as a sorted list of tuples of data columns."""
    live: list[tuple] = []
    for _, b in reversed(list(h.chain.iter_blocks())):
        nd = getattr(b.event, "new_data", None)
        if not nd:
            continue
        t = pq.read_table(h.store.local_path(DatasetLayout.data_key(nd.physical_hash)))
        data_cols = [c for c in t.column_names if c not in ("offset", "op", "system_time", "event_time")]
        for r in t.to_pylist():
            row = tuple(r[c] for c in data_cols)
            if r["op"] in (0, 3):
                live.append(row)
            else:
                live.remove(row)
    return sorted(live, key=repr)


def test_chain_root_derivative_derivative_with_retractions(ws, engine, tmp_path):
    root = make_root(ws)
    add_rows(root, tmp_path, [("a", 1, 0), ("b", 2, 1), ("a", 3, 2)], day=1)
    derivative(ws, "sums", "select max(event_time) as event_time, k, sum(v) as total from root group by k", "root")
    derivative(ws, "big", "select event_time, k, total from sums where total > 2", "sums")
    assert upstream_order(ws, ["big"]) == ["root", "sums", "big"]
    for name in ("sums", "big"):
        assert run(ws, name, engine=engine).block_hash
    assert reduced(ws.get("sums")) == [("a", 4), ("b", 2)]
    assert reduced(ws.get("big")) == [("a", 4)]
    # a retraction of ("a", 3) and new rows flow through both levels
    add_rows(root, tmp_path, [("a", 3, 2), ("b", 5, 3)], ops=[1, 0], day=2)
    for name in ("sums", "big"):
        assert run(ws, name, engine=engine).block_hash
        assert run(ws, name, engine=engine) is None  # nothing new
    assert reduced(ws.get("sums")) == [("a", 1), ("b", 7)]
    assert reduced(ws.get("big")) == [("b", 7)]
    for name in ("sums", "big"):
        assert verify(ws, name, engine=engine).ok
        assert verify_integrity(ws.get(name).store).ok


def test_input_without_data_waits(ws, engine):
    make_root(ws)
    derivative(ws, "d", "select event_time, k from root", "root")
    assert run(ws, "d", engine=engine) is None
    assert ws.get("d").state().block_count == 2


def test_invalid_queries_leave_the_dataset_untouched(ws, engine, tmp_path):
    root = make_root(ws)
    add_rows(root, tmp_path, [("a", 1, 0)])
    cases = {
        "selec event_time from root": "syntax",
        "select event_time from nowhere": "nowhere",
        "select * from root": "offset",
        "select k from root": "event_time",
        "select event_time, rand() as r from root": "rand",
    }
    for i, (query, fragment) in enumerate(cases.items()):
        h = derivative(ws, f"bad{i}", query, "root")
        head = h.chain.head()
        with pytest.raises(InvalidQuery) as ei:
            run(ws, f"bad{i}", engine=engine)
        assert fragment.lower() in str(ei.value).lower(), str(ei.value)
        assert h.chain.head() == head


def test_missing_input_and_flink_tables(ws, engine, tmp_path):
    root = make_root(ws)
    add_rows(root, tmp_path, [("a", 1, 0)])
    derivative(ws, "d", "select event_time, k from root", "root")
    ws.delete("root", force=True)
    with pytest.raises(TransformError, match="does not exist"):
        run(ws, "d", engine=engine)
    root = make_root(ws, "root2")
    ws.create(DatasetSnapshot(name="t", kind=DatasetKind.DERIVATIVE, metadata=(SetTransform(
        inputs=(TransformInput(dataset_ref="root2"),),
        transform=TransformSql(engine="spark", query="select 1", temporal_tables=())),)))
    from odf_core.metadata import TemporalTable

    ws.create(DatasetSnapshot(name="t2", kind=DatasetKind.DERIVATIVE, metadata=(SetTransform(
        inputs=(TransformInput(dataset_ref="root2"),),
        transform=TransformSql(engine="spark", query="select 1",
                               temporal_tables=(TemporalTable(name="root2", primary_key=("k",)),))),)))
    with pytest.raises(InvalidQuery, match="Flink"):
        run(ws, "t2", engine=engine)


def test_query_evolution(ws, engine, tmp_path):
    root = make_root(ws)
    add_rows(root, tmp_path, [("a", 1, 0), ("b", 2, 1)])
    derivative(ws, "d", "select event_time, k from root", "root")
    run(ws, "d", engine=engine)
    ok = SetTransform(inputs=(TransformInput(dataset_ref="root"),),
                      transform=TransformSql(engine="spark", query="select event_time, k, v * 10 as v10 from root"))
    set_transform(ws, "d", ok, engine=engine)
    add_rows(root, tmp_path, [("c", 3, 2)], day=2)
    run(ws, "d", engine=engine)
    assert ("c", 30) in reduced(ws.get("d"))
    head = ws.get("d").chain.head()
    for query, err in [("select event_time, v from root", SchemaEvolutionError),
                       ("select event_time, k, nope from root", InvalidQuery)]:
        with pytest.raises(err):
            set_transform(ws, "d", SetTransform(inputs=(TransformInput(dataset_ref="root"),),
                                                transform=TransformSql(engine="spark", query=query)), engine=engine)
    assert ws.get("d").chain.head() == head


def test_engine_version_recorded_and_enforced(ws, engine, tmp_path):
    from odf_core.transform import engine_version

    root = make_root(ws)
    add_rows(root, tmp_path, [("a", 1, 0)])
    h = derivative(ws, "d", "select event_time, k from root", "root")
    assert h.state().transform.transform.version == engine_version()
    ws.create(DatasetSnapshot(name="old", kind=DatasetKind.DERIVATIVE, metadata=(SetTransform(
        inputs=(TransformInput(dataset_ref="root"),),
        transform=TransformSql(engine="spark", version="spark-3.0.0+jobs-0000",
                               query="select event_time from root")),)))
    with pytest.raises(TransformError, match=f"run: odf --workspace {ws.url} set-transform --upgrade-engine old$"):
        run(ws, "old", engine=engine)


def test_reproduction_catches_tampering_that_integrity_misses(ws, engine, tmp_path):
    root = make_root(ws)
    add_rows(root, tmp_path, [("a", 1, 0), ("b", 2, 1)])
    d = derivative(ws, "d", "select event_time, k, v from root", "root")
    run(ws, "d", engine=engine)
    # Rewrite the output with other values and rebuild the chain so every hash (physical, logical, block) matches.
    blocks = [b for _, b in d.chain.iter_blocks()][::-1]
    et = blocks[-1].event
    t = pq.read_table(d.store.local_path(DatasetLayout.data_key(et.new_data.physical_hash)))
    forged = t.set_column(t.column_names.index("v"), "v", pa.array([100, 200], pa.int64()))
    path = str(tmp_path / "forged.parquet")
    pq.write_table(forged, path)
    sf = describe_slice(path, "offset", 0)
    d.store.put_file_if_absent(DatasetLayout.data_key(sf.data_slice.physical_hash), path)
    from odf_core.metadata import MetadataBlock, encode_block
    from odf_core.identity import Multihash

    forged_block = MetadataBlock(system_time=blocks[-1].system_time, prev_block_hash=blocks[-1].prev_block_hash,
                                 sequence_number=blocks[-1].sequence_number,
                                 event=et.replace(new_data=sf.data_slice))
    raw = encode_block(forged_block)
    mh = Multihash.sha3_256(raw)
    d.store.put_if_absent(DatasetLayout.block_key(mh), raw)
    d.store.compare_and_swap_ref(DatasetLayout.head_ref, str(d.chain.head()), str(mh))
    d.store.delete("info/summary")  # a careful forger drops the cache of the old head (integrity would flag it)
    assert verify_integrity(d.store).ok  # the cheap check cannot see it
    rep = verify(ws, "d", engine=engine)
    assert not rep.ok and rep.block == str(mh) and "logical hash" in rep.problem


def test_crash_after_engine_before_commit_then_retry_exactly_once(ws, engine, tmp_path):
    root = make_root(ws)
    add_rows(root, tmp_path, [("a", 1, 0), ("b", 2, 1)])
    d = derivative(ws, "d", "select max(event_time) as event_time, count(*) as n from root", "root")
    code = ("import sys; from odf_core.workspace import Workspace; from odf_core.engine import SubmitEngine; "
            "from odf_core.transform import run; "
            "run(Workspace.open(sys.argv[1]), 'd', engine=SubmitEngine(master='local[1]'), txn_id='t1')")
    head = d.chain.head()
    written: list[set[str]] = []
    for point in ("commit.after_data_file", "chain.after_block_write"):
        r = subprocess.run([sys.executable, "-c", code, ws.store.root], env=crash_env(point),
                           capture_output=True, text=True, timeout=300)
        assert was_killed(r.returncode), r.stdout[-2000:] + r.stderr[-2000:]
        # between attempts: the head where it was, no transform committed, the dataset whole
        assert d.chain.head() == head, point
        assert not any(isinstance(b.event, ExecuteTransform) for _, b in d.chain.iter_blocks()), point
        assert verify_integrity(d.store).ok, point
        written.append(set(d.store.list("data/")))
    assert len(written[0]) == 1 and written[1] == written[0]  # the data file of the first attempt, never another
    res = run(ws, "d", engine=engine, txn_id="t1")
    assert res.block_hash
    assert run(ws, "d", engine=engine, txn_id="t1") == res  # a retried task returns the same result
    ets = [b for _, b in d.chain.iter_blocks() if isinstance(b.event, ExecuteTransform)]
    assert len(ets) == 1 and reduced(d) == [(2,)]
    assert {DatasetLayout.data_key(ets[0].event.new_data.physical_hash)} == written[0]


def test_spark_submit_missing_and_timeout_kills_the_whole_group(ws, tmp_path, monkeypatch):
    # the job's request file is in this test's own temp dir: the orphan check below looks for this test's
    # processes only (another xdist worker may be running spark-submit jobs of its own)
    jobs_tmp = tmp_path / "jobs"
    jobs_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(jobs_tmp))
    root = make_root(ws)
    add_rows(root, tmp_path, [("a", 1, 0)])
    d = derivative(ws, "d", "select event_time, k from root", "root")
    head = d.chain.head()
    with pytest.raises(EngineError, match="not found"):
        run(ws, "d", engine=SubmitEngine(spark_submit="no-such-spark-submit"))
    eng = SubmitEngine(master="local[1]", timeout_s=3)
    with pytest.raises(EngineError, match="timed out"):
        run(ws, "d", engine=eng)
    assert d.chain.head() == head
    leftover = subprocess.run(["pgrep", "-f", f"spark_jobs/submit.py {jobs_tmp}/"], capture_output=True, text=True)
    assert leftover.stdout.strip() == "", "orphaned Spark processes"


# -- staging never outlives its use (#12.6) ---------------------------------------------------------------------


def _staged(ws):
    root = ws.store.local_path("staging")
    return sorted(os.path.relpath(os.path.join(d, n), root) for d, _, fs in os.walk(root) for n in fs)


def test_a_cli_transform_leaves_nothing_in_staging(ws, engine, tmp_path):
    """Its output and checkpoint are in the dataset after the commit: a second copy in staging would grow forever."""
    r = make_root(ws)
    add_rows(r, tmp_path, [("a", 1, 0), ("b", 2, 1)])
    derivative(ws, "d", "select event_time, k, v from root where v > 1", "root")
    assert run(ws, "d", engine=engine).num_records == 1
    assert _staged(ws) == []
    add_rows(r, tmp_path, [("c", 3, 2)], day=2)
    derivative(ws, "agg", "select max(event_time) as event_time, k, sum(v) as total from root group by k", "root")
    assert run(ws, "agg", engine=engine).num_records == 3
    assert _staged(ws) == []


def test_an_airflow_transform_keeps_only_its_commit_record(ws, engine, tmp_path):
    r = make_root(ws)
    add_rows(r, tmp_path, [("a", 1, 0), ("b", 2, 1)])
    derivative(ws, "agg", "select max(event_time) as event_time, k, sum(v) as total from root group by k", "root")
    res = run(ws, "agg", engine=engine, txn_id="af-run-1")
    assert [f.rsplit("/", 1)[1] for f in _staged(ws)] == ["commit.json"]
    assert run(ws, "agg", engine=engine, txn_id="af-run-1") == res  # a retried task still gets its result


def test_a_failed_engine_run_leaves_no_output_and_a_failed_commit_keeps_the_answer(ws, engine, tmp_path):
    from odf_core.storage.faults import inject_enospc

    r = make_root(ws)
    add_rows(r, tmp_path, [("a", 1, 0), ("b", 0, 1)])
    derivative(ws, "d", "select event_time, k, 10 div v as q from root", "root")
    with pytest.raises(InvalidQuery, match="DIVIDE_BY_ZERO"):
        run(ws, "d", engine=engine, txn_id="af-run-2")
    assert [f for f in _staged(ws) if f.endswith(".parquet")] == []
    derivative(ws, "e", "select event_time, k, v from root", "root")
    head = ws.get("e").chain.head()
    with pytest.raises(OdfError, match="^no space left on device while writing .*/datasets/e/data/f"), \
            inject_enospc(1, only="/datasets/e/"):
        run(ws, "e", engine=engine, txn_id="af-run-3")
    assert ws.get("e").chain.head() == head
    kept = sorted(f.rsplit("/", 1)[1] for f in _staged(ws) if "transform-af-run-3" in f)
    assert kept == ["checkpoint.parquet", "output.parquet", "plan.json", "response.fb", "schema-0.parquet"]
    assert run(ws, "e", engine=engine, txn_id="af-run-3").num_records == 2


def test_the_transform_log_line_says_how_an_incremental_step_ran(caplog):
    """What a user reads in the task's log: the path, the state, the shuffle plan, the slice and the history read."""
    from odf_core.engine.protocol import OdfTransformResponse, OperatorPlan, TransformDiagnostics
    from odf_core.metadata import TransformResponseSuccess
    from odf_core.transform.diagnostics import log_diagnostics as _log_diagnostics

    diag = TransformDiagnostics(plan_class="stateful", reason="Join", path="incremental", output_rows=3, state_rows=0,
                                sizing="1 shuffle partition(s) for up to 20 row(s), adaptive execution off",
                                slice="netted", history="a 1 of 4 slice(s), b 0 of 4 slice(s)",
                                operators=(OperatorPlan(depth=0, operator="Join", path="incremental", detail="x"),))
    with caplog.at_level("INFO", logger="odf.transform"):
        _log_diagnostics("joined", OdfTransformResponse(response=TransformResponseSuccess(), diagnostics=diag))
    line = caplog.records[0].getMessage()
    assert line.startswith("joined: stateful plan (Join is not row-wise), incremental path; 3 output row(s), 0 state "
                           "row(s) (1 shuffle partition(s)"), line
    assert line.endswith(", slice netted, history read: a 1 of 4 slice(s), b 0 of 4 slice(s); "), line
    assert caplog.records[1].getMessage() == "joined:   Join: incremental (x)"
