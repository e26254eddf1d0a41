"""Helpers shared by the benchmark scripts: result rows, alternating medians, machine info, step timers, the
cost of an empty ``spark-submit``, and rewriting one script's section of ``benchmarks/RESULTS.md``.

Each script owns one ``## <script>`` section of RESULTS.md made of ``### <benchmark>`` subsections; a run rewrites
the subsections it ran and keeps every other section and subsection as it was.
"""
from __future__ import annotations

import datetime as dt
import os
import platform
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

RESULTS_FILE = Path(__file__).with_name("RESULTS.md")


@dataclass(frozen=True)
class Result:
    """One measurement: ``ratio = value / baseline``; ``target`` bounds the ratio (a minimum when higher is
    better, a maximum with ``lower_is_better``); None marks a row shown for information only."""

    name: str
    value: float
    baseline: float
    unit: str
    target: float | None
    baseline_name: str = ""
    lower_is_better: bool = False

    @property
    def ratio(self) -> float:
        return self.value / self.baseline if self.baseline else float("inf")

    @property
    def passed(self) -> bool | None:
        if self.target is None:
            return None
        return self.ratio <= self.target if self.lower_is_better else self.ratio >= self.target

    def verdict(self) -> str:
        return "info" if self.passed is None else "yes" if self.passed else "**NO**"

    def target_text(self) -> str:
        if self.target is None:
            return "–"
        return f"{'<=' if self.lower_is_better else '>='} {self.target:.2f}"

    def line(self) -> str:
        return (f"{self.name}: {self.value:,.2f} {self.unit} vs {self.baseline:,.2f} {self.unit} -> ratio "
                f"{self.ratio:.2f} (target {self.target_text()}) {self.verdict()}")


# -- timing ---------------------------------------------------------------------------------------------------------


def seconds(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def timed(fn: Callable[[], object]) -> Callable[[], float]:
    """``fn`` as a trial that returns its own wall time (trials with untimed set-up return theirs directly)."""
    return lambda: seconds(fn)


def alternate(trials: Sequence[Callable[[], float]], repetitions: int, *, warmup: bool = False) -> list[list[float]]:
    """Run the trials in turn ``repetitions`` times (so load from other processes hits all alike); each trial
    returns the seconds it measured. Returns the times per trial."""
    if warmup:
        for trial in trials:
            trial()
    times: list[list[float]] = [[] for _ in trials]
    for _ in range(repetitions):
        for i, trial in enumerate(trials):
            times[i].append(trial())
    return times


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def timed_pair(baseline: Callable[[], object], candidate: Callable[[], object], repetitions: int = 5
               ) -> tuple[float, float]:
    """Median wall times of two plain callables run alternately after a warm-up of each."""
    times = alternate([timed(baseline), timed(candidate)], repetitions, warmup=True)
    return median(times[0]), median(times[1])


@dataclass
class StepTimer:
    """Wall time spent inside named functions during a real call, by wrapping module attributes for the duration
    of :meth:`patch` (instrumentation only: the real functions run). Nested steps are inclusive."""

    seconds: dict[str, float] = field(default_factory=dict)
    returned: dict[str, list[Any]] = field(default_factory=dict)

    def reset(self) -> None:
        self.seconds.clear()
        self.returned.clear()

    @contextmanager
    def patch(self, targets: dict[str, tuple[ModuleType, str] | list[tuple[ModuleType, str]]]
              ) -> Iterator["StepTimer"]:
        """``targets``: label -> the module attribute(s) to time under it (a function imported by name into several
        modules is one step: list every module that calls it)."""
        originals = []
        try:
            for label, where in targets.items():
                for module, attr in (where if isinstance(where, list) else [where]):
                    original = getattr(module, attr)
                    originals.append((module, attr, original))
                    setattr(module, attr, self._wrap(label, original))
            yield self
        finally:
            for module, attr, original in reversed(originals):
                setattr(module, attr, original)

    def _wrap(self, label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                out = fn(*args, **kwargs)
            finally:
                self.seconds[label] = self.seconds.get(label, 0.0) + time.perf_counter() - t0
            self.returned.setdefault(label, []).append(out)
            return out

        return wrapper

    def get(self, label: str) -> float:
        return self.seconds.get(label, 0.0)


# -- Spark ----------------------------------------------------------------------------------------------------------

EMPTY_JOB = '''"""Starts and stops a SparkSession: the floor cost of any spark-submit job."""
from pyspark.sql import SparkSession

spark = SparkSession.builder.appName("odf-empty").getOrCreate()
spark.range(1).count()
spark.stop()
'''


def spark_submit_floor(engine: Any, repetitions: int) -> list[float]:
    """Wall times of ``spark-submit`` running a job that only starts a session, runs one trivial query and stops
    (JVM and Python start, session creation, shutdown), with the engine's master and configuration."""
    with tempfile.TemporaryDirectory(prefix="odf-bench-empty-") as tmp:
        script = os.path.join(tmp, "empty_job.py")
        Path(script).write_text(EMPTY_JOB)
        return [seconds(lambda: engine.run_job([], what="empty Spark job", script=script)) for _ in range(repetitions)]


def ensure_venv_path() -> None:
    """``spark-submit`` and the pyspark workers come from the venv that runs the benchmark."""
    venv_bin = str(Path(sys.executable).parent)
    if venv_bin not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = venv_bin + os.pathsep + os.environ.get("PATH", "")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


# -- report ---------------------------------------------------------------------------------------------------------


def machine_info(extra: str = "") -> str:
    import numpy as np
    import pyarrow as pa

    parts = [f"{os.cpu_count()} cores", platform.machine(), f"Python {platform.python_version()}",
             f"pyarrow {pa.__version__}", f"numpy {np.__version__}"]
    try:
        import pyspark

        parts.append(f"pyspark {pyspark.__version__}")
    except ImportError:
        pass
    if extra:
        parts.append(extra)
    parts += [dt.date.today().isoformat(), f"load average {os.getloadavg()[0]:.1f} at the end (other processes "
                                           "share the cores)"]
    return ", ".join(parts)


def fmt_seconds(s: float) -> str:
    return f"{s * 1000:,.0f} ms" if s < 1 else f"{s:,.2f} s"


def render_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def render_results(rows: Sequence[Result]) -> str:
    """Results whose unit is ``s`` are shown with :func:`fmt_seconds`."""
    def show(v: float, unit: str) -> str:
        return fmt_seconds(v) if unit == "s" else f"{v:,.1f} {unit}"

    return render_table(
        ["benchmark", "measured", "baseline", "ratio", "target", "pass"],
        [[r.name, show(r.value, r.unit), f"{show(r.baseline, r.unit)} ({r.baseline_name})", f"{r.ratio:.2f}",
          r.target_text(), r.verdict()] for r in rows])


@dataclass(frozen=True)
class Step:
    """A line of a time breakdown: ``key`` in a :class:`StepTimer`'s times, shown indented by ``depth``."""

    key: str
    label: str
    depth: int = 0


def render_breakdown(steps: Sequence[Step], times: dict[str, float], total: float, total_label: str) -> str:
    """A table of inclusive step times under ``total``; after the children of each step (and of the total) a
    "rest" line holds what the children do not cover. Steps missing from ``times`` are left out."""
    present = [s for s in steps if s.key in times]
    rows: list[list[str]] = [[f"**{total_label}**", fmt_seconds(total), "100%"]]

    def line(label: str, depth: int, t: float) -> list[str]:
        return ["&nbsp;&nbsp;" * (depth + 1) + label, fmt_seconds(t), f"{100 * t / total:.0f}%" if total else "–"]

    def emit(start: int, depth: int, parent_time: float, parent_label: str) -> int:
        i, covered = start, 0.0
        while i < len(present) and present[i].depth >= depth:
            s = present[i]
            t = times[s.key]
            rows.append(line(s.label, depth, t))
            covered += t
            i = emit(i + 1, depth + 1, t, s.label)
        rest = parent_time - covered
        if i > start and rest >= 0.0005:  # shown when a millisecond or more is not covered by the children
            rows.append(line(f"rest of {parent_label}", depth, rest))
        return i

    emit(0, 0, total, total_label)
    return render_table(["step", "time", "share"], rows)


def update_results_file(section: str, subsections: dict[str, str], path: Path = RESULTS_FILE) -> None:
    """Rewrite the given ``### <name>`` subsections (bodies without the heading) of ``## <section>``; other
    sections, and the subsections of ``section`` not given, stay as they were."""
    heading = f"## {section}"
    text = path.read_text() if path.exists() else "# Benchmark results\n"
    match = re.search(rf"^{re.escape(heading)}\n.*?(?=^## |\Z)", text, flags=re.S | re.M)
    kept: dict[str, str] = {}
    if match:
        for chunk in re.split(r"^(?=### )", match.group(0), flags=re.M)[1:]:
            kept[chunk.split("\n", 1)[0][4:].strip()] = chunk.rstrip("\n") + "\n\n"
    for name, body in subsections.items():
        kept[name] = f"### {name}\n\n{body.strip()}\n\n"
    new = heading + "\n\n" + "".join(kept.values())
    if match:
        text = text[:match.start()] + new + text[match.end():]
    else:
        text = text.rstrip("\n") + "\n\n" + new
    path.write_text(text.rstrip("\n") + "\n")
