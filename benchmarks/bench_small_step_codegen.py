"""What running small steps without code generation saves (spark_jobs/transform/incremental/sizing.py,
``INTERPRETED``: no whole-stage code, Spark's interpreted projections): the same stateful chains with the rule, with
whole-stage code generation off alone (the rule before), and with Spark's defaults; CPU, wall and Spark jobs; results
go to the ``## bench_small_step_codegen`` section of ``benchmarks/RESULTS.md``.

Run: ``.venv/bin/python benchmarks/bench_small_step_codegen.py [--rounds N]``.

The chains (benchmarks/_step_chains.py): a GROUP BY with many aggregates, a window, stacked running windows, a top-N
over an aggregate, a join under an aggregate, each a rebuild and three incremental steps, checked against plain
Spark. Everything but the settings the rule sets is the same code.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._step_chains import Chains, publish

SECTION = "bench_small_step_codegen"
FAMILIES = ("aggregates", "window", "running_stacked", "top_then_aggregate", "join_then_aggregate")
SETTINGS = ("interpreted small steps", "whole-stage code generation off only", "Spark's defaults")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=4)
    args = ap.parse_args()

    chains = Chains(SECTION, FAMILIES)
    from spark_jobs.transform.incremental import sizing

    rule = dict(sizing.INTERPRETED)

    def use(interpreted: dict[str, str]) -> None:  # what a small step (or small rebuild) sets
        sizing.INTERPRETED.clear()
        sizing.INTERPRETED.update(interpreted)

    runs, loads = chains.compare({
        SETTINGS[0]: lambda: use(rule),
        SETTINGS[1]: lambda: use({sizing.CODEGEN_CONF: "false", sizing.FACTORY_CONF: "FALLBACK"}),
        SETTINGS[2]: lambda: use(dict(sizing.COMPILED)),
    }, args.rounds)
    publish(SECTION, "small steps without code generation (#64)", chains, runs, loads, args.rounds, summary)


def summary(med: dict) -> str:
    new, wholestage, default = (med[s] for s in SETTINGS)
    return (f"Small steps interpreted: CPU {new.cpu / default.cpu:.2f}x, wall {new.wall / default.wall:.2f}x of "
            f"Spark's defaults; whole-stage code generation off alone: CPU {wholestage.cpu / default.cpu:.2f}x, wall "
            f"{wholestage.wall / default.wall:.2f}x.")

if __name__ == "__main__":
    main()
