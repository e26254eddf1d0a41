"""Reading datasets: the last records (pyarrow, no Spark) and read-only Spark SQL over datasets by name.

Dataset names hold dots and hyphens (``com.example.trips-by-city``), which SQL reads as qualified names and minus
signs. ``odf sql`` lets people write them as they are: :func:`resolve_names` quotes every unquoted reference that
is exactly a dataset's name, and a table position (after FROM or JOIN) naming no dataset is a one-line error with a
"did you mean". Quoted identifiers, strings and comments are left alone.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

import pyarrow as pa

from odf_core.engine.sql_text import query_problem, tokens
from odf_core.errors import OdfError
from odf_core.hashing.sources import open_parquet
from odf_core.identity import Multihash
from odf_core.storage import DatasetLayout
from odf_core.workspace import DatasetHandle, Workspace


@dataclass(frozen=True)
class DataFile:
    """A data slice's file and the block that added it (named when the file is missing)."""

    key: str
    block: Multihash
    sequence_number: int


def data_file_blocks(handle: DatasetHandle, newest_first: bool = False) -> list[DataFile]:
    found = []
    for h, block in handle.chain.iter_blocks():
        nd = getattr(block.event, "new_data", None)
        if nd is not None:
            found.append(DataFile(DatasetLayout.data_key(nd.physical_hash), h, block.sequence_number))
    return found if newest_first else found[::-1]


def data_files(handle: DatasetHandle, newest_first: bool = False) -> list[str]:
    return [f.key for f in data_file_blocks(handle, newest_first)]


def require_files(handle: DatasetHandle, files: list[DataFile]) -> None:
    """Raise the integrity error of ``odf verify --integrity`` for the first of ``files`` the store lacks."""
    from odf_core.chain.integrity import missing_file_error

    for f in files:
        if not handle.store.exists(f.key):
            raise missing_file_error(str(handle.name), f.key, f.block, f.sequence_number)


def tail(handle: DatasetHandle, n: int) -> pa.Table:
    """The last ``n`` records, reading slices from the newest back only as far as needed."""
    parts: list[pa.Table] = []
    have = 0
    for f in data_file_blocks(handle, newest_first=True):
        key = f.key
        require_files(handle, [f])
        with handle.store.readable(key) as src, open_parquet(src) as pf:  # not pq.read_table: see open_parquet
            t = pf.read()
        parts.append(t)
        have += t.num_rows
        if have >= n:
            break
    if not parts:
        return pa.table({})
    table = pa.concat_tables(parts[::-1], promote_options="default")
    return table.slice(max(0, table.num_rows - n))


_CTE = re.compile(r"(?:\bwith(?:\s+recursive)?|,)\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:\([^()]*\))?\s+as\s*\(", re.I)


_NOT_CALLS = frozenset({"in", "as", "exists", "from", "join", "on", "and", "or", "not", "select", "where", "values",
                        "over", "using", "when", "then", "else", "lateral", "union", "all", "distinct", "by"})


def resolve_names(query: str, names: list[str]) -> str:
    """``query`` with unquoted references to the datasets ``names`` quoted; raises :class:`OdfError` for a table
    position naming no dataset (with the closest name)."""
    known = {n.lower(): n for n in names}
    ctes = {m.group(1).lower() for m in _CTE.finditer(query)}
    toks = list(tokens(query))
    out: list[str] = []
    prev_word = ""
    calls: list[bool] = []  # per open parenthesis: a function call's (``extract(year FROM ts)``) or not
    for i, t in enumerate(toks):
        text = t.text
        if t.kind == "other" and text == "(":
            calls.append(bool(prev_word) and prev_word not in _NOT_CALLS)
        elif t.kind == "other" and text == ")" and calls:
            calls.pop()
        if t.kind in ("word", "quoted"):
            bare = text.strip("`") if t.kind == "quoted" else text
            follows = next((u for u in toks[i + 1:] if u.kind not in ("space", "comment")), None)
            is_call = follows is not None and follows.kind == "other" and follows.text == "("
            table_position = prev_word in ("from", "join") and not is_call and not (calls and calls[-1])
            if t.kind == "word" and bare.lower() in known and any(ch in bare for ch in ".-"):
                text = "`" + bare + "`"
            elif table_position and bare.lower() not in known and bare.lower() not in ctes:
                raise OdfError(unknown_dataset(bare, names))
            prev_word = bare.lower() if t.kind == "word" else ""
        elif t.kind not in ("space", "comment"):
            prev_word = ""
        out.append(text)
    return "".join(out)


def unknown_dataset(name: str, names: list[str]) -> str:
    close = difflib.get_close_matches(name.lower(), [n.lower() for n in names], n=1, cutoff=0.5)
    if close:
        hint = f" (did you mean '{next(n for n in names if n.lower() == close[0])}'?)"
    elif names:
        hint = f" (datasets: {', '.join(sorted(names)[:10])}{', ...' if len(names) > 10 else ''})"
    else:
        hint = " (the workspace has no datasets)"
    return f"unknown dataset '{name}'{hint}"


def engine_label(engine) -> str:
    """What served a query: the Spark application of an in-process engine (one per session), else the engine."""
    session = getattr(engine, "session", None)
    if callable(session):
        return f"Spark application {session().sparkContext.applicationId}"
    return engine.describe()


def sql(ws: Workspace, query: str, engine, limit: int = 1000) -> pa.Table:
    """Run ``query`` with every dataset registered as a view named after it; names are usable as written."""
    from odf_core.engine.protocol import SqlRequest, SqlResult, SqlTable
    from odf_core.engine.responses import unwrap

    problem = query_problem(query)
    if problem is not None:  # a friendlier message only: the engine's own gate refuses anything but a query
        raise OdfError(problem)
    tables = []
    handles = ws.list()
    query = resolve_names(query, [str(h.name) for h in handles])
    named = referenced_datasets(query, [str(h.name) for h in handles])
    read: list[tuple[DatasetHandle, list[DataFile]]] = []
    for h in handles:
        if str(h.name) not in named:  # a dataset the query does not name is not read (nor can it break the query)
            continue
        files = data_file_blocks(h)
        read.append((h, files))
        paths = [h.store.local_path(f.key) or h.store.url_of(f.key) for f in files]
        tables.append(SqlTable(name=str(h.name), data_paths=tuple(paths)))
    try:
        result = engine.execute(SqlRequest(query=query, tables=tuple(tables), limit=limit), what="query")
        value = unwrap(result, SqlResult, "query", invalid=lambda message: OdfError(f"invalid query: {message}"))
    except OdfError:
        _require_read_files(read)  # checked only when the engine failed: no per-file request on the happy path
        raise
    return pa.ipc.open_stream(value.arrow_ipc).read_all()


def _require_read_files(read: list[tuple[DatasetHandle, list[DataFile]]]) -> None:
    for h, files in read:
        require_files(h, files)


def referenced_datasets(query: str, names: list[str]) -> set[str]:
    """The datasets ``query`` names anywhere as a word or a quoted identifier (a superset of those it reads: a
    column named like a dataset also counts, which only registers a view too many)."""
    known = {n.lower(): n for n in names}
    found = set()
    for t in tokens(query):
        if t.kind in ("word", "quoted"):
            bare = t.text.strip("`") if t.kind == "quoted" else t.text
            for part in (bare, *bare.split(".")):  # `db`.`table` style pieces and the whole
                if part.lower() in known:
                    found.add(known[part.lower()])
    return found
