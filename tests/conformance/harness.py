"""Runs the ported reference cases through the ``odf`` CLI and reads back what it committed.

The CLI runs in this process (``odf_core.cli.main``), so it reuses the test session's Spark; everything else is
what a user does: ``odf init``, ``odf add`` a snapshot file, ``odf ingest`` / ``odf pull``, ``odf add --update``.
Results are read the way any ODF reader would: ``odf log`` for the blocks, and the data file a block names in the
dataset's directory (the spec's layout). The one thing not done through the CLI is the clock: the reference
cases state their system times, so ``Timestamp.now`` is pinned per round (see :class:`Clock`).
"""
from __future__ import annotations

import base64
import contextlib
import io
import os
import re
import sys
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from odf_core.cli import main
from odf_core.metadata import Timestamp
from odf_core.metadata.arrow_schema import decode_arrow_schema, encode_arrow_schema

DATASET = "foo.bar"
DEFAULT_TIME = "2050-01-01T12:00:00Z"


@dataclass
class CliResult:
    code: int
    out: str
    err: str


class Clock:
    """The system time the CLI sees: ``Timestamp.now`` returns ``current`` while the case runs."""

    def __init__(self, start: str = DEFAULT_TIME):
        self.current = Timestamp.parse(start)

    def set(self, text: str) -> None:
        self.current = Timestamp.parse(text)


@dataclass
class OdfWorkspace:
    """A fresh workspace and a directory for source files, driven through the CLI."""

    root: Path
    src: Path = field(init=False)
    ws: str = field(init=False)

    def __post_init__(self) -> None:
        self.src = self.root / "src"
        self.src.mkdir(parents=True, exist_ok=True)
        self.ws = str(self.root / ".odf")

    def odf(self, *argv: str, stdin: bytes | None = None) -> CliResult:
        out, err = io.StringIO(), io.StringIO()
        old_stdin = sys.stdin
        if stdin is not None:
            sys.stdin = io.TextIOWrapper(io.BytesIO(stdin))
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main(["-w", self.ws, *argv])
        finally:
            sys.stdin = old_stdin
        return CliResult(code, out.getvalue(), err.getvalue())

    def ok(self, *argv: str, stdin: bytes | None = None) -> CliResult:
        r = self.odf(*argv, stdin=stdin)
        assert r.code == 0, f"odf {' '.join(argv)} failed: {r.err}"
        return r

    # -- reading back ------------------------------------------------------------------------------------------------

    def blocks(self, dataset: str = DATASET) -> list[dict[str, Any]]:
        """The dataset's blocks as ``odf log`` shows them, newest first (each with its ``hash``)."""
        text = self.ok("log", dataset).out
        blocks = []
        for chunk in text.split("\n---\n"):
            m = re.match(r"# Block: (\S+)\n", chunk)
            if not m:
                continue
            manifest = yaml.safe_load(chunk[m.end():])
            blocks.append({"hash": m.group(1), **manifest["content"]})
        return blocks

    def head(self, dataset: str = DATASET) -> str | None:
        blocks = self.blocks(dataset)
        return blocks[0]["hash"] if blocks else None

    def last_data(self, dataset: str = DATASET) -> pa.Table | None:
        """The newest data slice, read from ``datasets/<name>/data/<physicalHash>``."""
        for b in self.blocks(dataset):
            new_data = b["event"].get("newData")
            if b["event"]["kind"] == "AddData" and new_data:
                return pq.read_table(Path(self.ws) / "datasets" / dataset / "data" / new_data["physicalHash"])
        return None

    def schema_blocks(self, dataset: str = DATASET) -> list[dict[str, Any]]:
        return [b for b in self.blocks(dataset) if b["event"]["kind"] == "SetDataSchema"]

    def data_schema(self, dataset: str = DATASET) -> pa.Schema | None:
        found = self.schema_blocks(dataset)
        return decode_arrow_schema(base64.b64decode(found[0]["event"]["schema"])) if found else None


# -- writing the snapshot -------------------------------------------------------------------------------------------

_ARROW_TYPES = {
    "int32": pa.int32(), "int64": pa.int64(), "string": pa.string(), "double": pa.float64(),
    "date32": pa.date32(), "timestamp[ms,UTC]": pa.timestamp("ms", tz="UTC"),
}


def arrow_field(text: str) -> pa.Field:
    """``"city string not null"`` -> an Arrow field (the readable form the case files use for SetDataSchema)."""
    m = re.fullmatch(r"(\S+) (\S+?)( not null)?(?: description=(.+))?", text.strip())
    assert m, f"bad field spec {text!r}"
    meta = {"description": m.group(4)} if m.group(4) else None
    return pa.field(m.group(1), _ARROW_TYPES[m.group(2)], nullable=not m.group(3), metadata=meta)


def snapshot_yaml(events: list[dict[str, Any]], src: Path, name: str = DATASET) -> str:
    """A DatasetSnapshot manifest of a root dataset; ``{src}`` in any string becomes the source directory and a
    ``SetDataSchema`` given as ``fields`` gets its base64 Arrow schema."""
    out = []
    for ev in events:
        ev = dict(ev)
        if ev["kind"] == "SetDataSchema" and "fields" in ev:
            schema = pa.schema([arrow_field(f) for f in ev.pop("fields")])
            ev["schema"] = base64.b64encode(encode_arrow_schema(schema)).decode()
        out.append(ev)
    text = yaml.safe_dump({"kind": "DatasetSnapshot", "version": 1,
                           "content": {"name": name, "kind": "Root", "metadata": out}}, sort_keys=False)
    return text.replace("{src}", str(src))


# -- comparing values -----------------------------------------------------------------------------------------------


def show(value: Any) -> Any:
    """A value as the case files write it: timestamps as RFC 3339 UTC text (milliseconds when not whole seconds),
    dates as ISO text, decimals as text; everything else as is."""
    if isinstance(value, datetime):
        v = value.astimezone(timezone.utc)
        text = v.strftime("%Y-%m-%dT%H:%M:%S")
        if v.microsecond:
            text += f".{v.microsecond // 1000:03d}"
        return text + "Z"
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    return value


def rows_of(table: pa.Table, columns: list[str]) -> list[list[Any]]:
    missing = [c for c in columns if c not in table.column_names]
    assert not missing, f"columns {missing} not in the data (has {table.column_names})"
    return [[show(r[c]) for c in columns] for r in table.select(columns).to_pylist()]


def set_mtime(path: Path, when: str) -> None:
    """File sources are polled by modification time: each round's file gets the round's time."""
    t = Timestamp.parse(when).epoch_ns / 1e9
    os.utime(path, (t, t))
