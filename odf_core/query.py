"""Reading datasets: the last records (pyarrow, no Spark) and read-only Spark SQL over datasets by name."""
from __future__ import annotations

import re

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


def sql(ws: Workspace, query: str, engine, limit: int = 1000) -> pa.Table:
    """Run ``query`` with every dataset registered as a view named after it (use backticks for dotted names)."""
    from odf_core.engine import EngineError, internal_error
    from odf_core.engine.protocol import EngineInternalError, QueryResponseInvalidQuery, SqlRequest, SqlResult, \
        SqlTable

    if _WRITE.match(query):
        raise OdfError(f"only read-only queries are allowed: {query.split()[0]!r}")
    tables = []
    for h in ws.list():
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
