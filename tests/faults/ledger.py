"""The fault-injection suite's counts: every test records each fault it injected and what became of it.

A case is recorded *before* its assertions run, so a failing case is counted (as lost/corrupted or as a traceback)
and the summary written at the end of the session tells the truth. ``ODF_FAULT_SUMMARY=<file>`` makes the session
write the summary as JSON; ``benchmarks/bench_faults.py`` runs the suite that way and renders
``docs/fault-injection.md`` from it.
"""
from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import asdict, dataclass, field

SUMMARY_ENV = "ODF_FAULT_SUMMARY"


@dataclass(frozen=True)
class FaultCase:
    fault_class: str  # "kill -9", "ENOSPC", "tampered file", "malformed input"
    operation: str  # what ran when the fault hit: "ingest commit", "odf verify", ...
    where: str  # the crash point, the failing write's path, the flipped file
    lost_or_corrupted: bool  # the dataset did not end valid with exactly the expected records
    traceback: bool  # the user saw something else than one clear error line (a stack trace, an internal error)


@dataclass
class FaultLedger:
    cases: list[FaultCase] = field(default_factory=list)

    def record(self, fault_class: str, operation: str, where: str, *, lost_or_corrupted: bool = False,
               traceback: bool = False) -> FaultCase:
        case = FaultCase(fault_class, operation, where, bool(lost_or_corrupted), bool(traceback))
        self.cases.append(case)
        return case

    def summary(self) -> dict:
        by_class: dict[str, dict[str, dict[str, int]]] = defaultdict(dict)
        for c in self.cases:
            row = by_class[c.fault_class].setdefault(c.operation, {"injected": 0, "lost_or_corrupted": 0,
                                                                   "tracebacks": 0})
            row["injected"] += 1
            row["lost_or_corrupted"] += c.lost_or_corrupted
            row["tracebacks"] += c.traceback
        return {
            "faults_injected": len(self.cases),
            "datasets_lost_or_corrupted": sum(c.lost_or_corrupted for c in self.cases),
            "tracebacks_shown": sum(c.traceback for c in self.cases),
            "by_class": by_class,
            "cases": [asdict(c) for c in self.cases],
        }

    def write(self, path: str) -> None:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.summary(), f, indent=1, sort_keys=True)
