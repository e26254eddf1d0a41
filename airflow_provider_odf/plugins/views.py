"""What the ODF pages show, read from a workspace through ``odf_core`` only (chain, summaries, ``query.tail``).

No Airflow and no Spark here: the api-server reads a dataset's cached state, walks blocks from the head as far
as a page shows, and reads the last records with pyarrow.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_provider_odf.lineage.provenance import Column, input_slice, names_by_id, schema_columns

if TYPE_CHECKING:
    from odf_core.chain import ChainState
    from odf_core.metadata import MetadataBlock
    from odf_core.workspace import DatasetHandle, Workspace

MAX_CELL = 200  # characters of a record value shown in a table cell


@dataclass(frozen=True)
class DatasetRow:
    """One line of the datasets page."""

    name: str
    kind: str
    head: str | None
    blocks: int
    records: int
    size: int
    watermark: str | None
    updated: str | None  # system time of the head block


def dataset_row(handle: "DatasetHandle") -> DatasetRow:
    st = handle.state()
    return DatasetRow(str(handle.name), st.kind.value if st.kind else "?", str(st.head) if st.head else None,
                      st.block_count, st.num_records, st.data_size,
                      str(st.last_watermark) if st.last_watermark else None,
                      str(st.system_time) if st.system_time else None)


def dataset_rows(ws: "Workspace") -> list[DatasetRow]:
    return [dataset_row(h) for h in ws.list()]


@dataclass(frozen=True)
class ChainEntry:
    """One block of the metadata chain as the dataset page lists it."""

    sequence_number: int
    hash: str
    system_time: str
    event: str
    summary: str
    manifest: str  # the block as YAML (what ``odf log`` prints)
    links: tuple[str, ...] = ()  # datasets the block refers to (transform inputs)


def _offsets(iv: Any) -> str:
    return f"offsets {iv.start}..{iv.end} ({iv.end - iv.start + 1} records)"


def describe_event(block: "MetadataBlock", names: dict[str, str]) -> tuple[str, tuple[str, ...]]:
    """A one-line summary of a block's event, and the datasets it names."""
    from odf_core.metadata import (
        AddData,
        AddPushSource,
        ExecuteTransform,
        FetchStepContainer,
        FetchStepFilesGlob,
        FetchStepUrl,
        Seed,
        SetDataSchema,
        SetInfo,
        SetPollingSource,
        SetTransform,
    )

    ev = block.event
    if isinstance(ev, Seed):
        return f"{ev.dataset_kind.value} dataset {ev.dataset_id.to_did_odf()}", ()
    if isinstance(ev, AddData):
        parts = [_offsets(ev.new_data.offset_interval) if ev.new_data else "no new records"]
        if ev.new_watermark:
            parts.append(f"watermark {ev.new_watermark}")
        if ev.new_source_state:
            s = ev.new_source_state
            parts.append(f"source state {s.kind} {s.value}")
        return ", ".join(parts), ()
    if isinstance(ev, ExecuteTransform):
        parts = [_offsets(ev.new_data.offset_interval) if ev.new_data else "no new records"]
        used = []
        for qi in ev.query_inputs:
            sl = input_slice(qi, names)
            label = sl.dataset or sl.dataset_id
            read = f"{sl.offsets[0]}..{sl.offsets[1]}" if sl.offsets else "nothing new"
            parts.append(f"{label} {read} @ {short(sl.new_block)}")
            if sl.dataset:
                used.append(sl.dataset)
        if ev.new_watermark:
            parts.append(f"watermark {ev.new_watermark}")
        return ", ".join(parts), tuple(used)
    if isinstance(ev, SetPollingSource):
        f = ev.fetch
        where = f.url if isinstance(f, FetchStepUrl) else f.path if isinstance(f, FetchStepFilesGlob) else \
            f.image if isinstance(f, FetchStepContainer) else ""
        return f"fetch {type(f).__name__.removeprefix('FetchStep')} {where}, read " \
               f"{type(ev.read).__name__.removeprefix('ReadStep')}, merge " \
               f"{type(ev.merge).__name__.removeprefix('MergeStrategy')}", ()
    if isinstance(ev, AddPushSource):
        return f"push source '{ev.source_name}', read {type(ev.read).__name__.removeprefix('ReadStep')}, merge " \
               f"{type(ev.merge).__name__.removeprefix('MergeStrategy')}", ()
    if isinstance(ev, SetTransform):
        ins = [names.get(i.dataset_ref, i.dataset_ref) for i in ev.inputs]
        return f"{getattr(ev.transform, 'engine', '?')} transform of {', '.join(ins)}", \
            tuple(n for n in ins if not n.startswith("did:"))
    if isinstance(ev, SetDataSchema):
        from odf_core.metadata.arrow_schema import decode_arrow_schema
        from odf_core.metadata.data_schema_arrow import arrow_schema_bytes

        raw = arrow_schema_bytes(ev)  # the raw Arrow schema, else the DataSchema's: a block may carry either
        if raw is None:
            return "no schema", ()
        cols = [f.name for f in decode_arrow_schema(raw)]
        return f"{len(cols)} columns: {', '.join(cols)}", ()
    if isinstance(ev, SetInfo):
        return (ev.description or "").strip().splitlines()[0] if ev.description else "info", ()
    return "", ()


def short(block_hash: str | None) -> str:
    """The tail of a block hash (the head is always the same multihash/multibase prefix)."""
    return block_hash[-10:] if block_hash else "—"


def chain_entries(ws: "Workspace", handle: "DatasetHandle", limit: int) -> tuple[list[ChainEntry], bool]:
    """The newest ``limit`` blocks, and whether older ones exist."""
    from odf_core.metadata.yaml_serde import dump_manifest

    names = names_by_id(ws)
    out: list[ChainEntry] = []
    for h, block in handle.chain.iter_blocks():
        if len(out) == limit:
            return out, True
        summary, links = describe_event(block, names)
        out.append(ChainEntry(block.sequence_number, str(h), str(block.system_time), type(block.event).__name__,
                              summary, dump_manifest(block), links))
    return out, False


@dataclass(frozen=True)
class DatasetDetail:
    """The head of a dataset page: identity, state and the transform or source it has."""

    row: DatasetRow
    dataset_id: str
    description: str | None
    schema: tuple[Column, ...]
    queries: tuple[tuple[str | None, str], ...] = ()
    source: str | None = None


def dataset_detail(handle: "DatasetHandle") -> DatasetDetail:
    st = handle.state()
    queries: tuple[tuple[str | None, str], ...] = ()
    if st.transform is not None:
        t = st.transform.transform
        queries = tuple((q.alias, q.query) for q in (getattr(t, "queries", None) or ()))
        if not queries and (query := getattr(t, "query", None)):
            queries = ((None, query),)
    source = None
    if st.polling_source is not None:
        from airflow_provider_odf.lineage.naming import source_name

        n = source_name(st.polling_source.fetch)
        source = n.name if n.namespace in ("file", "container") else f"{n.namespace}{n.name}"
    elif st.push_sources:
        source = "push: " + ", ".join(s.source_name for s in st.push_sources)
    return DatasetDetail(dataset_row(handle), st.dataset_id.to_did_odf() if st.dataset_id else "",
                         st.info.description if st.info else None, schema_columns(st), queries, source)


@dataclass
class LineageGraph:
    """Datasets upstream (negative depth) and downstream (positive depth) of one dataset, and the edges between."""

    center: str
    depth: dict[str, int] = field(default_factory=dict)
    kinds: dict[str, str] = field(default_factory=dict)
    edges: set[tuple[str, str]] = field(default_factory=set)  # (input, derived)


def _inputs_of(state: "ChainState", names: dict[str, str]) -> list[str]:
    if state.transform is None:
        return []
    return [names.get(i.dataset_ref, i.dataset_ref) for i in state.transform.inputs]


def lineage_graph(ws: "Workspace", dataset: str) -> LineageGraph:
    """Walk transform inputs up and the reverse index down; depth is the longest path, so edges point right."""
    names = names_by_id(ws)
    states = {str(h.name): h.state() for h in ws.list()}
    center = str(ws.get(dataset).name)
    inputs = {n: _inputs_of(st, names) for n, st in states.items()}
    users: dict[str, list[str]] = {}
    for n, ins in inputs.items():
        for i in ins:
            users.setdefault(i, []).append(n)
    g = LineageGraph(center, {center: 0})

    def walk(start: str, nxt: dict[str, list[str]], sign: int) -> None:
        frontier, seen = [start], {start}
        while frontier:
            node = frontier.pop()
            for other in nxt.get(node, []):
                g.edges.add((other, node) if sign < 0 else (node, other))
                d = g.depth[node] + sign
                if other not in g.depth or abs(d) > abs(g.depth[other]):
                    g.depth[other] = d
                    frontier.append(other)  # deeper than found before: its own neighbours move too
                elif other not in seen:
                    frontier.append(other)
                seen.add(other)

    walk(center, inputs, -1)
    walk(center, users, +1)
    for n in g.depth:
        st = states.get(n)
        g.kinds[n] = st.kind.value if st is not None and st.kind else "?"
    return g


@dataclass(frozen=True)
class Records:
    columns: list[str]
    rows: list[list[str]]


def recent_records(handle: "DatasetHandle", n: int) -> Records:
    """The last ``n`` records (newest last), values as display strings."""
    from odf_core.query import tail

    table = tail(handle, n)
    cols = table.column_names
    rows = []
    for r in table.to_pylist():
        cells = []
        for c in cols:
            v = r[c]
            s = "" if v is None else str(v)
            cells.append(s if len(s) <= MAX_CELL else s[:MAX_CELL] + "…")
        rows.append(cells)
    return Records(cols, rows)
