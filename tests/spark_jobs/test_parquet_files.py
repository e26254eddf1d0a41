"""One-file parquet writes with Spark (spark_jobs.parquet_files) and what may run beside them."""
from __future__ import annotations

import threading
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from spark_jobs.parquet_files import SHARED_WRITER_SETTINGS, write_single_parquet
from spark_jobs.session import side_by_side
from spark_jobs.transform.incremental import state as state_files
from spark_jobs.transform.incremental.state import StateWriter

pytestmark = pytest.mark.spark


def dictionary_columns(path: Path) -> list[str]:
    meta = pq.ParquetFile(path).metadata
    return sorted({meta.schema.column(c).name for r in range(meta.num_row_groups)
                   for c in range(meta.num_columns) if meta.row_group(r).column(c).has_dictionary_page})


def test_a_checkpoint_written_beside_other_writes_has_the_bytes_it_has_alone(spark, tmp_path: Path, monkeypatch):
    # parquet-java makes a writer's column encoders (at its start and at every new row group) from the settings of
    # whichever writer started last in the JVM: a checkpoint with settings of its own got the other writes' encodings
    rows = 300_000
    monkeypatch.setattr(state_files, "ROW_GROUP_BYTES", 1 << 20)  # several row groups
    state = spark.range(0, rows).select((F.col("id") % 7).alias("k"), (F.col("id") * 3).alias("total"),
                                        (F.col("id") % 1000).alias("n"))
    tiny = spark.range(0, 100).select((F.col("id") % 5).alias("k"))

    def checkpoint(path: Path) -> bytes:
        writer = StateWriter()
        writer.put("sums", state, ["k"])
        assert writer.write(spark, str(path), {"version": 1}) == {"sums": rows}
        return path.read_bytes()

    alone = checkpoint(tmp_path / "alone.parquet")
    meta = pq.ParquetFile(tmp_path / "alone.parquet").metadata
    assert meta.num_row_groups > 1
    assert {"t0_k", "t0_n"} <= set(dictionary_columns(tmp_path / "alone.parquet"))  # what a race would change
    for run in range(3):
        done = threading.Event()
        others: list[int] = []

        def beside(run: int = run) -> None:  # other writers start while the checkpoint is written
            while not done.is_set() and len(others) < 200:
                others.append(1)
                write_single_parquet(tiny, str(tmp_path / f"other{run}.parquet"))

        def this(run: int = run) -> bytes:
            try:
                return checkpoint(tmp_path / f"beside{run}.parquet")
            finally:
                done.set()

        assert side_by_side(beside, this)[1] == alone, f"run {run}"
        assert len(others) > 1


@pytest.mark.parametrize("key", [*SHARED_WRITER_SETTINGS, "parquet.enable.dictionary#t0_total"])
def test_a_setting_every_writer_in_the_jvm_would_share_is_refused(spark, tmp_path: Path, key: str):
    with pytest.raises(ValueError, match=f"parquet settings \\['{key}'\\] would reach writers running beside"):
        write_single_parquet(spark.range(3), str(tmp_path / "x.parquet"), options={key: "false"})
    assert not list(tmp_path.iterdir())
