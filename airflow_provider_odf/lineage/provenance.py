"""What a committed block says about where data came from, read back from the metadata chain.

The chain is the only trusted record, so lineage (OpenLineage facets, Asset event extras, the UI) is read from the
block a task committed, never from what the task believes it did. Plain dataclasses: no Airflow or OpenLineage
import, so the UI and the asset events share this without pulling either in.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from odf_core.chain import ChainState
    from odf_core.metadata import ExecuteTransformInput, MetadataBlock
    from odf_core.workspace import DatasetHandle, Workspace


@dataclass(frozen=True)
class Column:
    """One column of a dataset's current schema (``SetDataSchema``)."""

    name: str
    type: str
    nullable: bool


@dataclass(frozen=True)
class DatasetIdentity:
    """A dataset as lineage names it: its workspace name, its global id and its current state."""

    name: str
    dataset_id: str  # did:odf:...
    kind: str  # Root | Derivative
    head: str | None
    schema: tuple[Column, ...] = ()
    watermark: str | None = None


@dataclass(frozen=True)
class InputSlice:
    """What a transformation read of one input: its blocks ``prev_block`` (exclusive) .. ``new_block``."""

    dataset: str | None  # its name in this workspace (None: no longer here)
    dataset_id: str
    prev_block: str | None
    new_block: str | None
    offsets: tuple[int, int] | None  # the input records consumed, inclusive

    def to_json(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "dataset_id": self.dataset_id, "prev_block": self.prev_block,
                "block": self.new_block, "offsets": list(self.offsets) if self.offsets else None}


@dataclass(frozen=True)
class SourceStateInfo:
    source: str
    kind: str
    value: str


@dataclass(frozen=True)
class BlockProvenance:
    """The provenance of one ``AddData`` or ``ExecuteTransform`` block."""

    dataset: DatasetIdentity
    block: str
    prev_block: str | None
    sequence_number: int
    system_time: str
    event: str  # AddData | ExecuteTransform
    offsets: tuple[int, int] | None
    records: int
    size: int | None  # bytes of the new data slice
    logical_hash: str | None
    watermark: str | None  # the dataset's watermark after this block
    source_state: SourceStateInfo | None = None
    checkpoint: str | None = None
    engine: str | None = None  # transforms: the engine and the queries in effect
    queries: tuple[tuple[str | None, str], ...] = ()  # (alias, query)
    inputs: tuple[InputSlice, ...] = ()

    def to_extra(self) -> dict[str, Any]:
        """The provenance as an Asset event's ``extra`` (JSON): which block, which records, from what."""
        extra: dict[str, Any] = {
            "dataset": self.dataset.name,
            "dataset_id": self.dataset.dataset_id,
            "block": self.block,
            "prev_block": self.prev_block,
            "sequence_number": self.sequence_number,
            "head": self.dataset.head,
            "offsets": list(self.offsets) if self.offsets else None,
            "records": self.records,
            "watermark": self.watermark,
        }
        if self.source_state is not None:
            s = self.source_state
            extra["source_state"] = {"source": s.source, "kind": s.kind, "value": s.value}
        if self.inputs:
            extra["inputs"] = [i.to_json() for i in self.inputs]
        return extra


@dataclass(frozen=True)
class VerifyOutcome:
    """What a verify task found: recorded by the operator before it returns or fails, reported as a data-quality
    assertion and shown in the UI."""

    mode: str  # integrity | full
    ok: bool
    summary: str
    blocks_checked: int | None = None


def schema_columns(state: "ChainState") -> tuple[Column, ...]:
    """The dataset's current schema as columns (empty before its first data)."""
    if state.schema is None:
        return ()
    from odf_core.metadata.arrow_schema import decode_arrow_schema

    return tuple(Column(f.name, str(f.type), f.nullable) for f in decode_arrow_schema(state.schema))


def identity(handle: "DatasetHandle", state: "ChainState | None" = None) -> DatasetIdentity:
    st = state if state is not None else handle.state()
    return DatasetIdentity(
        name=str(handle.name),
        dataset_id=st.dataset_id.to_did_odf() if st.dataset_id else "",
        kind=st.kind.value if st.kind else "",
        head=str(st.head) if st.head else None,
        schema=schema_columns(st),
        watermark=str(st.last_watermark) if st.last_watermark else None,
    )


def names_by_id(ws: "Workspace") -> dict[str, str]:
    """``did:odf:...`` → dataset name, for every dataset of the workspace (one summary read each)."""
    out = {}
    for h in ws.list():
        did = h.state().dataset_id
        if did is not None:
            out[did.to_did_odf()] = str(h.name)
    return out


def input_slice(qi: "ExecuteTransformInput", names: dict[str, str]) -> InputSlice:
    did = qi.dataset_id.to_did_odf()
    offsets = None
    if qi.new_offset is not None and qi.new_offset != qi.prev_offset:
        offsets = (0 if qi.prev_offset is None else qi.prev_offset + 1, qi.new_offset)
    return InputSlice(names.get(did), did, str(qi.prev_block_hash) if qi.prev_block_hash else None,
                      str(qi.new_block_hash) if qi.new_block_hash else None, offsets)


def block_provenance(ws: "Workspace", dataset: str, block_hash: str) -> BlockProvenance:
    """Read the provenance of a committed block of ``dataset`` (raises an OdfError when it is not in its chain)."""
    from odf_core.errors import OdfError
    from odf_core.identity import Multihash
    from odf_core.metadata import AddData, ExecuteTransform

    handle = ws.get(dataset)
    h = Multihash.parse(block_hash)
    state = handle.state()
    block: MetadataBlock = handle.chain.get_block(h)
    ev = block.event
    if not isinstance(ev, (AddData, ExecuteTransform)):
        raise OdfError(f"dataset '{dataset}': block {block_hash} is a {type(ev).__name__}, not a data block")
    at_block = state if state.head == h else handle.chain.state_at(h)
    nd = ev.new_data
    iv = nd.offset_interval if nd else None
    source_state = None
    engine: str | None = None
    queries: tuple[tuple[str | None, str], ...] = ()
    inputs: tuple[InputSlice, ...] = ()
    if isinstance(ev, AddData) and ev.new_source_state is not None:
        s = ev.new_source_state
        source_state = SourceStateInfo(s.source_name, s.kind, s.value)
    if isinstance(ev, ExecuteTransform):
        names = names_by_id(ws)
        inputs = tuple(input_slice(qi, names) for qi in ev.query_inputs)
        t = at_block.transform.transform if at_block.transform else None
        if t is not None:
            engine = getattr(t, "engine", None)
            steps = getattr(t, "queries", None) or ()
            queries = tuple((q.alias, q.query) for q in steps)
            if not queries and (query := getattr(t, "query", None)):
                queries = ((None, query),)
    return BlockProvenance(
        dataset=identity(handle, state),
        block=block_hash,
        prev_block=str(block.prev_block_hash) if block.prev_block_hash else None,
        sequence_number=block.sequence_number,
        system_time=str(block.system_time),
        event=type(ev).__name__,
        offsets=(iv.start, iv.end) if iv else None,
        records=(iv.end - iv.start + 1) if iv else 0,
        size=nd.size if nd else None,
        logical_hash=str(nd.logical_hash) if nd else None,
        watermark=str(at_block.last_watermark) if at_block.last_watermark else None,
        source_state=source_state,
        checkpoint=str(ev.new_checkpoint.physical_hash) if ev.new_checkpoint else None,
        engine=engine,
        queries=queries,
        inputs=inputs,
    )
