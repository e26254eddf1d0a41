"""Child process of the S3 race test: commit ``n`` AddData blocks to one dataset of an S3 workspace through the real
commit path, re-planning on the new head whenever another writer won the compare-and-swap (an Append slice's offsets
are all that depends on the head). Prints one JSON line: the committed block hashes and the conflicts seen."""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from odf_core.commit import commit_data, describe_slice
from odf_core.errors import RefConflict
from odf_core.metadata import Timestamp
from odf_core.workspace import Workspace

from tests.odf_core.chain.builders import write_slice


def main(ws_url: str, dataset: str, worker: str, n: str) -> None:
    handle = Workspace.open(ws_url).get(dataset)
    tmp = Path(tempfile.mkdtemp(prefix=f"race-{worker}-"))
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        raise SystemExit("no go signal")
    committed, conflicts = [], 0
    while len(committed) < int(n):
        state = handle.chain.state()
        start = state.next_offset
        sf = describe_slice(write_slice(tmp / f"{start}.parquet", start, 5 + int(worker)), "offset", start)
        try:
            block = commit_data(handle.chain, base_head=state.head, slice_file=sf, checkpoint_path=None,
                                system_time=Timestamp.now())
        except RefConflict:
            conflicts += 1
            continue
        committed.append(str(block))
    print(json.dumps({"committed": committed, "conflicts": conflicts}), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
