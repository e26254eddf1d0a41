"""Primary keys on the driver with pyarrow: numbering keys, first occurrences, Snapshot change data capture.

Keys compare as Spark's ``<=>`` and GROUP BY do: nulls equal each other, NaN equals NaN, -0.0 equals 0.0.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import date, datetime, timezone
from typing import Any, Sequence

from spark_jobs.errors import InputRejected
from spark_jobs.parquet_files import cast


def pa_concat(tables: Sequence[Any]) -> Any:
    import pyarrow as pa

    first = tables[0].schema.remove_metadata()
    return pa.concat_tables([t.replace_schema_metadata(None).cast(first) for t in tables])


def key_codes(columns: Sequence[Any]) -> Any:
    """A group number per row over the key columns (numpy int64), numbered in order of first appearance."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    code = None
    for c in columns:
        c = c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c
        if pa.types.is_floating(c.type):
            c = pc.add(c, pa.scalar(0.0, c.type))  # -0.0 + 0.0 = 0.0
        enc = pc.dictionary_encode(c, null_encoding="encode")
        k = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        if code is None:
            code = k
        else:  # pair with the codes so far, then renumber densely (again in order of first appearance)
            code = pc.dictionary_encode(pa.array(code * len(enc.dictionary) + k)).indices.to_numpy().astype(np.int64)
    return code if code is not None else np.zeros(0, np.int64)


def first_occurrence(codes: Any) -> Any:
    """True where a row is the first of its group (codes numbered in order of first appearance)."""
    import numpy as np

    if len(codes) == 0:
        return np.zeros(0, bool)
    running_max = np.maximum.accumulate(codes)
    before = np.empty_like(running_max)
    before[0], before[1:] = -1, running_max[:-1]
    return codes > before


def first_of_dense_integers(cols: Sequence[Any]) -> Any:
    """``first_occurrence`` for one integer key column without nulls whose values span at most a few times its length
    (ids, sequence numbers): a counting pass finds the keys that occur once, which are first occurrences by
    definition, and only the rows of repeated keys go through the hash pass. None when the shortcut does not apply."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if len(cols) != 1 or not pa.types.is_integer(cols[0].type):
        return None
    c = cols[0].combine_chunks() if isinstance(cols[0], pa.ChunkedArray) else cols[0]
    n = len(c)
    if n == 0 or c.null_count:
        return None
    bounds = pc.min_max(c)
    low, high = bounds["min"].as_py(), bounds["max"].as_py()
    if high - low > 4 * n + 1024:
        return None
    values = c.to_numpy().astype(np.int64) - low
    repeated = np.bincount(values)[values] > 1
    first = ~repeated
    if repeated.any():
        rows = np.nonzero(repeated)[0]
        first[rows] = first_occurrence(key_codes([c.take(pa.array(rows))]))
    return first


def ledger_keep_mask(new_keys: Any, seen_keys: Any) -> tuple[Any, Any]:
    """Which new rows (in order) carry a key neither seen before nor earlier in the input; the seen keys once each."""
    import pyarrow as pa

    m = 0 if seen_keys is None else seen_keys.num_rows
    if seen_keys is not None:
        seen_keys = seen_keys.select(new_keys.column_names).replace_schema_metadata(None).cast(
            new_keys.schema.remove_metadata())
        cols = [pa.chunked_array(seen_keys.column(k).chunks + new_keys.column(k).chunks, new_keys.schema.field(k).type)
                for k in new_keys.column_names]
    else:
        cols = [new_keys.column(k) for k in new_keys.column_names]
    first = first_of_dense_integers(cols)
    if first is None:
        first = first_occurrence(key_codes(cols))
    distinct_seen = None if seen_keys is None else seen_keys.filter(pa.array(first[:m]))
    return first[m:], distinct_seen


def key_json(table: Any, pk: Sequence[str], row: int) -> str:
    """The key of one row as Spark's ``to_json(struct(...))`` writes it (null fields left out)."""
    import base64

    values = {}
    for k in pk:
        v = table.column(k)[row].as_py()
        if v is None:
            continue
        if isinstance(v, datetime):
            v = (v if v.tzinfo else v.replace(tzinfo=timezone.utc)).astimezone(timezone.utc)
            v = v.strftime("%Y-%m-%dT%H:%M:%S.") + f"{v.microsecond // 1000:03d}Z"
        elif isinstance(v, date):
            v = v.isoformat()
        elif isinstance(v, bytes):
            v = base64.b64encode(v).decode()
        values[k] = v
    return json.dumps(values, separators=(",", ":"), ensure_ascii=False, default=str)


def duplicate_snapshot_key(key: str) -> InputRejected:
    return InputRejected(f"duplicate primary key {key} in the new snapshot: a snapshot must hold each key at most once")


def is_distinct(a: Any, b: Any) -> Any:
    """``a IS DISTINCT FROM b`` per row, as Spark: nulls equal each other, NaN equals NaN."""
    import pyarrow as pa
    import pyarrow.compute as pc

    same = pc.or_(pc.fill_null(pc.equal(a, b), False), pc.and_(pc.is_null(a), pc.is_null(b)))
    if pa.types.is_floating(a.type):
        same = pc.or_(same, pc.fill_null(pc.and_(pc.is_nan(a), pc.is_nan(b)), False))
    return pc.invert(same)


def normalized_table(table: Any, fields: Sequence[Any]) -> Any:
    """``table`` with exactly ``fields`` (missing columns as nulls), timestamps as timestamp(ms, UTC)."""
    import pyarrow as pa

    n = table.num_rows
    return pa.Table.from_arrays(
        [cast(table.column(f.name), f.type) if f.name in table.column_names else pa.nulls(n, f.type)
         for f in fields], schema=pa.schema(list(fields)))


def spark_key_order(table: Any, pk: Sequence[str], then: str) -> tuple[Any, list[Any]]:
    """Sort arguments ordering rows as Spark's ``ORDER BY pk ASC NULLS FIRST, then``: for floating-point keys NaN
    comes after every number (Arrow would place it with the nulls), so such keys sort by a rank column first."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    keys: list[Any] = []
    for k in pk:
        c = table.column(k)
        if pa.types.is_floating(c.type):
            rank = np.where(pc.is_nan(c).fill_null(False).to_numpy(zero_copy_only=False), 2, 1)
            rank[pc.is_null(c).to_numpy(zero_copy_only=False)] = 0
            table = table.append_column(f"__rank_{k}", pa.array(rank.astype(np.int8)))
            keys.append((f"__rank_{k}", "ascending"))
        keys.append((k, "ascending", "at_start"))
    return table, keys + [(then, "ascending")]


@dataclass
class SnapshotChanges:
    out: Any  # op + event time + data columns, sorted by key then op: the slice rows
    state: Any  # event time + data columns: the next state, one row per key, in the order of the new snapshot


def snapshot_changes(new: Any, state: Any, pk: Sequence[str], compare: Sequence[str], filled: Any, op_name: str,
                     event_time: str) -> SnapshotChanges:
    """Change data capture of ``new`` (one row per key) against ``state`` (conformance §7), all in pyarrow.

    Both tables hold the same columns. ``filled`` marks new rows whose event time came from the source: such a time
    is not a change. Cost: one hash pass over the keys of both, a comparison of the rows present in both.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    n, m = new.num_rows, (state.num_rows if state is not None else 0)
    if state is None:
        state = new.slice(0, 0)
    codes = key_codes([pa.chunked_array(state.column(k).chunks + new.column(k).chunks, new.schema.field(k).type)
                       for k in pk])
    groups = int(codes.max()) + 1 if len(codes) else 0
    s_codes, n_codes = codes[:m], codes[m:]
    counts = np.bincount(n_codes, minlength=groups)
    repeated = counts[n_codes] > 1
    if repeated.any():
        raise duplicate_snapshot_key(key_json(new, pk, int(np.argmax(repeated))))
    in_state = np.full(groups, -1, np.int64)
    in_state[s_codes] = np.arange(m)
    in_new = np.zeros(groups, bool)
    in_new[n_codes] = True
    state_row = in_state[n_codes]  # per new row: its key's state row, or -1
    n_both = np.nonzero(state_row >= 0)[0]
    s_both = state_row[n_both]
    n_idx, s_idx = pa.array(n_both), pa.array(s_both)
    changed = pa.repeat(pa.scalar(False), len(n_both))
    for c in compare:
        old, cur = state.column(c).take(s_idx), new.column(c).take(n_idx)
        diff = is_distinct(old, cur)
        if c == event_time:  # only an event time given by the data itself counts as a change
            diff = pc.and_(diff, pc.and_(pc.is_valid(cur), pc.invert(filled.take(n_idx))))
        changed = pc.or_(changed, diff)
    changed_np = changed.to_numpy(zero_copy_only=False).astype(bool)
    ch_n, ch_s = n_both[changed_np], s_both[changed_np]
    added = np.nonzero(state_row < 0)[0]
    removed = np.nonzero(~in_new[s_codes])[0]

    def rows(table: Any, idx: Any, ops: int, seq: int) -> Any:
        picked = table.take(pa.array(idx, pa.int64()))
        return picked.append_column(op_name, pa.array(np.full(len(idx), ops, np.int32))) \
            .append_column("__seq", pa.array(np.full(len(idx), seq, np.int8)))

    out = pa.concat_tables([rows(new, added, 0, 0), rows(state, removed, 1, 1), rows(state, ch_s, 2, 2),
                            rows(new, ch_n, 3, 3)])
    out = out.take(pc.sort_indices(*spark_key_order(out, pk, "__seq"))).drop_columns(["__seq"])
    keep_old = np.zeros(n, bool)
    keep_old[n_both[~changed_np]] = True
    pick = np.where(keep_old, state_row, m + np.arange(n, dtype=np.int64))
    next_state = pa.concat_tables([state, new]).take(pa.array(pick, pa.int64())) if m else new
    return SnapshotChanges(out, next_state)
