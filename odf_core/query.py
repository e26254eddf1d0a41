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
from typing import Iterator

import pyarrow as pa

from odf_core.errors import OdfError
from odf_core.hashing.sources import open_parquet
from odf_core.storage import DatasetLayout
from odf_core.workspace import DatasetHandle, Workspace


def data_files(handle: DatasetHandle, newest_first: bool = False) -> list[str]:
    keys = []
    for _, block in handle.chain.iter_blocks():
        nd = getattr(block.event, "new_data", None)
        if nd is not None:
            keys.append(DatasetLayout.data_key(nd.physical_hash))
    return keys if newest_first else keys[::-1]


def tail(handle: DatasetHandle, n: int) -> pa.Table:
    """The last ``n`` records, reading slices from the newest back only as far as needed."""
    parts: list[pa.Table] = []
    have = 0
    for key in data_files(handle, newest_first=True):
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


_WRITE = re.compile(r"^\s*(insert|update|delete|merge|create|drop|alter|truncate|set|reset|cache|uncache|"
                    r"refresh|msck|load|add|analyze)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Token:
    """A piece of SQL text: ``word`` (letters, digits, ``_ . -``), ``quoted`` (backticks), ``string``, ``comment``,
    ``space`` or ``other`` (one character)."""

    kind: str
    text: str


_WORD = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.]|-(?!-))*")


def tokens(query: str) -> Iterator[Token]:
    i, n = 0, len(query)
    while i < n:
        c = query[i]
        if c in "'\"`":
            j = i + 1
            while j < n and query[j] != c:
                j += 2 if query[j] == "\\" and c != "`" else 1
            yield Token("quoted" if c == "`" else "string", query[i:j + 1])
            i = j + 1
        elif query.startswith("--", i):
            j = query.find("\n", i)
            j = n if j < 0 else j
            yield Token("comment", query[i:j])
            i = j
        elif query.startswith("/*", i):
            j = query.find("*/", i + 2)
            j = n if j < 0 else j + 2
            yield Token("comment", query[i:j])
            i = j
        elif c.isspace():
            j = i
            while j < n and query[j].isspace():
                j += 1
            yield Token("space", query[i:j])
            i = j
        elif (m := _WORD.match(query, i)) is not None:
            yield Token("word", m.group(0).rstrip(".-"))
            i += len(m.group(0).rstrip(".-"))
        else:
            yield Token("other", c)
            i += 1


def split_statements(text: str) -> tuple[list[str], str]:
    """Complete statements (ended by ``;`` outside strings, quotes and comments) and the unfinished rest."""
    done: list[str] = []
    current: list[str] = []
    for t in tokens(text):
        if t.kind == "other" and t.text == ";":
            stmt = "".join(current).strip()
            if stmt:
                done.append(stmt)
            current = []
        else:
            current.append(t.text)
    return done, "".join(current)


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
    from odf_core.engine import EngineError, internal_error
    from odf_core.engine.protocol import EngineInternalError, QueryResponseInvalidQuery, SqlRequest, SqlResult, \
        SqlTable

    if _WRITE.match(query):
        raise OdfError(f"only read-only queries are allowed: {query.split()[0]!r}")
    tables = []
    handles = ws.list()
    query = resolve_names(query, [str(h.name) for h in handles])
    for h in handles:
        paths = [h.store.local_path(k) or h.store.url_of(k) for k in data_files(h)]
        tables.append(SqlTable(name=str(h.name), data_paths=tuple(paths)))
    result = engine.execute(SqlRequest(query=query, tables=tuple(tables), limit=limit), what="query")
    if not isinstance(result, SqlResult):
        raise EngineError(f"query: the engine answered with {type(result).__name__}")
    value = result.value
    if isinstance(value, QueryResponseInvalidQuery):
        raise OdfError(f"invalid query: {value.message}")
    if isinstance(value, EngineInternalError):
        raise internal_error("query", value.message, value.error_class, value.backtrace)
    return pa.ipc.open_stream(value.arrow_ipc).read_all()
