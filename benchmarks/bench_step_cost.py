"""What a tiny step costs on a warm engine, end to end and split into the engine's and the client's part (issue #64);
results go to the ``## bench_step_cost`` section of ``benchmarks/RESULTS.md``.

Run: ``.venv/bin/python benchmarks/bench_step_cost.py [--rounds N] [--label TEXT] [--quick]``.

One ``odf engine serve`` (local[2], on 127.0.0.1) is started first; its start-up is not counted. A fresh workspace
holds a push root and two derivatives of it: a projection (stateless) and a GROUP BY (stateful, incremental). After
``--warmup`` rounds (default 20: the issue's goals are for a warm engine in its steady state, and the JVM's
just-in-time compiler takes ~20 steps to settle; the engine's GROUP BY step went 2.05 → ~0.55 s over its first 30
steps), each round runs, each as a new ``odf`` process timed from start to exit:

* ``odf ingest`` of a one-row CSV file into the root,
* ``odf pull`` of the projection,
* ``odf pull`` of the GROUP BY,

and the fixed costs every command pays: ``python -c pass``, ``python -c "import odf_core.cli"``, ``odf --help``, and
the import of the modules an ``odf ingest`` loads. The engine's own time for a command is the sum of the times its log
gives for the requests it answered while the command ran ("answered ... in S s"), with the Spark jobs they ran when
the log names them; the client's share is the rest of the command's wall time (Python's start, imports, chain reads,
hashing and committing, gRPC).

The ``odf`` processes run with compiled bytecode cached (``PYTHONPYCACHEPREFIX`` in the run's temporary directory,
filled by the warm-up), as an installed package has it, even when the calling environment sets
``PYTHONDONTWRITEBYTECODE``; ``--no-bytecode`` measures them compiling every module on every start instead.
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
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
from benchmarks.bench_engine import Engine  # noqa: E402

SECTION = "bench_step_cost"
GRAPH = """kind: DatasetSnapshot
version: 1
content:
  name: step.events
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
  name: step.doubled
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs: [{datasetRef: step.events}]
      transform:
        kind: Sql
        engine: spark
        query: SELECT event_time, city, amount * 2 AS doubled FROM `step.events`
---
kind: DatasetSnapshot
version: 1
content:
  name: step.by-city
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs: [{datasetRef: step.events}]
      transform:
        kind: Sql
        engine: spark
        query: >
          SELECT city, count(*) AS n, sum(amount) AS total, max(event_time) AS event_time
          FROM `step.events` GROUP BY city
"""
CITIES = ("Oslo", "Rome", "Lima")
COMMANDS = ("ingest one row", "pull projection", "pull GROUP BY")
FIXED = ("python -c pass", 'python -c "import odf_core.cli"', "odf --help", "imports of `odf ingest`",
         "imports of `odf pull` (derivative)")
# what an `odf ingest` against a remote engine imports (cli.cmd_ingest and the engine client)
INGEST_IMPORTS = "import odf_core.cli, odf_core.ingest.transaction, odf_core.progress, odf_core.engine.remote, grpc"
# what an `odf pull` of a derivative against a remote engine imports (cli.cmd_pull, its transform and the client)
PULL_IMPORTS = ("import odf_core.cli, odf_core.transform, odf_core.repository.cli_support, odf_core.progress, "
                "odf_core.engine.remote, odf_core.engine.autostart, grpc")
_ANSWERED = re.compile(r" INFO .+: answered \S+ in ([0-9.]+) s(?: \((\d+) Spark jobs?\))?$")


@dataclass
class Samples:
    wall: dict[str, list[float]] = field(default_factory=dict)
    engine: dict[str, list[float]] = field(default_factory=dict)
    requests: dict[str, list[int]] = field(default_factory=dict)
    jobs: dict[str, list[int | None]] = field(default_factory=dict)

    def add(self, name: str, wall: float, engine: float | None = None, requests: int = 0,
            jobs: int | None = None) -> None:
        self.wall.setdefault(name, []).append(wall)
        if engine is not None:
            self.engine.setdefault(name, []).append(engine)
            self.requests.setdefault(name, []).append(requests)
            self.jobs.setdefault(name, []).append(jobs)


@dataclass
class EngineLog:
    """The engine's log, read on from where the last command's lines ended."""

    path: Path
    offset: int = 0

    def since_last(self) -> tuple[float, int, int | None]:
        """The engine's seconds for the requests answered since the last call, how many, and their Spark jobs (None
        when a line does not count them)."""
        text = self.path.read_text()
        new, self.offset = text[self.offset:], len(text)
        engine_s, requests, jobs = 0.0, 0, 0
        for line in new.splitlines():
            m = _ANSWERED.search(line.strip())
            if m:
                engine_s += float(m.group(1))
                requests += 1
                jobs = None if jobs is None or m.group(2) is None else jobs + int(m.group(2))
        return engine_s, requests, jobs


class Client:
    """Runs ``odf`` and plain Python as the user's shell would, each a new process, with the chosen bytecode mode;
    with ``tree`` the ``odf_core`` of that directory (another checkout) instead of this one's."""

    def __init__(self, tmp: Path, engine: Engine, log: EngineLog, bytecode: bool, tree: Path | None = None,
                 name: str = "ws"):
        self.ws = tmp / name
        self.cwd = tmp  # not the checkout: `python -m` puts the working directory first on sys.path
        self.engine = engine
        self.log = log
        self.env = dict(os.environ)
        self.env.pop("PYTHONDONTWRITEBYTECODE", None)
        if bytecode:
            self.env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
        else:
            self.env["PYTHONDONTWRITEBYTECODE"] = "1"
        if tree is not None:
            self.env["PYTHONPATH"] = os.pathsep.join([str(tree), *filter(None, [os.environ.get("PYTHONPATH")])])

    def run(self, argv: list[str]) -> tuple[float, str]:
        t0 = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, text=True, env=self.env, cwd=self.cwd, timeout=600)
        wall = time.perf_counter() - t0
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed: {done.stderr[-2000:]}")
        return wall, done.stdout

    def odf(self, *args: str) -> tuple[float, str]:
        return self.run([sys.executable, "-m", "odf_core.cli", "--workspace", str(self.ws), *args])

    def step(self, *args: str) -> tuple[float, float, int, int | None, str]:
        """One command against the engine: wall time, the engine's time for the requests it answered meanwhile,
        how many requests, their Spark jobs (None when the log does not count them), and the command's output."""
        wall, out = self.odf(*args, "--engine", self.engine.url)
        engine_s, requests, jobs = self.log.since_last()
        return wall, engine_s, requests, jobs, out


def one_row(tmp: Path, i: int) -> Path:
    day = dt.datetime(2024, 1, 1) + dt.timedelta(hours=i)
    path = tmp / f"row-{i}.csv"
    path.write_text(f"event_time,city,amount\n{day:%Y-%m-%dT%H:%M:%SZ},{CITIES[i % len(CITIES)]},{i + 1}\n")
    return path


def run_round(client: Client, tmp: Path, i: int, samples: Samples | None) -> None:
    steps = (["ingest", "step.events", str(one_row(tmp, i))], ["pull", "step.doubled"], ["pull", "step.by-city"])
    for name, argv in zip(COMMANDS, steps):
        wall, engine_s, requests, jobs, out = client.step(*argv)
        if "records" not in out:
            raise RuntimeError(f"odf {' '.join(argv)} committed nothing: {out}")
        if samples is not None:
            samples.add(name, wall, engine_s, requests, jobs)
    fixed = ([sys.executable, "-c", "pass"], [sys.executable, "-c", "import odf_core.cli"],
             [sys.executable, "-m", "odf_core.cli", "--help"], [sys.executable, "-c", INGEST_IMPORTS],
             [sys.executable, "-c", PULL_IMPORTS])
    for name, argv in zip(FIXED, fixed):
        wall, _ = client.run(argv)
        if samples is not None:
            samples.add(name, wall)


def span(values: list[float]) -> str:
    return f"{fmt_seconds(median(values))} ({fmt_seconds(min(values))}–{fmt_seconds(max(values))})"


def check_rows(rows: str, rounds: int) -> None:
    """The GROUP BY's latest rows are exactly what the ``rounds`` rounds (warm-up included) pushed."""
    expected = {c: [0, 0] for c in CITIES}
    for i in range(rounds):
        expected[CITIES[i % len(CITIES)]][0] += 1
        expected[CITIES[i % len(CITIES)]][1] += i + 1
    for city, (n, total) in expected.items():
        if not re.search(rf"\b{city}\s+{n}\s+{total}\b", rows):
            raise RuntimeError(f"unexpected GROUP BY result: {city} should have n={n} total={total}:\n{rows}")


def tables(samples: Samples) -> str:
    step_rows = []
    for name in COMMANDS:
        wall, eng = samples.wall[name], samples.engine[name]
        client_s = [w - e for w, e in zip(wall, eng)]
        jobs = samples.jobs[name]
        step_rows.append([f"`odf {name}`", span(wall), span(eng), span(client_s),
                          f"{median(samples.requests[name]):g}",
                          "–" if None in jobs else f"{median([j for j in jobs if j is not None]):g}"])
    fixed_rows = [[f"`{name}`" if "`" not in name else name, span(samples.wall[name])] for name in FIXED]
    return "\n".join([
        render_table(["command (end to end)", "wall", "engine (its log)", "client (wall − engine)", "requests",
                      "Spark jobs"], step_rows),
        "",
        render_table(["fixed cost, in the same run", "wall"], fixed_rows),
    ])


def comparison(before: Samples, after: Samples) -> str:
    rows = []
    for name in (*COMMANDS, *FIXED):
        b, a = median(before.wall[name]), median(after.wall[name])
        label = f"`odf {name}`" if name in COMMANDS else (f"`{name}`" if "`" not in name else name)
        row = [label, fmt_seconds(b), fmt_seconds(a), f"{a - b:+.3f} s"]
        if name in COMMANDS:
            cb = median([w - e for w, e in zip(before.wall[name], before.engine[name])])
            ca = median([w - e for w, e in zip(after.wall[name], after.engine[name])])
            row += [fmt_seconds(cb), fmt_seconds(ca)]
        else:
            row += ["", ""]
        rows.append(row)
    return render_table(["median", "before (wall)", "after (wall)", "change", "client before", "client after"], rows)


# the GROUP BY's current row per city: its latest offset (a changed group's +C row comes after its -C row)
LATEST = ("SELECT city, n, total FROM (SELECT *, row_number() OVER (PARTITION BY city ORDER BY `offset` DESC) AS r "
          "FROM `step.by-city`) WHERE r = 1 ORDER BY city")


def bench(rounds: int, bytecode: bool, before_tree: Path | None, warmup: int = 20) -> str:
    """One engine; this tree's client (and ``before_tree``'s, alternating with it) through the rounds."""
    loads = []
    with tempfile.TemporaryDirectory(prefix="odf-bench-step-") as d:
        tmp = Path(d)
        engine = Engine(tmp)
        log = EngineLog(engine.log)
        clients = {"after": Client(tmp, engine, log, bytecode)}
        if before_tree is not None:
            clients = {"before": Client(tmp, engine, log, bytecode, before_tree, "ws-before"), **clients}
        samples = {k: Samples() for k in clients}
        rows = {}
        try:
            (tmp / "graph.yaml").write_text(GRAPH)
            for client in clients.values():
                client.odf("init")
                client.odf("add", str(tmp / "graph.yaml"))
            warming = Samples()  # first transactions, bytecode cache, the engine's plans and its JIT
            for i in range(warmup):
                for client in clients.values():
                    run_round(client, tmp, i, warming)
            for i in range(warmup, warmup + rounds):
                for key, client in clients.items():
                    run_round(client, tmp, i, samples[key])
                loads.append(os.getloadavg()[0])
            for key, client in clients.items():
                _, rows[key] = client.odf("sql", LATEST, "--engine", engine.url)
                check_rows(rows[key], warmup + rounds)
        finally:
            engine.stop()
    if before_tree is not None and rows["before"] != rows["after"]:
        raise RuntimeError(f"the two clients disagree:\n{rows['before']}\n{rows['after']}")
    parts = [
        f"Machine: {machine_info('local[2]')}; load average (1 min) over the rounds "
        f"{min(loads):.1f}–{max(loads):.1f}. One warm engine (`odf engine serve`, local[2], start-up not counted), "
        f"{warmup} warm-up rounds, then {rounds} rounds; median (min–max). Bytecode "
        f"{'cached (as installed)' if bytecode else 'compiled on every start (PYTHONDONTWRITEBYTECODE=1)'}."
        + (" The client before the changes ran from a copy of the tree before them, alternating round by round with "
           "this one, against the same engine, each in its own workspace." if before_tree is not None else ""),
        "",
        "The engine's GROUP BY steps over the warm-up rounds (its log, s; "
        + ("both clients' steps in turn" if before_tree is not None else "one a round") + "): "
        + ", ".join(f"{e:.2f}" for e in warming.engine.get(COMMANDS[2], [])) + ".",
        "",
    ]
    if before_tree is not None:
        parts += [comparison(samples["before"], samples["after"]), "", "Before:", "", tables(samples["before"]), "",
                  "After:", ""]
    parts += [tables(samples["after"]), "",
              f"The GROUP BY's latest rows after the run (checked against the rows pushed):\n\n```\n"
              f"{rows['after'].strip()}\n```"]
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7, help="measured rounds after the warm-up (default 7)")
    ap.add_argument("--warmup", type=int, default=20,
                    help="rounds before the measured ones, for the engine's steady state (default 20)")
    ap.add_argument("--before", type=Path, metavar="DIR",
                    help="also run the client of another tree (e.g. `git archive HEAD odf_core spark_jobs | tar -x -C "
                         "DIR`), alternating with this one against the same engine: a before/after table")
    ap.add_argument("--label", default=dt.date.today().isoformat(),
                    help="the RESULTS.md subsection to (re)write (default: today's date)")
    ap.add_argument("--no-bytecode", action="store_true",
                    help="the odf processes compile every module on every start (PYTHONDONTWRITEBYTECODE=1)")
    ap.add_argument("--quick", action="store_true", help="two rounds; RESULTS.md is not touched")
    args = ap.parse_args(argv)
    if args.before is not None and not (args.before / "odf_core" / "cli.py").is_file():
        ap.error(f"--before {args.before}: no odf_core/cli.py in it")
    ensure_venv_path()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    text = bench(2 if args.quick else args.rounds, not args.no_bytecode, args.before,
                 1 if args.quick else max(1, args.warmup))
    print(text)
    if not args.quick:
        update_results_file(SECTION, {args.label: text})
        print(f"updated ## {SECTION} in benchmarks/RESULTS.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
