"""Tampered caches, blocks and files, through the CLI as a user meets them.

Each case edits one stored object of a healthy workspace (a flipped byte, a truncation, an edited cache, a head
naming nothing), then runs the commands a user would: ``odf verify --integrity`` must fail in one line naming what is
wrong; a command that would build on a corrupted checkpoint must refuse in one line and change nothing; an edited
cache must be ignored and rebuilt. One child process runs every command (one Spark start); the workspace is restored
between cases.
"""
from __future__ import annotations

import json
import os
import shutil

import pytest

from odf_core.chain.summary import SUMMARY_KEY
from odf_core.identity import Multihash
from odf_core.ingest import transaction as tx
from odf_core.metadata import AddData
from odf_core.storage import DatasetLayout
from odf_core.transform import run as run_transform
from odf_core.workspace import Workspace

from .scenarios import (
    DERIVED,
    ROOT,
    derived_snapshot,
    error_lines,
    is_one_clear_line,
    root_snapshot,
    run_cli_batch,
    write_ndjson,
)

pytestmark = pytest.mark.spark


def _flip(path: str, at: int = -40) -> None:
    with open(path, "r+b") as f:
        f.seek(at, os.SEEK_END if at < 0 else os.SEEK_SET)
        b = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([b[0] ^ 0xFF]))


def _truncate(path: str) -> None:
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 2)


def _edit_summary(path: str) -> None:
    """Raise the record count the cache claims, keeping its layout (the HMAC no longer matches)."""
    with open(path, "rb") as f:
        header, sep, body = f.read().partition(b"\n")
    doc = json.loads(body if sep else header)
    doc["num_records"] = doc.get("num_records", 0) + 1000
    edited = json.dumps(doc).encode()
    with open(path, "wb") as f:
        f.write(header + sep + edited if sep else edited)


def test_tampered_blocks_files_and_caches(tmp_path, engine, fault_ledger):
    ws_dir = str(tmp_path / "ws")
    ws = Workspace.init(ws_dir)
    ws.create(root_snapshot())
    tx.push(ws, ROOT, write_ndjson(tmp_path / "a.json", range(0, 5)), engine=engine)
    tx.push(ws, ROOT, write_ndjson(tmp_path / "b.json", range(5, 9)), engine=engine)
    ws.create(derived_snapshot())
    run_transform(ws, DERIVED, engine=engine)
    tx.push(ws, ROOT, write_ndjson(tmp_path / "c.json", range(9, 12)), engine=engine)  # waiting for the transform
    root, derived = ws.get(ROOT), ws.get(DERIVED)
    adds = [(h, b.event) for h, b in root.chain.iter_blocks() if isinstance(b.event, AddData)]
    first_block, first_add = adds[-1]
    data = DatasetLayout.data_key(first_add.new_data.physical_hash)
    checkpoint = DatasetLayout.checkpoint_key(root.state().last_checkpoint.physical_hash)
    derived_checkpoint = DatasetLayout.checkpoint_key(derived.state().last_checkpoint.physical_hash)
    heads = {ROOT: root.chain.head(), DERIVED: derived.chain.head()}
    pristine = str(tmp_path / "pristine")
    shutil.copytree(ws_dir, pristine)
    more = write_ndjson(tmp_path / "d.json", range(12, 15))
    w = ["-w", ws_dir]

    def path(h, key: str) -> str:
        return h.store.local_path(key)

    nowhere = Multihash.sha3_256(b"no block has these bytes")

    # (what is edited, how, the commands and what each must say: (argv, exit code, text its one line must hold))
    cases = [
        ("a block (flipped byte)", lambda: _flip(path(root, DatasetLayout.block_key(first_block))), [
            (["verify", ROOT, "--integrity"], 1, f"block {first_block} is corrupted")]),
        ("a data file (flipped byte)", lambda: _flip(path(root, data)), [
            (["verify", ROOT, "--integrity"], 1, f"{data}")]),
        ("a data file (truncated)", lambda: _truncate(path(root, data)), [
            (["verify", ROOT, "--integrity"], 1, f"file {data} is")]),
        ("an ingest checkpoint (flipped byte)", lambda: _flip(path(root, checkpoint)), [
            (["verify", ROOT, "--integrity"], 1, f"{checkpoint}"),
            (["ingest", ROOT, more, "--master", "local[1]"], 1, "is corrupted: its bytes hash to")]),
        ("a transform checkpoint (flipped byte)", lambda: _flip(path(derived, derived_checkpoint)), [
            (["verify", DERIVED, "--integrity"], 1, f"{derived_checkpoint}"),
            (["pull", DERIVED, "--master", "local[1]"], 1, "is corrupted: its bytes hash to")]),
        ("the summary cache (edited)", lambda: _edit_summary(path(root, SUMMARY_KEY)), [
            (["verify", ROOT, "--integrity"], 1, SUMMARY_KEY),
            (["list"], 0, "")]),
        ("refs/head (not a block hash)", lambda: open(path(root, "refs/head"), "w").write("f" + "1" * 70), [
            (["verify", ROOT, "--integrity"], 1, "refs/head holds an invalid block hash")]),
        ("refs/head (names no block)", lambda: open(path(root, "refs/head"), "w").write(str(nowhere)), [
            (["verify", ROOT, "--integrity"], 1, f"block {nowhere} is missing")]),
    ]
    steps, expected = [], []
    for what, tamper, commands in cases:
        shutil.rmtree(ws_dir)
        shutil.copytree(pristine, ws_dir)
        tamper()
        tampered = str(tmp_path / f"tampered-{len(expected)}")
        shutil.copytree(ws_dir, tampered)
        steps.append({"run": ["sh", "-c", 'rm -rf "$0" && cp -a "$1" "$0"', ws_dir, tampered]})
        for argv, code, text in commands:
            steps.append({"odf": [*w, *argv]})
            expected.append((what, argv, code, text, len(steps) - 1))
        steps.append({"run": ["cat", *(os.path.join(ws_dir, "datasets", n, "refs", "head") for n in (ROOT, DERIVED))],
                      "case": what})
    results = run_cli_batch(steps, env={"ODF_LOG_DIR": str(tmp_path / "logs")})

    failures = []
    for what, argv, code, text, i in expected:
        r = results[i]
        lines = error_lines(r["err"])
        traceback = (not is_one_clear_line(r["err"])) if code else ("Traceback" in r["err"] or any(
            line.lstrip().startswith("at ") for line in lines))
        problems = []
        if r["code"] != code:
            problems.append(f"exit code {r['code']}, expected {code}")
        if code and text not in r["err"]:
            problems.append(f"the error does not name {text!r}")
        if argv[0] == "list" and (" 12 " not in r["out"] or "1012" in r["out"]):
            problems.append(f"odf list believed the edited cache: {r['out']}")
        fault_ledger.record("tampered file", f"odf {argv[0]}", what, traceback=traceback,
                            lost_or_corrupted=bool(problems))
        if problems or traceback:
            failures.append(f"{what}: odf {' '.join(argv)}: {problems} {lines}")
    # nothing was built on a corrupted state: every head as it was before the case's commands
    for step, r in zip(steps, results):
        if "case" in step and not step["case"].startswith("refs/head"):
            if r["out"] != f"{heads[ROOT]}{heads[DERIVED]}":
                failures.append(f"{step['case']}: a head moved although the dataset was corrupted: {r['out']}")
    assert not failures, "\n".join(failures)
