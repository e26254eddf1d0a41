"""The engine's part of a tiny warm step, this tree against another (issue #64); results go to the
``## bench_engine_step`` section of ``benchmarks/RESULTS.md``.

Run: ``.venv/bin/python benchmarks/bench_engine_step.py --before DIR [--runs N] [--label TEXT]`` where ``DIR`` holds
another tree (``git worktree add DIR COMMIT``).

``bench_step_cost`` measures a warm engine's clients; its engine runs this tree's code for both. Here each tree runs
the whole step itself, in one Python process with its Spark session (the in-process engine: what ``odf engine serve``
runs per request, without gRPC): the bench_step_cost graph (a push root, a projection, a GROUP BY), four warm-up
rounds, then timed rounds of ``odf pull`` of each derivative after a one-row ``odf ingest``. Runs alternate between
the trees, each in a fresh process and workspace; a run's figure is its median round, the result the median of runs.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks._common import (  # noqa: E402
    ensure_venv_path,
    fmt_seconds,
    machine_info,
    median,
    render_table,
    update_results_file,
)

SECTION = "bench_engine_step"
WARMUP, ROUNDS = 4, 9

# One run, in a child process whose sys.path starts with the tree measured (argv: tree, workspace directory).
RUN = r"""
import json, statistics, sys, time
from pathlib import Path
tree, tmp = sys.argv[1], Path(sys.argv[2])
sys.path.insert(0, tree)
from odf_core.cli import main
import odf_core
assert odf_core.__file__.startswith(tree), odf_core.__file__
graph, warmup, rounds = json.loads(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
ws = str(tmp / "ws")
def odf(*a):
    extra = ["--master", "local[2]"] if a[0] in ("ingest", "pull") else []
    assert main(["--workspace", ws, *a, *extra]) == 0, a
(tmp / "graph.yaml").write_text(graph)
odf("init"); odf("add", str(tmp / "graph.yaml"))
times = {"projection": [], "GROUP BY": []}
for i in range(warmup + rounds):
    row = tmp / f"row-{i}.csv"
    city = ("Oslo", "Lima", "Rome")[i % 3]
    row.write_text(f"event_time,city,amount\n2024-01-01T{i % 24:02d}:00:00Z,{city},{i + 1}\n")
    odf("ingest", "step.events", str(row))
    t0 = time.perf_counter(); odf("pull", "step.doubled"); t1 = time.perf_counter(); odf("pull", "step.by-city")
    t2 = time.perf_counter()
    if i >= warmup:
        times["projection"].append(t1 - t0); times["GROUP BY"].append(t2 - t1)
print("RESULT " + json.dumps({k: statistics.median(v) for k, v in times.items()}))
"""


def one_run(tree: Path, tmp: Path) -> dict[str, float]:
    from benchmarks.bench_step_cost import GRAPH

    env = {**os.environ, "ODF_PROGRESS": "never"}
    env.pop("PYTHONPATH", None)
    done = subprocess.run([sys.executable, "-c", RUN, str(tree), str(tmp), json.dumps(GRAPH), str(WARMUP),
                           str(ROUNDS)], capture_output=True, text=True, env=env, cwd=tmp, timeout=1200)
    line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
    if done.returncode != 0 or line is None:
        raise RuntimeError(f"run of {tree} failed: {done.stderr[-2000:]}")
    return json.loads(line.removeprefix("RESULT "))


def bench(before: Path, runs: int) -> str:
    trees = {"before": before, "after": REPO}
    results: dict[str, list[dict[str, float]]] = {k: [] for k in trees}
    loads = []
    with tempfile.TemporaryDirectory(prefix="odf-bench-engine-step-") as d:
        for r in range(runs):
            for key, tree in trees.items():
                tmp = Path(d) / f"{key}-{r}"
                tmp.mkdir()
                results[key].append(one_run(tree, tmp))
                loads.append(os.getloadavg()[0])
    rows = []
    for step in ("projection", "GROUP BY"):
        b = [x[step] for x in results["before"]]
        a = [x[step] for x in results["after"]]
        rows.append([f"`odf pull` {step}", f"{fmt_seconds(median(b))} ({fmt_seconds(min(b))}–{fmt_seconds(max(b))})",
                     f"{fmt_seconds(median(a))} ({fmt_seconds(min(a))}–{fmt_seconds(max(a))})",
                     f"{median(a) / median(b):.2f}x"])
    return "\n".join([
        f"Machine: {machine_info('local[2]')}; load average (1 min) after each run {min(loads):.1f}–{max(loads):.1f}. "
        f"Each tree in its own process with the in-process engine (local[2]): {WARMUP} warm-up rounds, then "
        f"{ROUNDS} rounds of a one-row ingest and a pull of each derivative; a run's figure is its median round; "
        f"{runs} runs per tree, alternating; median (min–max) of the runs. Before: {before}.",
        "",
        render_table(["step (client and engine in one process)", "before", "after", "after ÷ before"], rows),
    ])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", type=Path, required=True, metavar="DIR", help="the other tree (git worktree add)")
    ap.add_argument("--runs", type=int, default=3, help="runs per tree (default 3)")
    ap.add_argument("--label", default=dt.date.today().isoformat(), help="the RESULTS.md subsection to (re)write")
    args = ap.parse_args(argv)
    if not (args.before / "odf_core" / "cli.py").is_file():
        ap.error(f"--before {args.before}: no odf_core/cli.py in it")
    ensure_venv_path()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    text = bench(args.before.resolve(), args.runs)
    print(text)
    update_results_file(SECTION, {args.label: text})
    print(f"updated ## {SECTION} in benchmarks/RESULTS.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
