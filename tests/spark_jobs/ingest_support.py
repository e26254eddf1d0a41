"""Helpers for the ingest job tests: build requests, write tiny input files, read the resulting slices."""
from __future__ import annotations

import json
import struct
import zipfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from spark_jobs import ingest

SYSTEM_TIME = "2024-06-01T00:00:00Z"


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=timezone.utc)


def read_request(tmp: Path, read_step: dict, files: list[Path | str], *, event_time: str | None = None,
                 preprocess: dict | None = None, output: str = "read.parquet") -> dict[str, Any]:
    return {"phases": ["read"], "dataset": "test.dataset",
            "read": {"inputs": [{"path": str(f), "eventTime": event_time} for f in files],
                     "readStep": read_step, "preprocess": preprocess, "outputPath": str(tmp / output)}}


def run_read(spark, tmp: Path, read_step: dict, files: list[Path | str], **kw) -> tuple[dict, list[dict]]:
    """Run only the read phase; returns the response and the rows of the read output (hidden columns dropped)."""
    resp = ingest.run_request(spark, read_request(tmp, read_step, files, **kw))
    rows = []
    if resp["status"] == "Success":
        rows = [{k: v for k, v in r.items() if not k.startswith("__odf")}
                for r in pq.read_table(tmp / kw.get("output", "read.parquet")).to_pylist()]
    return resp, rows


class Dataset:
    """Drives successive ingests into one dataset the way the coordinator would (offsets, checkpoints, slices)."""

    def __init__(self, spark, root: Path, strategy: dict, read_step: dict | None = None,
                 vocab: dict | None = None, use_checkpoint: bool = True):
        self.spark, self.root, self.strategy, self.vocab = spark, root, strategy, vocab
        self.read_step = read_step or {"kind": "Csv", "header": True}
        self.use_checkpoint = use_checkpoint
        self.prev_offset: int | None = None
        self.checkpoint: str | None = None
        self.slices: list[str] = []
        self.round = 0

    def ingest(self, csv_text: str, *, event_time: str | None = None, system_time: str = SYSTEM_TIME,
               extra_merge: dict | None = None, read_step: dict | None = None) -> tuple[dict, list[dict]]:
        self.round += 1
        src = self.root / f"in-{self.round}.csv"
        src.write_text(csv_text)
        out = self.root / f"slice-{self.round}.parquet"
        ckpt = self.root / f"checkpoint-{self.round}.parquet"
        req: dict[str, Any] = {
            "phases": ["read", "merge"],
            "read": {"inputs": [{"path": str(src), "eventTime": event_time}],
                     "readStep": read_step or self.read_step},
            "merge": {"strategy": self.strategy, "prevOffset": self.prev_offset, "systemTime": system_time,
                      "prevCheckpointPath": self.checkpoint if self.use_checkpoint else None,
                      "prevDataPaths": list(self.slices), "outputPath": str(out),
                      "newCheckpointPath": str(ckpt), **(extra_merge or {})}}
        if self.vocab:
            req["vocab"] = self.vocab
        resp = ingest.run_request(self.spark, req)
        rows: list[dict] = []
        if resp["status"] == "Success" and resp["merge"]["numRecords"]:
            rows = pq.read_table(out).to_pylist()
            self.slices.append(str(out))
            self.prev_offset = resp["merge"]["offsetInterval"]["end"]
            if resp["merge"]["checkpointWritten"]:
                self.checkpoint = str(ckpt)
        return resp, rows


def ops(rows: list[dict], key: str = "key", value: str = "value", op: str = "op") -> list[tuple]:
    return [(r[op], r[key], r[value]) for r in rows]


# --------------------------------------------------------------------------------------------------------------
# A tiny ESRI shapefile writer (struct only), enough to test the reader against known geometries
# --------------------------------------------------------------------------------------------------------------


def _shp_record(shape_type: int, geom: Any) -> bytes:
    if shape_type == 1:
        return struct.pack("<i2d", 1, *geom)
    parts = geom  # list of point lists (PolyLine 3 / Polygon 5)
    pts = [p for part in parts for p in part]
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    out = struct.pack("<i4d2i", shape_type, min(xs), min(ys), max(xs), max(ys), len(parts), len(pts))
    offsets, n = [], 0
    for part in parts:
        offsets.append(n)
        n += len(part)
    out += struct.pack(f"<{len(parts)}i", *offsets)
    out += b"".join(struct.pack("<2d", *p) for p in pts)
    return out


def build_shp(shape_type: int, geoms: list[Any]) -> bytes:
    body = b""
    for i, g in enumerate(geoms, 1):
        content = struct.pack("<i", 0) if g is None else _shp_record(shape_type, g)
        body += struct.pack(">2i", i, len(content) // 2) + content
    header = struct.pack(">i5ii", 9994, 0, 0, 0, 0, 0, (100 + len(body)) // 2)
    header += struct.pack("<2i", 1000, shape_type) + struct.pack("<8d", *([0.0] * 8))
    return header + body


def build_dbf(fields: list[tuple[str, str, int, int]], records: list[list[Any]], deleted: set[int] = frozenset()
              ) -> bytes:
    """dBase III: fields are (name, type, length, decimals); values are formatted like real writers do."""
    header_len = 32 + 32 * len(fields) + 1
    record_len = 1 + sum(f[2] for f in fields)
    out = struct.pack("<B3BIHH20x", 3, 124, 1, 1, len(records), header_len, record_len)
    for name, ftype, length, dec in fields:
        out += name.encode().ljust(11, b"\0") + ftype.encode() + b"\0" * 4 + bytes([length, dec]) + b"\0" * 14
    out += b"\r"
    for i, rec in enumerate(records):
        out += b"*" if i in deleted else b" "
        for (name, ftype, length, dec), v in zip(fields, rec):
            if v is None:
                text = ""
            elif ftype in "NF":
                text = f"{v:.{dec}f}".rjust(length) if dec else str(v).rjust(length)
            else:
                text = str(v)
            out += text.encode("utf-8").ljust(length, b" ")[:length]
    return out + b"\x1a"


def write_shapefile_zip(path: Path, stem: str, shape_type: int, geoms: list[Any],
                        fields: list[tuple[str, str, int, int]], records: list[list[Any]],
                        extra: dict[str, bytes] | None = None) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{stem}.shp", build_shp(shape_type, geoms))
        z.writestr(f"{stem}.dbf", build_dbf(fields, records))
        z.writestr(f"{stem}.cpg", b"UTF-8")
        for name, data in (extra or {}).items():
            z.writestr(name, data)
    return path


def geom(text: str | None) -> Any:
    return None if text is None else json.loads(text)
