"""Small real datasets for the fault suite, and the checks every fault must pass: the dataset verifies, holds exactly
the records it should, and nothing is left behind that ``odf gc`` would not remove."""
from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass

import pyarrow.parquet as pq

from odf_core.chain.integrity import verify_integrity
from odf_core.gc import referenced_keys
from odf_core.metadata import (
    AddPushSource,
    DatasetKind,
    DatasetSnapshot,
    MergeStrategyLedger,
    ReadStepNdJson,
    SetTransform,
    TransformInput,
    TransformSql,
)
from odf_core.storage import DatasetLayout
from odf_core.workspace import DatasetHandle, Workspace

ROOT = "events"
DERIVED = "totals"


def root_snapshot(name: str = ROOT) -> DatasetSnapshot:
    """A push source merged as a Ledger: every ingest commit writes a slice and a checkpoint (the seen keys)."""
    return DatasetSnapshot(name=name, kind=DatasetKind.ROOT, metadata=(AddPushSource(
        source_name="app", read=ReadStepNdJson(schema=("k STRING", "v BIGINT")),
        merge=MergeStrategyLedger(primary_key=("k",))),))


def derived_snapshot() -> DatasetSnapshot:
    """An aggregation: a stateful plan, so every transform commit writes a slice and a checkpoint."""
    return DatasetSnapshot(name=DERIVED, kind=DatasetKind.DERIVATIVE, metadata=(SetTransform(
        inputs=(TransformInput(dataset_ref=ROOT),),
        transform=TransformSql(engine="spark", query=f"select max(event_time) as event_time, k, sum(v) as total "
                                                     f"from {ROOT} group by k")),))


def write_ndjson(path, keys: range) -> str:
    with open(path, "w", encoding="utf-8") as f:
        for i in keys:
            f.write(f'{{"k": "k{i}", "v": {i}}}\n')
    return str(path)


@dataclass(frozen=True)
class Snapshot:
    """A copy of a whole workspace directory (staging included) to restore between injected faults."""

    source: str
    copy: str

    @classmethod
    def take(cls, source, copy) -> "Snapshot":
        shutil.copytree(source, copy, symlinks=True)
        return cls(str(source), str(copy))

    def restore(self) -> None:
        shutil.rmtree(self.source)
        shutil.copytree(self.copy, self.source, symlinks=True)


def record_count(h: DatasetHandle) -> int:
    return h.state().num_records


def rows(h: DatasetHandle) -> list[tuple]:
    """The data columns of every record, in offset order (system columns left out)."""
    out: list[tuple] = []
    for _, b in reversed(list(h.chain.iter_blocks())):
        nd = getattr(b.event, "new_data", None)
        if nd:
            t = pq.read_table(h.store.local_path(DatasetLayout.data_key(nd.physical_hash)))
            names = [n for n in t.column_names if n not in ("offset", "op", "system_time", "event_time")]
            out += [tuple(r[n] for n in names) for r in t.to_pylist()]
    return out


TEMP_NAME = re.compile(r"^\.tmp-|\.part$|\.tmp$|\.tmp-[0-9a-f]{32}$")


def temp_files(root: str) -> list[str]:
    """Temp files of the storage layer, the staging helpers or the engine anywhere under ``root``."""
    return sorted(os.path.relpath(os.path.join(d, n), root) for d, _, files in os.walk(root) for n in files
                  if TEMP_NAME.search(n))


def staged(ws: Workspace) -> list[str]:
    """Every file under the workspace's staging directory."""
    root = ws.store.local_path("staging")
    return sorted(os.path.relpath(os.path.join(d, n), root) for d, _, files in os.walk(root) for n in files)


def orphans(h: DatasetHandle) -> list[str]:
    """Data, checkpoint and block files no block of the chain references."""
    referenced, _ = referenced_keys(h.chain, h.chain.head(), None)
    listed = [k for folder in (DatasetLayout.DATA, DatasetLayout.CHECKPOINTS, DatasetLayout.BLOCKS)
              for k in h.store.list(folder)]
    return sorted(k for k in listed if k not in referenced)


def intact(h: DatasetHandle) -> str | None:
    """None when the dataset verifies (every block, link, file and the summary); else the problem."""
    report = verify_integrity(h.store)
    if not report.ok:
        return report.summary()
    if h.chain.state() != h.chain.rebuild_state():
        return "the state read through the summary differs from the chain's"
    return None


#: Lines the JVM and Spark print on stderr while Spark starts in the CLI's process, before any of our code can set
#: its logging up: noise, but no error and no trace. Anything else on stderr counts against the one-line rule.
SPARK_BANNER = re.compile(
    r"^(WARNING: Using incubator modules: .*|Using Spark's default log4j profile: .*|Setting default log level to .*"
    r"|To adjust logging level use .*|\d\d/\d\d/\d\d \d\d:\d\d:\d\d WARN (Utils|NativeCodeLoader): .*)$")


def error_lines(stderr: str) -> list[str]:
    """What the user reads on stderr, the Spark start-up banner left out."""
    return [line for line in stderr.splitlines() if line.strip() and not SPARK_BANNER.match(line)]


def is_one_clear_line(stderr: str) -> bool:
    """Exactly one ``odf: error: …`` line, no stack trace, no internal error."""
    lines = error_lines(stderr)
    return (len(lines) == 1 and lines[0].startswith("odf: error: ") and "Traceback" not in stderr
            and "internal error" not in lines[0])


REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_cli_batch(steps: list[dict], *, env: dict[str, str] | None = None, wrap: list[str] | None = None,
                  timeout: float = 600) -> list[dict]:
    """Run ``odf`` commands in one child process (see ``tests.faults.cli_batch``); one result per step."""
    import json
    import subprocess
    import sys

    cmd = [*(wrap or []), sys.executable, "-m", "tests.faults.cli_batch"]
    p = subprocess.run(cmd, input=json.dumps(steps), capture_output=True, text=True, cwd=REPO, timeout=timeout,
                       env={**os.environ, **(env or {})})
    assert p.returncode == 0, f"the batch itself failed ({p.returncode}): {p.stderr[-3000:]}"
    return json.loads(p.stdout)
