"""The S3 store on a real S3 API (moto's server on loopback): reads, listings, create-only objects and a ref
compare-and-swap made of conditional writes, raced by real processes."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from odf_core.errors import OdfError, RefConflict
from odf_core.storage import ObjectNotFound, ObjectStore

from .storage_worker import WORKER


@pytest.fixture
def s3_store(s3_server) -> ObjectStore:
    return ObjectStore.open(f"s3://{s3_server.bucket()}/ws")


def test_objects_and_listings(s3_store: ObjectStore) -> None:
    assert s3_store.url.startswith("s3://") and s3_store.url.endswith("/ws")
    assert s3_store.put_if_absent("blocks/a", b"one") is True
    assert s3_store.put_if_absent("blocks/a", b"two") is False  # If-None-Match: the first object stays
    assert s3_store.get("blocks/a") == b"one"
    s3_store.put("info/summary", b"x")
    s3_store.put("info/summary", b"y")
    assert s3_store.get("info/summary") == b"y"
    assert s3_store.list() == ["blocks/a", "info/summary"]
    assert s3_store.list_dirs() == ["blocks", "info"]
    assert s3_store.child("blocks").list() == ["a"]
    assert s3_store.exists("blocks/a") and not s3_store.exists("blocks/b") and not s3_store.exists("blocks")
    assert s3_store.size("blocks/a") == 3
    with pytest.raises(ObjectNotFound):
        s3_store.get("blocks/b")
    big = bytes(range(256)) * 40000
    s3_store.put_if_absent("data/big", big)
    with s3_store.open_read("data/big") as f:
        f.seek(1_000_000)
        assert f.read(10) == big[1_000_000:1_000_010]
    assert s3_store.delete("blocks/a") and not s3_store.delete("blocks/a")
    s3_store.delete_prefix("data")
    assert s3_store.list() == ["info/summary"]


def test_ref_compare_and_swap(s3_store: ObjectStore) -> None:
    assert s3_store.get_ref("refs/head") is None
    s3_store.compare_and_swap_ref("refs/head", None, "a")
    with pytest.raises(RefConflict) as e:
        s3_store.compare_and_swap_ref("refs/head", None, "b")
    assert e.value.actual == "a"
    s3_store.compare_and_swap_ref("refs/head", "a", "b")
    with pytest.raises(RefConflict):
        s3_store.compare_and_swap_ref("refs/head", "a", "c")
    assert s3_store.get_ref("refs/head") == "b"


def test_probe_conditional_writes(s3_store: ObjectStore) -> None:
    ok, how = s3_store.fs.probe_conditional_writes(s3_store.root)
    assert ok, how
    assert s3_store.list() == []  # the probe object is gone


def test_missing_bucket_is_one_clear_line(s3_server) -> None:
    store = ObjectStore.open("s3://no-such-bucket-odf/ws")
    with pytest.raises(OdfError) as e:
        store.put("x", b"1")
    assert "no-such-bucket-odf" in str(e.value) and "NoSuchBucket" in str(e.value) and "\n" not in str(e.value)


def test_processes_racing_on_s3_refs(s3_server) -> None:
    """Like the local race test: no increment of a ref is lost when processes swap it concurrently on S3."""
    workers, rounds = 4, 12
    root = f"s3://{s3_server.bucket()}/race"
    store = ObjectStore.open(root)
    store.compare_and_swap_ref("refs/head", None, "0")
    procs = [subprocess.Popen([sys.executable, WORKER, "race", root, str(i), str(rounds)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=s3_server.env())
             for i in range(workers)]
    try:
        for p in procs:
            assert p.stdout.readline().strip() == "ready", p.stderr.read()
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        results = []
        for p in procs:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
            results.append(json.loads(out))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert sum(r["gate"]["won"] for r in results) == 1
    written = sorted(v for r in results for v in r["written"])
    assert written == list(range(1, workers * rounds + 1)), "a value was written twice: lost update"
    assert store.get_ref("refs/head") == str(workers * rounds)
