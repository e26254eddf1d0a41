"""A GROUP BY's incremental step against its first transaction over a big input, each in a fresh JVM (issue #64, the
table's last row: 5M rows in 50k groups, 10k new rows, net incremental step ÷ net first transaction, goal ≤ 0.3);
results go to the ``## bench_big_group_by`` section of ``benchmarks/RESULTS.md``.

Run: ``.venv/bin/python benchmarks/bench_big_group_by.py [--rounds N] [--rows N] [--groups N] [--new N]``.

A push root gets ``--rows`` rows (``--groups`` keys) in one ``odf ingest`` before the rounds. Each round, every
command a new process with ``--master local[2]`` (a fresh JVM, as every command without an engine and every
spark-submit task runs), timed from start to exit:

* the fixed cost: ``python -c`` that starts a ``local[2]`` SparkSession, runs ``spark.range(3).count()`` and stops,
* ``odf add`` of a new GROUP BY derivative (``n``, ``total``, ``max(event_time)`` per key) and ``odf pull`` of it:
  its first transaction, over the whole root,
* ``odf ingest`` of ``--new`` rows into the root (not part of the ratio),
* ``odf pull`` of the same derivative again: the incremental step (the log's step line must say so).

Net = the command's wall time minus the round's fixed cost; the ratio is median(net step) ÷ median(net first). The
package's own JVM class archive is off for every process (``ODF_JVM_ARCHIVE=off``), so the fixed cost and the
commands start alike (bench_cold_start measures the archive); ``--archive`` runs them as the package does by default
instead: the first fresh driver (the root's ingest) writes the archive, every later command maps it, and so does the
fixed cost's session (``-XX:SharedArchiveFile``). Round 0 is a warm-up and not counted.

The same rounds then run against one warm engine (``odf engine serve``, local[2], started after the fresh-JVM rounds
and not counted; ``--engine URL`` on every command, new derivatives): there the ratio is of the commands' whole wall
times (nothing subtracted), and the engine's own time for each pull is taken from its log.
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks._common import ensure_venv_path, machine_info, median, render_table, update_results_file  # noqa: E402
from benchmarks.bench_cold_start import BARE, command_env, timed_command  # noqa: E402
from benchmarks.bench_engine import Engine  # noqa: E402

SECTION = "bench_big_group_by"
ROOT = """kind: DatasetSnapshot
version: 1
content:
  name: big.events
  kind: Root
  metadata:
    - kind: AddPushSource
      sourceName: app
      read: {kind: Csv, header: true, schema: ["event_time TIMESTAMP", "k BIGINT", "amount BIGINT"]}
      merge: {kind: Append}
"""
DERIVATIVE = """kind: DatasetSnapshot
version: 1
content:
  name: big.by-key-{i}
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs: [{{datasetRef: big.events}}]
      transform:
        kind: Sql
        engine: spark
        query: >
          SELECT k, count(*) AS n, sum(amount) AS total, max(event_time) AS event_time
          FROM `big.events` GROUP BY k
"""
COMMANDS = ("fixed cost (bare SparkSession)", "first transaction", "ingest of the new rows", "incremental step")


def write_rows(path: Path, start: int, n: int, groups: int) -> Path:
    """``n`` rows from row ``start`` on: a key per row round-robin over ``groups``, a second per row."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.csv as pcsv

    ids = np.arange(start, start + n, dtype=np.int64)
    base = np.datetime64("2024-01-01T00:00:00", "s")
    times = np.char.add(np.datetime_as_string(base + ids * np.timedelta64(1, "s"), unit="s"), "Z")
    table = pa.table({"event_time": pa.array(times),
                      "k": pa.array(ids % groups), "amount": pa.array(ids)})
    pcsv.write_csv(table, path)
    return path


class Runner:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.ws = tmp / "ws"
        self.env = command_env(tmp)
        self.spark_args = ["--master", "local[2]"]

    def with_archive(self) -> None:
        """The package's default: its class archive on, in this run's own directory."""
        self.env.update(ODF_JVM_ARCHIVE="on", ODF_JVM_ARCHIVE_DIR=str(self.tmp / "jvm"))

    def bare_env(self) -> dict[str, str]:
        """The fixed cost's session maps the package's archive when there is one (like for like)."""
        found = sorted((self.tmp / "jvm").glob("spark-*.jsa")) if self.env.get("ODF_JVM_ARCHIVE") == "on" else []
        if not found:
            return self.env
        opts = f"{self.env.get('SPARK_SUBMIT_OPTS', '')} -XX:SharedArchiveFile={found[0]} -Xshare:auto".strip()
        return dict(self.env, SPARK_SUBMIT_OPTS=opts)

    def run(self, argv: list[str], expect: str = "") -> tuple[float, str]:
        return timed_command(argv, self.env, self.tmp, expect)

    def odf(self, *args: str, spark: bool = True, expect: str = "") -> tuple[float, str]:
        extra = self.spark_args if spark else []
        return self.run([sys.executable, "-m", "odf_core.cli", "--workspace", str(self.ws), *args, *extra], expect)

    def rounds(self, rounds: int, new: int, groups: int, total: int, prefix: str, fixed: bool,
               engine_log: Path | None = None) -> tuple[dict[str, list[float]], int]:
        """Round 0 (a warm-up) and ``rounds`` measured ones; the walls of each command, and the root's rows after."""
        walls: dict[str, list[float]] = {}
        for i in range(rounds + 1):
            bare = timed_command([sys.executable, "-c", BARE], self.bare_env(), self.tmp)[0] if fixed else 0.0
            snap = self.tmp / f"{prefix}-{i}.yaml"
            snap.write_text(DERIVATIVE.format(i=f"{prefix}-{i}"))
            self.odf("add", str(snap), spark=False)
            mark = _answered(engine_log)
            first, _ = self.odf("pull", f"big.by-key-{prefix}-{i}", expect="records")
            first_engine = sum(_answered(engine_log)[len(mark):])
            new_file = write_rows(self.tmp / f"rows-{prefix}-{i}.csv", total, new, groups)
            ingest, _ = self.odf("ingest", "big.events", str(new_file), expect="records")
            total += new
            mark = _answered(engine_log)
            step, _ = self.odf("pull", f"big.by-key-{prefix}-{i}", expect="records")
            step_engine = sum(_answered(engine_log)[len(mark):])
            if i:
                values = (bare, first, ingest, step) + ((first_engine, step_engine) if engine_log else ())
                for name, wall in zip(COMMANDS + ENGINE_TIMES, values):
                    walls.setdefault(name, []).append(wall)
                walls.setdefault("load", []).append(os.getloadavg()[0])
                print(f"{prefix} round {i}: " + ", ".join(f"{n} {v:.2f} s" for n, v in zip(COMMANDS, values)),
                      flush=True)
        return walls, total


ARCHIVE_NOTE = {False: "the package's class archive off",
                True: "the package's class archive on (written by the root's ingest, the first fresh driver; the "
                      "fixed cost's session maps it too)"}
ENGINE_TIMES = ("engine's time: first transaction", "engine's time: incremental step")


def _answered(log: Path | None) -> list[float]:
    """The seconds of every request the engine's log says it answered so far."""
    if log is None:
        return []
    return [float(m) for m in re.findall(r"answered .*? in ([0-9.]+) s", log.read_text())]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--groups", type=int, default=50_000)
    ap.add_argument("--new", type=int, default=10_000)
    ap.add_argument("--archive", action="store_true", help="fresh JVMs with the package's class archive (its default)")
    args = ap.parse_args()
    ensure_venv_path()
    with tempfile.TemporaryDirectory(prefix="odf-bench-big-") as d:
        r = Runner(Path(d))
        if args.archive:
            r.with_archive()
        (r.tmp / "root.yaml").write_text(ROOT)
        r.odf("init", spark=False)
        r.odf("add", str(r.tmp / "root.yaml"), spark=False)
        t0 = time.perf_counter()
        first_file = write_rows(r.tmp / "rows-0.csv", 0, args.rows, args.groups)
        r.odf("ingest", "big.events", str(first_file), expect="records")
        setup_s = time.perf_counter() - t0
        fresh, total = r.rounds(args.rounds, args.new, args.groups, args.rows, "fresh", fixed=True)
        engine = Engine(r.tmp)
        try:
            r.spark_args = ["--engine", engine.url]
            warm, total = r.rounds(args.rounds, args.new, args.groups, total, "warm", fixed=False,
                                   engine_log=engine.log)
        finally:
            engine.stop()

    def cell(v: list[float]) -> str:
        return f"{median(v):.2f} s ({min(v):.2f}–{max(v):.2f})"

    net_first = [f - b for f, b in zip(fresh[COMMANDS[1]], fresh[COMMANDS[0]])]
    net_step = [s - b for s, b in zip(fresh[COMMANDS[3]], fresh[COMMANDS[0]])]
    fresh_ratio = median(net_step) / median(net_first)
    warm_ratio = median(warm[COMMANDS[3]]) / median(warm[COMMANDS[1]])
    engine_ratio = median(warm[ENGINE_TIMES[1]]) / median(warm[ENGINE_TIMES[0]])
    rows = [[name, cell(fresh[name]), {COMMANDS[1]: f"{median(net_first):.2f} s",
                                       COMMANDS[3]: f"{median(net_step):.2f} s"}.get(name, ""),
             cell(warm[name]) if name != COMMANDS[0] else "–"] for name in COMMANDS]
    rows += [[name, "", "", cell(warm[name])] for name in ENGINE_TIMES]
    loads = fresh["load"] + warm["load"]
    body = "\n\n".join([
        f"Machine: {machine_info('local[2]')}; load average (1 min) after each round {min(loads):.1f}-"
        f"{max(loads):.1f}. A push root of {args.rows:,} rows in {args.groups:,} groups (its one `odf ingest`: "
        f"{setup_s:.0f} s with writing the CSV file); each round a new GROUP BY derivative's first transaction, then "
        f"{args.new:,} new rows and its incremental step. Fresh JVM: every command a new process with `--master "
        f"local[2]`, {ARCHIVE_NOTE[args.archive]}; net = wall minus the round's fixed cost. Warm engine: every "
        f"command with `--engine` of one `odf engine serve` (local[2]). A warm-up round, then {args.rounds} rounds "
        f"each; median (min–max).",
        render_table(["command (end to end)", "fresh JVM: wall", "fresh JVM: net", "warm engine: wall"], rows),
        f"**Fresh JVM: net incremental step ÷ net first transaction {fresh_ratio:.2f}** (goal ≤ 0.3; "
        f"{median(net_step):.2f} s ÷ {median(net_first):.2f} s). Warm engine: {warm_ratio:.2f} end to end, "
        f"{engine_ratio:.2f} of the engine's own times.",
    ])
    archived = " with the class archive" if args.archive else ""
    update_results_file(SECTION, {f"{dt.date.today()}: {args.rows // 1_000_000}M rows, {args.groups // 1000}k "
                                   f"groups, {args.new // 1000}k new rows, fresh JVMs{archived} and a warm engine "
                                   "(#64)": body})
    print(body)


if __name__ == "__main__":
    main()
