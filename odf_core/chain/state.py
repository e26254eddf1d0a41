"""The dataset's current state, folded from its blocks.

:class:`ChainState` is what planning needs (schema, vocab, sources, transform, offsets, watermark, checkpoint, source
state) so it never has to walk the chain: the chain keeps it as an authenticated summary bound to the head it was
computed at (``odf_core.chain.summary``), and reading it costs O(1) storage reads whatever the chain length.
"""
from __future__ import annotations

import base64
import dataclasses
from dataclasses import dataclass

from odf_core.identity import DatasetID, Multihash
from odf_core.metadata import (
    AddData,
    AddPushSource,
    Checkpoint,
    DatasetKind,
    DatasetVocabulary,
    DisablePollingSource,
    DisablePushSource,
    ExecuteTransform,
    ExecuteTransformInput,
    MetadataBlock,
    Seed,
    SetAttachments,
    SetDataSchema,
    SetInfo,
    SetLicense,
    SetPollingSource,
    SetTransform,
    SetVocab,
    SourceState,
    Timestamp,
)
from odf_core.metadata.yaml_serde import from_data, to_data


@dataclass(frozen=True)
class ChainState:
    head: Multihash | None = None
    sequence_number: int = -1
    system_time: Timestamp | None = None
    dataset_id: DatasetID | None = None
    kind: DatasetKind | None = None
    schema: bytes | None = None
    set_vocab: SetVocab | None = None
    polling_source: SetPollingSource | None = None
    push_sources: tuple[AddPushSource, ...] = ()
    transform: SetTransform | None = None
    info: SetInfo | None = None
    license: SetLicense | None = None
    attachments: SetAttachments | None = None
    last_offset: int | None = None
    last_watermark: Timestamp | None = None
    last_checkpoint: Checkpoint | None = None
    source_states: tuple[SourceState, ...] = ()
    transform_inputs: tuple[ExecuteTransformInput, ...] = ()  # last ExecuteTransform position per input
    num_records: int = 0
    data_size: int = 0
    data_blocks: int = 0

    @property
    def seeded_id(self) -> DatasetID:
        """The dataset's id, for a chain known to start with its Seed (every stored dataset's chain does)."""
        assert self.dataset_id is not None, "the chain has no Seed"
        return self.dataset_id

    @property
    def block_count(self) -> int:
        return self.sequence_number + 1

    @property
    def vocab(self) -> DatasetVocabulary:
        d = DatasetVocabulary.default()
        v = self.set_vocab
        if v is None:
            return d
        return DatasetVocabulary(
            offset_column=v.offset_column or d.offset_column,
            operation_type_column=v.operation_type_column or d.operation_type_column,
            system_time_column=v.system_time_column or d.system_time_column,
            event_time_column=v.event_time_column or d.event_time_column,
        )

    @property
    def next_offset(self) -> int:
        return 0 if self.last_offset is None else self.last_offset + 1

    def push_source(self, name: str | None) -> AddPushSource | None:
        for s in self.push_sources:
            if name is None or s.source_name == name:
                return s
        return None

    def source_state(self, source_name: str) -> SourceState | None:
        for s in self.source_states:
            if s.source_name == source_name:
                return s
        return None

    def transform_input(self, dataset_id: DatasetID) -> ExecuteTransformInput | None:
        for i in self.transform_inputs:
            if i.dataset_id == dataset_id:
                return i
        return None


def _replace_by(items: tuple, key, new) -> tuple:
    out = [i for i in items if key(i) != key(new)]
    out.append(new)
    return tuple(out)


def fold(state: ChainState, block: MetadataBlock, block_hash: Multihash) -> ChainState:
    """The state after ``block`` (assumed valid: see :mod:`odf_core.chain.rules`)."""
    ev = block.event
    ch: dict = {"head": block_hash, "sequence_number": block.sequence_number, "system_time": block.system_time}
    if isinstance(ev, Seed):
        ch.update(dataset_id=ev.dataset_id, kind=ev.dataset_kind)
    elif isinstance(ev, (AddData, ExecuteTransform)):
        if ev.new_data is not None:
            iv = ev.new_data.offset_interval
            ch.update(
                last_offset=iv.end,
                num_records=state.num_records + iv.end - iv.start + 1,
                data_size=state.data_size + ev.new_data.size,
                data_blocks=state.data_blocks + 1,
            )
        ch["last_checkpoint"] = ev.new_checkpoint
        if ev.new_watermark is not None:
            ch["last_watermark"] = ev.new_watermark
        if isinstance(ev, AddData) and ev.new_source_state is not None:
            ch["source_states"] = _replace_by(state.source_states, lambda s: s.source_name, ev.new_source_state)
        if isinstance(ev, ExecuteTransform):
            inputs = state.transform_inputs
            for qi in ev.query_inputs:
                inputs = _replace_by(inputs, lambda i: i.dataset_id, _carry_input(state, qi))
            ch["transform_inputs"] = inputs
    elif isinstance(ev, SetDataSchema):
        from odf_core.metadata.data_schema_arrow import arrow_schema_bytes

        ch["schema"] = arrow_schema_bytes(ev)  # the raw Arrow schema, or the ODF DataSchema's Arrow form
    elif isinstance(ev, SetVocab):
        ch["set_vocab"] = ev
    elif isinstance(ev, SetPollingSource):
        ch["polling_source"] = ev
    elif isinstance(ev, DisablePollingSource):
        ch["polling_source"] = None
    elif isinstance(ev, AddPushSource):
        ch["push_sources"] = _replace_by(state.push_sources, lambda s: s.source_name, ev)
    elif isinstance(ev, DisablePushSource):
        ch["push_sources"] = tuple(s for s in state.push_sources if s.source_name != ev.source_name)
    elif isinstance(ev, SetTransform):
        ch["transform"] = ev
    elif isinstance(ev, SetInfo):
        ch["info"] = ev
    elif isinstance(ev, SetLicense):
        ch["license"] = ev
    elif isinstance(ev, SetAttachments):
        ch["attachments"] = ev
    return dataclasses.replace(state, **ch)


def _carry_input(state: ChainState, qi: ExecuteTransformInput) -> ExecuteTransformInput:
    """An input that consumed nothing new keeps its previous position."""
    prev = state.transform_input(qi.dataset_id)
    if prev is None:
        return qi
    return ExecuteTransformInput(
        dataset_id=qi.dataset_id,
        prev_block_hash=qi.prev_block_hash,
        new_block_hash=qi.new_block_hash or prev.new_block_hash,
        prev_offset=qi.prev_offset,
        new_offset=qi.new_offset if qi.new_offset is not None else prev.new_offset,
    )


# --- plain-data form (what ``info/summary`` stores: see ``odf_core.chain.summary``) -------------------------------

_MODEL_FIELDS = {
    "set_vocab": SetVocab,
    "polling_source": SetPollingSource,
    "transform": SetTransform,
    "info": SetInfo,
    "license": SetLicense,
    "attachments": SetAttachments,
    "last_checkpoint": Checkpoint,
}
_MODEL_LISTS = {"push_sources": AddPushSource, "source_states": SourceState, "transform_inputs": ExecuteTransformInput}


def state_to_dict(state: ChainState) -> dict:
    """JSON-ready dict of the non-empty fields (models in their manifest form, bytes in base64)."""
    out: dict = {}
    for f in dataclasses.fields(state):
        v = getattr(state, f.name)
        if v is None:
            continue
        if f.name in _MODEL_FIELDS:
            v = to_data(v)
        elif f.name in _MODEL_LISTS:
            v = [to_data(x) for x in v]
        elif isinstance(v, (Multihash, DatasetID, Timestamp)):
            v = str(v)
        elif isinstance(v, DatasetKind):
            v = v.value
        elif isinstance(v, bytes):
            v = base64.b64encode(v).decode()
        out[f.name] = v
    return out


def state_from_dict(raw: dict) -> ChainState:
    """Inverse of :func:`state_to_dict`; raises (ValueError, KeyError, TypeError, …) on anything malformed."""
    kw: dict = {}
    for k, v in raw.items():
        if k in _MODEL_FIELDS:
            v = from_data(_MODEL_FIELDS[k], v)
        elif k in _MODEL_LISTS:
            v = tuple(from_data(_MODEL_LISTS[k], x) for x in v)
        elif k == "head":
            v = Multihash.parse(v)
        elif k == "dataset_id":
            v = DatasetID.parse(v)
        elif k in ("system_time", "last_watermark"):
            v = Timestamp.parse(v)
        elif k == "kind":
            v = DatasetKind(v)
        elif k == "schema":
            v = base64.b64decode(v)
        kw[k] = v
    return ChainState(**kw)


def first_difference(a: ChainState, b: ChainState) -> str | None:
    """``"<field>: <a> vs <b>"`` for the first field where two states differ, or None when they are equal."""
    for f in dataclasses.fields(ChainState):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if x != y:
            return f"{f.name} {_short(x)} vs {_short(y)}"
    return None


def _short(v: object) -> str:
    text = str(v) if isinstance(v, (Multihash, DatasetID, Timestamp, int)) else repr(v)
    return text if len(text) <= 120 else text[:117] + "..."
