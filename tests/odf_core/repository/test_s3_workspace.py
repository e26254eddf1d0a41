"""A workspace on S3 (moto's server on loopback): concurrent writer processes on one dataset leave a linear chain
with exactly their successful commits (compare-and-swap by conditional writes), and ``odf`` works on it."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from odf_core.chain.integrity import verify_integrity
from odf_core.metadata import AddData
from odf_core.workspace import Workspace

from ..chain.builders import new_root

REPO = Path(__file__).resolve().parents[3]
WORKERS, COMMITS = 4, 3


def test_concurrent_writers_leave_a_linear_chain(s3_server) -> None:
    url = f"s3://{s3_server.bucket()}/ws"
    ws = Workspace.init(url)
    new_root(ws, "shared")
    env = s3_server.env({**os.environ, "PYTHONPATH": str(REPO)})
    procs = [subprocess.Popen([sys.executable, "-m", "tests.odf_core.repository.race_worker", url, "shared", str(i),
                               str(COMMITS)], cwd=REPO, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
             for i in range(WORKERS)]
    try:
        for p in procs:
            assert p.stdout.readline().strip() == "ready", p.stderr.read()
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        results = []
        for p in procs:
            out, err = p.communicate(timeout=180)
            assert p.returncode == 0, err[-3000:]
            results.append(json.loads(out))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    committed = [h for r in results for h in r["committed"]]
    handle = Workspace.open(url).get("shared")
    blocks = list(handle.chain.iter_blocks())
    adds = [str(h) for h, b in blocks if isinstance(b.event, AddData)]
    assert len(committed) == WORKERS * COMMITS
    assert sorted(adds) == sorted(committed), "a successful commit is missing from the chain (lost update)"
    assert [b.sequence_number for _, b in blocks] == list(range(len(blocks) - 1, -1, -1))
    assert sum(r["conflicts"] for r in results) > 0, "the writers never raced"
    report = verify_integrity(handle.store)
    assert report.ok, report.problem
    cli = subprocess.run([sys.executable, "-m", "odf_core.cli", "--workspace", url, "verify", "shared", "--integrity"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert cli.returncode == 0 and "ok" in cli.stdout, cli.stderr


@pytest.mark.slow
def test_cli_repo_push_pull_on_an_s3_workspace(s3_server, tmp_path: Path) -> None:
    """`odf init/push/pull/list` with --workspace s3://…, endpoint and credentials from the AWS_* variables."""
    from .datasets import grow

    env = s3_server.env({**os.environ, "PYTHONPATH": str(REPO)})
    bucket = s3_server.bucket()
    ws_url = f"s3://{bucket}/ws"

    def odf(*args: str, ws: str = ws_url) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "odf_core.cli", "--workspace", ws, *args], env=env,
                              capture_output=True, text=True, timeout=120)

    assert odf("init").returncode == 0
    ws = Workspace.open(ws_url)
    grow(new_root(ws, "root"), tmp_path, 2)
    assert odf("repo", "add", "shared", f"s3://{bucket}/repo").returncode == 0
    r = odf("push", "root", "--to", "shared/root")
    assert r.returncode == 0 and "-> s3://" in r.stdout, r.stderr
    local = tmp_path / "local"
    assert odf("init", ws=str(local)).returncode == 0
    r = odf("pull", f"s3://{bucket}/repo/root", "--as", "copy", ws=str(local))
    assert r.returncode == 0 and r.stdout.startswith("copy: 5 new block(s)"), r.stdout + r.stderr
    grow(ws.get("root"), tmp_path, 1, tag="b")
    assert odf("push", "root").returncode == 0  # to the remembered remote
    r = odf("pull", "copy", ws=str(local))  # a replica: synced from its remote
    assert r.returncode == 0 and r.stdout.startswith("copy: 1 new block(s)"), r.stdout + r.stderr
    r = odf("list", ws=str(local))
    assert r.returncode == 0 and "copy" in r.stdout
    assert verify_integrity(Workspace.open(str(local)).get("copy").store).ok
