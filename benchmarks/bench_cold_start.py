"""What a command costs without an engine (a fresh JVM, as every command without ``--engine`` and every spark-submit
task runs), against a bare Spark start measured in the same run, and what a JVM class-data-sharing archive saves
(issue #64, the table's "no engine" row and item 3); results go to the ``## bench_cold_start`` section of
``benchmarks/RESULTS.md``.

Run: ``.venv/bin/python benchmarks/bench_cold_start.py [--rounds N]``.

Each measured command is a new process timed from start to exit, in bench_step_cost's workspace (a push root, a
projection and a GROUP BY of it), each command with ``--master local[2]``:

* the baseline: ``python -c`` that starts a ``local[2]`` SparkSession, runs ``spark.range(3).count()`` and stops it,
* ``odf ingest`` of one row, ``odf pull`` of the projection, ``odf pull`` of the GROUP BY (an incremental step).

Each round runs them all with the JVM's defaults, then all with a dynamic class-data-sharing archive
(JDK 13+: ``-XX:ArchiveClassesAtExit`` once, then ``-XX:SharedArchiveFile``) created before the rounds by one
``odf pull`` of the GROUP BY (the classes a step loads, Spark's and ours), passed to the driver JVM through
``SPARK_SUBMIT_OPTS`` as tests/conftest.py passes its JVM options. A warm-up round is not counted; medians of the
rounds.
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks._common import ensure_venv_path, machine_info, median, render_table, update_results_file  # noqa: E402
from benchmarks.bench_step_cost import GRAPH, one_row  # noqa: E402

SECTION = "bench_cold_start"
BARE = ("from pyspark.sql import SparkSession; "
        "s = SparkSession.builder.master('local[2]').appName('bare').getOrCreate(); "
        "assert s.range(3).count() == 3; s.stop()")
COMMANDS = ("bare SparkSession + range(3).count()", "odf ingest one row", "odf pull projection", "odf pull GROUP BY")


def command_env(tmp: Path) -> dict[str, str]:
    """The environment of a measured command: bytecode cached under ``tmp`` (as installed), no engine URL, and the
    package's own class archive off (an archive is a benchmark's setting, not the package's)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("ODF_ENGINE_URL", None)
    env["ODF_JVM_ARCHIVE"] = "off"
    env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
    return env


def timed_command(argv: list[str], env: dict[str, str], cwd: Path, expect: str = "",
                  timeout: float = 1800) -> tuple[float, str]:
    """One measured command: its wall time from start to exit and its output; it must succeed and print ``expect``
    (a pull with nothing new would cost no JVM at all)."""
    t0 = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {done.stdout[-2000:]} {done.stderr[-3000:]}")
    if expect not in done.stdout:
        raise RuntimeError(f"{' '.join(argv)}: no {expect!r} in its output: {done.stdout[-2000:]}")
    return wall, done.stdout


class Runner:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.ws = tmp / "ws"
        self.env = command_env(tmp)
        self.base_opts = self.env.get("SPARK_SUBMIT_OPTS", "")
        self.archive = tmp / "odf-step.jsa"
        self.rows = 0

    def _run(self, argv: list[str], jvm_opts: str, expect: str = "") -> float:
        env = dict(self.env, SPARK_SUBMIT_OPTS=f"{self.base_opts} {jvm_opts}".strip())
        return timed_command(argv, env, self.tmp, expect, timeout=900)[0]

    def odf(self, *args: str, jvm_opts: str = "") -> float:
        return self._run([sys.executable, "-m", "odf_core.cli", "--workspace", str(self.ws), *args,
                          "--master", "local[2]"], jvm_opts, expect="records")

    def command(self, name: str, jvm_opts: str) -> float:
        if name == COMMANDS[0]:
            return self._run([sys.executable, "-c", BARE], jvm_opts)
        if name == COMMANDS[1]:
            self.rows += 1
            return self.odf("ingest", "step.events", str(one_row(self.tmp, self.rows)), jvm_opts=jvm_opts)
        return self.odf("pull", "step.doubled" if name == COMMANDS[2] else "step.by-city", jvm_opts=jvm_opts)

    def setup(self) -> float:
        """The workspace, a first transaction everywhere, and the archive (from a GROUP BY pull); its time."""
        (self.tmp / "graph.yaml").write_text(GRAPH)
        subprocess.run([sys.executable, "-m", "odf_core.cli", "--workspace", str(self.ws), "init"], check=True,
                       env=self.env, cwd=self.tmp, capture_output=True)
        subprocess.run([sys.executable, "-m", "odf_core.cli", "--workspace", str(self.ws), "add",
                        str(self.tmp / "graph.yaml")], check=True, env=self.env, cwd=self.tmp, capture_output=True)
        for name in COMMANDS[1:3]:
            self.command(name, "")
        self.command(COMMANDS[1], "")
        t0 = time.perf_counter()
        self.command(COMMANDS[3], f"-XX:ArchiveClassesAtExit={self.archive}")
        took = time.perf_counter() - t0
        for _ in range(50):  # the JVM writes the archive as it exits, after the Python side has returned
            if self.archive.exists() and self.archive.stat().st_size > 0:
                break
            time.sleep(0.1)
        if not self.archive.exists():
            raise RuntimeError(f"no archive at {self.archive}: -XX:ArchiveClassesAtExit did not write one")
        return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    ensure_venv_path()
    settings = {"JVM defaults": "", "CDS archive": None}
    walls: dict[tuple[str, str], list[float]] = {}
    loads = []
    with tempfile.TemporaryDirectory(prefix="odf-bench-cold-") as d:
        r = Runner(Path(d))
        dump_s = r.setup()
        settings["CDS archive"] = f"-XX:SharedArchiveFile={r.archive} -Xshare:auto"
        archive_mb = r.archive.stat().st_size / 1e6
        for i in range(args.rounds + 1):  # round 0 warms the page cache for both settings
            for setting, opts in settings.items():  # each setting's pulls get the row its ingest added
                for name in COMMANDS:
                    wall = r.command(name, opts or "")
                    if i:
                        walls.setdefault((name, setting), []).append(wall)
            if i:
                loads.append(os.getloadavg()[0])
                print(f"round {i}: " + ", ".join(f"{n} {s} {walls[(n, s)][-1]:.2f} s" for n in COMMANDS
                                               for s in settings), flush=True)
    med = {k: median(v) for k, v in walls.items()}
    bare = {s: med[(COMMANDS[0], s)] for s in settings}
    rows = [[name, *(f"{med[(name, s)]:.2f} s ({min(walls[(name, s)]):.2f}–{max(walls[(name, s)]):.2f})"
                     for s in settings),
             *(f"{med[(name, s)] / bare[s]:.2f}x" for s in settings),
             f"{med[(name, 'CDS archive')] / med[(name, 'JVM defaults')]:.2f}x"]
            for name in COMMANDS]
    body = "\n\n".join([
        f"Machine: {machine_info('local[2]')}; load average (1 min) after each round {min(loads):.1f}-"
        f"{max(loads):.1f}. Every command a new process with `--master local[2]` (a fresh JVM), bytecode cached; a "
        f"warm-up round, then {args.rounds} rounds, each running the four with one setting, then the other (each pull "
        f"has the row its ingest added); median (min–max). The archive: "
        f"{archive_mb:.0f} MB, written by one `odf pull` of the GROUP BY with `-XX:ArchiveClassesAtExit` "
        f"({dump_s:.1f} s, the dump included).",
        render_table(["command (end to end)", "JVM defaults", "CDS archive", "÷ bare (defaults)", "÷ bare (CDS)",
                      "CDS ÷ defaults"], rows),
    ])
    update_results_file(SECTION, {f"{dt.date.today()}: a fresh JVM per command, with and without a class-data-"
                                   "sharing archive (#64)": body})
    print(body)


if __name__ == "__main__":
    main()
