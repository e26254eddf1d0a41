"""The warm engine against a fresh Spark per command; results go to the ``## bench_engine`` section of
``benchmarks/RESULTS.md``.

Run: ``.venv/bin/python benchmarks/bench_engine.py [--quick]``.

``cli``: the same four ``odf`` commands as a user types them on tiny data — push a file into a root, pull a stateful
derivative (GROUP BY), push a second file, pull the derivative again — each a new ``odf`` process, once with Spark
started by every command (``--master local[2]``) and once with ``--engine`` pointing at an ``odf engine serve``
started before (its start-up is reported as a fixed cost, not counted per command). Fresh workspaces per round,
rounds alternate between the two ways, medians; both must leave the same records in the derivative.
"""
from __future__ import annotations

import argparse
import os
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one round; RESULTS.md is not touched")
    args = ap.parse_args(argv)
    ensure_venv_path()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    body = bench_cli(1 if args.quick else 3)
    if args.quick:
        print(body)
    else:
        update_results_file(SECTION, {"cli: four commands, warm engine vs fresh Spark": body})
        print(f"updated ## {SECTION} in benchmarks/RESULTS.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
