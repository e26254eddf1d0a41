"""Repositories (issue #14): pulling from S3 (moto's server on loopback) against a plain parallel copy.

1. ``pull``: a 1,000-block chain with ~1 GB of data (1 MiB per block) pushed to S3, then pulled into a fresh
   workspace (``odf_core.repository.pull_remote``: block walk, hash check of every object, validation, head last)
   vs a plain parallel copy of the very same objects with the same boto3 client and the same number of threads
   (GET + write to local files, nothing checked). Target: copy time / pull time >= 0.8.
2. ``pull 1 new block``: a 10,000-block chain already pulled; one block more is pushed; pulling it must take
   <= 2 s (the walk stops at the common ancestor: O(new blocks), not O(chain)).

Chains are written directly (blocks through the real encoder, data files of random bytes named by their physical
hash), no Spark. Run: ``python benchmarks/bench_repos.py [--mb-per-block 1] [--blocks 1000] [--rounds 3]``.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import Result, machine_info, median, update_results_file

SECTION = "Repositories (issue #14)"


def build_chain(ws, name: str, blocks: int, data_bytes: int, seed: int = 0):
    """A root dataset of ``blocks`` blocks (Seed, SetDataSchema, then AddData), each AddData with a data file of
    ``data_bytes`` random bytes (0: no data, a source state only); written straight to the store, head last."""
    import pyarrow as pa

    from odf_core.chain import ChainState, fold
    from odf_core.identity import DatasetID, Multihash
    from odf_core.metadata import (AddData, DataSlice, DatasetKind, MetadataBlock, OffsetInterval, Seed,
                                   SetDataSchema, SourceState, Timestamp, encode_block)
    from odf_core.metadata.arrow_schema import encode_arrow_schema
    from odf_core.storage import DatasetLayout

    store = ws.store.child(f"datasets/{name}")
    did, _ = DatasetID.new_keypair()
    state = ChainState()
    t0 = 1_704_067_200_000_000_000
    rng = os.urandom
    events = [Seed(dataset_id=did, dataset_kind=DatasetKind.ROOT),
              SetDataSchema(schema=encode_arrow_schema(pa.schema([pa.field("v", pa.int64())])))]
    for i in range(blocks):
        if i < len(events):
            ev = events[i]
        else:
            new_data = None
            if data_bytes:
                raw = rng(data_bytes)
                h = Multihash.sha3_256(raw)
                store.put_if_absent(DatasetLayout.data_key(h), raw)
                start = state.next_offset
                new_data = DataSlice(logical_hash=h, physical_hash=h,
                                     offset_interval=OffsetInterval(start=start, end=start),
                                     size=len(raw))
            ev = AddData(prev_offset=state.last_offset, new_data=new_data,
                         new_source_state=SourceState(source_name="default", kind="odf/etag", value=f'"{seed}-{i}"'))
        block = MetadataBlock(system_time=Timestamp(t0 + i * 1000), prev_block_hash=state.head,
                              sequence_number=state.sequence_number + 1, event=ev)
        raw = encode_block(block)
        h = Multihash.sha3_256(raw)
        store.put_if_absent(DatasetLayout.block_key(h), raw)
        state = fold(state, block, h)
    store.compare_and_swap_ref(DatasetLayout.head_ref, None, str(state.head))
    return ws.get(name)


def plain_copy(bucket: str, prefix: str, dest: Path, workers: int) -> int:
    """The baseline: list, then GET every object with the same boto3 client and threads, write it to a file."""
    from odf_core.storage.s3 import S3Settings, client_for

    client = client_for(S3Settings())
    keys = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/"):
        keys += [o["Key"] for o in page.get("Contents", [])]

    def one(key: str) -> int:
        body = client.get_object(Bucket=bucket, Key=key)["Body"].read()
        path = dest / key[len(prefix) + 1:]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
        return len(body)

    with ThreadPoolExecutor(workers) as pool:
        return sum(pool.map(one, keys))


def bench_pull(server, blocks: int, mb: float, rounds: int, tmp: Path) -> tuple[list[Result], str]:
    from odf_core.repository import pull_remote, push
    from odf_core.repository.transfer import WORKERS
    from odf_core.workspace import Workspace

    bucket = server.bucket("bench")
    src = Workspace.init(str(tmp / "src"))
    t0 = time.perf_counter()
    build_chain(src, "big", blocks, int(mb * 1024 * 1024))
    built = time.perf_counter() - t0
    t0 = time.perf_counter()
    pushed = push(src, "big", f"s3://{bucket}/repo/big")
    push_s = time.perf_counter() - t0
    copy_times, pull_times = [], []
    for r in range(rounds):
        dest = tmp / f"copy{r}"
        t0 = time.perf_counter()
        nbytes = plain_copy(bucket, "repo/big", dest, WORKERS)
        copy_times.append(time.perf_counter() - t0)
        shutil.rmtree(dest)
        ws = Workspace.init(str(tmp / f"dst{r}"))
        t0 = time.perf_counter()
        _, result = pull_remote(ws, f"s3://{bucket}/repo/big")
        pull_times.append(time.perf_counter() - t0)
        assert result.new_blocks == blocks and result.nbytes >= nbytes - 200, (result, nbytes)
        shutil.rmtree(tmp / f"dst{r}")
    gb = pushed.nbytes / 1e9
    res = Result(f"pull of a {blocks:,}-block chain with {gb:.2f} GB from S3 (moto), as throughput vs a plain "
                 "parallel copy", median(copy_times), median(pull_times), "s", 0.8,
                 "plain parallel copy, same client and threads")
    notes = (f"Chain written in {built:.1f} s, pushed to S3 in {push_s:.1f} s ({pushed.copied} objects). "
             f"Copy times {', '.join(f'{t:.2f}' for t in copy_times)} s; pull times "
             f"{', '.join(f'{t:.2f}' for t in pull_times)} s; {WORKERS} threads each.")
    return [res], notes


def bench_one_block(server, blocks: int, rounds: int, tmp: Path) -> tuple[list[Result], str]:
    from odf_core.metadata import AddData, SourceState
    from odf_core.repository import pull_remote, push
    from odf_core.workspace import Workspace

    bucket = server.bucket("bench")
    url = f"s3://{bucket}/repo/long"
    src = Workspace.init(str(tmp / "long-src"))
    t0 = time.perf_counter()
    h = build_chain(src, "long", blocks, 0)
    built = time.perf_counter() - t0
    push(src, "long", url)
    dst = Workspace.init(str(tmp / "long-dst"))
    t0 = time.perf_counter()
    pull_remote(dst, url)
    first = time.perf_counter() - t0
    times = []
    for r in range(rounds):
        h.chain.append_event(AddData(prev_offset=h.state().last_offset, new_source_state=SourceState(
            source_name="default", kind="odf/etag", value=f'"new-{r}"')))
        push(src, "long")
        t0 = time.perf_counter()
        _, result = pull_remote(dst, url)
        times.append(time.perf_counter() - t0)
        assert result.new_blocks == 1, result
    res = Result(f"pull of 1 new block on top of a {blocks:,}-block chain from S3 (moto), seconds", median(times),
                 2.0, "s", 1.0, "the 2 s budget", lower_is_better=True)
    notes = (f"Chain of {blocks:,} blocks written in {built:.1f} s; its first full pull took {first:.1f} s. "
             f"One-block pulls: {', '.join(f'{t * 1000:.0f} ms' for t in times)}.")
    return [res], notes


def render(rows: list[Result], notes: str) -> str:
    lines = [machine_info(), "", "| benchmark | measured | baseline | ratio | target | pass |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r.name} | {r.baseline:.2f} {r.unit} (pull) | {r.value:.2f} {r.unit} ({r.baseline_name}) | "
                     f"{r.ratio:.2f} | {r.target_text()} | {r.verdict()} |" if not r.lower_is_better else
                     f"| {r.name} | {r.value:.3f} {r.unit} | {r.baseline:.2f} {r.unit} ({r.baseline_name}) | "
                     f"{r.ratio:.2f} | {r.target_text()} | {r.verdict()} |")
    return "\n".join(lines) + "\n\n" + notes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--blocks", type=int, default=1000)
    ap.add_argument("--mb-per-block", type=float, default=1.0)
    ap.add_argument("--long-chain", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", choices=("pull", "one-block"))
    ap.add_argument("--no-write", action="store_true", help="print only, do not update RESULTS.md")
    args = ap.parse_args(argv)
    os.environ.setdefault("ODF_PROGRESS", "off")
    from tests.s3_server import start_s3_server

    server = start_s3_server()
    for k, v in server.env({}).items():
        os.environ[k] = v
    sections: dict[str, str] = {}
    failed = False
    tmp = Path(tempfile.mkdtemp(prefix="bench-repos-"))
    try:
        if args.only in (None, "pull"):
            rows, notes = bench_pull(server, args.blocks, args.mb_per_block, args.rounds, tmp)
            failed |= any(r.passed is False for r in rows)
            print("\n".join(r.line() for r in rows), notes, sep="\n")
            sections["pull from S3 vs a plain parallel copy"] = render(rows, notes)
        if args.only in (None, "one-block"):
            rows, notes = bench_one_block(server, args.long_chain, args.rounds, tmp)
            failed |= any(r.passed is False for r in rows)
            print("\n".join(r.line() for r in rows), notes, sep="\n")
            sections["pull of one new block on a long chain"] = render(rows, notes)
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    if not args.no_write:
        update_results_file(SECTION, sections)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
