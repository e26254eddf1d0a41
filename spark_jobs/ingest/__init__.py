"""Ingest of root datasets on Spark: read prepared files, preprocess them, merge them into a data slice.

:func:`execute_ingest` runs one :class:`~odf_core.engine.protocol.IngestRequest` (read, merge, or both) and always
answers with a response: ``Success``, ``InvalidInput`` (the user's to fix: file, line, value) or ``InternalError``.
Each step writes only into the transaction's staging directory; the coordinator commits.
"""
from __future__ import annotations

import os
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.types import StructType

from odf_core.engine.spark_conf import INGEST_SQL_CONF
from odf_core.engine.protocol import (
    IngestInputFile,
    IngestRequest,
    IngestResponse,
    IngestResponseInvalidInput,
    IngestResponseSuccess,
    MergeOutcome,
    ReadOutcome,
)
from spark_jobs.columns import schema_ddl_list
from spark_jobs.errors import InputRejected, always_answer
from spark_jobs.ingest.diagnose import explain_failure
from spark_jobs.ingest.kept import KeptRead, KeptReads
import spark_jobs.ingest.merge as plans
from spark_jobs.ingest.merge import MergeInput, flat_types, run_merge
from spark_jobs.ingest.read import HIDDEN, build_read_frame
from spark_jobs.ingest.readers import SourceInfo, WorkDir
from spark_jobs.ingest.slices import combine_plain
from spark_jobs.parquet_files import file_bytes, load_parquet, write_parts
from spark_jobs.session import request_session


def _input_bytes(inputs: tuple[IngestInputFile, ...]) -> int:
    """Bytes of the prepared input files (directories summed): what the collect plan would hold in memory."""
    total = 0
    for inp in inputs:
        if os.path.isdir(inp.path):
            total += sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(inp.path) for f in fs)
        elif os.path.exists(inp.path):
            total += os.path.getsize(inp.path)
    return total


def _columns(schema: StructType) -> tuple[str, ...]:
    return tuple(schema_ddl_list(StructType([f for f in schema.fields if f.name not in HIDDEN])))


def execute_ingest(spark: SparkSession, request: IngestRequest, kept: KeptReads | None = None) -> IngestResponse:
    """Run the request's phases in a child session of ``spark``; never raises."""
    sources: list[SourceInfo] = []
    with request_session(spark) as session:
        for k, v in INGEST_SQL_CONF.items():
            session.conf.set(k, v)
        work = WorkDir(request.work_dir)

        def invalid(e: Exception) -> IngestResponse:
            assert isinstance(e, InputRejected)
            return IngestResponseInvalidInput(message=e.message, file=e.file, line=e.line, record=e.record)

        def explain(e: Exception) -> IngestResponse | None:
            explained = explain_failure(session, e, sources)
            return None if explained is None else invalid(explained)

        try:
            return always_answer(lambda: _execute(session, request, work, sources, kept), invalid=invalid,
                                 rejected=(InputRejected,), user_errors=None, explain=explain)
        finally:
            work.cleanup()


def _execute(spark: SparkSession, request: IngestRequest, work: WorkDir, sources: list[SourceInfo],
             kept: KeptReads | None) -> IngestResponse:
    read_phase, merge_phase, vocab = request.read, request.merge, request.vocab
    reused = kept.take(request.keep_read_as) if (kept is not None and request.keep_read_as and merge_phase) else None
    if reused is not None:
        sources.extend(reused.sources)
        read_out = ReadOutcome(num_records=reused.num_records, columns=_columns(reused.schema))
        if reused.table is not None:
            empty = spark.createDataFrame([], reused.schema)
            merge_input = MergeInput(empty, normalized=True, arrow=reused.table)
        else:
            size = file_bytes([reused.path])
            merge_input = MergeInput(load_parquet(spark, reused.path), size, True, source_bytes=size)
        return IngestResponseSuccess(read=read_out, merge=run_merge(spark, merge_input, merge_phase, vocab, work),
                                     read_reused=True)

    merge_input: MergeInput | None = None
    read_out: ReadOutcome | None = None
    if read_phase is not None:
        frame = build_read_frame(spark, read_phase, vocab, work)
        sources.extend(frame.sources)
        if frame.df is None:  # every input was an empty file without a read schema: nothing to read or merge
            return _nothing_read(read_phase, merge_phase)
        columns = _columns(frame.df.schema)
        if merge_phase is None and kept is not None and request.keep_read_as and read_phase.output_path is None:
            item = _keep(spark, frame.df, read_phase.inputs, frame.sources, request, work)
            kept.put(request.keep_read_as, item)
            return IngestResponseSuccess(read=ReadOutcome(num_records=item.num_records, columns=columns))
        if read_phase.output_path:
            n = combine_plain(write_parts(frame.df, work.path("read")), read_phase.output_path)
            read_out = ReadOutcome(num_records=n, columns=columns)
            if merge_phase is not None:
                size = file_bytes([read_phase.output_path])
                merge_input = MergeInput(load_parquet(spark, read_phase.output_path), size, source_bytes=size)
        elif merge_phase is not None:
            # The rows go straight into the merge; it reports how many it read.
            read_out = ReadOutcome(num_records=None, columns=columns)
            merge_input = MergeInput(frame.df, None, True, source_bytes=_input_bytes(read_phase.inputs))
        else:
            raise InputRejected("a read-only request needs an output path (or a long-lived engine to keep the rows)")
    merge_out: MergeOutcome | None = None
    if merge_phase is not None:
        if merge_input is None:
            path = merge_phase.input_path or ""
            if not os.path.exists(path):
                raise InputRejected(f"the read step's output {path!r} is missing: run the read step again")
            size = file_bytes([path])
            merge_input = MergeInput(load_parquet(spark, path), size, source_bytes=size)
        merge_out = run_merge(spark, merge_input, merge_phase, vocab, work)
        if read_out is not None and read_out.num_records is None:
            rows = merge_input.rows_read
            read_out = read_out.replace(num_records=merge_out.num_records if rows is None else rows)
    return IngestResponseSuccess(read=read_out, merge=merge_out)


def _nothing_read(read_phase: Any, merge_phase: Any) -> IngestResponse:
    """No rows and no columns: no read output is written and the merge adds nothing (the coordinator then commits
    only the new source state)."""
    return IngestResponseSuccess(read=ReadOutcome(num_records=0, columns=()),
                                 merge=MergeOutcome(num_records=0) if merge_phase is not None else None)


def _keep(spark: SparkSession, df: Any, inputs: tuple[IngestInputFile, ...], sources: list[SourceInfo],
          request: IngestRequest, work: WorkDir) -> KeptRead:
    """Run the read now (parse errors surface in the Read task) and keep its rows for the merge request."""
    if flat_types(df.schema, [c for c in df.columns]) and _input_bytes(inputs) <= plans.DRIVER_MERGE_BYTES:
        table = df.toArrow()
        return KeptRead(df.schema, table.num_rows, sources, table=table)
    path = os.path.join(request.work_dir, "read.parquet")
    n = combine_plain(write_parts(df, work.path("read")), path)
    return KeptRead(df.schema, n, sources, path=path)
