"""What running small steps without whole-stage code generation saves (spark_jobs/transform/incremental/sizing.py):
the same stateful chains with the rule and with it switched off, CPU and wall; results go to the
``## bench_small_step_codegen`` section of ``benchmarks/RESULTS.md``.

Run: ``.venv/bin/python benchmarks/bench_small_step_codegen.py [--rounds N]``.

One warm ``local[2]`` session (the tests' settings and JVM options), a few families of the incremental property tests
(a GROUP BY with many aggregates, a window, stacked running windows, a top-N over an aggregate, a join under an
aggregate), each its fixed history of four transactions: a rebuild and three incremental steps. Each round runs every
chain once per setting, alternating; "Spark's default" switches the rule off (small steps and small rebuilds keep
whole-stage code generation), everything else is the same code. Every chain's output is checked against the batch
result of plain Spark. CPU is the JVM's (from its process entry) plus Python's: two test workers or two requests
share 2 cores, so the CPU is what their time follows. Medians over the rounds; the first round warms the JVM for
both settings and is reported but not counted when there are more than two.
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks._common import machine_info, median, render_table, update_results_file  # noqa: E402

SECTION = "bench_small_step_codegen"
FAMILIES = ("aggregates", "window", "running_stacked", "top_then_aggregate", "join_then_aggregate")
SETTINGS = ("interpreted small steps", "Spark's default")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=4)
    args = ap.parse_args()

    import tests.conftest as conftest  # the tests' JVM options (SPARK_SUBMIT_OPTS) and Spark settings
    from pyspark.sql import SparkSession

    from spark_jobs.transform.incremental import sizing
    from tests.spark_jobs import test_transform_incremental as cases
    from tests.spark_jobs.transform_support import MiniCoordinator, Txn, batch_reference, reduce_output

    builder = SparkSession.builder.master("local[2]").appName(SECTION)
    for k, v in conftest.SPARK_CONF.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    pid = spark.sparkContext._gateway.proc.pid  # type: ignore[union-attr]

    def cpu() -> float:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK") + sum(os.times()[:2])

    rule_on = (sizing.StepSizing.interpreted, sizing.interpret_small_history)
    rule_off = (property(lambda self: False), lambda session, rows: False)

    def use(setting: str) -> None:
        prop, full = rule_on if setting == SETTINGS[0] else rule_off
        sizing.StepSizing.interpreted = prop  # type: ignore[method-assign,assignment]
        sizing.interpret_small_history = full

    inputs = cases._inputs(cases.FIXED_A, cases.FIXED_B)
    split = [Txn({"a": 2, "b": 1}), Txn({"a": 2, "b": 1}), Txn({"a": 3}), Txn({"a": 2})]

    def chains() -> tuple[float, float]:
        spark.conf.set("spark.odf.incremental.enabled", "true")
        c0, t0 = cpu(), time.monotonic()
        for name in FAMILIES:
            transform, changelog = cases.FAMILIES[name]
            with tempfile.TemporaryDirectory() as d:
                coord = MiniCoordinator(spark, Path(d), transform, inputs, watermarks=True)
                for txn in split:
                    coord.step(txn)
                if reduce_output(coord.result.rows()) != batch_reference(spark, transform, inputs, changelog):
                    raise AssertionError(f"{name}: the chain's output is not the batch result")
        return time.monotonic() - t0, cpu() - c0

    runs: dict[str, list[tuple[float, float]]] = {s: [] for s in SETTINGS}
    loads = []
    for r in range(args.rounds):
        for setting in SETTINGS:
            use(setting)
            runs[setting].append(chains())
            loads.append(os.getloadavg()[0])
            wall, c = runs[setting][-1]
            print(f"round {r + 1} {setting}: wall {wall:.1f} s, CPU {c:.1f} s", flush=True)
    use(SETTINGS[0])
    counted = {s: (v[1:] if args.rounds > 2 else v) for s, v in runs.items()}
    med = {s: (median([w for w, _ in v]), median([c for _, c in v])) for s, v in counted.items()}
    steps = len(FAMILIES) * len(split)
    rows = [[s, f"{w:.1f} s", f"{c:.1f} s", f"{w / steps:.2f} s"] for s, (w, c) in med.items()]
    (w_new, c_new), (w_old, c_old) = med[SETTINGS[0]], med[SETTINGS[1]]
    body = "\n\n".join([
        f"Machine: {machine_info('local[2]')}; load average (1 min) after each run {min(loads):.1f}-{max(loads):.1f}. "
        f"{len(FAMILIES)} chains of 4 steps each (a rebuild, 3 incremental steps) per run, {args.rounds} rounds "
        f"alternating the settings; medians of rounds {'2' if args.rounds > 2 else '1'}-{args.rounds}. Every "
        "run: " + "; ".join(f"{s} " + ", ".join(f"{w:.0f}/{c:.0f} s" for w, c in v) for s, v in runs.items())
        + " (wall/CPU).",
        render_table(["setting", "wall", "CPU (JVM + Python)", "wall per step"], rows),
        f"With small steps interpreted: CPU {c_new / c_old:.2f}x, wall {w_new / w_old:.2f}x of Spark's default.",
    ])
    update_results_file(SECTION, {f"{dt.date.today()}: small steps without whole-stage code generation (#64)": body})
    print(body)


if __name__ == "__main__":
    main()
