"""What the test suite's JVM options (tests/conftest.py ``TEST_JVM_OPTIONS``) save: the same sample of incremental
tests run with Java's defaults and with the options, CPU per JVM thread group; results go to the ``## bench_test_jvm``
section of ``benchmarks/RESULTS.md``.

Run: ``.venv/bin/python benchmarks/bench_test_jvm.py [--rounds N]``.

Each round runs the sample once per setting (``ODF_TEST_JVM_OPTIONS=""`` for Java's defaults, then the suite's own),
alternating, each as one ``pytest -n 0`` process with a fresh JVM. A small pytest plugin reads, when the session
ends, the CPU time of every thread of the session's JVM from ``/proc`` and groups the threads by name (the JIT's
compiler threads, the driver's py4j threads, the collector's; the rest: executors' tasks, broadcasts, threads that
ended), the JVM's total from its process entry; the pytest process's own CPU is the Python side. Medians over the
rounds. Two workers share 2 cores in ``./dev test``, so the CPU, not one process's wall time, is what the suite's
time follows; both are reported.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks._common import machine_info, median, render_table, update_results_file  # noqa: E402

SECTION = "bench_test_jvm"
#: a spread of the incremental file: property families (fixed and generated examples) and scenario tests
SAMPLE = [
    "tests/spark_jobs/test_transform_incremental.py::test_any_changelog_and_split_gives_the_batch_result[running]",
    "tests/spark_jobs/test_transform_incremental.py::test_any_changelog_and_split_gives_the_batch_result[aggregates]",
    "tests/spark_jobs/test_transform_incremental.py::test_any_changelog_and_split_gives_the_batch_result[lookup_join]",
    "tests/spark_jobs/test_transform_incremental.py::test_a_lag_or_lead_keeps_its_partitions_last_rows",
    "tests/spark_jobs/test_transform_incremental.py::test_a_top_aggregate_writes_each_groups_old_and_new_row",
]
SETTINGS = {"Java's defaults": "", "TEST_JVM_OPTIONS": None}  # None: the suite's own (tests/conftest.py)
GROUPS = (("JIT compiler", ("C1 CompilerThre", "C2 CompilerThre")), ("driver (py4j)", ("Thread-",)),
          ("collector", ("GC Thread", "G1 ", "VM Thread")))

PLUGIN = '''
import glob, json, os, re


def _threads(pid):
    out = {}
    for task in glob.glob(f"/proc/{pid}/task/*"):
        try:
            name = open(task + "/comm").read().strip()
            fields = open(task + "/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return out


def pytest_sessionfinish(session):
    me = os.getpid()
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            text = open(stat).read()
            pid, ppid = int(text.split()[0]), int(text.rsplit(")", 1)[1].split()[1])
            cmd = open(f"/proc/{pid}/cmdline").read()
        except (OSError, ValueError):
            continue
        if ppid == me and "java" in cmd:
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
            total = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # ended threads too
            with open(os.environ["BENCH_JVM_OUT"], "w") as f:
                json.dump({"threads": _threads(pid), "total": total, "python": sum(os.times()[:2]),
                           "failed": session.testsfailed}, f)
'''


def run_sample(options: str | None, tmp: Path, n: int) -> dict:
    out = tmp / f"run{n}.json"
    env = dict(os.environ, BENCH_JVM_OUT=str(out), PYTHONPATH=f"{tmp}{os.pathsep}{REPO}")
    env.pop("SPARK_SUBMIT_OPTS", None)
    if options is None:
        env.pop("ODF_TEST_JVM_OPTIONS", None)
    else:
        env["ODF_TEST_JVM_OPTIONS"] = options
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "-p",
                           "bench_jvm_plugin", *SAMPLE], cwd=REPO, env=env, capture_output=True, text=True)
    wall = time.monotonic() - t0
    if done.returncode != 0 or not out.exists():
        raise RuntimeError(f"the sample failed ({done.returncode}): {done.stdout[-3000:]}")
    found = json.loads(out.read_text())
    threads: dict[str, float] = found["threads"]
    grouped = {g: sum(v for k, v in threads.items() if k.startswith(prefixes)) for g, prefixes in GROUPS}
    rest = found["total"] - sum(grouped.values())  # executors' tasks, broadcasts, ended threads...
    return {"wall": wall, "jvm": found["total"], "python": found["python"], **grouped, "other": rest}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    loads = []
    results: dict[str, list[dict]] = {name: [] for name in SETTINGS}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        (tmp / "bench_jvm_plugin.py").write_text(PLUGIN)
        n = 0
        for r in range(args.rounds):
            for name, options in SETTINGS.items():
                n += 1
                results[name].append(run_sample(options, tmp, n))
                loads.append(os.getloadavg()[0])
                print(f"round {r + 1} {name}: " + ", ".join(f"{k} {v:.1f} s" for k, v in results[name][-1].items()),
                      flush=True)
    keys = ["wall", "jvm", "python", *(g for g, _ in GROUPS), "other"]
    heads = ["setting", "wall", "JVM CPU", "Python CPU", *(f"JVM: {g}" for g, _ in GROUPS), "JVM: the rest"]
    rows = [[name, *(f"{median([x[k] for x in runs]):.0f} s" for k in keys)] for name, runs in results.items()]
    base, new = (median([x["jvm"] + x["python"] for x in results[n]]) for n in SETTINGS)
    body = "\n\n".join([
        f"Machine: {machine_info('local[2]')}; load average (1 min) after each run "
        f"{min(loads):.1f}-{max(loads):.1f}. {len(SAMPLE)} incremental tests (`pytest -n 0`, a fresh JVM each run), "
        f"{args.rounds} rounds alternating the settings; medians. `TEST_JVM_OPTIONS`: "
        "`-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m -XX:+UseSerialGC`.",
        render_table(heads, rows),
        f"CPU of JVM and Python together: {base:.0f} s with Java's defaults, {new:.0f} s with the options "
        f"({new / base:.2f}x).",
    ])
    update_results_file(SECTION, {f"{dt.date.today()}: the tests' JVM options (issue #62)": body})
    print(body)


if __name__ == "__main__":
    main()
