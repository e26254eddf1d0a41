"""Logical hash of Parquet files: streamed batch by batch, equal to the hash of the records as a table."""
from __future__ import annotations

import io
import subprocess
import sys
import tempfile
import threading
from decimal import Decimal
from pathlib import Path

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pyarrow.types as pt
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from odf_core.hashing import HashingError, UnsupportedTypeError, logical_hash_file, logical_hash_table
from odf_core.hashing.sources import open_parquet
from tests.odf_core.hashing.test_hashing_logical import ref_logical_hash, tables


def odf_slice(n: int) -> pa.Table:
    """A data slice shaped like the ones ODF writes: offset, op, system_time, event_time, then data columns."""
    rng = np.random.default_rng(11)
    valid = rng.random(n) > 0.2
    return pa.table({
        "offset": pa.array(np.arange(n), pa.int64()),
        "op": pa.array(np.zeros(n, np.int32)),
        "system_time": pa.array(np.full(n, 1_700_000_000_000), pa.timestamp("ms", "UTC")),
        "event_time": pa.array(1_600_000_000_000 + rng.integers(0, 10**9, n), pa.timestamp("ms", "UTC")),
        "city": pa.array([f"city-{i % 97}" if v else None for i, v in enumerate(valid)]),
        "population": pa.array(rng.integers(0, 10**7, n), mask=~valid),
        "price": pa.array([Decimal(i) / 100 if v else None for i, v in enumerate(valid)], pa.decimal128(12, 2)),
        "tags": pa.array([[str(i % 3)] * (i % 4) if v else None for i, v in enumerate(valid)]),
        "geo": pa.StructArray.from_arrays([pa.array(rng.random(n)), pa.array(rng.random(n))], names=["lat", "lon"],
                                          mask=pa.array(~valid)),
    })


def test_file_hash_streams_across_row_groups_and_batches(tmp_path: Path) -> None:
    table = odf_slice(20_000)
    path = tmp_path / "slice.parquet"
    pq.write_table(table, path, row_group_size=3_000)
    assert pq.ParquetFile(path).metadata.num_row_groups == 7
    expected = logical_hash_table(table)
    assert expected.digest == ref_logical_hash(table)
    assert logical_hash_file(path) == expected
    assert logical_hash_file(str(path), batch_rows=1_000) == expected
    assert logical_hash_file(path, parallel=False) == expected


def test_memory_stays_at_about_one_row_group(tmp_path: Path) -> None:
    # A fresh interpreter so that Arrow's peak-allocation counter only sees the hashing of this file.
    n = 3_000_000
    table = pa.table({"i": np.arange(n, dtype=np.int64), "f": np.random.default_rng(3).random(n)})
    path = tmp_path / "big.parquet"
    pq.write_table(table, path, row_group_size=100_000, compression="none")
    script = ("import sys, pyarrow as pa; from odf_core.hashing import logical_hash_file; "
              "print(logical_hash_file(sys.argv[1], batch_rows=65536)); print(pa.default_memory_pool().max_memory())")
    out = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, check=True)
    digest, peak = out.stdout.split()
    assert digest == logical_hash_table(table).to_multibase()
    assert int(peak) < table.nbytes / 4, f"peak Arrow allocation {int(peak):,} B for a {table.nbytes:,} B table"


def test_every_source_kind(tmp_path: Path) -> None:
    table = odf_slice(500)
    path = tmp_path / "slice.parquet"
    pq.write_table(table, path)
    expected = logical_hash_table(table)
    assert logical_hash_file(path.as_uri()) == expected
    assert logical_hash_file((fsspec.filesystem("file"), str(path))) == expected
    with open(path, "rb") as f:
        assert logical_hash_file(f) == expected


class ThreadRecordingFile(io.BytesIO):
    """An in-memory stream that records which threads read it."""

    def __init__(self, data: bytes):
        super().__init__(data)
        self.threads: set[int] = set()

    def read(self, *args):
        self.threads.add(threading.get_ident())
        return super().read(*args)

    def readinto(self, *args):
        self.threads.add(threading.get_ident())
        return super().readinto(*args)

    def seek(self, *args):
        self.threads.add(threading.get_ident())
        return super().seek(*args)


def test_a_stream_is_read_on_the_calling_thread_only(tmp_path: Path) -> None:
    """A stream (an object on S3) is never read by Arrow's worker threads: a worker that holds Python buffers when
    the interpreter exits aborts the process after its work is done (see ``ParquetReader``)."""
    path = tmp_path / "slice.parquet"
    table = odf_slice(20_000)
    pq.write_table(table, path, row_group_size=3_000)
    data = path.read_bytes()
    f = ThreadRecordingFile(data)
    assert logical_hash_file(f) == logical_hash_table(table)
    f2 = ThreadRecordingFile(data)
    with open_parquet(f2) as pf:
        assert pf.read(columns=["offset", "city", "geo"]).num_rows == 20_000
    assert f.threads == f2.threads == {threading.get_ident()}
    with open_parquet(path) as pf:
        assert pf.threads, "a local file is decoded on Arrow's worker threads"


@pytest.fixture(scope="module")
def scratch() -> Path:
    with tempfile.TemporaryDirectory() as d:
        yield Path(d)


def _has_zero_size_list(t: pa.DataType) -> bool:
    if pt.is_fixed_size_list(t) and t.list_size == 0:
        return True
    if pt.is_list(t) or pt.is_large_list(t) or pt.is_fixed_size_list(t):
        return _has_zero_size_list(t.value_type)
    return pt.is_struct(t) and any(_has_zero_size_list(f.type) for f in t.fields)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(table=tables(max_rows=40), row_group=st.integers(1, 50))
def test_random_tables_round_trip(scratch: Path, table: pa.Table, row_group: int) -> None:
    # pyarrow cannot read back fixed_size_list<...>[0] from Parquet ("Expected all lists to be of size=0")
    assume(not any(_has_zero_size_list(f.type) for f in table.schema))
    path = scratch / "t.parquet"
    pq.write_table(table, path, row_group_size=row_group)
    read_back = pq.read_table(path)
    assert logical_hash_file(path, batch_rows=7) == logical_hash_table(read_back)
    if read_back.schema.equals(table.schema):  # date64, time32[s] and timestamp[s] change type in Parquet
        assert logical_hash_file(path) == logical_hash_table(table)


def test_bad_files_raise_clear_errors(tmp_path: Path) -> None:
    not_parquet = tmp_path / "notes.txt"
    not_parquet.write_text("hello")
    with pytest.raises(HashingError, match="notes.txt"):
        logical_hash_file(not_parquet)
    with pytest.raises(HashingError, match="missing.parquet"):
        logical_hash_file(tmp_path / "missing.parquet")
    with pytest.raises(HashingError, match="missing.parquet"):
        logical_hash_file((tmp_path / "missing.parquet").as_uri())
    with_duration = tmp_path / "duration.parquet"
    pq.write_table(pa.table({"a": [1], "wait": pa.array([5], pa.duration("s"))}), with_duration)
    with pytest.raises(UnsupportedTypeError, match=r"duration\.parquet: column 'wait'"):
        logical_hash_file(with_duration)
