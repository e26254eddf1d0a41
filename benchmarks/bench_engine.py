"""The warm engine against a fresh Spark per command; results go to the ``## bench_engine`` section of
``benchmarks/RESULTS.md``.

Run: ``.venv/bin/python benchmarks/bench_engine.py [--quick]``.

``cli``: the same four ``odf`` commands as a user types them on tiny data — push a file into a root, pull a stateful
derivative (GROUP BY), push a second file, pull the derivative again — each a new ``odf`` process, once with Spark
started by every command (``--master local[2]``) and once with ``--engine`` pointing at an ``odf engine serve``
started before (its start-up is reported as a fixed cost, not counted per command). Fresh workspaces per round,
rounds alternate between the two ways, medians; both must leave the same records in the derivative.

``graph``: the example graph of ``dags_examples/`` through a real ``airflow standalone`` (``./dev demo``), every Spark
step a call to a warm engine vs one spark-submit per step: the wall time from the first DAG run to the last
derivative (Airflow's and the engine's start-ups are reported apart), and each task's overhead: its duration as
Airflow records it minus the time the engine spent on that task's requests (from the engine's request log).
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks._common import (  # noqa: E402
    Result,
    alternate,
    ensure_venv_path,
    fmt_seconds,
    machine_info,
    median,
    render_results,
    render_table,
    update_results_file,
)

SECTION = "bench_engine"
ROOT = """kind: DatasetSnapshot
version: 1
content:
  name: bench.events
  kind: Root
  metadata:
    - kind: AddPushSource
      sourceName: app
      read: {kind: Csv, header: true, schema: ["event_time TIMESTAMP", "city STRING", "amount BIGINT"]}
      merge: {kind: Append}
---
kind: DatasetSnapshot
version: 1
content:
  name: bench.by-city
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs: [{datasetRef: bench.events}]
      transform:
        kind: Sql
        engine: spark
        query: >
          SELECT city, count(*) AS n, sum(amount) AS total, max(event_time) AS event_time
          FROM `bench.events` GROUP BY city
"""
FILES = ["event_time,city,amount\n2024-01-01T00:00:00Z,Oslo,3\n2024-01-01T01:00:00Z,Rome,5\n",
         "event_time,city,amount\n2024-01-02T00:00:00Z,Oslo,7\n2024-01-02T01:00:00Z,Lima,1\n"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def odf(ws: Path, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "odf_core.cli", "--workspace", str(ws), *args],
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"odf {' '.join(args)} failed: {done.stderr[-2000:]}")
    return done.stdout


def commands(tmp: Path, spark_args: list[str]) -> tuple[float, list[float], str]:
    """A fresh workspace, then the four timed commands; returns their total, each one, and the derivative's rows."""
    ws = tmp / f"ws-{time.monotonic_ns()}"
    subprocess.run([sys.executable, "-m", "odf_core.cli", "--workspace", str(ws), "init"], check=True,
                   capture_output=True)
    (tmp / "graph.yaml").write_text(ROOT)
    odf(ws, "add", str(tmp / "graph.yaml"))
    times = []
    for i, text in enumerate(FILES):
        src = tmp / f"in-{i}.csv"
        src.write_text(text)
        for argv in (["ingest", "bench.events", str(src)], ["pull", "bench.by-city"]):
            t0 = time.perf_counter()
            odf(ws, *argv, *spark_args)
            times.append(time.perf_counter() - t0)
    rows = odf(ws, "sql", "SELECT city, n, total FROM `bench.by-city` ORDER BY city", *spark_args)
    return sum(times), times, rows


class Engine:
    def __init__(self, tmp: Path):
        self.port = free_port()
        self.log = tmp / "engine.log"
        t0 = time.perf_counter()
        self.proc = subprocess.Popen([sys.executable, "-m", "odf_core.cli", "engine", "serve", "--port",
                                      str(self.port), "--master", "local[2]"],
                                     stdout=subprocess.DEVNULL, stderr=self.log.open("w"))
        while "odf engine ready" not in self.log.read_text():
            if self.proc.poll() is not None:
                raise RuntimeError(self.log.read_text()[-2000:])
            time.sleep(0.1)
        self.start_s = time.perf_counter() - t0
        self.url = f"grpc://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(120)


def bench_cli(rounds: int) -> str:
    with tempfile.TemporaryDirectory(prefix="odf-bench-engine-") as d:
        tmp = Path(d)
        engine = Engine(tmp)
        fresh_each, warm_each, outputs = [], [], {}
        try:
            def fresh() -> float:
                total, each, outputs["fresh"] = commands(tmp, ["--master", "local[2]"])
                fresh_each.append(each)
                return total

            def warm() -> float:
                total, each, outputs["warm"] = commands(tmp, ["--engine", engine.url])
                warm_each.append(each)
                return total

            fresh_t, warm_t = alternate([fresh, warm], rounds, warmup=True)  # a long-lived engine is warm
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "odf_core.cli", "--help"], capture_output=True, check=True)
            cli_start = time.perf_counter() - t0
        finally:
            engine.stop()
    if outputs["fresh"] != outputs["warm"]:
        raise RuntimeError(f"the two ways disagree:\n{outputs['fresh']}\n{outputs['warm']}")
    result = Result("2 pushes + 2 stateful pulls, `odf` with `--engine` vs a fresh Spark per command",
                    median(warm_t), median(fresh_t), "s", 0.2, "fresh Spark per command", lower_is_better=True)
    print(result.line(), flush=True)
    labels = ["ingest 1", "pull 1", "ingest 2", "pull 2"]
    per = [[labels[i], fmt_seconds(median([e[i] for e in fresh_each])), fmt_seconds(median([e[i] for e in warm_each]))]
           for i in range(4)]
    return "\n".join([
        f"Machine: {machine_info('local[2]')}. Median of {rounds} rounds each, alternating.",
        "",
        render_results([result]),
        "",
        render_table(["command", "fresh Spark", "warm engine"], per),
        "",
        render_table(["fixed cost", "time"], [
            ["`odf engine serve` until ready (once; spark-submit, JVM, session)", fmt_seconds(engine.start_s)],
            ["`odf --help` (Python start + CLI import, paid by every command)", fmt_seconds(cli_start)]]),
        "",
        f"Both ways leave the same derivative rows:\n\n```\n{outputs['warm'].strip()}\n```",
    ])


#: the demo's auto engine gets the Spark settings its spark-submit jobs get (dags_examples/demo.py SPARK)
AUTO_ARGS = "--master local[2] --conf spark.sql.shuffle.partitions=4"


def demo(mode: str, out: Path) -> dict:
    """One ``./dev demo`` run; in ``engine`` mode with an auto engine of its own (a private engine directory, so
    every run measures the engine's start and no user engine is touched), stopped afterwards."""
    args = [sys.executable, "-m", "dags_examples.demo", "--timings", str(out)]
    env = dict(os.environ)
    if mode == "spark-submit":
        args.append("--spark-submit")
    else:
        env.update(ODF_ENGINE_DIR=tempfile.mkdtemp(prefix="odf-bench-"), ODF_ENGINE_AUTO_ARGS=AUTO_ARGS)
        env.pop("ODF_ENGINE_URL", None)
    try:
        done = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=2400, env=env)
    finally:
        if mode != "spark-submit":
            subprocess.run([sys.executable, "-m", "odf_core.cli", "engine", "stop"], env=env, capture_output=True,
                           timeout=120)
            shutil.rmtree(env["ODF_ENGINE_DIR"], ignore_errors=True)
    if done.returncode != 0:
        raise RuntimeError(f"demo ({mode}) failed: {done.stdout[-3000:]} {done.stderr[-2000:]}")
    return json.loads(out.read_text())


_ANSWERED = re.compile(r"^(\S+ \S+) INFO (.+?) of (\S+): answered \S+ in ([0-9.]+) s(?: \(\d+ Spark jobs\))?$")


def engine_requests(log: str) -> list[tuple[str, float, float]]:
    """(dataset, start, end) in epoch seconds of every request the engine answered, from its log."""
    out = []
    for line in log.splitlines():
        m = _ANSWERED.match(line.strip())
        if m:
            end = dt.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").astimezone().timestamp()
            out.append((m.group(3), end - float(m.group(4)), end))
    return out


def task_overheads(timings: dict) -> list[tuple[str, str, float, float, float]]:
    """(task, dag, duration, overhead, start) of every finished task: its duration minus its requests' engine
    time, and when it started (epoch seconds)."""
    requests = engine_requests(timings.get("engine_log", ""))
    out = []
    for t in timings["tasks"]:
        if t["state"] != "success" or t["duration"] is None:
            continue
        start = dt.datetime.fromisoformat(t["start"]).timestamp()
        end = dt.datetime.fromisoformat(t["end"]).timestamp()
        dataset_id = t["dag_id"].removeprefix("odf__")
        engine = sum(min(e, end) - max(s, start) for ds, s, e in requests
                     if re.sub(r"[.-]", "_", ds) == dataset_id and e > start and s < end)
        out.append((t["task_id"], t["dag_id"], t["duration"], t["duration"] - engine, start))
    return out


def bench_graph(rounds: int) -> str:
    with tempfile.TemporaryDirectory(prefix="odf-bench-graph-") as d:
        runs: dict[str, list[dict]] = {"engine": [], "spark-submit": []}

        def trial(mode: str):
            def go() -> float:
                runs[mode].append(demo(mode, Path(d) / f"{mode}-{len(runs[mode])}.json"))
                return runs[mode][-1]["graph_s"]
            return go

        engine_t, submit_t = alternate([trial("engine"), trial("spark-submit")], rounds)
    result = Result("example graph through Airflow, warm engine vs spark-submit per step (first DAG run to last "
                    "derivative)", median(engine_t), median(submit_t), "s", 0.4, "spark-submit per step",
                    lower_is_better=True)
    print(result.line(), flush=True)
    by_task: dict[str, list[float]] = {}
    firsts: list[tuple[str, float]] = []  # the first task of each run: Airflow's own warm-up lands on it
    for r in runs["engine"]:
        seen = task_overheads(r)
        first = min(range(len(seen)), key=lambda i: seen[i][4]) if seen else None
        for i, (task, _, _, overhead, _) in enumerate(seen):
            if i == first:
                firsts.append((task, overhead))
                continue
            by_task.setdefault(task, []).append(overhead)
    worst = max(v for vs in by_task.values() for v in vs)
    rows = [[task, fmt_seconds(median(vs)), fmt_seconds(max(vs)), str(len(vs))] for task, vs in sorted(by_task.items())]
    starts = median([r["engine_start_s"] for r in runs["engine"]])
    return "\n".join([
        f"Machine: {machine_info('local[2]')}. `./dev demo` (an `airflow standalone`, LocalExecutor, SQLite) "
        f"{rounds} times each way, alternating; medians.",
        "",
        render_results([result]),
        "",
        "Per-task overhead on the warm engine (Airflow's task duration minus the engine's time for the task's "
        f"requests); target <= 1 s for every task; worst seen {fmt_seconds(worst)} "
        f"({'yes' if worst <= 1.0 else '**NO**'}). Not in the table: the first task of each run "
        f"({', '.join(f'{t} {fmt_seconds(o)}' for t, o in firsts)}), which also carries the warm-up of Airflow's "
        "freshly started worker and API server: its task log shows the seconds pass before Airflow starts parsing the "
        "DAG file, i.e. before any code of this project runs.",
        "",
        render_table(["task", "median overhead", "max", "samples"], rows),
        "",
        f"Fixed costs, not in the graph time: the engine's start (spark-submit until ready, concurrent with "
        f"Airflow's): {fmt_seconds(starts)}.",
    ])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one round; RESULTS.md is not touched")
    ap.add_argument("benchmarks", nargs="*", metavar="cli|graph", help="which to run (default: both)")
    args = ap.parse_args(argv)
    if set(args.benchmarks) - {"cli", "graph"}:
        ap.error(f"unknown benchmark(s) {sorted(set(args.benchmarks) - {'cli', 'graph'})}; known: cli, graph")
    ensure_venv_path()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    names = args.benchmarks or ["cli", "graph"]
    sections = {}
    if "cli" in names:
        sections["cli: four commands, warm engine vs fresh Spark"] = bench_cli(1 if args.quick else 3)
    if "graph" in names:
        sections["graph: the example graph through Airflow"] = bench_graph(1 if args.quick else 2)
    if args.quick:
        print("\n\n".join(sections.values()))
    else:
        update_results_file(SECTION, sections)
        print(f"updated ## {SECTION} in benchmarks/RESULTS.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
