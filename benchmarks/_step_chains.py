"""Stateful chains of tiny incremental steps in one warm Spark session, for benchmarks that compare two settings of the
incremental engine (bench_small_step_codegen, bench_local_leaves).

One ``local[2]`` session with the tests' settings and JVM options (tests/conftest.py); each chain is a family of the
incremental property tests (tests/spark_jobs/test_transform_incremental.py) over its fixed history of four
transactions: a rebuild and three incremental steps, its output checked against plain Spark's batch result. CPU is
the JVM's (from its process entry) plus Python's: two test workers or two requests share 2 cores, so the CPU is what
their time follows. Spark jobs are counted from the scheduler's job ids (consecutive).
"""
from __future__ import annotations

import datetime as dt
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks._common import median  # noqa: E402


@dataclass(frozen=True)
class Run:
    wall: float
    cpu: float
    jobs: int


class Chains:
    """The session and the chains; :meth:`run` runs every family's chain once."""

    def __init__(self, app_name: str, families: Sequence[str]) -> None:
        import tests.conftest as conftest  # the tests' JVM options (SPARK_SUBMIT_OPTS) and Spark settings
        from pyspark.sql import SparkSession

        builder = SparkSession.builder.master("local[2]").appName(app_name)
        for k, v in conftest.SPARK_CONF.items():
            builder = builder.config(k, v)
        self.spark = builder.getOrCreate()
        self.spark.sparkContext.setLogLevel("ERROR")
        self.pid = self.spark.sparkContext._gateway.proc.pid  # type: ignore[union-attr]
        self.families = tuple(families)
        self.steps = 4 * len(self.families)

    def cpu(self) -> float:
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK") + sum(os.times()[:2])

    def jobs(self) -> int:
        return max(self.spark.sparkContext.statusTracker().getJobIdsForGroup(None), default=-1)

    def run(self) -> Run:
        from tests.spark_jobs import test_transform_incremental as cases
        from tests.spark_jobs.transform_support import MiniCoordinator, Txn, batch_reference, reduce_output

        inputs = cases._inputs(cases.FIXED_A, cases.FIXED_B)
        split = [Txn({"a": 2, "b": 1}), Txn({"a": 2, "b": 1}), Txn({"a": 3}), Txn({"a": 2})]
        self.spark.conf.set("spark.odf.incremental.enabled", "true")
        c0, t0, j0 = self.cpu(), time.monotonic(), self.jobs()
        for name in self.families:
            transform, changelog = cases.FAMILIES[name]
            with tempfile.TemporaryDirectory() as d:
                coord = MiniCoordinator(self.spark, Path(d), transform, inputs, watermarks=True)
                for txn in split:
                    coord.step(txn)
                if reduce_output(coord.result.rows()) != batch_reference(self.spark, transform, inputs, changelog):
                    raise AssertionError(f"{name}: the chain's output is not the batch result")
        return Run(time.monotonic() - t0, self.cpu() - c0, self.jobs() - j0)

    def compare(self, settings: Mapping[str, Callable[[], None]], rounds: int
                ) -> tuple[dict[str, list[Run]], list[float]]:
        """Every setting's chains once per round, alternating (``settings``: name -> what switches to it; the first is
        switched to again at the end); the 1-minute load average after each run."""
        runs: dict[str, list[Run]] = {s: [] for s in settings}
        loads: list[float] = []
        for r in range(rounds):
            for name, use in settings.items():
                use()
                runs[name].append(self.run())
                loads.append(os.getloadavg()[0])
                got = runs[name][-1]
                print(f"round {r + 1} {name}: wall {got.wall:.1f} s, CPU {got.cpu:.1f} s, {got.jobs} Spark jobs",
                      flush=True)
        next(iter(settings.values()))()
        return runs, loads


def medians(runs: Sequence[Run], rounds: int) -> Run:
    """Medians of the rounds after the first (it warms the JVM for every setting) when there are more than two."""
    counted = runs[1:] if rounds > 2 else runs
    return Run(median([r.wall for r in counted]), median([r.cpu for r in counted]),
               int(median([r.jobs for r in counted])))


def describe(runs: Mapping[str, Sequence[Run]], loads: Sequence[float], chains: int, rounds: int) -> str:
    counted = "2" if rounds > 2 else "1"
    return (f"load average (1 min) after each run {min(loads):.1f}-{max(loads):.1f}. {chains} chains of 4 steps each "
            f"(a rebuild, 3 incremental steps) per run, {rounds} rounds alternating the settings; medians of rounds "
            f"{counted}-{rounds}. Every run: "
            + "; ".join(f"{s} " + ", ".join(f"{r.wall:.0f}/{r.cpu:.0f} s/{r.jobs}" for r in v) for s, v in runs.items())
            + " (wall/CPU/Spark jobs).")


def table_rows(med: Mapping[str, Run], steps: int) -> list[list[Any]]:
    return [[s, f"{m.wall:.1f} s", f"{m.cpu:.1f} s", f"{m.wall / steps:.2f} s", f"{m.jobs / steps:.1f}"]
            for s, m in med.items()]


HEADERS = ["setting", "wall", "CPU (JVM + Python)", "wall per step", "Spark jobs per step"]


def publish(section: str, title: str, chains: Chains, runs: Mapping[str, Sequence[Run]], loads: Sequence[float],
            rounds: int, summary: Callable[[Mapping[str, Run]], str]) -> None:
    """The medians' table, every run's figures and ``summary(medians)`` under ``title`` (dated) in RESULTS.md."""
    from benchmarks._common import machine_info, render_table, update_results_file

    med = {s: medians(v, rounds) for s, v in runs.items()}
    body = "\n\n".join([
        f"Machine: {machine_info('local[2]')}; " + describe(runs, loads, len(chains.families), rounds),
        render_table(HEADERS, table_rows(med, chains.steps)),
        summary(med),
    ])
    update_results_file(section, {f"{dt.date.today()}: {title}": body})
    print(body)
