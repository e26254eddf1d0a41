"""Helpers for the ingest job tests: build requests, write tiny input files, read the resulting slices."""
from __future__ import annotations

import json
import zipfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from odf_core.engine.protocol import (
    EngineInternalError,
    IngestInputFile,
    IngestRequest,
    IngestResponseInvalidInput,
    MergePhase,
    ReadPhase,
)
from odf_core.metadata import DatasetVocabulary, Timestamp
from odf_core.metadata.schema import W, Wire
from odf_core.metadata.yaml_serde import _value_from, to_data
from spark_jobs.ingest import execute_ingest

SYSTEM_TIME = "2024-06-01T00:00:00Z"


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=timezone.utc)


def _union(name: str, value: dict, path: str) -> Any:
    return _value_from(Wire(W.UNION, name), value, path)


def typed_request(req: dict[str, Any], default_work: str) -> IngestRequest:
    """The compact dict form these tests write (camelCase, as in ODF YAML) -> the engine's typed request."""
    vocab = _vocab(req.get("vocab"))
    read = merge = None
    if req.get("read"):
        r = req["read"]
        read = ReadPhase(
            inputs=tuple(IngestInputFile(path=str(i["path"]), display_name=str(i.get("sourceName") or i["path"]),
                                         event_time=Timestamp.parse(i["eventTime"]) if i.get("eventTime") else None)
                         for i in r["inputs"]),
            read_step=_union("ReadStep", r["readStep"], "read.readStep"),
            preprocess=_union("Transform", r["preprocess"], "read.preprocess") if r.get("preprocess") else None,
            output_path=r.get("outputPath"))
    if req.get("merge"):
        m = req["merge"]
        merge = MergePhase(
            strategy=_union("MergeStrategy", m["strategy"], "merge.strategy"),
            system_time=Timestamp.parse(m["systemTime"]), output_path=m["outputPath"],
            new_checkpoint_path=m.get("newCheckpointPath") or str(Path(m["outputPath"]).with_suffix(".ckpt")),
            prev_offset=m.get("prevOffset"), prev_schema=m.get("prevSchema"),
            prev_checkpoint_path=m.get("prevCheckpointPath"),
            prev_data_paths=tuple(m.get("prevDataPaths") or ()) or None, input_path=m.get("inputPath"))
    return IngestRequest(dataset=req.get("dataset") or "test.dataset", vocab=vocab,
                         work_dir=req.get("workDir") or default_work, read=read, merge=merge,
                         keep_read_as=req.get("keepReadAs"))


def _vocab(d: dict | None) -> DatasetVocabulary:
    base = DatasetVocabulary.default()
    if not d:
        return base
    from odf_core.metadata.yaml_serde import from_data

    return from_data(DatasetVocabulary, {**to_data(base), **d})


def response_dict(resp: Any) -> dict[str, Any]:
    """The typed response as the dict these tests assert on."""
    if isinstance(resp, IngestResponseInvalidInput):
        out: dict[str, Any] = {"status": "InvalidInput", "message": resp.message}
        for k in ("file", "line", "record"):
            if getattr(resp, k) is not None:
                out[k] = getattr(resp, k)
        return out
    if isinstance(resp, EngineInternalError):
        return {"status": "InternalError", "message": resp.message, "backtrace": resp.backtrace,
                "errorClass": resp.error_class}
    out = {"status": "Success"}
    if resp.read is not None:
        out["read"] = {"numRecords": resp.read.num_records, "schema": list(resp.read.columns)}
    if resp.merge is not None:
        m = resp.merge
        iv = m.offset_interval
        out["merge"] = {"numRecords": m.num_records,
                        "offsetInterval": {"start": iv.start, "end": iv.end} if iv else None,
                        "maxEventTime": str(m.max_event_time) if m.max_event_time else None,
                        "checkpointWritten": bool(m.checkpoint_written)}
    return out


def run_request(spark, req: dict[str, Any], kept=None) -> dict[str, Any]:
    """Run an ingest request given in the compact dict form; the answer as a dict."""
    outputs = [req.get("read", {}).get("outputPath"), req.get("merge", {}).get("outputPath")]
    default_work = str(Path(next(p for p in outputs if p)).parent) if any(outputs) else "."
    return response_dict(execute_ingest(spark, typed_request(req, default_work), kept))


def read_request(tmp: Path, read_step: dict, files: list[Path | str], *, event_time: str | None = None,
                 preprocess: dict | None = None, output: str = "read.parquet") -> dict[str, Any]:
    return {"phases": ["read"], "dataset": "test.dataset",
            "read": {"inputs": [{"path": str(f), "eventTime": event_time} for f in files],
                     "readStep": read_step, "preprocess": preprocess, "outputPath": str(tmp / output)}}


def run_read(spark, tmp: Path, read_step: dict, files: list[Path | str], **kw) -> tuple[dict, list[dict]]:
    """Run only the read phase; returns the response and the rows of the read output (hidden columns dropped)."""
    resp = run_request(spark, read_request(tmp, read_step, files, **kw))
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
        resp = run_request(self.spark, req)
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
# Shapefiles written with pyshp, to test the reader against known geometries
# --------------------------------------------------------------------------------------------------------------


def write_shapefile_zip(path: Path, stem: str, shape_type: int, geoms: list[Any],
                        fields: list[tuple[str, str, int, int]], records: list[list[Any]],
                        extra: dict[str, bytes] | None = None) -> Path:
    """A zip holding ``stem``.shp/.shx/.dbf/.cpg: shape type 1 point, 3 polyline, 5 polygon, or their Z forms 11, 13,
    15 (geoms: a point, or a list of parts/rings), fields (name, type, length, decimals); None is the null shape."""
    import io

    import shapefile

    shp, shx, dbf = io.BytesIO(), io.BytesIO(), io.BytesIO()
    w = shapefile.Writer(shp=shp, shx=shx, dbf=dbf, shapeType=shape_type, encoding="utf-8")
    for name, ftype, length, dec in fields:
        w.field(name, ftype, length, dec)
    for g, rec in zip(geoms, records):
        if g is None:
            w.null()
        else:
            {1: w.point, 11: w.pointz}.get(shape_type, lambda *p: None)(*g) if shape_type in (1, 11) else \
                {3: w.line, 13: w.linez, 5: w.poly, 15: w.polyz}[shape_type](g)
        w.record(*rec)
    w.close()
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{stem}.shp", shp.getvalue())
        z.writestr(f"{stem}.shx", shx.getvalue())
        z.writestr(f"{stem}.dbf", dbf.getvalue())
        z.writestr(f"{stem}.cpg", b"UTF-8")
        for name, data in (extra or {}).items():
            z.writestr(name, data)
    return path


def geom(text: str | None) -> Any:
    return None if text is None else json.loads(text)
