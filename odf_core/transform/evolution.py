"""Query evolution: validating a new query (or the running engine, for an upgrade) against the inputs'
schemas with the engine, then appending its ``SetTransform``; ``odf explain``."""
from __future__ import annotations

import logging
import os
import tempfile

from odf_core.engine import Engine
from odf_core.engine.protocol import (
    ValidateInput,
    ValidateQueryRequest,
    ValidateQueryResponseSuccess,
    ValidateQueryResult,
)
from odf_core.engine.responses import unwrap
from odf_core.engine.version import running_engine_version
from odf_core.identity import Multihash
from odf_core.metadata import (
    DatasetKind,
    SetTransform,
)
from odf_core.workspace import Workspace

from odf_core.transform.errors import InvalidQuery, TransformError, invalid_query
from odf_core.transform.planning import check_engine, input_handle, schema_file, transform_of

log = logging.getLogger("odf.transform")


def validate_query(ws: Workspace, engine: Engine, dataset: str, event: SetTransform, vocab) -> bytes | None:
    """The output schema (Arrow, SetDataSchema form) of ``event``'s query on its inputs' schemas, validated by the
    engine; None when an input has no schema yet (the query is then validated on its first data)."""
    answer = _validate(ws, engine, dataset, event, vocab)
    return answer.output_schema if answer is not None else None


def explain(ws: Workspace, engine: Engine, dataset: str) -> ValidateQueryResponseSuccess:
    """How the engine evaluates a derivative's current query: its plan class and, for stateful queries, the path of
    each operator (incremental, row-wise or full, with why). Reads nothing but the inputs' schemas."""
    handle = ws.get(dataset)
    state = handle.state()
    if state.transform is None:
        raise InvalidQuery(f"dataset '{dataset}' has no transform (is it a root dataset?)")
    answer = _validate(ws, engine, dataset, state.transform, state.vocab)
    if answer is None:
        raise InvalidQuery(f"dataset '{dataset}': an input has no schema yet (pull it first)")
    return answer


def _validate(ws: Workspace, engine: Engine, dataset: str, event: SetTransform, vocab
              ) -> ValidateQueryResponseSuccess | None:
    with tempfile.TemporaryDirectory(prefix="odf-validate-") as tmp:
        inputs, missing = [], []
        for i, inp in enumerate(event.inputs):
            h = input_handle(ws, inp.dataset_ref, dataset)
            ist = h.state()
            if ist.schema is None:
                missing.append(str(h.name))
                continue
            inputs.append(ValidateInput(query_alias=inp.alias or str(h.name), vocab=ist.vocab,
                                        schema_file=schema_file(h, ist, os.path.join(tmp, f"s{i}.parquet"))))
        if missing:
            log.warning("%s: inputs %s have no schema yet: the query is validated on their first data",
                        dataset, ", ".join(missing))
            return None
        what = f"query validation of dataset '{dataset}'"
        result = engine.execute(ValidateQueryRequest(vocab=vocab, transform=event.transform, inputs=tuple(inputs)),
                                what=what)
    return unwrap(result, ValidateQueryResult, what, invalid=invalid_query(dataset))


def set_transform(ws: Workspace, dataset: str, event: SetTransform, *, engine: Engine) -> Multihash:
    """Query evolution: validate the new query with Spark against the inputs' schemas, check the output schema only
    adds columns (the chain's own rule), then append the new ``SetTransform``."""
    event = validate_transform(ws, dataset, event, engine=engine)
    return ws.get(dataset).chain.append_event(event)


def upgrade_engine(ws: Workspace, dataset: str, *, engine: Engine) -> Multihash | None:
    """Record in the chain that ``dataset``'s query now runs on this engine: the same ``SetTransform`` with the running
    engine's version, validated by it (the output schema may only add columns). None when it is already recorded."""
    handle = ws.get(dataset)
    st = transform_of(handle.state(), str(handle.name))
    running = running_engine_version(engine)
    if st.transform.version == running:
        return None
    event = validate_transform(ws, str(handle.name), st.replace(transform=st.transform.replace(version=running)),
                               engine=engine)
    head = handle.chain.append_event(event)
    log.info("%s: engine upgraded from %s to %s in block %s", handle.name, st.transform.version, running, head)
    return head


def validate_transform(ws: Workspace, dataset: str, event: SetTransform, *, engine: Engine) -> SetTransform:
    """The checks of :func:`set_transform` without the append (so a batch can be validated before any write); returns
    the event as it would be appended."""
    from odf_core.errors import SchemaEvolutionError
    from odf_core.metadata import DatasetSnapshot
    from odf_core.metadata.arrow_schema import decode_arrow_schema
    from odf_core.metadata.schema_evolution import check_schema_evolution

    handle = ws.get(dataset)
    state = handle.state()
    if state.kind is not DatasetKind.DERIVATIVE:
        raise TransformError(f"dataset '{handle.name}' is not a derivative dataset")
    event = ws.normalize_event(event, DatasetSnapshot(name=str(handle.name), kind=DatasetKind.DERIVATIVE,
                                                       metadata=(event,)))
    check_engine(event.transform, str(handle.name))
    output = validate_query(ws, engine, str(handle.name), event, state.vocab)
    if output is not None and state.schema is not None:
        try:
            check_schema_evolution(decode_arrow_schema(state.schema), decode_arrow_schema(output))
        except SchemaEvolutionError as e:
            raise SchemaEvolutionError(f"dataset '{handle.name}': new query", e.problems) from None
    return event
