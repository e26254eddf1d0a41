"""``--output json`` of ``odf list``, ``odf log`` and ``odf tail``: JSON Lines, one object per dataset, block or
record, so scripts can stream them (``jq -c``, ``json.loads`` per line). Timestamps and binary values become
strings."""
from __future__ import annotations

import datetime as dt
import json
from typing import Any, Iterable, TextIO


def _default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    return str(value)


def write_json_lines(rows: Iterable[dict[str, Any]], out: TextIO) -> None:
    for row in rows:
        out.write(json.dumps(row, default=_default, ensure_ascii=False) + "\n")
