"""One-file parquet writes with Spark (spark_jobs.parquet_files) and what may run beside them; a file's schema as
Spark infers it, with no job."""
from __future__ import annotations

import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.errors import AnalysisException, ArithmeticException
from pyspark.sql import functions as F

from spark_jobs.parquet_files import SHARED_WRITER_SETTINGS, footer_schema, write_single_parquet
from spark_jobs.session import side_by_side
from spark_jobs.transform.incremental import state as state_files
from spark_jobs.transform.incremental.state import StateWriter
from tests.odf_core.hashing.test_hashing_logical import column_types

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

        def beside(run: int = run, done: threading.Event = done, others: list[int] = others) -> None:
            # other writers start while the checkpoint is written
            while not done.is_set() and len(others) < 200:
                others.append(1)
                write_single_parquet(tiny, str(tmp_path / f"other{run}.parquet"))

        def this(run: int = run, done: threading.Event = done) -> bytes:
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


@st.composite
def schema_files(draw: st.DrawFn) -> pa.Schema:
    """Schemas of every type the hashing tests draw (some Spark cannot read), with required and optional fields."""
    types = draw(st.lists(column_types, min_size=1, max_size=4))
    return pa.schema([pa.field(f"c{i}", t, nullable=draw(st.booleans())) for i, t in enumerate(types)])


def _last_job(spark) -> int:
    """The id of the session's latest Spark job (ids only grow; the tracker keeps a bounded list of them)."""
    return max(spark.sparkContext.statusTracker().getJobIdsForGroup(None), default=-1)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(schema=schema_files())
def test_a_files_schema_is_the_one_spark_infers_without_a_job(spark, tmp_path_factory, schema):
    """The schema an input's schema file (written by the coordinator with pyarrow) is read with: Spark's own
    inference's, read from the footer on the driver, with no Spark job; a file Spark cannot read fails both ways."""
    path = str(tmp_path_factory.mktemp("schema") / "schema.parquet")
    pq.write_table(schema.empty_table(), path)
    try:
        inferred = spark.read.parquet(path).schema
    except (AnalysisException, ArithmeticException) as e:  # a type Spark does not read (or a too wide decimal)
        inferred, refused = None, e
    last = _last_job(spark)
    if inferred is None:  # the very error Spark's read gives
        with pytest.raises(type(refused)) as e:
            footer_schema(spark, path)
        assert e.value.getCondition() == refused.getCondition(), (e.value, refused)
        return
    assert footer_schema(spark, path).jsonValue() == inferred.jsonValue()
    assert _last_job(spark) == last
    spark.read.parquet(path)  # (the inference this avoids runs one)
    assert _last_job(spark) > last


def test_a_schema_spark_recorded_is_read_back_as_it_wrote_it(spark, tmp_path):
    df = spark.sql("SELECT 1 AS i, 'a' AS s, CAST(1 AS DECIMAL(20, 3)) AS d, TIMESTAMP_NTZ'2024-01-01 00:00:00' AS t, "
                   "array(named_struct('x', 1.5D)) AS l")
    df.coalesce(1).write.parquet(str(tmp_path / "out"))
    (part,) = list((tmp_path / "out").glob("part-*.parquet"))
    assert footer_schema(spark, str(part)).jsonValue() == spark.read.parquet(str(part)).schema.jsonValue()
