"""``ReadStep::EsriShapefile``: a zip, a directory or a ``.shp`` file, read with pyshp.

Attributes become columns (dbf C/M text, N/F numbers, D dates, L booleans; blank values null), the shape a GeoJSON
text column ``geometry`` (points, multipoints, polylines, polygons with holes; Z kept, M dropped).
"""
from __future__ import annotations

import codecs
import fnmatch
import glob
import io
import os
import zipfile
from typing import Any, Callable, Iterator

import shapefile as pyshp
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import BooleanType, DataType, DateType, DoubleType, LongType, StringType, StructField, StructType

from odf_core.engine.protocol import IngestInputFile
from odf_core.metadata import ReadStepEsriShapefile
from spark_jobs.errors import InputRejected
from spark_jobs.ingest.readers import SourceInfo, WorkDir, reader, schema_of
from spark_jobs.ingest.readers.geojson import GEOMETRY, geo_schema
from spark_jobs.ingest.readers.json import dump, read_ndjson_file, write_ndjson


def _members(path: str, sub_path: str | None, display: str) -> tuple[str, Callable[[str], bytes | None]]:
    """Locate the .shp inside a zip, a directory or as the file itself; returns its name and a reader of siblings."""
    if os.path.isfile(path) and zipfile.is_zipfile(path):
        zf = zipfile.ZipFile(path)
        names = [n for n in zf.namelist() if not n.endswith("/")]
        lookup = {n.lower(): n for n in names}

        def read_member(name: str) -> bytes | None:
            real = lookup.get(name.lower())
            return zf.read(real) if real else None
    elif os.path.isdir(path):
        names = sorted(os.path.relpath(p, path) for p in glob.glob(os.path.join(path, "**", "*"), recursive=True)
                       if os.path.isfile(p))
        lookup = {n.lower(): n for n in names}

        def read_member(name: str) -> bytes | None:
            real = lookup.get(name.lower())
            if real is None:
                return None
            with open(os.path.join(path, real), "rb") as f:
                return f.read()
    elif path.lower().endswith(".shp"):
        base_dir, shp = os.path.split(path)
        return _members(base_dir or ".", shp, display)
    else:
        raise InputRejected(f"cannot read {display}: expected a zip archive, a directory or a .shp file", file=display)
    candidates = [n for n in names if n.lower().endswith(".shp")]
    if sub_path:
        candidates = [n for n in candidates if fnmatch.fnmatch(n, sub_path)]
    if len(candidates) != 1:
        what = "no .shp file" if not candidates else f"several .shp files {candidates}"
        raise InputRejected(f"cannot read {display}: {what} match subPath {sub_path!r}" if sub_path else
                            f"cannot read {display}: {what} found; set subPath to choose one", file=display)
    return candidates[0], read_member


def _cpg_encoding(cpg: bytes | None) -> str | None:
    if not cpg:
        return None
    name = cpg.decode("ascii", "replace").strip()
    if name.isdigit():
        name = {"88591": "latin-1", "65001": "utf-8"}.get(name, "cp" + name)
    try:
        return codecs.lookup(name).name
    except LookupError:
        return None


def _spark_type(field: Any) -> DataType:
    kind = str(field.field_type.name if hasattr(field.field_type, "name") else field.field_type).upper()
    if kind == "N" and field.decimal == 0 and field.size <= 18:
        return LongType()
    if kind in ("N", "F"):
        return DoubleType()
    if kind == "D":
        return DateType()
    if kind == "L":
        return BooleanType()
    return StringType()


def _coords(shape: Any) -> list[list[float]]:
    """The shape's points as [x, y] or [x, y, z] lists."""
    pts = [[float(p[0]), float(p[1])] for p in shape.points]
    z = getattr(shape, "z", None)
    if shape.shapeType in (pyshp.POINTZ, pyshp.MULTIPOINTZ, pyshp.POLYLINEZ, pyshp.POLYGONZ) and z:
        for p, zv in zip(pts, z):
            p.append(float(zv))
    return pts


def geometry(shape: Any) -> dict[str, Any] | None:
    """One pyshp shape -> a GeoJSON geometry (None for the null shape)."""
    t = shape.shapeType
    if t == pyshp.NULL:
        return None
    pts = _coords(shape)
    if t in (pyshp.POINT, pyshp.POINTZ, pyshp.POINTM):
        return {"type": "Point", "coordinates": pts[0]}
    if t in (pyshp.MULTIPOINT, pyshp.MULTIPOINTZ, pyshp.MULTIPOINTM):
        return {"type": "MultiPoint", "coordinates": pts}
    parts = list(shape.parts) + [len(pts)]
    chunks = [pts[a:b] for a, b in zip(parts, parts[1:])]
    if t in (pyshp.POLYLINE, pyshp.POLYLINEZ, pyshp.POLYLINEM):
        return {"type": "LineString", "coordinates": chunks[0]} if len(chunks) == 1 else \
            {"type": "MultiLineString", "coordinates": chunks}
    if t in (pyshp.POLYGON, pyshp.POLYGONZ, pyshp.POLYGONM):
        # Always a MultiPolygon, as the reference implementation writes a polygon shape (a shape may hold several).
        return {"type": "MultiPolygon", "coordinates": pyshp.organize_polygon_rings(chunks)}
    raise ValueError(f"shape type {shape.shapeTypeName} is not supported (supported: point, multipoint, polyline, "
                     "polygon)")


def _value(v: Any) -> Any:
    if isinstance(v, str):
        v = v.strip()
        return v or None
    if hasattr(v, "isoformat"):
        return v.isoformat()
    return v


def open_shapefile(inp: IngestInputFile, sub_path: str | None) -> tuple[StructType, Iterator[dict[str, Any]]]:
    """The .dbf fields as a Spark schema and the records (attributes + ``geometry``) of the selected shapefile."""
    display = inp.display_name
    shp_name, read_member = _members(inp.path, sub_path, display)
    stem = shp_name[:-4]
    shp, dbf = read_member(shp_name), read_member(stem + ".dbf")
    if dbf is None:
        raise InputRejected(f"cannot read {display}: {stem}.dbf is missing next to {shp_name}", file=display)
    # The code page: a .cpg file, else a .cst one (the older name some exporters write, e.g. GeoServer).
    encoding = _cpg_encoding(read_member(stem + ".cpg")) or _cpg_encoding(read_member(stem + ".cst"))
    rows: list[dict[str, Any]] = []
    for attempt in ([encoding] if encoding else ["utf-8", "latin-1"]):
        try:
            r = pyshp.Reader(shp=io.BytesIO(shp or b""), dbf=io.BytesIO(dbf), encoding=attempt)
            fields = r.fields[1:]  # the first is the deletion flag
            if any(f.name == GEOMETRY for f in fields):
                raise InputRejected(f"cannot read {display}: a dbf field named '{GEOMETRY}' clashes with the "
                                    "geometry column", file=display)
            if len(r.shapes()) != r.numRecords:
                raise InputRejected(f"cannot read {display}: {shp_name} has {len(r.shapes())} shapes but {stem}.dbf "
                                    f"has {r.numRecords} records", file=display)
            rows = []
            for sr in r.iterShapeRecords():
                rec = {k: _value(v) for k, v in sr.record.as_dict().items()}
                g = geometry(sr.shape)
                rec[GEOMETRY] = dump(g, sort_keys=True) if g is not None else None  # as GeoJSON's
                rows.append(rec)
            schema = StructType([StructField(f.name, _spark_type(f)) for f in fields]
                                + [StructField(GEOMETRY, StringType())])
            return schema, iter(rows)
        except UnicodeDecodeError:
            continue
        except InputRejected:
            raise
        except Exception as e:  # noqa: BLE001 - pyshp's format errors
            if isinstance(e.__cause__ or e.__context__, UnicodeDecodeError) or "decode" in str(e):
                continue  # text that is not in this encoding: try the next one
            raise InputRejected(f"cannot read {display} ({shp_name}): {e}", file=display) from None
    raise InputRejected(f"cannot read {display}: {stem}.dbf is not valid {encoding} text", file=display)


@reader(ReadStepEsriShapefile)
def read_shapefile(spark: SparkSession, step: ReadStepEsriShapefile, inp: IngestInputFile, work: WorkDir
                   ) -> tuple[DataFrame, SourceInfo]:
    dbf_schema, records = open_shapefile(inp, step.sub_path)
    tmp = work.path("shapes.ndjson")
    write_ndjson(tmp, (dump(r) for r in records))
    # A read schema selects columns: the geometry only when it names it (as in the reference implementation).
    user = schema_of(step)
    schema = (geo_schema(step) if GEOMETRY in user.names else user) if user is not None else dbf_schema
    df = read_ndjson_file(spark, tmp, schema, {})
    return df, SourceInfo(inp.display_name, tmp, "json", {}, df.schema, "utf-8", "record")
