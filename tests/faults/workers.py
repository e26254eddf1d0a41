"""What the kill -9 tests run in a child process: one commit step, to be killed at a crash point.

Children come from a ``forkserver`` that has imported ``odf_core`` once, so each costs a fork, not an interpreter
start; none of them needs Spark (the engine's answer is already in staging), and ``NoEngine`` makes sure of it.
"""
from __future__ import annotations

import os

from odf_core.engine import Engine, EngineError

PRELOAD = ["odf_core.workspace", "odf_core.ingest.transaction", "odf_core.transform.transaction",
           "odf_core.chain.integrity", "odf_core.hashing", "tests.faults.scenarios"]


class NoEngine(Engine):
    """Refuses to run anything: a commit retried from staging must not need Spark again."""

    def execute(self, request, *, what: str = "engine request"):
        raise EngineError(f"{what}: the engine must not run here (the answer is staged)")

    def describe(self) -> str:
        return "no engine"


def _with_env(env: dict[str, str]) -> None:
    os.environ.update(env)


def ingest_commit(env: dict[str, str], ws_root: str, staging_dir: str) -> None:
    _with_env(env)
    from odf_core.ingest import transaction as tx
    from odf_core.workspace import Workspace

    tx.commit(Workspace.open(ws_root), tx.IngestTransaction.load(staging_dir))


def transform_commit(env: dict[str, str], ws_root: str, dataset: str, txn_id: str) -> None:
    _with_env(env)
    from odf_core.transform import run
    from odf_core.workspace import Workspace

    run(Workspace.open(ws_root), dataset, engine=NoEngine(), txn_id=txn_id)


def create_dataset(env: dict[str, str], ws_root: str) -> None:
    _with_env(env)
    from odf_core.workspace import Workspace
    from tests.faults.scenarios import root_snapshot

    Workspace.open(ws_root).create(root_snapshot("created"))


def hang(env: dict[str, str]) -> None:
    """Reaches no crash point and never ends: a hung child must not pass for one killed at its point."""
    _with_env(env)
    import time

    time.sleep(3600)
