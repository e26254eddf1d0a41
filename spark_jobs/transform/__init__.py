"""Derivative datasets on Spark: transformations whose results do not depend on how inputs are batched.

The promise: the output changelog, reduced to its current rows (op 0 +A and 3 +C add a row, op 1 -R and 2 -C remove
one equal row), equals the query evaluated once over all input data, however the inputs were split into transactions.
Each input is a temp view named by its ``queryAlias``; aliased steps become temp views; the one step without alias is
the output. :mod:`.planning` decides between the :mod:`.stateless` and :mod:`.stateful` paths.

Output slice: ONE parquet file at ``newDataPath`` (none when there are no rows): ``offset`` (int64, consecutive from
``nextOffset``), ``op`` (int32), ``system_time`` (the request's time), ``event_time``, then the query's other columns
in query order (top-level timestamps truncated to ms UTC). The checkpoint (:mod:`.checkpoint`) is always written.

Stateful queries in the incremental fragment (:mod:`.incremental`) cost their new rows plus their state; the others
cost O(history). Ties in a window's ORDER BY, LIMIT without ORDER BY and the element
order of ``collect_list`` are non-deterministic in Spark itself and are not detected. Map/variant columns cannot be
diffed or reduced (InvalidQuery for stateful queries). Output and checkpoint paths must be local to the driver.
"""
from __future__ import annotations

import os
import tempfile
import time
from typing import Any, Sequence

from pyspark.sql import SparkSession

from odf_core.engine.protocol import (
    DISK_ERROR_CLASSES,
    OdfTransformRequest,
    OdfTransformResponse,
    QueryResponseInvalidQuery,
    SliceDescription,
    TransformDiagnostics,
    ValidateQueryRequest,
    ValidateQueryResponse,
    ValidateQueryResponseSuccess,
)
from odf_core.metadata import (
    TransformRequest,
    TransformResponseInternalError,
    TransformResponseInvalidQuery,
    TransformResponseSuccess,
)
from spark_jobs.errors import EngineFailure, always_answer
from spark_jobs.parquet_files import local_path
from spark_jobs.session import request_session
from spark_jobs.transform import plan_cache
from spark_jobs.transform.checkpoint import write_stateless_checkpoint
from spark_jobs.transform.inputs import (
    QueryInput,
    file_schema,
    input_schema,
    marked_schema,
    output_watermark,
    read_rows,
    slice_rows,
)
from spark_jobs.transform.planning import STATELESS, output_schema, prepare, query_over
from spark_jobs.transform.stateful import run_stateful
from spark_jobs.transform.stateless import run_stateless


def _inputs(request: OdfTransformRequest | TransformRequest) -> tuple[TransformRequest, list[QueryInput]]:
    if isinstance(request, OdfTransformRequest):
        histories = {h.query_alias: tuple(h.data_paths) for h in request.histories}
        req = request.request
    else:  # the spec's request, as a foreign coordinator sends it: no histories
        histories, req = {}, request
    seen: set[str] = set()
    for i in req.query_inputs:
        if i.query_alias.lower() in seen:
            raise EngineFailure(f"queryInputs: duplicate queryAlias {i.query_alias!r}")
        seen.add(i.query_alias.lower())
    return req, [QueryInput(i, histories.get(i.query_alias)) for i in req.query_inputs]


def _diagnostics(diag: dict[str, Any], timings: dict[str, float]) -> TransformDiagnostics:
    return TransformDiagnostics(
        plan_class=diag.get("plan_class"), reason=diag.get("reason") or None,
        correction_key=tuple(diag["correction_key"]) if diag.get("correction_key") else None,
        output_rows=diag.get("output_rows"), warnings=tuple(diag.get("warnings") or ()) or None,
        timings=" ".join(f"{k}={v * 1000:.0f}ms" for k, v in timings.items()) or None,
        path=diag.get("path"), operators=tuple(diag["operators"]) if diag.get("operators") else None,
        state_rows=diag.get("state_rows"), sizing=diag.get("sizing"), slice=diag.get("slice"),
        history=diag.get("history"))


def _plan_incremental(session: SparkSession, transform: Any, inputs: Sequence[Any], schemas: Sequence[Any],
                      vocab: Any) -> Any:
    """The incremental plan (or why not) of a stateful query; ``inputs`` have ``query_alias`` and ``vocab``."""
    from spark_jobs.transform.incremental import enabled
    from spark_jobs.transform.incremental.planner import plan_query

    return plan_query(session, transform, schemas, [i.vocab for i in inputs], [i.query_alias for i in inputs],
                      vocab, enabled(session))


def _classed(message: str, error_class: str | None) -> str:
    """The spec's InternalError has no error-class field: a disk error's class travels as the message's prefix
    (``[ENOSPC] no space left on device``), so the coordinator can still say where the engine was writing."""
    return f"[{error_class}] {message}" if error_class in DISK_ERROR_CLASSES else message


def execute_transform(spark: SparkSession, request: OdfTransformRequest | TransformRequest) -> OdfTransformResponse:
    """Run one transaction; never raises (query and request problems become responses)."""
    diag: dict[str, Any] = {}
    timings: dict[str, float] = {}
    started = time.monotonic()
    described: SliceDescription | None = None

    def run() -> Any:
        nonlocal described
        req, inputs = _inputs(request)
        with request_session(spark) as session:
            interval = _execute(session, req, inputs, diag, timings)
        output = local_path(req.new_data_path)
        # our coordinator commits from the description; the spec's answer has no place for it (nothing to hash for)
        if interval is not None and isinstance(request, OdfTransformRequest) and os.path.exists(output):
            from odf_core.engine.slice_description import describe

            t0 = time.monotonic()
            described = describe(output, req.vocab.offset_column, interval.start)
            timings["describe"] = time.monotonic() - t0
        timings["total"] = time.monotonic() - started
        return TransformResponseSuccess(new_offset_interval=interval, new_watermark=output_watermark(inputs))

    response = always_answer(
        run, invalid=lambda e: TransformResponseInvalidQuery(message=str(e)),
        internal=lambda err: TransformResponseInternalError(message=_classed(err.message, err.error_class),
                                                            backtrace=err.backtrace),
        user_errors="the query failed on the input data: ")
    return OdfTransformResponse(response=response, diagnostics=_diagnostics(diag, timings),
                                slice=described if isinstance(response, TransformResponseSuccess) else None)


def _execute(session: SparkSession, request: TransformRequest, inputs: list[QueryInput], diag: dict[str, Any],
             timings: dict[str, float]) -> Any:
    """One transaction on the request's own ``session``."""
    t0 = time.monotonic()
    schemas = [input_schema(session, inp, i) for i, inp in enumerate(inputs)]
    key = plan_cache.plan_key(session, request.transform, schemas, [i.alias for i in inputs],
                              [i.vocab for i in inputs], request.vocab)
    known = plan_cache.get(key)  # a query this driver planned before: (PlanInfo, Planned or None if stateless)
    out: Any = None  # the stateful path reads its inputs itself
    if known is None or known[0].plan_class == STATELESS:
        views = {inp.alias: slice_rows(session, inp, schema) for inp, schema in zip(inputs, schemas)}
    if known is None:
        out, info = prepare(session, request.transform, views, request.vocab)
        if info.plan_class == STATELESS:
            plan_cache.put(key, (info, None))
    elif known[0].plan_class == STATELESS:  # the query over these slices, through the gate: not its inspection
        out, info = query_over(session, request.transform, views), known[0]
    else:
        info = known[0]
    timings["plan"] = time.monotonic() - t0
    diag["plan_class"] = info.plan_class
    diag["reason"] = info.reason
    t1 = time.monotonic()
    if info.plan_class == STATELESS:
        if all(i.request.offset_interval is None for i in inputs):
            interval, counts = None, {}
        else:
            from spark_jobs.transform.incremental.sizing import size_stateless_step

            sized = size_stateless_step(session, inputs)
            if sized is not None:
                diag["sizing"] = sized
            interval, counts = run_stateless(session, request, out, info)
        write_stateless_checkpoint(session, request)
    else:
        if known is None:
            planned = _plan_incremental(session, request.transform, [i.request for i in inputs], schemas,
                                        request.vocab)
            plan_cache.put(key, (info, planned))
        else:
            planned = known[1]
        diag["operators"] = planned.operators
        if planned.reason:
            diag["reason"] = f"{info.reason}; full path: {planned.reason}"
        timings["plan"] = time.monotonic() - t0
        t1 = time.monotonic()
        interval, counts = run_stateful(session, request, inputs, info, schemas, diag, planned)
        timings.update(diag.pop("timings", {}))  # its parts: evaluate, states (a rebuild), checkpoint
    if interval is None and os.path.exists(local_path(request.new_data_path)):
        os.remove(local_path(request.new_data_path))  # left by an earlier attempt of this transaction
    timings["execute"] = time.monotonic() - t1
    diag["output_rows"] = sum(counts.values())
    return interval


def _arrow_schema_bytes(session: SparkSession, schema: Any) -> bytes:
    """The output slice's Arrow schema exactly as Spark's parquet writer will store it (an empty write)."""
    import pyarrow.parquet as pq

    from odf_core.metadata.arrow_schema import encode_arrow_schema, recorded_schema
    from spark_jobs.parquet_files import write_single_parquet

    with tempfile.TemporaryDirectory(prefix="odf-schema-") as tmp:
        path = os.path.join(tmp, "empty.parquet")
        write_single_parquet(session.createDataFrame([], schema), path)
        return encode_arrow_schema(recorded_schema(pq.read_schema(path)))


def validate_query(spark: SparkSession, request: ValidateQueryRequest) -> ValidateQueryResponse:
    """Analyse the query against the inputs' schemas: the output slice's schema, or why the query is wrong."""
    def run() -> ValidateQueryResponse:
        with request_session(spark) as session:
            views = {}
            for idx, inp in enumerate(request.inputs):
                if not os.path.exists(local_path(inp.schema_file)):
                    raise EngineFailure(f"inputs[{idx}].schemaFile: file not found: {inp.schema_file!r}")
                schema = marked_schema(file_schema(session, inp.schema_file), inp.vocab, idx,
                                       f"input {inp.query_alias!r}")
                views[inp.query_alias] = read_rows(session, schema, ())
            out, info = prepare(session, request.transform, views, request.vocab)
            schema = output_schema(out, info.layout, request.vocab)
            path, operators = None, None
            if info.plan_class != STATELESS:
                planned = _plan_incremental(session, request.transform, request.inputs,
                                            [v.schema for v in views.values()], request.vocab)
                path = "incremental" if planned.plan is not None else "full"
                operators = tuple(planned.operators) or None
            return ValidateQueryResponseSuccess(output_schema=_arrow_schema_bytes(session, schema),
                                                plan_class=info.plan_class, reason=info.reason or None, path=path,
                                                operators=operators)

    return always_answer(run, invalid=lambda e: QueryResponseInvalidQuery(message=str(e)))
