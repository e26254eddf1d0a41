"""``odf engine serve`` as users run it: its own process (spark-submit), killed with -9 mid-request, restarted,
stopped with SIGTERM; clients are the library and the ``odf`` CLI with ``--engine``."""
from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from odf_core.engine import EngineError, remote_engine
from odf_core.ingest import transaction as tx
from odf_core.ingest.transaction import staging_root
from odf_core.metadata import AddData
from odf_core.metadata.yaml_serde import read_manifest_file
from odf_core.workspace import Workspace

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SNAPSHOT = """kind: DatasetSnapshot
version: 1
content:
  name: slow.pushes
  kind: Root
  metadata:
    - kind: AddPushSource
      sourceName: app
      read: {kind: Csv, header: true, schema: ["k STRING", "v BIGINT"]}
      preprocess:
        kind: Sql
        engine: spark
        # seconds of CPU (no memory) on two rows: long enough to kill the engine in the middle
        query: SELECT * FROM input WHERE (SELECT count(*) FROM range(400000000) WHERE hash(id) % 7 = 0) >= 0
      merge: {kind: Append}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class EngineProcess:
    def __init__(self, tmp: Path, name: str, drain_s: float = 30.0):
        self.port = free_port()
        self.log = tmp / f"{name}.log"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "odf_core.cli", "engine", "serve", "--port", str(self.port), "--master",
             "local[2]", "--max-concurrency", "2", "--drain-s", str(drain_s)],
            stdout=subprocess.DEVNULL, stderr=self.log.open("w"))
        self.url = f"grpc://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 180
        while "odf engine ready" not in self.log.read_text():
            assert self.proc.poll() is None, self.log.read_text()[-3000:]
            assert time.monotonic() < deadline, "the engine did not come up"
            time.sleep(0.2)

    def processes(self) -> list[psutil.Process]:
        p = psutil.Process(self.proc.pid)
        return [p, *p.children(recursive=True)]

    def kill9(self) -> None:
        for p in self.processes():
            p.kill()
        self.proc.wait(30)

    def wait_running(self, n: int) -> None:
        deadline = time.monotonic() + 60
        while remote_engine(self.url).health().running != n:
            assert time.monotonic() < deadline
            time.sleep(0.05)


def in_thread(fn) -> tuple[threading.Thread, list]:
    out: list = []

    def run() -> None:
        try:
            out.append(fn())
        except BaseException as e:  # noqa: BLE001
            out.append(e)

    t = threading.Thread(target=run)
    t.start()
    return t, out


def odf(*args: str, ws: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "odf_core.cli", "--workspace", str(ws), *args],
                          capture_output=True, text=True, timeout=300)


def test_kill9_restart_retry_exactly_once_then_sigterm_leaves_nothing_staged(tmp_path):
    snap_file = tmp_path / "slow.yaml"
    snap_file.write_text(SNAPSHOT)
    ws = Workspace.init(tmp_path / "ws")
    handle = ws.create(read_manifest_file(str(snap_file), expected="DatasetSnapshot"))
    data = tmp_path / "in.csv"
    data.write_text("k,v\na,1\nb,2\n")
    before = handle.chain.head()

    a = EngineProcess(tmp_path, "a")
    t, out = in_thread(lambda: tx.push(ws, "slow.pushes", str(data), engine=remote_engine(a.url), txn_id="k1"))
    a.wait_running(1)
    a.kill9()
    t.join(60)
    assert isinstance(out[0], EngineError) and a.url in str(out[0]), out
    assert handle.chain.head() == before  # the dataset is unchanged

    b = EngineProcess(tmp_path, "b", drain_s=0)
    try:
        first = tx.push(ws, "slow.pushes", str(data), engine=remote_engine(b.url), txn_id="k1")
        assert first.block_hash and first.num_records == 2 and not first.already_ingested
        cli = odf("ingest", "slow.pushes", str(data), "--txn-id", "k1", "--engine", b.url, ws=tmp_path / "ws")
        assert cli.returncode == 0 and "already ingested in block " + first.block_hash in cli.stdout, cli.stderr
        adds = [blk for _, blk in handle.chain.iter_blocks() if isinstance(blk.event, AddData)]
        assert len(adds) == 1 and handle.state().num_records == 2
        status = odf("engine", "status", "--engine", b.url, ws=tmp_path / "ws")
        assert status.returncode == 0 and "0 of 2 request(s) running" in status.stdout

        # SIGTERM with no drain time: the running request is cancelled and its staged output removed
        head = handle.chain.head()
        t, out = in_thread(lambda: tx.push(ws, "slow.pushes", str(data), engine=remote_engine(b.url),
                                           txn_id="k2"))
        b.wait_running(1)
        b.proc.send_signal(signal.SIGTERM)
        assert b.proc.wait(120) == 0, b.log.read_text()[-3000:]
        t.join(60)
        assert isinstance(out[0], EngineError), out
        assert handle.chain.head() == head
        # the engine's own log (Python's, which spark-submit sends to the driver's stdout) is on serve's stderr
        log = b.log.read_text()
        assert "odf engine listening on" in log and ": answered " in log and "draining" in log, log[-3000:]
        # each answer's line says the request's time and how many Spark jobs it ran (issue #64)
        answered = r"of slow\.pushes: answered IngestResponseSuccess in [0-9.]+ s \([1-9][0-9]* Spark jobs\)$"
        assert re.search(answered, log, re.M), log[-3000:]
        staged = Path(staging_root(ws)) / str(handle.state().dataset_id).removeprefix("did:odf:") / "k2"
        assert not (staged / "slice.parquet").exists() and not (staged / "checkpoint.parquet").exists()
    finally:
        if b.proc.poll() is None:
            b.kill9()
    # this test's engines only (another xdist worker may run engines of its own): they listen on a.port and b.port
    ours = {str(a.port), str(b.port)}
    leftovers = [p for p in psutil.process_iter(["cmdline"]) if "spark_jobs/server.py" in " ".join(
        p.info["cmdline"] or []) and ours & set(p.info["cmdline"] or [])]
    assert leftovers == [], "engine processes left behind"
