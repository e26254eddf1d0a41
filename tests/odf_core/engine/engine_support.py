"""Helpers of the warm-engine tests (test_engine_server.py, test_engine_security.py): typed ingest requests, a slow
preprocess query, waiting on the server's health."""
from __future__ import annotations

import time
from pathlib import Path

from spark_jobs.server import EngineServer

from ...spark_jobs.ingest_support import typed_request

# A preprocess query that keeps a request busy for seconds on a few rows (CPU, no data, no memory: an earlier
# aggregate over a 40M-element sequence took ~1 GB of the driver's heap per row and once failed a request in CI):
# to cancel or overload.
SLOW = "SELECT * FROM input WHERE (SELECT count(*) FROM range(400000000) WHERE hash(id) % 7 = 0) >= 0"


def wait_until(condition, timeout_s: float = 30.0) -> None:
    """Poll a condition of the server (its health) until it holds."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the engine never reached the expected state"
        time.sleep(0.02)


def url(srv: EngineServer) -> str:
    return f"grpc://127.0.0.1:{srv.port}"


def ingest_request(tmp: Path, name: str, *, slow: bool = False, keep: str | None = None, read_only: bool = False,
                   out: Path | None = None):
    """A read+merge (or read-only) ingest of a two-row CSV; ``out``: where the slice and checkpoint go (default
    ``tmp``)."""
    src = tmp / f"{name}.csv"
    src.write_text("k,v\na,1\nb,2\n")
    out = out or tmp
    req = {"dataset": name, "workDir": str(tmp),
           "read": {"inputs": [{"path": str(src), "eventTime": "2024-01-01T00:00:00Z"}],
                    "readStep": {"kind": "Csv", "header": True, "schema": ["k STRING", "v BIGINT"]},
                    "preprocess": {"kind": "Sql", "engine": "spark", "query": SLOW} if slow else None}}
    if not read_only:
        req["merge"] = {"strategy": {"kind": "Ledger", "primaryKey": ["k"]}, "systemTime": "2024-01-02T00:00:00Z",
                        "outputPath": str(out / f"{name}.slice.parquet"),
                        "newCheckpointPath": str(out / f"{name}.ckpt.parquet")}
    if keep:
        req["keepReadAs"] = keep
    return typed_request(req, str(tmp))
