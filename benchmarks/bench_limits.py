"""How soon each ingest limit fires after its value; results go to the ``## bench_limits`` section of
``benchmarks/RESULTS.md``.

Run: ``.venv/bin/python benchmarks/bench_limits.py [--quick]`` (``--quick``: one repetition, RESULTS.md untouched).
The tests (tests/odf_core/ingest/test_fetch_url.py, test_prepare.py) assert that each limit fires, by its message and
by what was left undone (bytes not received, a killed child); the seconds it takes are measured here, not asserted
there, where a loaded machine would make them flaky. Each case runs against the tests' real HTTP server on
127.0.0.1 (tests/odf_core/ingest/http_server.py) or a real child process; no Spark.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import fmt_seconds, machine_info, median, render_table, update_results_file
from odf_core.ingest import FetchedFile, FetchError, FetchOptions, PrepareError
from odf_core.ingest.fetch import fetch
from odf_core.ingest.prepare import prepare
from odf_core.metadata import FetchStepUrl, PrepStepPipe, Timestamp
from tests.odf_core.ingest.http_server import LocalHttpServer, Resource

SECTION = "bench_limits"
REPETITIONS = 5
T = Timestamp.parse("2030-01-01T00:00:00Z")


@dataclass(frozen=True)
class Case:
    name: str
    limit_s: float  # the limit's value: the earliest it may fire
    uncut_s: float  # how long the operation would take were the limit not enforced
    run: Callable[[LocalHttpServer, Path], None]  # must raise the limit's error


def _fetch(server: LocalHttpServer, staging: Path, path: str, **opts: float) -> None:
    fetch(FetchStepUrl(url=server.url(path)), staging_dir=str(staging), source_state=None, system_time=T,
          already_ingested=False, options=FetchOptions(**opts))


def _pipe_timeout(_: LocalHttpServer, staging: Path) -> None:
    src = staging / "fetch" / "000000-data.csv"
    src.parent.mkdir(parents=True, exist_ok=True)
    src.write_bytes(b"a\n1\n")
    prepare((PrepStepPipe(command=("sh", "-c", "sleep 30 & wait")),),
            (FetchedFile(path=str(src), event_time=T, name="data.csv"),), staging_dir=str(staging), timeout_s=0.3)


def _serve(server: LocalHttpServer) -> None:
    server.resources.update({
        "/slow": Resource(b"late"),
        "/trickle-deadline.csv": Resource(b"x" * 2000, trickle=(20, 0.05)),
        "/trickle-stall.csv": Resource(b"y" * 1000, trickle=(5, 0.05)),
        "/half.csv": Resource(b"z" * 100, stall_after=30),
    })


CASES = [
    # the server's delay (set per case below) keeps the answer back
    Case("fetch: read timeout 0.5 s, answer after 2 s", 0.5, 2.0,
         lambda s, d: _fetch(s, d, "/slow", timeout_s=0.5)),
    Case("fetch: deadline 0.6 s, body trickling for 5 s", 0.6, 5.0,
         lambda s, d: _fetch(s, d, "/trickle-deadline.csv", deadline_s=0.6, min_bytes_per_s=0)),
    Case("fetch: stall window 0.4 s at 100 B/s (minimum 400 B/s)", 0.4, 10.0,
         lambda s, d: _fetch(s, d, "/trickle-stall.csv", min_bytes_per_s=400, stall_window_s=0.4)),
    Case("fetch: stall window 0.3 s, body silent (read timeout 30 s)", 0.3, 30.0,
         lambda s, d: _fetch(s, d, "/half.csv", timeout_s=30, min_bytes_per_s=10, stall_window_s=0.3)),
    Case("fetch: deadline 0.4 s, answer after 3 s (read timeout 30 s)", 0.4, 3.0,
         lambda s, d: _fetch(s, d, "/slow", timeout_s=30, deadline_s=0.4)),
    Case("prepare: Pipe timeout 0.3 s, command sleeping 30 s", 0.3, 30.0, _pipe_timeout),
]
DELAYS = {CASES[0].name: 2.0, CASES[4].name: 3.0}


def measure(case: Case, repetitions: int, tmp: Path) -> list[float]:
    times = []
    for _ in range(repetitions):
        server = LocalHttpServer().start()
        _serve(server)
        server.delay_s = DELAYS.get(case.name, 0.0)
        staging = Path(tempfile.mkdtemp(dir=tmp))
        try:
            started = time.monotonic()
            try:
                case.run(server, staging)
            except (FetchError, PrepareError):
                times.append(time.monotonic() - started)
            else:
                raise AssertionError(f"{case.name}: the limit did not fire")
        finally:
            server.stop()
    return times


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="one repetition; RESULTS.md is not touched")
    args = ap.parse_args(argv)
    reps = 1 if args.quick else REPETITIONS
    rows = []
    with tempfile.TemporaryDirectory(prefix="odf-bench-limits-") as tmp:
        for case in CASES:
            print(f"{case.name} ...", flush=True)
            times = measure(case, reps, Path(tmp))
            rows.append([case.name, fmt_seconds(case.limit_s), fmt_seconds(median(times)),
                         fmt_seconds(max(times)), fmt_seconds(median(times) - case.limit_s), fmt_seconds(case.uncut_s)])
    table = render_table(["case", "limit", "fired after (median)", "slowest", "past the limit (median)",
                          "without the limit"], rows)
    body = (f"Machine: {machine_info()}. {reps} runs per case; the time from the call to the limit's error.\n\n"
            f"{table}")
    if args.quick:
        print(body)
    else:
        update_results_file(SECTION, {"limits: how soon a fetch or prepare limit fires": body})
        print(f"updated {SECTION} in benchmarks/RESULTS.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
