"""What the first command costs when it has to start the auto engine (``ODF_ENGINE_URL=auto``: the first command
of the day, and the first after each idle exit), with and without the JVM class archive the package's fresh drivers
write, against a bare Spark start in the same run; results go to the ``## bench_engine_start`` section of
``benchmarks/RESULTS.md``.

Run: ``.venv/bin/python benchmarks/bench_engine_start.py [--rounds N]``.

Each round, for each setting: a bare ``local[2]`` SparkSession start with ``range(3).count()`` (a new process, the
same archive setting), then ``odf sql "SELECT 40 + 2"`` with ``ODF_ENGINE_URL=auto`` in a new engine directory (it
starts the engine, waits for it, asks it), then ``odf engine stop``. The archive is written before the rounds by one
fresh driver (an in-process ``odf sql`` without an engine), as the package does on first use. A warm-up round is not
counted; medians of the rounds.
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks._common import ensure_venv_path, machine_info, median, render_table, update_results_file  # noqa: E402
from benchmarks.bench_cold_start import BARE, timed_command  # noqa: E402

SECTION = "bench_engine_start"
SQL = "SELECT 40 + 2 AS answer"


class Runner:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.ws = tmp / "ws"
        self.env = {k: v for k, v in os.environ.items() if k not in ("ODF_ENGINE_URL", "ODF_JVM_ARCHIVE")}
        self.env.update(ODF_JVM_ARCHIVE_DIR=str(tmp / "jvm"), ODF_LOG_DIR=str(tmp / "logs"),
                        ODF_ENGINE_AUTO_ARGS="--master local[2]", PYTHONPYCACHEPREFIX=str(tmp / "pycache"))
        self.env.pop("PYTHONDONTWRITEBYTECODE", None)
        self.round = 0

    def setting_env(self, archive: bool) -> dict[str, str]:
        return dict(self.env, ODF_JVM_ARCHIVE="on" if archive else "off")

    def odf(self, *args: str, env: dict[str, str], expect: str = "") -> float:
        return timed_command([sys.executable, "-m", "odf_core.cli", "--workspace", str(self.ws), *args], env,
                             self.tmp, expect, timeout=600)[0]

    def setup(self) -> None:
        self.odf("init", env=self.env)
        env = self.setting_env(True)
        self.odf("sql", SQL, "--master", "local[2]", env=env, expect="42")  # a fresh driver writes the archive
        if not list((self.tmp / "jvm").glob("spark-*.jsa")):
            raise RuntimeError("the fresh driver wrote no class archive")

    def bare(self, archive: bool) -> float:
        env = self.setting_env(archive)
        if archive:
            (jsa,) = (self.tmp / "jvm").glob("spark-*.jsa")
            env["SPARK_SUBMIT_OPTS"] = f"{env.get('SPARK_SUBMIT_OPTS', '')} -XX:SharedArchiveFile={jsa}".strip()
        return timed_command([sys.executable, "-c", BARE], env, self.tmp)[0]

    def first_command(self, archive: bool) -> float:
        """``odf sql`` that starts an auto engine in a directory of its own; the engine is stopped after."""
        self.round += 1
        env = dict(self.setting_env(archive), ODF_ENGINE_URL="auto",
                   ODF_ENGINE_DIR=str(self.tmp / f"e{self.round}"))
        took = self.odf("sql", SQL, env=env, expect="42")
        self.odf("engine", "stop", env=env)
        return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    ensure_venv_path()
    settings = {"no archive": False, "class archive": True}
    walls: dict[tuple[str, str], list[float]] = {}
    loads = []
    with tempfile.TemporaryDirectory(prefix="odf-bench-start-", dir="/tmp") as d:
        r = Runner(Path(d))
        r.setup()
        for i in range(args.rounds + 1):
            for setting, archive in settings.items():
                measured = {"bare SparkSession + range(3).count()": r.bare(archive),
                            "first `odf sql` with auto (starts the engine)": r.first_command(archive)}
                if i:
                    for name, wall in measured.items():
                        walls.setdefault((name, setting), []).append(wall)
            if i:
                loads.append(os.getloadavg()[0])
                print(f"round {i}: " + ", ".join(f"{n[:20]} {s} {v[-1]:.2f} s" for (n, s), v in walls.items()),
                      flush=True)
    names = list(dict.fromkeys(n for n, _ in walls))
    med = {k: median(v) for k, v in walls.items()}
    rows = [[name, *(f"{med[(name, s)]:.2f} s ({min(walls[(name, s)]):.2f}–{max(walls[(name, s)]):.2f})"
                     for s in settings),
             f"{med[(name, 'class archive')] / med[(name, 'no archive')]:.2f}x",
             *(f"{med[(name, s)] / med[(names[0], s)]:.2f}x" for s in settings)]
            for name in names]
    body = "\n\n".join([
        f"Machine: {machine_info('local[2]')}; load average (1 min) after each round {min(loads):.1f}-"
        f"{max(loads):.1f}. Each round, each setting: a bare session (a new process), then `odf sql` with "
        f"`ODF_ENGINE_URL=auto` in a new engine directory (it starts `odf engine serve --master local[2]`, waits, "
        f"asks), then `odf engine stop`; a warm-up round, then {args.rounds} rounds; median (min–max). The archive "
        "was written by one fresh driver before the rounds, as on first use.",
        render_table(["command (end to end)", "no archive", "class archive", "archive ÷ none", "÷ bare (none)",
                      "÷ bare (archive)"], rows),
    ])
    update_results_file(SECTION, {f"{dt.date.today()}: the auto engine's start maps the class archive": body})
    print(body)


if __name__ == "__main__":
    main()
