"""Rules every appended block must satisfy (conformance §5), checked against the folded state. Pure: no I/O."""
from __future__ import annotations

from odf_core.errors import ChainError
from odf_core.metadata import (
    AddData,
    AddPushSource,
    DatasetKind,
    DisablePollingSource,
    DisablePushSource,
    ExecuteTransform,
    MetadataBlock,
    Seed,
    SetDataSchema,
    SetPollingSource,
    SetTransform,
)
from odf_core.chain.state import ChainState

_ROOT_ONLY = (AddData, SetPollingSource, AddPushSource, DisablePushSource, DisablePollingSource)
_DERIVATIVE_ONLY = (ExecuteTransform, SetTransform)


def validate_append(state: ChainState, block: MetadataBlock) -> None:
    """Raise :class:`ChainError` naming the broken rule if ``block`` cannot follow ``state``."""
    ev = block.event
    name = type(ev).__name__
    if state.head is None:
        if not isinstance(ev, Seed):
            raise ChainError(f"the first block must be a Seed, got {name}")
        if block.sequence_number != 0 or block.prev_block_hash is not None:
            raise ChainError(
                f"the Seed block must have sequenceNumber 0 and no prevBlockHash "
                f"(got {block.sequence_number}, {block.prev_block_hash})"
            )
        return
    if isinstance(ev, Seed):
        raise ChainError("a Seed may only be the first block of a chain")
    if block.prev_block_hash != state.head:
        raise ChainError(f"{name}: prevBlockHash {block.prev_block_hash} is not the head {state.head}")
    if block.sequence_number != state.sequence_number + 1:
        raise ChainError(
            f"{name}: sequenceNumber {block.sequence_number} does not follow the head's {state.sequence_number}"
        )
    if state.system_time is not None and block.system_time < state.system_time:
        raise ChainError(f"{name}: systemTime {block.system_time} is before the head's {state.system_time}")
    if isinstance(ev, _ROOT_ONLY) and state.kind is not DatasetKind.ROOT:
        raise ChainError(f"{name} is only allowed in root datasets")
    if isinstance(ev, _DERIVATIVE_ONLY) and state.kind is not DatasetKind.DERIVATIVE:
        raise ChainError(f"{name} is only allowed in derivative datasets")
    if isinstance(ev, (AddData, ExecuteTransform)):
        _validate_data_event(state, ev, name)
    elif isinstance(ev, SetDataSchema):
        _validate_schema(state, ev)
    elif isinstance(ev, DisablePushSource):
        if state.push_source(ev.source_name) is None:
            raise ChainError(f"DisablePushSource: there is no push source named {ev.source_name!r}")
    elif isinstance(ev, DisablePollingSource):
        if state.polling_source is None:
            raise ChainError("DisablePollingSource: the dataset has no active polling source")
    elif isinstance(ev, SetTransform):
        if not ev.inputs:
            raise ChainError("SetTransform: a transform needs at least one input")


def _validate_data_event(state: ChainState, ev: AddData | ExecuteTransform, name: str) -> None:
    if ev.prev_offset != state.last_offset:
        raise ChainError(f"{name}: prevOffset {ev.prev_offset} is not the last offset of the chain {state.last_offset}")
    last_cp = state.last_checkpoint.physical_hash if state.last_checkpoint else None
    if ev.prev_checkpoint != last_cp:
        raise ChainError(f"{name}: prevCheckpoint {ev.prev_checkpoint} is not the last checkpoint {last_cp}")
    if ev.new_data is not None:
        if state.schema is None:
            raise ChainError(f"{name}: data added before any SetDataSchema")
        iv = ev.new_data.offset_interval
        if iv.start != state.next_offset:
            kind = "gap" if iv.start > state.next_offset else "overlap"
            raise ChainError(
                f"{name}: offset {kind}: newData starts at {iv.start}, expected {state.next_offset}"
            )
        if iv.end < iv.start:
            raise ChainError(f"{name}: newData offset interval [{iv.start}, {iv.end}] is empty")
    if state.last_watermark is not None:
        if ev.new_watermark is None:
            raise ChainError(f"{name}: the watermark {state.last_watermark} must be carried once set")
        if ev.new_watermark < state.last_watermark:
            raise ChainError(
                f"{name}: watermark decreases from {state.last_watermark} to {ev.new_watermark}"
            )
    if isinstance(ev, ExecuteTransform):
        for qi in ev.query_inputs:
            prev = state.transform_input(qi.dataset_id)
            prev_hash = prev.new_block_hash if prev else None
            if qi.prev_block_hash != prev_hash and qi.new_block_hash is not None:
                raise ChainError(
                    f"ExecuteTransform: input {qi.dataset_id} prevBlockHash {qi.prev_block_hash} "
                    f"is not the last processed block {prev_hash}"
                )
            prev_off = prev.new_offset if prev else None
            if qi.new_offset is not None and qi.prev_offset != prev_off:
                raise ChainError(
                    f"ExecuteTransform: input {qi.dataset_id} prevOffset {qi.prev_offset} "
                    f"is not the last processed offset {prev_off}"
                )
    changes = (
        ev.new_data is not None
        or ev.new_checkpoint != state.last_checkpoint
        or (ev.new_watermark is not None and ev.new_watermark != state.last_watermark)
    )
    if isinstance(ev, AddData):
        if ev.new_source_state is not None:
            changes = changes or state.source_state(ev.new_source_state.source_name) != ev.new_source_state
    else:
        changes = changes or any(qi.new_block_hash is not None for qi in ev.query_inputs)
    if not changes:
        raise ChainError(f"{name} changes nothing (no data, checkpoint, watermark or source state change)")


def _validate_schema(state: ChainState, ev: SetDataSchema) -> None:
    from odf_core.metadata.arrow_schema import check_schema_evolution, decode_arrow_schema
    from odf_core.metadata.data_schema_arrow import arrow_schema_bytes

    raw = arrow_schema_bytes(ev)
    if raw is None:
        raise ChainError("SetDataSchema carries no schema (neither schema nor rawArrowSchema)")
    new = decode_arrow_schema(raw)
    if state.schema is not None:
        check_schema_evolution(decode_arrow_schema(state.schema), new, where="SetDataSchema")
