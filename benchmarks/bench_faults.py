"""Run the fault-injection suite (``tests/faults``) and write its counts to ``docs/fault-injection.md``.

``./dev bench faults`` (or ``python benchmarks/bench_faults.py``) runs the suite with ``ODF_FAULT_SUMMARY`` set, so
the session writes what every test injected and what became of it as JSON; this script renders that JSON. With
``--render FILE`` it only renders an existing summary.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "fault-injection.md"

INTRO = """# Fault injection

`tests/faults/` injects faults into real runs — real Spark, real files, a real HTTP server, the real CLI in a child
process — and checks what a user is left with. This page is written by `benchmarks/bench_faults.py` from one run of
the suite (reproduce it with `./dev bench faults`; the suite alone runs with `./dev test tests/faults`). It is
part of every `./dev test` run (marker `spark`): one Spark session for the whole suite, child processes only where a
kill -9 or a console needs them, so it takes about two minutes (the wall time of this run is in the Counts line).

| fault class | how it is injected | what must hold after each fault |
|---|---|---|
| kill -9 | a child process (forked from a pre-loaded fork server) is killed with SIGKILL at every crash point the operation passes — the points are traced from an undisturbed run (`ODF_CRASH_TRACE`), not listed by hand, each with how often it is passed | the dataset is at its old or new head (or the commit's SetDataSchema between) and verifies; the retry commits exactly once, the very block an undisturbed run makes, without running Spark again; after `odf gc` no unreferenced file, temp file or staged file is left |
| ENOSPC | the storage layer and the staging helpers count their writes (filling a temp file, linking or renaming it into place, creating a directory); the N-th fails with `OSError(ENOSPC)` for every N of an undisturbed run (`inject_enospc`, `ODF_ENOSPC_AT`); the engine's own writers (pyarrow, Spark) hit a real full tmpfs in a private mount namespace; the CLI's output file and stdout go to `/dev/full` | one error line, "no space left on device while … <path>"; the dataset verifies at its old head (a failure after the head moved — the summary cache, `commit.json` — is a warning, the commit stands); no temp file; a CLI transaction leaves no staging; an Airflow task keeps what its retry needs; after `odf gc` nothing unreferenced; the next run, disk freed, succeeds exactly once |
| tampered file | a flipped byte in a block, a data file, an ingest or transform checkpoint; a truncated data file; an edited summary cache; a head naming no block — then the CLI | `odf verify --integrity` fails in one line naming the object; ingest or pull refuse to build on a corrupted checkpoint and change nothing; an edited cache is ignored and rebuilt |
| malformed input | an HTML error page where a CSV was expected, header/field count mismatches, bytes invalid in the declared encoding, a value that does not fit its column, broken JSON, a broken snapshot YAML — through the CLI | one line naming the file or URL and the line; the dataset exactly as it was; nothing staged |

"Tracebacks shown" counts every user-facing outcome that was not one clear error line: a Python or Java stack trace
on the console, an "internal error", more than one error line (Spark's start-up banner, printed before any of our
code runs, is not counted), or a library call that raised something other than an `OdfError`.
"""

STAGING = """
## Staging and `odf gc`

* A transaction with a random id (the CLI's `odf pull`, `odf ingest` without `--txn-id`) leaves nothing in staging,
  committed or failed: nobody retries it.
* A transaction with a fixed id (an Airflow DAG run, `--txn-id`) keeps its small manifests until it commits, so a
  retried task finds its way back; a failed step removes what it was writing; after the commit an ingest keeps
  `transaction.json`, `commit.json` and the step manifests, a transform only `commit.json` — every copy of data goes.
* A commit that fails half-way may leave data or checkpoint files no block references (it cannot delete them safely:
  a concurrent retry of the same transaction may be about to reference them). `odf gc [--dry-run] [--min-age S]`
  removes those, stale temp files and staging directories unchanged for `--min-age` seconds (default one hour), and
  never anything a block of the chain references; see `odf_core/gc.py` for why that is safe while writers run.
"""


def run_suite(summary: str, pytest_args: list[str]) -> int:
    env = {**os.environ, "ODF_FAULT_SUMMARY": summary}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/faults", *pytest_args]
    return subprocess.run(cmd, cwd=ROOT, env=env).returncode


def render(summary: dict, *, seconds: float | None, exit_code: int | None, load: float | None = None) -> str:
    lines = [INTRO, "## Counts", ""]
    when = dt.date.today().isoformat()
    took = f", {seconds:.0f} s" if seconds is not None else ""
    status = "" if exit_code is None else (", every test passed" if exit_code == 0 else
                                           f", **pytest exit code {exit_code}**")
    busy = f" (load average {load:.1f} when it started: the machine is shared)" if load is not None else ""
    lines.append(f"Run of {when} on {os.cpu_count()} cores, {platform.machine()}, Python "
                 f"{platform.python_version()}{took}{busy}{status}.")
    lines += ["", "| fault class | operation | faults injected | datasets lost or corrupted | tracebacks shown |",
              "|---|---|---|---|---|"]
    order = ["kill -9", "ENOSPC", "tampered file", "malformed input"]
    classes = sorted(summary["by_class"].items(), key=lambda kv: (order.index(kv[0]) if kv[0] in order else 99, kv[0]))
    for fault_class, operations in classes:
        for operation, row in operations.items():
            lines.append(f"| {fault_class} | {operation} | {row['injected']} | {row['lost_or_corrupted']} | "
                         f"{row['tracebacks']} |")
    lines.append(f"| **all** | | **{summary['faults_injected']}** | **{summary['datasets_lost_or_corrupted']}** | "
                 f"**{summary['tracebacks_shown']}** |")
    lines.append(STAGING)
    lines += ["## Every fault injected", "", "<details><summary>"
              f"{summary['faults_injected']} faults: class, operation, where</summary>", ""]
    lines += ["| fault class | operation | where | lost or corrupted | traceback |", "|---|---|---|---|---|"]
    for c in sorted(summary["cases"], key=lambda c: order.index(c["fault_class"]) if c["fault_class"] in order
                    else 99):
        lines.append(f"| {c['fault_class']} | {c['operation']} | `{c['where']}` | "
                     f"{'**yes**' if c['lost_or_corrupted'] else 'no'} | {'**yes**' if c['traceback'] else 'no'} |")
    lines += ["", "</details>", ""]
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--render", metavar="FILE", help="only render this summary JSON")
    p.add_argument("pytest_args", nargs="*", help="passed to pytest (e.g. -k kill)")
    args = p.parse_args()
    seconds = exit_code = load = None
    if args.render:
        path = args.render
    else:
        path = os.path.join(tempfile.mkdtemp(prefix="odf-faults-"), "summary.json")
        load = os.getloadavg()[0]
        started = time.monotonic()
        exit_code = run_suite(path, args.pytest_args)
        seconds = time.monotonic() - started
        if not os.path.exists(path):
            print(f"the suite wrote no summary (pytest exit code {exit_code})", file=sys.stderr)
            return exit_code or 1
    with open(path, encoding="utf-8") as f:
        summary = json.load(f)
    DOC.write_text(render(summary, seconds=seconds, exit_code=exit_code, load=load), encoding="utf-8")
    print(f"{summary['faults_injected']} faults injected, {summary['datasets_lost_or_corrupted']} datasets lost or "
          f"corrupted, {summary['tracebacks_shown']} tracebacks shown -> {DOC.relative_to(ROOT)}")
    return exit_code or 0


if __name__ == "__main__":
    sys.exit(main())
