"""Push and pull through the Simple Transfer Protocol between real stores: a local directory, S3 (moto's server on
loopback) and HTTP (``odf serve`` on loopback): the layout, round trips, only-missing objects, a corrupt object, a
divergence, and a transfer killed mid-way then resumed."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from odf_core.chain.integrity import verify_integrity
from odf_core.errors import OdfError
from odf_core.repository import Diverged, pull_remote, push
from odf_core.repository.registry import RepoRegistry, remote_of
from odf_core.repository.serve import make_server
from odf_core.storage import DatasetLayout, ObjectStore, crash_env, was_killed
from odf_core.workspace import Workspace

from .datasets import chain_hashes, grow, workspace_with_root

REPO = Path(__file__).resolve().parents[3]


def _spec_keys(handle) -> set[str]:
    """Every object the spec's layout names for this chain: refs/head, blocks, data and checkpoint files."""
    keys = {DatasetLayout.head_ref}
    for h, block in handle.chain.iter_blocks():
        keys.add(DatasetLayout.block_key(h))
        ev = block.event
        if getattr(ev, "new_data", None) is not None:
            keys.add(DatasetLayout.data_key(ev.new_data.physical_hash))
        if getattr(ev, "new_checkpoint", None) is not None:
            keys.add(DatasetLayout.checkpoint_key(ev.new_checkpoint.physical_hash))
    return keys


def test_push_writes_the_spec_layout_object_for_object(tmp_path: Path) -> None:
    ws, h = workspace_with_root(str(tmp_path / "ws"), tmp_path, slices=3)
    result = push(ws, "root", f"file://{tmp_path}/repo/root")
    remote = ObjectStore.open(str(tmp_path / "repo" / "root"))
    keys = set(remote.list())
    assert keys == _spec_keys(h)
    assert len([k for k in keys if k.startswith("data/")]) == 3
    # Byte for byte what the dataset holds, under the same names; refs/head is the bare multibase hash.
    for k in keys - {DatasetLayout.head_ref}:
        assert remote.get(k) == h.store.get(k), k
    assert remote.get(DatasetLayout.head_ref) == str(h.chain.head()).encode()
    assert all(k.split("/")[1].startswith("f1620") for k in keys - {DatasetLayout.head_ref})  # sha3-256 multihash
    assert result.copied == len(keys) - 1 and result.new_blocks == len(chain_hashes(h))
    assert remote_of(h.store) == f"file://{tmp_path}/repo/root"


def _round_trip(tmp_path: Path, url: str) -> None:
    ws, h = workspace_with_root(str(tmp_path / "ws"), tmp_path, slices=3)
    push(ws, "root", url)
    ws2 = Workspace.init(str(tmp_path / "ws2"))
    name, first = pull_remote(ws2, url, "copy")
    copy = ws2.get(name)
    assert chain_hashes(copy) == chain_hashes(h)
    assert verify_integrity(copy.store).ok
    assert copy.state().last_offset == h.state().last_offset
    # Two more slices: only their objects travel, both ways.
    grow(h, tmp_path, 2, tag="b")
    again = push(ws, "root")
    assert again.new_blocks == 2 and again.copied == 2 * 3  # block + data + checkpoint each
    name, second = pull_remote(ws2, url, "copy")
    assert second.new_blocks == 2 and second.copied == 6 and second.old_head == first.new_head
    assert chain_hashes(ws2.get("copy")) == chain_hashes(h)
    assert verify_integrity(ws2.get("copy").store).ok
    assert pull_remote(ws2, url, "copy")[1].up_to_date


def test_round_trip_file(tmp_path: Path) -> None:
    _round_trip(tmp_path, f"file://{tmp_path}/repo/root")


def test_round_trip_s3(tmp_path: Path, s3_server) -> None:
    _round_trip(tmp_path, f"s3://{s3_server.bucket()}/repo/root")


def test_pull_over_http_from_odf_serve(tmp_path: Path) -> None:
    ws, h = workspace_with_root(str(tmp_path / "ws"), tmp_path, slices=3)
    server = make_server(ws, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        ws2 = Workspace.init(str(tmp_path / "ws2"))
        RepoRegistry(ws2.store).add("web", base)
        name, result = pull_remote(ws2, "web/root")
        assert name == "root" and chain_hashes(ws2.get("root")) == chain_hashes(h)
        assert verify_integrity(ws2.get("root").store).ok
        grow(h, tmp_path, 1, tag="b")
        assert pull_remote(ws2, f"{base}/root", "root")[1].new_blocks == 1
        with pytest.raises(OdfError, match="read-only"):
            push(ws2, "root")
        import urllib.request
        for bad in ("/root/keys", "/root/info/summary", "/root/../keys/chain-summary.key", "/nope/refs/head"):
            with pytest.raises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(base + bad)
            assert e.value.code == 404, bad
    finally:
        server.shutdown()
        server.server_close()


def test_corrupt_object_is_refused_and_nothing_committed(tmp_path: Path) -> None:
    ws, h = workspace_with_root(str(tmp_path / "ws"), tmp_path, slices=3)
    url = f"file://{tmp_path}/repo/root"
    push(ws, "root", url)
    remote = tmp_path / "repo" / "root"
    victim = sorted((remote / "data").iterdir())[1]
    victim.write_bytes(victim.read_bytes()[:-1] + b"\0")
    ws2 = Workspace.init(str(tmp_path / "ws2"))
    with pytest.raises(OdfError, match=r"data/f1620\w+ is corrupt: its bytes hash to"):
        pull_remote(ws2, url)
    assert not ws2.exists("root")
    assert ws2.store.get_ref("datasets/root/refs/head") is None
    assert not ws2.store.exists(f"datasets/root/data/{victim.name}")


def test_divergence_is_refused_unless_forced(tmp_path: Path) -> None:
    ws, h = workspace_with_root(str(tmp_path / "ws"), tmp_path, slices=2)
    url = f"file://{tmp_path}/repo/root"
    push(ws, "root", url)
    ws2 = Workspace.init(str(tmp_path / "ws2"))
    pull_remote(ws2, url)
    grow(h, tmp_path, 1, tag="a")  # the origin moves on and pushes ...
    push(ws, "root")
    other = ws2.get("root")
    grow(other, tmp_path, 1, tag="z")  # ... while the replica committed something else
    with pytest.raises(Diverged, match="diverged"):
        push(ws2, "root")
    with pytest.raises(Diverged, match="diverged"):
        pull_remote(ws2, url)
    assert ObjectStore.open(url).get_ref("refs/head") == str(h.chain.head())
    assert chain_hashes(ws2.get("root"))[0] == str(other.chain.head())
    pull_remote(ws2, url, force=True)
    assert chain_hashes(ws2.get("root")) == chain_hashes(h)
    assert verify_integrity(ws2.get("root").store).ok
    # The origin ahead of the replica is a fast-forward; the replica ahead of the origin is refused.
    grow(ws2.get("root"), tmp_path, 1, tag="y")
    with pytest.raises(Diverged, match="1 block\\(s\\) ahead"):
        pull_remote(ws2, url)


def test_pull_killed_mid_transfer_resumes(tmp_path: Path) -> None:
    ws, h = workspace_with_root(str(tmp_path / "ws"), tmp_path, slices=6)
    url = f"file://{tmp_path}/repo/root"
    total = push(ws, "root", url).copied
    ws2 = tmp_path / "ws2"
    Workspace.init(str(ws2))
    env = {**os.environ, "PYTHONPATH": str(REPO), **crash_env("transfer.after_object@7")}
    cmd = [sys.executable, "-m", "odf_core.cli", "--workspace", str(ws2), "pull", url]
    killed = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert was_killed(killed.returncode), killed.stderr
    assert not Workspace.open(str(ws2)).exists("root")  # no head yet: nothing committed
    env.pop("ODF_CRASH_AT")
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    copied, present = map(int, re.search(r"(\d+) object\(s\) copied .* (\d+) already there", done.stdout).groups())
    assert 0 < copied <= total - 7 and present >= 7, done.stdout
    again = Workspace.open(str(ws2)).get("root")
    assert chain_hashes(again) == chain_hashes(h) and verify_integrity(again.store).ok
