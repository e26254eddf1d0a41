"""Several real processes appending to one dataset at once: the chain stays linear, nothing is lost or forked."""
from __future__ import annotations

import subprocess
import sys
from collections import Counter

from odf_core.chain.integrity import verify_integrity
from odf_core.metadata import SetInfo
from odf_core.workspace import Workspace

from .builders import new_root

PROCS, PER_PROC = 4, 30


def test_multi_process_append_race(tmp_path):
    ws = Workspace.init(tmp_path / "ws")
    h = new_root(ws)
    procs = [
        subprocess.Popen([sys.executable, "-m", "tests.odf_core.chain.worker", "append", h.store.root, f"w{p}",
                          str(PER_PROC)], stdout=subprocess.PIPE, text=True)
        for p in range(PROCS)
    ]
    conflicts = [int(p.communicate(timeout=120)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    blocks = list(h.chain.iter_blocks())
    seqs = [b.sequence_number for _, b in blocks]
    assert seqs == list(range(len(blocks) - 1, -1, -1))  # linear, no gaps, no fork
    descs = Counter(b.event.description for _, b in blocks if isinstance(b.event, SetInfo))
    assert len(descs) == PROCS * PER_PROC and set(descs.values()) == {1}  # nothing lost, nothing twice
    assert h.chain.state() == h.chain.rebuild_state()
    assert verify_integrity(h.store).ok
    assert sum(conflicts) > 0  # the race really happened and losers were told to retry
