"""Ingest benchmarks on generated CSV files; results go to the ``## bench_ingest`` section of ``benchmarks/RESULTS.md``.

Run: ``.venv/bin/python benchmarks/bench_ingest.py [--quick] [bench_name ...]`` (``--quick`` shrinks every size
and does not touch RESULTS.md). One in-process SparkSession (``local[2]``, 8 GB driver) serves the baselines and
the ingests, so JVM start-up is only counted where it is the measurement (the ``spark-submit`` rows).

* ``bench_csv_10m``: ``odf_core.ingest.transaction.pull`` of a 10M-row CSV through a ``FilesGlob`` polling source
  (fetch/stage, Spark read+merge, one slice file, hashing, commit) with Append and Ledger, against the same Spark
  session doing ``read.csv(schema) -> write.parquet`` of the file; then further Ledger ingests of 1M-row files
  (10% of their keys already ingested) on top of the 10M keys, against the plain copy of those files.
* ``bench_snapshot_1m``: Snapshot merge of a 1M-row snapshot with 1% of rows changed and 0.1% added and removed,
  after the previous snapshot is ingested, against ``read.csv -> write.parquet`` of that snapshot.
* ``bench_fixed_10_rows``: a 10-row file end to end in-process (session warm), by step, and the merge step through
  ``spark-submit`` (what one Airflow task pays), next to an empty ``spark-submit`` job.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import spark_jobs.ingest.merge as plans
from spark_jobs.ingest.merge import append as append_merge
from spark_jobs.ingest.merge import ledger as ledger_merge
from spark_jobs.ingest.merge import snapshot as snapshot_merge
from benchmarks._common import (
    Result,
    Step,
    StepTimer,
    alternate,
    ensure_venv_path,
    fmt_seconds,
    machine_info,
    median,
    render_breakdown,
    render_results,
    render_table,
    seconds,
    spark_submit_floor,
    update_results_file,
)
from odf_core import commit as odf_commit
from odf_core import hashing
from odf_core.engine import LocalEngine, SubmitEngine
from odf_core.ingest import transaction as tx
from odf_core.metadata import (
    DatasetKind,
    DatasetSnapshot,
    FetchStepFilesGlob,
    MergeStrategyAppend,
    MergeStrategyLedger,
    MergeStrategySnapshot,
    ReadStepCsv,
    SetPollingSource,
)
from odf_core.workspace import Workspace

SECTION = "bench_ingest"
CSV_SCHEMA = ("id BIGINT", "event_time TIMESTAMP", "category STRING", "value DOUBLE")
CATEGORIES = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta")
T0_MS = 1_704_067_200_000  # 2024-01-01T00:00:00Z
DRIVER_MEMORY = "8g"


@dataclass(frozen=True)
class Sizes:
    big_rows: int = 10_000_000
    big_reps: int = 5  # baseline and Append
    ledger_reps: int = 5  # Ledger first ingest
    ledger_more_rows: int = 1_000_000
    ledger_more_reps: int = 3
    spark_plan_reps: int = 3
    snapshot_rows: int = 1_000_000
    snapshot_reps: int = 7
    warmup_rows: int = 300_000
    tiny_reps: int = 7
    submit_reps: int = 3


QUICK = Sizes(big_rows=200_000, big_reps=1, spark_plan_reps=1, ledger_reps=1, ledger_more_rows=20_000,
              ledger_more_reps=1,
              snapshot_rows=50_000, snapshot_reps=2, warmup_rows=10_000, tiny_reps=2, submit_reps=1)


# -- generated data ---------------------------------------------------------------------------------------------


def events(ids: np.ndarray, *, seed: int, start_ms: int) -> pa.Table:
    """Rows (id, event_time, category, value) with event times ascending every 10 ms from ``start_ms``.

    Event times are written as naive ``YYYY-MM-DD HH:MM:SS.fff`` (read as UTC by the session): casting a naive
    timestamp to text is ~25x faster in Arrow than formatting one with a time zone.
    """
    rng = np.random.default_rng(seed)
    n = len(ids)
    return pa.table({
        "id": pa.array(ids.astype(np.int64)),
        "event_time": pa.array(start_ms + np.arange(n, dtype=np.int64) * 10, pa.timestamp("ms")).cast(pa.string()),
        "category": pa.array(CATEGORIES).take(pa.array(rng.integers(0, len(CATEGORIES), n))),
        "value": pa.array(np.round(rng.random(n) * 1000, 2)),
    })


def write_csv(table: pa.Table, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pacsv.write_csv(table, str(path), write_options=pacsv.WriteOptions(quoting_style="none"))
    return path


def snapshot_series(n: int, count: int, seed: int = 11) -> list[pa.Table]:
    """``count`` snapshots of ``n`` keys; each next one changes the value (and event time) of 1% of the rows,
    removes 0.1% and adds 0.1% new keys. Rows are in key order."""
    rng = np.random.default_rng(seed)
    ids = np.arange(n, dtype=np.int64)
    et = T0_MS + ids * 10
    cat = rng.integers(0, len(CATEGORIES), n)
    val = np.round(rng.random(n) * 1000, 2)
    next_id, out = n, []
    for k in range(count):
        if k:
            changed = rng.choice(len(ids), size=len(ids) // 100, replace=False)
            val = val.copy()
            et = et.copy()
            val[changed] = np.round(val[changed] + 1.5, 2)
            et[changed] = T0_MS + 86_400_000 * k
            keep = np.ones(len(ids), bool)
            keep[rng.choice(len(ids), size=n // 1000, replace=False)] = False
            add = np.arange(next_id, next_id + n // 1000, dtype=np.int64)
            next_id += len(add)
            ids = np.concatenate([ids[keep], add])
            et = np.concatenate([et[keep], np.full(len(add), T0_MS + 86_400_000 * k)])
            cat = np.concatenate([cat[keep], rng.integers(0, len(CATEGORIES), len(add))])
            val = np.concatenate([val[keep], np.round(rng.random(len(add)) * 1000, 2)])
        out.append(pa.table({
            "id": pa.array(ids),
            "event_time": pa.array(et, pa.timestamp("ms")).cast(pa.string()),
            "category": pa.array(CATEGORIES).take(pa.array(cat)),
            "value": pa.array(val),
        }))
    return out


# -- the bench context --------------------------------------------------------------------------------------------

INGEST_STEPS = [
    Step("begin", "begin (plan, chain state)"),
    Step("fetch", "fetch (FilesGlob: link the file into staging)"),
    Step("prepare", "prepare"),
    Step("merge", "read + merge (one Spark job, in-process)"),
    Step("build_request", "build the merge request (chain state, checkpoint check, paths)", 1),
    Step("run_request", "engine request", 1),
    Step("strategy", "the merge strategy (Append / Ledger / Snapshot)", 2),
    Step("collect_arrow", "collect plan: Spark reads + parses, rows collected as Arrow", 3),
    Step("ledger_keep_mask", "which rows carry new keys (pyarrow)", 3),
    Step("snapshot_changes", "CDC against the state (pyarrow)", 3),
    Step("write_slice", "write slice (+ checkpoint) with offsets (pyarrow)", 3),
    Step("snapshot_spark_plan", "Spark plan of Snapshot: stage the input, CDC, write parts", 3),
    Step("duplicate_key", "Spark: primary-key check (hash aggregation over the keys)", 3),
    Step("spark_merge", "Spark: read, parse (merge) and write parts", 3),
    Step("parts_sorted_by", "order check of the parts (pyarrow)", 3),
    Step("combine_slice", "combine parts -> one slice file + checkpoint (pyarrow)", 3),
    Step("commit", "commit"),
    Step("describe_slice", "describe slice", 1),
    Step("logical_hash_file", "logical hash", 2),
    Step("commit_data", "commit_data (copy files, checkpoint hash, blocks)", 1),
    Step("describe_checkpoint", "checkpoint physical hash", 2),
]

_STRATEGIES = [append_merge, ledger_merge, snapshot_merge]
_TARGETS = {
    "begin": (tx, "begin"), "fetch": (tx, "fetch"), "prepare": (tx, "prepare"), "merge": (tx, "merge"),
    "commit": (tx, "commit"), "build_request": (tx, "_merge_phase"), "run_request": (tx, "run_request"),
    "strategy": [(m, "merge") for m in _STRATEGIES],
    "collect_arrow": [(m, "collect_input") for m in _STRATEGIES],
    "ledger_keep_mask": (ledger_merge, "ledger_keep_mask"), "snapshot_changes": (snapshot_merge, "snapshot_changes"),
    "write_slice": [(m, "write_slice") for m in _STRATEGIES],
    "snapshot_spark_plan": (snapshot_merge, "_spark_plan"),
    "duplicate_key": [(ledger_merge, "duplicate_key"), (snapshot_merge, "duplicate_key")],
    "write_parts": [(plans, "write_parts"), (ledger_merge, "write_parts")],
    "parts_sorted_by": (plans, "parts_sorted_by"),
    "combine_slice": [(m, "combine_slice") for m in _STRATEGIES],
    "describe_slice": (tx, "describe_slice"), "logical_hash_file": (hashing, "logical_hash_file"),
    "commit_data": (tx, "commit_data"), "describe_checkpoint": (odf_commit, "describe_checkpoint"),
}


@dataclass
class Run:
    seconds: float
    steps: dict[str, float]
    records: int


@dataclass
class Ctx:
    sizes: Sizes
    tmp: Path
    engine: LocalEngine
    ws: Workspace
    counter: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def spark(self):
        return self.engine.session()

    def name(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}-{self.counter}"

    def create(self, prefix: str, glob: str, merge) -> str:
        name = self.name(prefix)
        self.ws.create(DatasetSnapshot(name=name, kind=DatasetKind.ROOT, metadata=(SetPollingSource(
            fetch=FetchStepFilesGlob(path=glob), read=ReadStepCsv(header=True, schema=CSV_SCHEMA), merge=merge),)))
        return name

    def pull_once(self, name: str, expect_rows: int | None = None) -> Run:
        """One timed ingest transaction with its step breakdown; checks it ingested what it should."""
        timer, out = StepTimer(), []
        with timer.patch(_TARGETS):
            t = seconds(lambda: out.extend(tx.pull(self.ws, name, self.engine, once=True)))
        (res,) = out
        if res.up_to_date or (expect_rows is not None and res.num_records != expect_rows):
            raise RuntimeError(f"{name}: expected {expect_rows} new records, the ingest gave {res}")
        steps = dict(timer.seconds)
        steps["spark_merge"] = steps.get("write_parts", 0.0)
        return Run(t, steps, res.num_records)

    def spark_copy(self, csv: Path) -> float:
        """The baseline: plain Spark ``read.csv(schema) -> write.parquet`` of the same file in the same session."""
        out = self.tmp / "baseline-out"
        shutil.rmtree(out, ignore_errors=True)
        reader = self.spark.read.options(header="true", mode="FAILFAST").schema(", ".join(CSV_SCHEMA))
        t = seconds(lambda: reader.csv(str(csv)).write.parquet(str(out)))
        shutil.rmtree(out, ignore_errors=True)
        return t


def median_run(runs: list[Run]) -> Run:
    return sorted(runs, key=lambda r: r.seconds)[(len(runs) - 1) // 2]


def paired(times: list[float], baselines: list[float]) -> float:
    """Median of each run's ratio to the baseline run of the same round."""
    return median([t / b for t, b in zip(times, baselines)])


def breakdown(run: Run, label: str) -> str:
    return render_breakdown(INGEST_STEPS, run.steps, run.seconds, label)


# -- benchmarks ---------------------------------------------------------------------------------------------------


def warm_up(ctx: Ctx) -> None:
    """JIT and class loading of every code path, on a small file, before anything is timed."""
    csv = write_csv(events(np.random.default_rng(3).permutation(ctx.sizes.warmup_rows), seed=3, start_ms=T0_MS),
                    ctx.tmp / "warmup" / "warm.csv")
    ctx.spark_copy(csv)
    for merge in (MergeStrategyAppend(), MergeStrategyLedger(primary_key=("id",)),
                  MergeStrategySnapshot(primary_key=("id",))):
        name = ctx.create("warm", str(csv), merge)
        ctx.pull_once(name, ctx.sizes.warmup_rows)
        ctx.ws.delete(name)


def bench_csv_10m(ctx: Ctx) -> str:
    sz = ctx.sizes
    rng = np.random.default_rng(1)
    big = write_csv(events(rng.permutation(sz.big_rows), seed=1, start_ms=T0_MS), ctx.tmp / "ledger" / "part-0.csv")
    mb = big.stat().st_size / 1e6
    append_runs: list[Run] = []
    ledger_runs: list[Run] = []
    kept: list[str] = []

    def append() -> float:
        name = ctx.create("append", str(big), MergeStrategyAppend())
        run = ctx.pull_once(name, sz.big_rows)
        append_runs.append(run)
        ctx.ws.delete(name)
        return run.seconds

    def ledger() -> float:
        for name in kept:
            ctx.ws.delete(name)
        kept.clear()
        name = ctx.create("ledger", str(big.parent / "part-*.csv"), MergeStrategyLedger(primary_key=("id",)))
        run = ctx.pull_once(name, sz.big_rows)
        ledger_runs.append(run)
        kept.append(name)  # the last one goes on with the next files
        return run.seconds

    base_times, append_times, ledger_times = [], [], []
    for i in range(max(sz.big_reps, sz.ledger_reps)):
        if i < sz.big_reps:
            base_times.append(ctx.spark_copy(big))
            print(f"  baseline {base_times[-1]:.1f} s", flush=True)
            append_times.append(append())
            print(f"  append {append_times[-1]:.1f} s", flush=True)
        if i < sz.ledger_reps:
            ledger_times.append(ledger())
            print(f"  ledger {ledger_times[-1]:.1f} s", flush=True)
    base = median(base_times)
    rows_m = sz.big_rows / 1e6
    results_rows = [
        Result(f"Append, {rows_m:g}M-row CSV ({mb:.0f} MB), end to end", median(append_times), base, "s", 1.5,
               "read.csv -> write.parquet", lower_is_better=True),
        Result(f"Ledger(id), {rows_m:g}M-row CSV, first ingest (no history: dedup inside the file only)",
               median(ledger_times), base, "s", 1.5, "read.csv -> write.parquet", lower_is_better=True),
    ]

    # Ledger on top of the checkpointed keys: further files, 10% of whose keys were ingested before.
    ledger_name = kept[0]
    more_base, more_times, more_runs = [], [], []
    next_id = sz.big_rows
    for k in range(1, sz.ledger_more_reps + 1):
        n = sz.ledger_more_rows
        seen = rng.choice(next_id, size=n // 10, replace=False)
        ids = rng.permutation(np.concatenate([seen, np.arange(next_id, next_id + n - len(seen))]))
        next_id += n - len(seen)
        csv = write_csv(events(ids, seed=100 + k, start_ms=T0_MS + sz.big_rows * 10 + k * 86_400_000),
                        big.parent / f"part-{k}.csv")
        more_base.append(ctx.spark_copy(csv))
        run = ctx.pull_once(ledger_name, n - len(seen))
        more_runs.append(run)
        more_times.append(run.seconds)
        print(f"  ledger +{n} rows: {run.seconds:.1f} s (baseline {more_base[-1]:.1f} s)", flush=True)
    results_rows.append(Result(
        f"Ledger(id), {sz.ledger_more_rows / 1e6:g}M-row CSV on top of {rows_m:g}M+ checkpointed keys "
        "(10% of its keys seen before)", median(more_times), median(more_base), "s", None,
        "read.csv -> write.parquet of that file", lower_is_better=True))

    # The same file through the Spark part-file plans, as inputs above ODF_INGEST_DRIVER_MERGE_BYTES go.
    spark_base, spark_append, spark_ledger = [], [], []
    limit = plans.DRIVER_MERGE_BYTES
    plans.DRIVER_MERGE_BYTES = -1
    try:
        for _ in range(sz.spark_plan_reps):
            spark_base.append(ctx.spark_copy(big))
            spark_append.append(append())
            spark_ledger.append(ledger())
            print(f"  Spark plans: append {spark_append[-1]:.1f} s, ledger {spark_ledger[-1]:.1f} s "
                  f"(baseline {spark_base[-1]:.1f} s)", flush=True)
    finally:
        plans.DRIVER_MERGE_BYTES = limit
    append_runs, ledger_runs = append_runs[:len(append_times)], ledger_runs[:len(ledger_times)]
    for label, times in (("Append", spark_append), ("Ledger(id), first ingest", spark_ledger)):
        results_rows.append(Result(
            f"{label}, {rows_m:g}M-row CSV, Spark part-file plan (inputs above the driver limit)",
            median(times), median(spark_base), "s", None, "read.csv -> write.parquet", lower_is_better=True))

    parts = [
        f"Machine: {machine_info(f'local[2], driver {DRIVER_MEMORY}')}.",
        "The 10M-row file (444 MB) is below `ODF_INGEST_DRIVER_MERGE_BYTES` (512 MiB), so the first two rows take the "
        "collect plan (rows parsed by Spark, shipped to the driver as Arrow, written once); the two info rows force "
        f"the Spark part-file plans that larger inputs take ({sz.spark_plan_reps} runs each).",
        f"Medians of {sz.big_reps} runs (baseline, Append) and {sz.ledger_reps} runs (Ledger first ingest), "
        f"{sz.ledger_more_reps} further Ledger files; runs alternate with the baseline. Ratio = ingest / baseline "
        "(lower is better). The CSV's event times ascend (no re-sort needed for Append); ids are a random "
        "permutation (unique).",
        "",
        render_results(results_rows),
        "",
        f"Baseline runs: {', '.join(f'{t:.1f}' for t in base_times)} s; Append: "
        f"{', '.join(f'{t:.1f}' for t in append_times)} s; Ledger: {', '.join(f'{t:.1f}' for t in ledger_times)} s; "
        f"further Ledger files: {', '.join(f'{t:.1f}' for t in more_times)} s (baseline "
        f"{', '.join(f'{t:.1f}' for t in more_base)} s). Median of the per-round ratios (each run over the baseline "
        f"run just before it, less exposed to load changes): Append {paired(append_times, base_times):.2f}, Ledger "
        f"{paired(ledger_times, base_times):.2f}.",
        "",
        "Where the time goes (the median run; inclusive times, the job's steps are inside `read + merge`):",
        "",
        f"Append, {rows_m:g}M rows:",
        "",
        breakdown(median_run(append_runs), "pull (Append)"),
        "",
        f"Ledger, {rows_m:g}M rows, first ingest:",
        "",
        breakdown(median_run(ledger_runs), "pull (Ledger)"),
        "",
        f"Ledger, {sz.ledger_more_rows / 1e6:g}M rows on top of the checkpoint:",
        "",
        breakdown(median_run(more_runs), "pull (Ledger, checkpointed keys)"),
    ]
    for name in kept:
        ctx.ws.delete(name)
    shutil.rmtree(big.parent, ignore_errors=True)
    for r in results_rows:
        print(r.line(), flush=True)
    return "\n".join(parts)


def bench_snapshot_1m(ctx: Ctx) -> str:
    sz = ctx.sizes
    folder = ctx.tmp / "snapshots"
    tables = snapshot_series(sz.snapshot_rows, sz.snapshot_reps + 1)
    files = [write_csv(t, folder / f"snap-{k:03d}.csv") for k, t in enumerate(tables)]
    name = ctx.create("snapshot", str(folder / "snap-*.csv"), MergeStrategySnapshot(primary_key=("id",)))
    first = ctx.pull_once(name, sz.snapshot_rows)
    base_times, runs = [], []
    n = sz.snapshot_rows
    expected = n // 100 * 2 + 2 * (n // 1000)  # -C/+C per changed row, -R per removed, +A per added
    for csv in files[1:]:
        base_times.append(ctx.spark_copy(csv))
        runs.append(ctx.pull_once(name, None))
        print(f"  snapshot {runs[-1].seconds:.1f} s (baseline {base_times[-1]:.1f} s)", flush=True)
    records = [r.records for r in runs]
    if any(r < expected * 0.95 or r > expected for r in records):  # changed rows may coincide with removed ones
        raise RuntimeError(f"snapshot CDC gave {records} records per ingest, expected about {expected}")
    result = Result(f"Snapshot(id), {n / 1e6:g}M-row state, 1% changed + 0.1% added + 0.1% removed "
                    f"({expected:,} change records)", median(r.seconds for r in runs), median(base_times), "s",
                    2.0, "read.csv -> write.parquet of the snapshot", lower_is_better=True)
    ctx.ws.delete(name)
    shutil.rmtree(folder, ignore_errors=True)
    print(result.line(), flush=True)
    return "\n".join([
        f"Machine: {machine_info(f'local[2], driver {DRIVER_MEMORY}')}.",
        f"Median of {sz.snapshot_reps} consecutive snapshots of one dataset (each against the state checkpointed by "
        f"the previous one), alternating with the baseline; the first snapshot's ingest ({first.seconds:.1f} s, "
        "no state yet) is not counted. Ratio = ingest / baseline (lower is better).",
        "",
        render_results([result]),
        "",
        f"Snapshot runs: {', '.join(f'{r.seconds:.1f}' for r in runs)} s; baseline: "
        f"{', '.join(f'{t:.1f}' for t in base_times)} s; median of the per-round ratios "
        f"{paired([r.seconds for r in runs], base_times):.2f}.",
        "",
        "Where the time goes (the median run):",
        "",
        breakdown(median_run(runs), "pull (Snapshot)"),
    ])


def bench_fixed_10_rows(ctx: Ctx) -> str:
    sz = ctx.sizes
    csv = write_csv(events(np.arange(10), seed=5, start_ms=T0_MS), ctx.tmp / "tiny" / "tiny.csv")
    runs = []
    for _ in range(sz.tiny_reps):
        name = ctx.create("tiny", str(csv), MergeStrategyAppend())
        runs.append(ctx.pull_once(name, 10))
        ctx.ws.delete(name)
    in_process = median_run(runs)

    submit_engine = SubmitEngine(master="local[2]")  # what an Airflow task runs: the engine's default settings
    merge_times: list[float] = []
    rest_times: list[float] = []
    floor: list[float] = []

    def submitted() -> float:
        """begin/fetch/prepare/commit in this process, the merge step through spark-submit."""
        name = ctx.create("tiny-submit", str(csv), MergeStrategyAppend())
        holder: list[tx.IngestTransaction] = []
        rest = seconds(lambda: holder.append(tx.begin(ctx.ws, name, source=tx.POLLING)))
        txn = holder[0]
        rest += seconds(lambda: (tx.fetch(ctx.ws, txn), tx.prepare(ctx.ws, txn)))
        t = seconds(lambda: tx.merge(ctx.ws, txn, submit_engine, with_read=True))
        rest += seconds(lambda: tx.commit(ctx.ws, txn))
        if ctx.ws.get(name).state().last_offset != 9:
            raise RuntimeError(f"{name}: the spark-submit ingest did not commit 10 records")
        ctx.ws.delete(name)
        merge_times.append(t)
        rest_times.append(rest)
        return t

    def empty_job() -> float:
        floor.extend(spark_submit_floor(submit_engine, 1))
        return floor[-1]

    alternate([submitted, empty_job], sz.submit_reps)
    submit, empty = median(merge_times), median(floor)
    in_merge = in_process.steps["merge"]
    lines = [
        f"Machine: {machine_info(f'local[2], driver {DRIVER_MEMORY}')}.",
        f"In-process: `pull` of a 10-row CSV (Append) into a new dataset with the session already warm, the median "
        f"of {sz.tiny_reps} runs: **{fmt_seconds(in_process.seconds)}**.",
        "",
        breakdown(in_process, "pull, 10 rows, in-process"),
        "",
        f"Through `spark-submit` (`merge(..., SubmitEngine, with_read=True)`: one JVM launch, as one Airflow "
        f"task pays it; the engine's default settings), medians of {sz.submit_reps} runs alternating with an empty "
        "job:",
        "",
        render_table(["what", "time"], [
            ["merge step via spark-submit (launch + session + read/merge job + stop)", fmt_seconds(submit)],
            ["&nbsp;&nbsp;empty spark-submit job (launch + session + `range(1).count()` + stop)", fmt_seconds(empty)],
            ["&nbsp;&nbsp;rest: the job's own work in a fresh (cold) JVM", fmt_seconds(max(submit - empty, 0.0))],
            ["same merge step in the warm in-process session", fmt_seconds(in_merge)],
            ["begin + fetch + prepare + commit around it (Python, in this process)", fmt_seconds(median(rest_times))],
        ]),
        "",
        f"Spark-submit runs: {', '.join(f'{t:.1f}' for t in merge_times)} s; empty job: "
        f"{', '.join(f'{t:.1f}' for t in floor)} s.",
    ]
    print(f"tiny in-process {in_process.seconds:.3f} s; spark-submit merge {submit:.1f} s, empty job {empty:.1f} s",
          flush=True)
    return "\n".join(lines)


BENCHMARKS: dict[str, Callable[[Ctx], str]] = {
    "bench_csv_10m": bench_csv_10m,
    "bench_snapshot_1m": bench_snapshot_1m,
    "bench_fixed_10_rows": bench_fixed_10_rows,
}

TITLES = {
    "bench_csv_10m": "End-to-end CSV ingest vs plain Spark read.csv -> write.parquet",
    "bench_snapshot_1m": "Snapshot merge (CDC against the checkpointed state)",
    "bench_fixed_10_rows": "Fixed overhead of one ingest transaction (10-row file)",
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, one repetition; RESULTS.md is not touched")
    ap.add_argument("benchmarks", nargs="*", metavar="bench_name", help=f"any of {', '.join(BENCHMARKS)}")
    args = ap.parse_args(argv)
    names = args.benchmarks or list(BENCHMARKS)
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        ap.error(f"unknown benchmark(s) {unknown}; known: {list(BENCHMARKS)}")
    sizes = QUICK if args.quick else Sizes()
    ensure_venv_path()
    with tempfile.TemporaryDirectory(prefix="odf-bench-ingest-") as tmp:
        engine = LocalEngine(master="local[2]", conf={"spark.driver.memory": DRIVER_MEMORY})
        ctx = Ctx(sizes, Path(tmp), engine, Workspace.init(Path(tmp) / ".odf"))
        try:
            warm_up(ctx)
            sections = {}
            for name in names:
                print(f"{name} ...", flush=True)
                sections[f"{name}: {TITLES[name]}"] = BENCHMARKS[name](ctx)
        finally:
            ctx.spark.stop()
    if args.quick:
        print("\n\n".join(sections.values()))
    else:
        update_results_file(SECTION, sections)
        print(f"updated {SECTION} in benchmarks/RESULTS.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
