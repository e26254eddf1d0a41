"""What holding a small step's small frames as local relations saves (spark_jobs/transform/incremental/step.py,
``Step.keep``): the same stateful chains with the rule and with it switched off (every frame a local checkpoint, as
before), CPU, wall and Spark jobs; results go to the ``## bench_local_leaves`` section of ``benchmarks/RESULTS.md``.

Run: ``.venv/bin/python benchmarks/bench_local_leaves.py [--rounds N]``.

The chains (benchmarks/_step_chains.py): a GROUP BY with many aggregates, a window, stacked running windows, a window
over a window that looks ahead, a top-N over an aggregate, a join under an aggregate, each a rebuild and three
incremental steps, checked against plain Spark. "local checkpoints" switches the rule off; everything else is the
same code.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._step_chains import Chains, publish

SECTION = "bench_local_leaves"
FAMILIES = ("aggregates", "window", "running_stacked", "running_over_ahead", "top_then_aggregate",
            "join_then_aggregate")
SETTINGS = ("local relations", "local checkpoints")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()

    chains = Chains(SECTION, FAMILIES)
    from spark_jobs.transform.incremental import sizing

    rule_on = sizing.StepSizing.local_leaves

    def use(on: bool) -> None:
        sizing.StepSizing.local_leaves = rule_on if on else property(lambda self: False)  # type: ignore[method-assign]

    runs, loads = chains.compare({SETTINGS[0]: lambda: use(True), SETTINGS[1]: lambda: use(False)}, args.rounds)
    publish(SECTION, "a small step's small frames as local relations (#64)", chains, runs, loads, args.rounds,
            lambda med: (f"With small frames as local relations: CPU {ratio(med, 'cpu')}x, wall {ratio(med, 'wall')}x, "
                         f"Spark jobs {ratio(med, 'jobs')}x of local checkpoints."))


def ratio(med: dict, field: str) -> str:
    return f"{getattr(med[SETTINGS[0]], field) / getattr(med[SETTINGS[1]], field):.2f}"

if __name__ == "__main__":
    main()
