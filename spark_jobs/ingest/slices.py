"""Writing the ODF data slice (and the checkpoint) on the driver with pyarrow.

One parquet file: ``offset`` int64, ``op`` int32, ``system_time`` timestamp(ms, UTC) (all not null), the event time,
then the data columns in their order; every top-level timestamp is timestamp(ms, UTC). Offsets are added here, on
the driver, because they follow the global row order the merge fixed. No rows: no file (and no checkpoint change).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Collection, Sequence

from odf_core.errors import SchemaEvolutionError
from odf_core.metadata import DatasetVocabulary
from spark_jobs.errors import InputRejected
from spark_jobs.ingest.checkpoint import CheckpointPlan, primary_key
from spark_jobs.parquet_files import (
    BufferedParquetWriter,
    cast,
    iter_tables,
    ms_utc,
    spark_fields_of_file,
    spark_schema_meta,
)

DEST = "__odf_dest"  # Snapshot part files: 0 = slice row, 1 = next-state row


@dataclass
class SliceStats:
    num_records: int
    max_event_time: Any
    checkpoint_written: bool


def slice_schema(vocab: DatasetVocabulary, data_fields: Sequence[Any], required: Collection[str] = ()) -> Any:
    """The Arrow schema of a slice: system columns, then the event time and data columns (timestamps ms, UTC); the
    ``required`` ones not null (see :func:`spark_jobs.ingest.merge.required_columns`)."""
    import pyarrow as pa

    ts = pa.timestamp("ms", tz="UTC")
    return pa.schema([pa.field(vocab.offset, pa.int64(), nullable=False),
                      pa.field(vocab.op, pa.int32(), nullable=False),
                      pa.field(vocab.system_time, ts, nullable=False)]
                     + [pa.field(f.name, ms_utc(f.type), nullable=f.name not in required) for f in data_fields])


def check_evolution(prev_schema: bytes | None, schema: Any) -> None:
    """The new slice's schema against the dataset's, by the one rule of the chain (columns may only be added)."""
    if not prev_schema:
        return
    from odf_core.metadata.arrow_schema import decode_arrow_schema
    from odf_core.metadata.schema_evolution import check_schema_evolution

    try:
        check_schema_evolution(decode_arrow_schema(prev_schema), schema, where="the new data")
    except SchemaEvolutionError as e:
        raise InputRejected(f"{e}. Only adding columns at the end is allowed.") from None


class SliceWriter:
    """Numbers ordered rows from ``offset_start``, stamps the system time and writes the ODF slice file."""

    def __init__(self, output_path: str, data_fields: Sequence[Any], *, vocab: DatasetVocabulary,
                 offset_start: int, system_time_ms: int, required: Collection[str] = ()):
        import pyarrow as pa

        self.vocab, self.next_offset, self.max_et = vocab, offset_start, None
        self.ts_type = pa.timestamp("ms", tz="UTC")
        self.system_time_ms = system_time_ms
        self.schema = slice_schema(vocab, data_fields, required)
        self.data_fields = list(self.schema)[3:]
        self._out = BufferedParquetWriter(output_path, self.schema, (vocab.op, vocab.system_time))

    def write(self, data: Any, op: Any = None) -> Any:
        """``data``: the event-time and data columns (by name); ``op``: int array or None for the constant 0."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        n = data.num_rows
        if n == 0:
            return None
        arrays = [pa.array(np.arange(self.next_offset, self.next_offset + n, dtype=np.int64)),
                  pa.repeat(pa.scalar(0, pa.int32()), n) if op is None else cast(op, pa.int32()),
                  pa.repeat(pa.scalar(self.system_time_ms, self.ts_type), n)]
        arrays += [cast(data.column(f.name), f.type) for f in self.data_fields]
        table = pa.Table.from_arrays(arrays, schema=self.schema)
        self._out.write(table)
        batch_max = pc.max(table.column(self.vocab.event_time)).as_py()
        if batch_max is not None and (self.max_et is None or batch_max > self.max_et):
            self.max_et = batch_max
        self.next_offset += n
        return table

    @property
    def rows(self) -> int:
        return self._out.rows

    def commit(self) -> None:
        self._out.commit()

    def abort(self) -> None:
        self._out.abort()


def checkpoint_writer(plan: CheckpointPlan, out: SliceWriter, spark_fields: dict[str, Any]) -> BufferedParquetWriter:
    """Snapshot checkpoints hold the slice's event-time and data columns, Ledger ones its primary-key columns."""
    import pyarrow as pa

    if plan.kind == "Snapshot":
        schema = pa.schema(out.data_fields)
    else:
        schema = pa.schema([out.schema.field(k) for k in primary_key(plan.strategy)])
    return BufferedParquetWriter(plan.path, schema.with_metadata(plan.metadata(spark_fields, schema.names)))


def abort(*writers: SliceWriter | BufferedParquetWriter | None) -> None:
    for w in writers:
        if w is not None:
            w.abort()


def finish(out: SliceWriter, ckpt: BufferedParquetWriter | None) -> SliceStats:
    """Commit both files, or neither when the slice is empty (no data -> no checkpoint change either)."""
    if out.rows == 0:
        abort(out, ckpt)
        return SliceStats(0, None, False)
    out.commit()
    if ckpt is not None:
        ckpt.commit()
    return SliceStats(out.rows, out.max_et, ckpt is not None)


def combine_slice(part_files: Sequence[str], output_path: str, *, vocab: DatasetVocabulary, offset_start: int,
                  system_time_ms: int, checkpoint: CheckpointPlan | None, keep: Any = None,
                  required: Collection[str] = ()) -> SliceStats:
    """Turn Spark's ordered part files ``[dest] [op] event_time, data...`` into the ODF slice (and checkpoint).

    One streaming pass. Rows with ``__odf_dest == 1`` are Snapshot state rows for the checkpoint; ``keep`` (a numpy
    bool array over all rows of the parts, in order) drops rows the driver-side Ledger plan found already seen.
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    part_schema = pq.read_schema(part_files[0]).remove_metadata()
    has_dest = DEST in part_schema.names
    has_op = vocab.op in part_schema.names  # Append parts leave the constant op 0 to this step
    data_fields = [f for f in part_schema if f.name not in (DEST, vocab.op)]
    spark_fields = spark_fields_of_file(part_files[0])
    out = ckpt = None
    try:
        out = SliceWriter(output_path, data_fields, vocab=vocab, offset_start=offset_start,
                          system_time_ms=system_time_ms, required=required)
        if checkpoint is not None:
            ckpt = checkpoint_writer(checkpoint, out, spark_fields)
            for t in list(checkpoint.prefix_tables) + list(iter_tables(checkpoint.prefix_files, ckpt.schema.names)):
                ckpt.write(t.select(ckpt.schema.names).replace_schema_metadata(None).cast(ckpt.schema))
        seen = 0
        for t in iter_tables(part_files):
            if keep is not None:
                mask, seen = keep[seen:seen + t.num_rows], seen + t.num_rows
                if not mask.all():
                    t = t.filter(pa.array(mask))
            if has_dest:
                is_out = pc.equal(t.column(DEST), 0)
                if ckpt is not None:
                    state = t.filter(pc.invert(is_out)).select(ckpt.schema.names)
                    ckpt.write(pa.Table.from_arrays(
                        [cast(c, f.type) for c, f in zip(state.columns, ckpt.schema)], schema=ckpt.schema))
                t = t.filter(is_out)
            table = out.write(t, t.column(vocab.op) if has_op else None)
            if table is not None and ckpt is not None and checkpoint.kind == "Ledger":
                ckpt.write(table.select(list(primary_key(checkpoint.strategy))).cast(ckpt.schema))
        return finish(out, ckpt)
    except BaseException:
        abort(out, ckpt)
        raise


def combine_plain(part_files: Sequence[str], output_path: str) -> int:
    """Concatenate part files into one parquet file (written even when empty, to carry the schema)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pq.read_schema(part_files[0]).remove_metadata()
    schema = pa.schema([pa.field(f.name, ms_utc(f.type)) for f in schema])
    writer = BufferedParquetWriter(
        output_path, schema.with_metadata(spark_schema_meta(spark_fields_of_file(part_files[0]), schema.names)))
    try:
        for t in iter_tables(part_files):
            writer.write(t.replace_schema_metadata(None).cast(schema).replace_schema_metadata(writer.schema.metadata))
        writer.commit()
    except BaseException:
        writer.abort()
        raise
    return writer.rows


def write_slice(output_path: str, vocab: DatasetVocabulary, table: Any, op: Any = None, *, offset_start: int,
                system_time_ms: int, spark_fields: dict[str, Any], checkpoint: CheckpointPlan | None = None,
                state: Any = None, required: Collection[str] = ()) -> SliceStats:
    """Write an in-memory slice (event time + data columns, in final order) and its checkpoint: the Snapshot
    ``state``, or for Ledger the earlier keys (``checkpoint.prefix_tables``) followed by the keys of this slice."""
    out = ckpt = None
    try:
        out = SliceWriter(output_path, list(table.schema), vocab=vocab, offset_start=offset_start,
                          system_time_ms=system_time_ms, required=required)
        written = out.write(table, op)
        if checkpoint is not None and checkpoint.path:
            ckpt = checkpoint_writer(checkpoint, out, spark_fields)
            if checkpoint.kind == "Snapshot":
                ckpt.write(state.cast(ckpt.schema))
            else:
                for t in list(checkpoint.prefix_tables) + ([written] if written is not None else []):
                    ckpt.write(t.select(ckpt.schema.names).replace_schema_metadata(None).cast(ckpt.schema))
        return finish(out, ckpt)
    except BaseException:
        abort(out, ckpt)
        raise
