"""The main job on the embedded default: a fresh workspace with the example datasets, shown with ``odf``.

Run with ``./dev demo``. The workspace lives in ``build/demo/.odf`` and is recreated on every run.
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

from odf_core.cli import main as odf

HERE = Path(__file__).resolve().parent
WORKSPACE = HERE.parent / "build" / "demo" / ".odf"


def run(*argv: str) -> None:
    print(f"\n$ odf {' '.join(argv)}", flush=True)
    code = odf(["--workspace", str(WORKSPACE), *argv])
    if code != 0:
        sys.exit(code)


def main() -> None:
    if WORKSPACE.exists():
        shutil.rmtree(WORKSPACE)
    WORKSPACE.parent.mkdir(parents=True, exist_ok=True)
    run("init")
    run("add", "--recursive", str(HERE / "datasets"))
    run("list")
    for name in ("com.example.cities", "com.example.trips-by-city"):
        run("log", name)
    for name in ("com.example.cities", "com.example.trips", "com.example.ratings",
                 "com.example.trips-by-city", "com.example.busy-cities"):
        run("verify", name, "--integrity")


if __name__ == "__main__":
    main()
