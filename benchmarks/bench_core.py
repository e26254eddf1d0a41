"""Core benchmarks of the protocol library; results go to the ``## bench_core`` section of ``benchmarks/RESULTS.md``.

Run: ``.venv/bin/python benchmarks/bench_core.py [bench_name ...]``. Every ``bench_*`` function returns a list of
:class:`Result` rows; add new benchmarks by writing such a function and listing it in :data:`BENCHMARKS`.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import os
import platform
import re
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa

from odf_core.hashing import logical_hash_table

RESULTS_FILE = Path(__file__).with_name("RESULTS.md")
SECTION = "## bench_core"
REPETITIONS = 5


@dataclass(frozen=True)
class Result:
    """One measurement: ``value`` and ``baseline`` in ``unit`` (higher is better), ``ratio = value / baseline``."""

    name: str
    value: float
    baseline: float
    unit: str
    target: float | None  # minimum acceptable ratio; None for rows shown for information only
    baseline_name: str = ""
    clock: str = "wall"  # "wall" (perf_counter) or "cpu" (this thread's CPU time: robust on a busy machine)

    @property
    def ratio(self) -> float:
        return self.value / self.baseline if self.baseline else float("inf")

    @property
    def passed(self) -> bool | None:
        return None if self.target is None else self.ratio >= self.target

    def verdict(self) -> str:
        return "info" if self.passed is None else "yes" if self.passed else "**NO**"


CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.thread_time}


def _seconds(fn: Callable[[], object], clock: Callable[[], float]) -> float:
    t0 = clock()
    fn()
    return clock() - t0


def timed_pair(baseline: Callable[[], object], candidate: Callable[[], object],
               repetitions: int = REPETITIONS, clock: str = "wall") -> tuple[float, float]:
    """Median times of ``baseline`` and ``candidate``, run alternately (after a warm-up of each) so that load from
    other processes on the machine hits both alike. The "cpu" clock counts only this thread's CPU time, which
    is only meaningful for code that runs on this thread alone."""
    baseline()
    candidate()
    tick = CLOCKS[clock]
    pairs = [(_seconds(baseline, tick), _seconds(candidate, tick)) for _ in range(repetitions)]
    return statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)


# ---------------------------------------------------------------------------------------------------------------
# Logical hash


def _fixed_table(n: int) -> pa.Table:
    rng = np.random.default_rng(1)
    return pa.table({
        "i": pa.array(rng.integers(-(1 << 62), 1 << 62, n), pa.int64()),
        "f": pa.array(rng.random(n), pa.float64()),
        "t": pa.array(1_600_000_000_000 + rng.integers(0, 10**10, n), pa.timestamp("ms", "UTC")),
    })


def _strings_table(n: int, null_fraction: float) -> pa.Table:
    """``n`` random strings of 5-15 ASCII characters, built from buffers (fast for 10M rows)."""
    rng = np.random.default_rng(2)
    lengths = rng.integers(5, 16, n)
    valid = rng.random(n) >= null_fraction
    lengths[~valid] = 0
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    alphabet = np.frombuffer(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ", np.uint8)
    data = alphabet[rng.integers(0, len(alphabet), int(offsets[-1]))]
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
    arr = pa.Array.from_buffers(pa.string(), n, [bitmap, pa.py_buffer(offsets), pa.py_buffer(data)])
    return pa.table({"s": arr})


def _raw_sha3(buffers: list[pa.Buffer]) -> None:
    for buf in buffers:
        hashlib.sha3_256(buf).digest()


def bench_logical_hash(rows: int = 10_000_000) -> list[Result]:
    """Logical hash throughput vs raw SHA3-256 over the same column bytes (MB/s of column data)."""
    results = []

    fixed = _fixed_table(rows)
    value_buffers = [fixed.column(i).chunk(0).buffers()[1] for i in range(fixed.num_columns)]
    size_mb = sum(b.size for b in value_buffers) / 1e6
    for parallel in (True, False):
        clock = "wall" if parallel else "cpu"
        base, t = timed_pair(lambda: _raw_sha3(value_buffers),  # noqa: F821 - the lambdas run before the del below
                             lambda: logical_hash_table(fixed, parallel=parallel),  # noqa: F821
                             clock=clock)
        results.append(Result(
            name=f"logical hash {rows // 1_000_000}M rows int64+float64+timestamp(ms,UTC), no nulls"
                 + (" (default: columns on worker threads)" if parallel else " (parallel=False)"),
            value=size_mb / t, baseline=size_mb / base, unit="MB/s", target=0.7 if parallel else None,
            baseline_name="sha3-256 of the 3 value buffers", clock=clock,
        ))
    del fixed, value_buffers

    strings = _strings_table(rows, 0.10)
    data_buffer = strings.column(0).chunk(0).buffers()[2]
    size_mb = data_buffer.size / 1e6
    for parallel in (True, False):
        clock = "wall" if parallel else "cpu"
        base, t = timed_pair(lambda: _raw_sha3([data_buffer]), lambda: logical_hash_table(strings, parallel=parallel),
                             clock=clock)
        results.append(Result(
            name=f"logical hash {rows // 1_000_000}M strings (5-15 chars), 10% nulls"
                 + (" (default: encode next chunk while hashing)" if parallel else " (parallel=False)"),
            value=size_mb / t, baseline=size_mb / base, unit="MB/s", target=0.3 if parallel else None,
            baseline_name="sha3-256 of the string data buffer", clock=clock,
        ))
    return results


# ---------------------------------------------------------------------------------------------------------------
# Registry and report

# -- metadata chain --------------------------------------------------------------------------------------------------

CHAIN_BLOCKS = 10_000


def _chain_event(i: int):
    from odf_core.metadata import AddData, SourceState, Timestamp

    return AddData(new_source_state=SourceState(source_name="default", kind="odf/etag", value=f'"{i}"'),
                   new_watermark=Timestamp(1_704_067_200_000_000_000 + i * 1_000_000_000))


def _new_root(tmp: str, name: str):
    from odf_core.metadata import AddPushSource, DatasetKind, DatasetSnapshot, MergeStrategyAppend, ReadStepNdJson
    from odf_core.workspace import Workspace

    ws = Workspace.init(os.path.join(tmp, name))
    return ws.create(DatasetSnapshot(name="bench", kind=DatasetKind.ROOT, metadata=(AddPushSource(
        source_name="default", read=ReadStepNdJson(), merge=MergeStrategyAppend()),)))


def _grow(handle, n: int) -> float:
    """Append n blocks through the real path (validate, encode, write, compare-and-swap, summary); seconds."""
    from odf_core.metadata import Timestamp

    chain = handle.chain
    state = chain.state()
    t0 = time.perf_counter()
    for i in range(n):
        chain.append_event(_chain_event(i), Timestamp(1_704_067_200_000_000_000 + i), state=state)
        state = chain.state()
    return time.perf_counter() - t0


def bench_chain(blocks: int = CHAIN_BLOCKS) -> list[Result]:
    """Append and validate a chain of ``blocks`` blocks; read the current state at 10 vs ``blocks`` blocks."""
    import tempfile

    from odf_core.chain.integrity import verify_integrity
    from odf_core.storage import DatasetLayout

    rows = []
    with tempfile.TemporaryDirectory(prefix="odf-bench-chain-") as tmp:
        big = _new_root(tmp, "big")
        append_s = _grow(big, blocks)
        n = big.state().block_count
        # baseline for appends: hashing the same manifest bytes with raw SHA3 (what cannot be avoided)
        raws = [big.store.get(DatasetLayout.block_key(h)) for h, _ in big.chain.iter_blocks()]
        sha3_s = statistics.median(_seconds(lambda: [hashlib.sha3_256(r).digest() for r in raws], time.perf_counter)
                                   for _ in range(REPETITIONS))
        rows.append(Result(f"append {blocks:,} blocks (validate, encode, write, CAS head, summary; fsync on)",
                           blocks / append_s, len(raws) / sha3_s, "blocks/s", None,
                           "raw sha3-256 of the same block bytes"))
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            report = verify_integrity(big.store)
            times.append(time.perf_counter() - t0)
            assert report.ok, report.summary()
        rate = n / statistics.median(times)
        rows.append(Result(f"full integrity validation of the {n:,}-block chain (read, hash, decode, rules)",
                           rate, 5_000.0, "blocks/s", 1.0, "target 5,000 blocks/s"))
        small = _new_root(tmp, "small")
        _grow(small, 10 - small.state().block_count)

        def read_state(handle) -> float:
            chain = handle.chain  # with the workspace's summary key: head + authenticated summary
            samples = []
            for _ in range(7):
                t0 = time.perf_counter()
                for _ in range(200):
                    chain.state()
                samples.append((time.perf_counter() - t0) / 200)
            return statistics.median(samples)

        at_small, at_big = read_state(small), read_state(big)
        rows.append(Result(f"current state read at 10 blocks vs {n:,} blocks (inverse time; ratio = t(10)/t(big))",
                           1 / at_big, 1 / at_small, "reads/s", 1 / 1.5, "the same read at 10 blocks"))
    return rows


BENCHMARKS: dict[str, Callable[[], list[Result]]] = {
    "bench_logical_hash": bench_logical_hash,
    "bench_chain": bench_chain,
}


def machine_info() -> str:
    return (f"{os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}, "
            f"pyarrow {pa.__version__}, numpy {np.__version__}, {dt.date.today().isoformat()}, "
            f"load average {os.getloadavg()[0]:.1f} (other processes share the cores)")


def render_subsection(bench: str, rows: list[Result]) -> str:
    lines = [f"### {bench}", "", f"Machine: {machine_info()}. Medians of {REPETITIONS} alternating runs; "
             "ratio = measured / baseline (higher is better); clock `wall` = elapsed time, `cpu` = CPU time of the "
             "calling thread (single-thread rows: not distorted by other processes on the cores).", "",
             "| benchmark | clock | measured | baseline | ratio | target | pass |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        target = "–" if r.target is None else f">= {r.target:.2f}"
        lines.append(f"| {r.name} | {r.clock} | {r.value:,.1f} {r.unit} | {r.baseline:,.1f} {r.unit} "
                     f"({r.baseline_name}) | {r.ratio:.2f} | {target} | {r.verdict()} |")
    return "\n".join(lines) + "\n\n"


def update_results_file(results: dict[str, list[Result]], path: Path = RESULTS_FILE) -> None:
    """Rewrite the ``### <bench>`` subsections that ran inside ``## bench_core``; other sections and the
    subsections of benchmarks not run this time are kept."""
    text = path.read_text() if path.exists() else "# Benchmark results\n"
    pattern = re.compile(rf"^{re.escape(SECTION)}\n.*?(?=^## |\Z)", re.S | re.M)
    match = pattern.search(text)
    subsections: dict[str, str] = {}
    if match:
        for chunk in re.split(r"^(?=### )", match.group(0), flags=re.M)[1:]:
            subsections[chunk.split("\n", 1)[0][4:].strip()] = chunk.rstrip("\n") + "\n\n"
    for bench, rows in results.items():
        subsections[bench] = render_subsection(bench, rows)
    section = SECTION + "\n\n" + "".join(subsections.values())
    if match:
        text = text[:match.start()] + section + text[match.end():]
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text.rstrip("\n") + "\n")


def main(argv: list[str] | None = None) -> int:
    names = (argv if argv is not None else sys.argv[1:]) or list(BENCHMARKS)
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        print(f"unknown benchmark(s) {unknown}; known: {list(BENCHMARKS)}", file=sys.stderr)
        return 2
    results = {}
    for name in names:
        results[name] = BENCHMARKS[name]()
        for r in results[name]:
            print(f"{r.name} [{r.clock}]: {r.value:.1f} {r.unit} vs {r.baseline:.1f} -> ratio {r.ratio:.2f} "
                  f"(target {r.target}) {r.verdict()}", flush=True)
    update_results_file(results)
    return 0 if all(r.passed is not False for rows in results.values() for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
