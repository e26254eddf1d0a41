"""Binary inputs of the ported cases, built here (the reference's own test files are not copied).

Each generator writes one file and is named in a case file as ``{generate: <name>}``. The data are the reference
tests' facts: the same columns, types and values (the shapefile is a small stand-in with the structure of the
reference's 27-region archive: the same archive layout, stem, dbf fields and field types, and the first points of the
region the geometry test looks at).
"""
from __future__ import annotations

import io
import zipfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import pyarrow as pa
import pyarrow.parquet as pq

GENERATORS: dict[str, Callable[[Path], None]] = {}


def generator(fn: Callable[[Path], None]) -> Callable[[Path], None]:
    GENERATORS[fn.__name__] = fn
    return fn


@generator
def cities_parquet(path: Path) -> None:
    """A parquet file that looks like an ODF slice: its own offset (uint64), system_time and event_time columns."""
    ts = pa.timestamp("ms", tz="UTC")
    system_time = datetime(2023, 2, 1, tzinfo=timezone.utc)
    event_time = datetime(2023, 1, 1, tzinfo=timezone.utc)
    table = pa.table({
        "offset": pa.array([0, 1, 2], pa.uint64()),
        "system_time": pa.array([system_time] * 3, ts),
        "event_time": pa.array([event_time] * 3, ts),
        "city": ["vancouver", "seattle", "kyiv"],
        "population": pa.array([675_000, 733_000, 2_884_000], pa.int64()),
    }, schema=pa.schema([pa.field("offset", pa.uint64(), False), pa.field("system_time", ts, False),
                         pa.field("event_time", ts, False), pa.field("city", pa.string(), False),
                         pa.field("population", pa.int64(), False)]))
    pq.write_table(table, path)


# (name_1, hasc_1, first ring) - Kiev City starts with the points the reference's geometry test checks.
_REGIONS = [
    ("Cherkasy", "UA.CK", [(32.0, 50.0), (32.0, 49.0), (31.0, 49.0), (31.0, 50.0), (32.0, 50.0)]),
    ("Crimea", "UA.KR", [(34.0, 45.5), (34.0, 44.5), (33.0, 44.5), (33.0, 45.5), (34.0, 45.5)]),
    ("Kiev City", "UA.KC", [(30.466304779052763, 50.587009429931804), (30.466583251953324, 50.58112716674821),
                            (30.3, 50.5), (30.466304779052763, 50.587009429931804)]),
    ("Zhytomyr", "UA.ZT", [(29.0, 51.0), (29.0, 50.0), (28.0, 50.0), (28.0, 51.0), (29.0, 51.0)]),
]
_VARNAMES = {"Crimea": "Crim\u00e9e|Krim"}  # latin-1 text, as in the reference archive


@generator
def ukraine_like_zip(path: Path) -> None:
    """A zipped shapefile: ``gg870xt4706.shp/.shx/.dbf`` (ISO-8859-1 text, as its ``.cst`` says) plus files a reader
    must ignore; polygons, one ring each, drawn clockwise as the format wants outer rings."""
    import shapefile

    shp, shx, dbf = io.BytesIO(), io.BytesIO(), io.BytesIO()
    w = shapefile.Writer(shp=shp, shx=shx, dbf=dbf, shapeType=shapefile.POLYGON, encoding="latin-1")
    for name, ftype, size, dec in [("id_0", "N", 33, 15), ("iso", "C", 254, 0), ("name_0", "C", 254, 0),
                                   ("id_1", "N", 33, 15), ("name_1", "C", 254, 0), ("hasc_1", "C", 254, 0),
                                   ("ccn_1", "N", 33, 15), ("cca_1", "C", 254, 0), ("type_1", "C", 254, 0),
                                   ("engtype_1", "C", 254, 0), ("nl_name_1", "C", 254, 0),
                                   ("varname_1", "C", 254, 0)]:
        w.field(name, ftype, size, dec)
    for i, (name, hasc, ring) in enumerate(_REGIONS, 1):
        w.poly([ring])
        w.record(240.0, "UKR", "Ukraine", float(i), name, hasc, 0.0, "", "Oblast'", "Region", "",
                 _VARNAMES.get(name, ""))
    w.close()
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("gg870xt4706.shp", shp.getvalue())
        z.writestr("gg870xt4706.shx", shx.getvalue())
        z.writestr("gg870xt4706.cst", b"ISO-8859-1")
        z.writestr("gg870xt4706.dbf", dbf.getvalue())
        z.writestr("gg870xt4706.prj", b'GEOGCS["WGS 84"]')
        z.writestr("wfsrequest.txt", b"a request that produced this archive")


@generator
def minutes_ndjson(path: Path) -> None:
    """Three cities a minute for 5000 minutes from 2010-01-01, the population as a quoted number (15000 lines)."""
    from datetime import timedelta

    start = datetime(2010, 1, 1, tzinfo=timezone.utc)
    with open(path, "w") as f:
        for i in range(5000):
            t = (start + timedelta(minutes=i)).isoformat()
            for city in ("A", "B", "C"):
                f.write(f'{{"event_time": "{t}", "city": "{city}", "population": "{i}"}}\n')
