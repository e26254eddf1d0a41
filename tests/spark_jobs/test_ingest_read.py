"""Read phase of the ingest job: every ODF read format from real files, coercion, malformed data, preprocess SQL."""
from __future__ import annotations

import json
from datetime import date
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest


from .ingest_support import geom, run_read, run_request, utc, write_shapefile_zip

pytestmark = pytest.mark.spark

ET = "2024-05-05T00:00:00Z"


# ---------------------------------------------------------------------------------------------------- CSV


def test_csv_header_and_ddl_schema_coerce_types(spark, tmp_path):
    f = tmp_path / "in.csv"
    f.write_text("when,id,price,day,ok,name\n"
                 "2024-01-01T10:00:00Z,1,1.5,2024-01-02,true,a\n"
                 "2024-01-01T11:30:00.123+01:00,2,,2024-01-03,false,\n")
    resp, rows = run_read(spark, tmp_path, {"kind": "Csv", "header": True, "schema": [
        "event_time TIMESTAMP", "id BIGINT", "price DOUBLE", "day DATE", "ok BOOLEAN", "name STRING"]}, [f])
    assert resp["status"] == "Success", resp
    assert resp["read"] == {"numRecords": 2, "schema": ["event_time TIMESTAMP", "id BIGINT", "price DOUBLE",
                                                        "day DATE", "ok BOOLEAN", "name STRING"]}
    assert rows == [
        {"event_time": utc(2024, 1, 1, 10), "id": 1, "price": 1.5, "day": date(2024, 1, 2), "ok": True, "name": "a"},
        {"event_time": utc(2024, 1, 1, 10, 30, 0, 123000), "id": 2, "price": None, "day": date(2024, 1, 3),
         "ok": False, "name": None}]
    schema = pq.read_schema(tmp_path / "read.parquet")
    assert schema.field("event_time").type == pa.timestamp("ms", tz="UTC")
    assert schema.field("id").type == pa.int64() and schema.field("day").type == pa.date32()


def test_csv_separator_quote_escape_null_value_and_formats(spark, tmp_path):
    f = tmp_path / "in.csv"
    f.write_text("01.02.2024 13:45;'x;y';NA;05/03/2024\n"
                 "02.02.2024 08:00;'it\\'s';7;06/03/2024\n")
    resp, rows = run_read(spark, tmp_path, {
        "kind": "csv", "separator": ";", "quote": "'", "escape": "\\", "nullValue": "NA",
        "timestampFormat": "dd.MM.yyyy HH:mm", "dateFormat": "dd/MM/yyyy",
        "schema": ["event_time TIMESTAMP", "text STRING", "n INT", "d DATE"]}, [f])
    assert resp["status"] == "Success", resp
    assert rows == [{"event_time": utc(2024, 2, 1, 13, 45), "text": "x;y", "n": None, "d": date(2024, 3, 5)},
                    {"event_time": utc(2024, 2, 2, 8), "text": "it's", "n": 7, "d": date(2024, 3, 6)}]


def test_csv_encoding_and_disabled_quoting(spark, tmp_path):
    f = tmp_path / "in.csv"
    f.write_bytes('city,note\nZürich,"quoted"\n'.encode("latin-1"))
    resp, rows = run_read(spark, tmp_path, {"kind": "Csv", "header": True, "encoding": "ISO-8859-1", "quote": ""},
                          [f], event_time=ET)
    assert resp["status"] == "Success", resp
    assert rows == [{"event_time": utc(2024, 5, 5), "city": "Zürich", "note": '"quoted"'}]


def test_csv_without_schema_reads_strings_and_infer_schema_infers(spark, tmp_path):
    f = tmp_path / "in.csv"
    f.write_text("1,2.5,x\n2,3.5,y\n")
    resp, rows = run_read(spark, tmp_path, {"kind": "Csv"}, [f], event_time=ET)
    assert resp["read"]["schema"] == ["event_time TIMESTAMP", "_c0 STRING", "_c1 STRING", "_c2 STRING"]
    assert rows[0] == {"event_time": utc(2024, 5, 5), "_c0": "1", "_c1": "2.5", "_c2": "x"}
    resp, _ = run_read(spark, tmp_path, {"kind": "Csv", "inferSchema": True}, [f], event_time=ET)
    assert resp["read"]["schema"] == ["event_time TIMESTAMP", "_c0 BIGINT", "_c1 DOUBLE", "_c2 STRING"]


def test_csv_value_not_fitting_schema_names_file_line_value_and_column(spark, tmp_path):
    f = tmp_path / "bad.csv"
    f.write_text("id,name\n1,a\n2,b\nabc,c\n4,d\n")
    resp, _ = run_read(spark, tmp_path, {"kind": "Csv", "header": True, "schema": ["id BIGINT", "name STRING"]},
                       [f], event_time=ET)
    assert resp["status"] == "InvalidInput"
    assert resp["file"] == str(f) and resp["line"] == 4
    assert "'abc'" in resp["message"] and "'id'" in resp["message"] and "BIGINT" in resp["message"]
    assert "Exception" not in resp["message"] and "at org." not in resp["message"]


def test_csv_bad_timestamp_and_wrong_column_count(spark, tmp_path):
    f = tmp_path / "ts.csv"
    f.write_text("t\n2024-01-01T00:00:00Z\n2024-13-45T00:00:00Z\n")
    resp, _ = run_read(spark, tmp_path, {"kind": "Csv", "header": True, "schema": ["event_time TIMESTAMP"]}, [f])
    assert (resp["status"], resp["line"]) == ("InvalidInput", 3)
    assert "2024-13-45T00:00:00Z" in resp["message"] and "TIMESTAMP" in resp["message"]

    g = tmp_path / "cols.csv"
    g.write_text("a,b\n1,2\n3,4,5\n")
    resp, _ = run_read(spark, tmp_path, {"kind": "Csv", "header": True}, [g], event_time=ET)
    assert (resp["status"], resp["file"], resp["line"]) == ("InvalidInput", str(g), 3)
    assert "expected 2 columns, found 3" in resp["message"]


def test_missing_input_file_and_invalid_ddl(spark, tmp_path):
    resp, _ = run_read(spark, tmp_path, {"kind": "Csv"}, [tmp_path / "nope.csv"], event_time=ET)
    assert resp["status"] == "InvalidInput" and "not found" in resp["message"]
    f = tmp_path / "in.csv"
    f.write_text("1\n")
    resp, _ = run_read(spark, tmp_path, {"kind": "Csv", "schema": ["id BIGINTT"]}, [f], event_time=ET)
    assert resp["status"] == "InvalidInput" and "invalid DDL schema" in resp["message"]


# ---------------------------------------------------------------------------------------------------- JSON


def test_json_document_with_sub_path_and_schema(spark, tmp_path):
    f = tmp_path / "in.json"
    f.write_text(json.dumps({"meta": {"n": 2}, "data": {"items": [
        {"id": 1, "seen at": "2024-01-01T00:00:00Z", "tags": ["a"]},
        {"id": 2, "seen at": "2024-01-02T00:00:00Z", "tags": []}]}}))
    resp, rows = run_read(spark, tmp_path, {"kind": "Json", "subPath": "data.items",
                                            "schema": ["id INT", "`seen at` TIMESTAMP", "tags ARRAY<STRING>"]},
                          [f], event_time=ET)
    assert resp["status"] == "Success", resp
    assert resp["read"]["schema"] == ["event_time TIMESTAMP", "id INT", "`seen at` TIMESTAMP", "tags ARRAY<STRING>"]
    assert rows == [{"event_time": utc(2024, 5, 5), "id": 1, "seen at": utc(2024, 1, 1), "tags": ["a"]},
                    {"event_time": utc(2024, 5, 5), "id": 2, "seen at": utc(2024, 1, 2), "tags": []}]


def test_json_without_schema_keeps_key_order_of_the_data(spark, tmp_path):
    f = tmp_path / "in.json"
    f.write_text(json.dumps([{"zeta": 1, "alpha": "x"}, {"zeta": 2, "alpha": "y", "mid": 1.5}]))
    resp, rows = run_read(spark, tmp_path, {"kind": "json"}, [f], event_time=ET)
    assert resp["read"]["schema"] == ["event_time TIMESTAMP", "zeta BIGINT", "alpha STRING", "mid DOUBLE"]
    assert [r["zeta"] for r in rows] == [1, 2] and rows[0]["mid"] is None


@pytest.mark.parametrize("content, step, message, where", [
    ('{"a": [1, 2}', {}, "invalid JSON", {"line": 1}),
    ('{"a": 1}', {}, "root element is not an array", {}),
    ('{"a": {"b": []}}', {"subPath": "a.c"}, "subPath 'a.c' not found", {}),
    ('[{"a": 1}, 5]', {}, "record 2 is not a JSON object", {"record": 2}),
    ('[{"id": 1}, {"id": "x1"}]', {"schema": ["id BIGINT"]}, "x1", {"record": 2}),
])
def test_json_errors_name_the_file_and_record(spark, tmp_path, content, step, message, where):
    f = tmp_path / "bad.json"
    f.write_text(content)
    resp, _ = run_read(spark, tmp_path, {"kind": "Json", **step}, [f], event_time=ET)
    assert resp["status"] == "InvalidInput" and resp["file"] == str(f)
    assert message in resp["message"]
    for k, v in where.items():
        assert resp[k] == v


def test_ndjson_with_schema_and_timestamp_format(spark, tmp_path):
    f = tmp_path / "in.ndjson"
    f.write_text('{"event_time": "2024/01/01 10:00", "v": 1}\n\n{"event_time": null, "v": 2}\n')
    resp, rows = run_read(spark, tmp_path, {"kind": "NdJson", "timestampFormat": "yyyy/MM/dd HH:mm",
                                            "schema": ["event_time TIMESTAMP", "v SMALLINT"]}, [f], event_time=ET)
    assert resp["status"] == "Success", resp
    # the null event time is filled from the source time
    assert rows == [{"event_time": utc(2024, 1, 1, 10), "v": 1}, {"event_time": utc(2024, 5, 5), "v": 2}]
    assert pq.read_schema(tmp_path / "read.parquet").field("v").type == pa.int16()


def test_ndjson_malformed_line_and_mismatched_value(spark, tmp_path):
    f = tmp_path / "bad.ndjson"
    f.write_text('{"id": 1}\n{"id": 2}\n{"id": 3\n')
    resp, _ = run_read(spark, tmp_path, {"kind": "NdJson", "schema": ["id BIGINT"]}, [f], event_time=ET)
    assert (resp["status"], resp["file"], resp["line"]) == ("InvalidInput", str(f), 3)
    assert "invalid JSON" in resp["message"]
    g = tmp_path / "types.ndjson"
    g.write_text('{"id": 1}\n{"id": "abc"}\n')
    resp, _ = run_read(spark, tmp_path, {"kind": "ndjson", "schema": ["id BIGINT"]}, [g], event_time=ET)
    assert (resp["status"], resp["line"]) == ("InvalidInput", 2)
    assert "abc" in resp["message"] and "BIGINT" in resp["message"]


# ---------------------------------------------------------------------------------------------------- GeoJSON


FEATURES = [
    {"type": "Feature", "properties": {"name": "a", "pop": 10},
     "geometry": {"type": "Point", "coordinates": [1.5, 2.5]}},
    {"type": "Feature", "properties": {"name": "b", "pop": 20},
     "geometry": {"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 0]]]}},
    {"type": "Feature", "properties": {"name": "c", "pop": None}, "geometry": None},
]


def test_geojson_feature_collection_rows_with_geometry_text(spark, tmp_path):
    f = tmp_path / "in.geojson"
    f.write_text(json.dumps({"type": "FeatureCollection", "features": FEATURES}))
    resp, rows = run_read(spark, tmp_path, {"kind": "GeoJson"}, [f], event_time=ET)
    assert resp["status"] == "Success", resp
    assert resp["read"]["schema"] == ["event_time TIMESTAMP", "name STRING", "pop BIGINT", "geometry STRING"]
    assert [(r["name"], r["pop"], geom(r["geometry"])) for r in rows] == \
        [(ft["properties"]["name"], ft["properties"]["pop"], ft["geometry"]) for ft in FEATURES]
    # a schema coerces the properties; the geometry column is appended when the schema does not list it
    resp, rows = run_read(spark, tmp_path, {"kind": "GeoJson", "schema": ["pop INT", "name STRING"]}, [f],
                          event_time=ET)
    assert resp["read"]["schema"] == ["event_time TIMESTAMP", "pop INT", "name STRING", "geometry STRING"]
    assert rows[0]["pop"] == 10 and geom(rows[0]["geometry"]) == FEATURES[0]["geometry"]


def test_geojson_rejects_other_documents(spark, tmp_path):
    f = tmp_path / "in.geojson"
    f.write_text(json.dumps({"type": "FeatureCollection", "features": [FEATURES[0], {"type": "Point"}]}))
    resp, _ = run_read(spark, tmp_path, {"kind": "GeoJson"}, [f], event_time=ET)
    assert (resp["status"], resp["record"]) == ("InvalidInput", 2)
    assert "not a GeoJSON Feature" in resp["message"]


def test_ndgeojson_one_feature_per_line(spark, tmp_path):
    f = tmp_path / "in.ndgeojson"
    f.write_text("\n".join(json.dumps(ft) for ft in FEATURES[:2]) + "\n\n" + json.dumps(FEATURES[2]) + "\n")
    resp, rows = run_read(spark, tmp_path, {"kind": "NdGeoJson", "schema": ["name STRING", "geometry STRING",
                                                                            "pop DOUBLE"]}, [f], event_time=ET)
    assert resp["status"] == "Success", resp
    assert [(r["name"], r["pop"], geom(r["geometry"])) for r in rows] == \
        [("a", 10.0, FEATURES[0]["geometry"]), ("b", 20.0, FEATURES[1]["geometry"]), ("c", None, None)]
    bad = tmp_path / "bad.ndgeojson"
    bad.write_text(json.dumps(FEATURES[0]) + "\n\n" + '{"type": "Feature", "properties": {"pop": "many"}}\n')
    resp, _ = run_read(spark, tmp_path, {"kind": "NdGeoJson", "schema": ["pop INT"]}, [bad], event_time=ET)
    assert (resp["status"], resp["file"], resp["line"]) == ("InvalidInput", str(bad), 3)


# ---------------------------------------------------------------------------------------------------- Parquet


def test_parquet_with_and_without_schema(spark, tmp_path):
    f = tmp_path / "in.parquet"
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int32()), "amount": ["1.25", "2.50"],
                             "ts": pa.array([1_700_000_000_123_456, None], pa.timestamp("us"))}), f)
    resp, rows = run_read(spark, tmp_path, {"kind": "Parquet"}, [f], event_time=ET)
    assert resp["read"]["schema"] == ["event_time TIMESTAMP", "id INT", "amount STRING", "ts TIMESTAMP"]
    # a zone-less microsecond timestamp is normalized to timestamp(ms, UTC)
    assert rows[0]["ts"] == utc(2023, 11, 14, 22, 13, 20, 123000)
    resp, rows = run_read(spark, tmp_path, {"kind": "parquet", "schema": ["amount DECIMAL(10,2)", "id BIGINT"]},
                          [f], event_time=ET)
    assert resp["read"]["schema"] == ["event_time TIMESTAMP", "amount DECIMAL(10,2)", "id BIGINT"]
    assert [r["amount"] for r in rows] == [Decimal("1.25"), Decimal("2.50")]


def test_parquet_values_not_fitting_the_schema_and_missing_columns(spark, tmp_path):
    f = tmp_path / "in.parquet"
    pq.write_table(pa.table({"id": ["1", "x2"]}), f)
    resp, _ = run_read(spark, tmp_path, {"kind": "Parquet", "schema": ["id BIGINT"]}, [f], event_time=ET)
    assert resp["status"] == "InvalidInput" and resp["file"] == str(f) and "x2" in resp["message"]
    resp, _ = run_read(spark, tmp_path, {"kind": "Parquet", "schema": ["nope BIGINT"]}, [f], event_time=ET)
    assert resp["status"] == "InvalidInput" and "['nope']" in resp["message"]


# ---------------------------------------------------------------------------------------------------- Shapefile

DBF_FIELDS = [("NAME", "C", 10, 0), ("POP", "N", 9, 0), ("AREA", "N", 12, 3), ("FOUNDED", "D", 8, 0),
              ("CAPITAL", "L", 1, 0)]


def test_shapefile_zip_points_with_attributes(spark, tmp_path):
    z = write_shapefile_zip(tmp_path / "towns.zip", "data/towns", 1, [(1.0, 2.0), (3.5, -4.25), None],
                            DBF_FIELDS, [["Alpha", 100, 1.5, date(1999, 1, 2), True], ["Beta", None, 2.25, None, False],
                                         ["Gamma", 3, None, date(2000, 1, 1), None]])
    resp, rows = run_read(spark, tmp_path, {"kind": "EsriShapefile"}, [z], event_time=ET)
    assert resp["status"] == "Success", resp
    assert resp["read"]["schema"] == ["event_time TIMESTAMP", "NAME STRING", "POP BIGINT", "AREA DOUBLE",
                                      "FOUNDED DATE", "CAPITAL BOOLEAN", "geometry STRING"]
    assert [{k: v for k, v in r.items() if k != "event_time"} for r in rows] == [
        {"NAME": "Alpha", "POP": 100, "AREA": 1.5, "FOUNDED": date(1999, 1, 2), "CAPITAL": True,
         "geometry": '{"coordinates":[1.0,2.0],"type":"Point"}'},
        {"NAME": "Beta", "POP": None, "AREA": 2.25, "FOUNDED": None, "CAPITAL": False,
         "geometry": '{"coordinates":[3.5,-4.25],"type":"Point"}'},
        {"NAME": "Gamma", "POP": 3, "AREA": None, "FOUNDED": date(2000, 1, 1), "CAPITAL": None, "geometry": None}]


def test_shapefile_polygons_polylines_sub_path_and_schema(spark, tmp_path):
    outer = [(0, 0), (0, 10), (10, 10), (10, 0), (0, 0)]  # clockwise = outer ring in shapefiles
    hole = [(2, 2), (4, 2), (4, 4), (2, 4), (2, 2)]  # counter-clockwise = hole
    far = [(20, 20), (20, 21), (21, 21), (20, 20)]
    z = write_shapefile_zip(tmp_path / "shapes.zip", "polys", 5, [[outer, hole], [outer, far]],
                            [("ID", "N", 4, 0)], [[1], [2]],
                            extra={"lines.shp": b"", "lines.dbf": b""})
    resp, _ = run_read(spark, tmp_path, {"kind": "EsriShapefile"}, [z], event_time=ET)
    assert resp["status"] == "InvalidInput" and "several .shp files" in resp["message"]
    resp, rows = run_read(spark, tmp_path, {"kind": "EsriShapefile", "subPath": "poly*",
                                            "schema": ["ID STRING", "geometry STRING"]}, [z], event_time=ET)
    assert resp["status"] == "Success", resp
    assert [r["ID"] for r in rows] == ["1", "2"]
    as_lists = lambda ring: [list(map(float, p)) for p in ring]  # noqa: E731
    # a polygon shape is always a MultiPolygon (as the reference implementation writes it)
    assert geom(rows[0]["geometry"]) == {"type": "MultiPolygon", "coordinates": [[as_lists(outer), as_lists(hole)]]}
    assert geom(rows[1]["geometry"]) == {"type": "MultiPolygon",
                                         "coordinates": [[as_lists(outer)], [as_lists(far)]]}

    lz = write_shapefile_zip(tmp_path / "lines.zip", "roads", 3, [[[(0, 0), (1, 1)]], [[(0, 0), (1, 0)],
                                                                                      [(5, 5), (6, 6)]]],
                             [("ID", "N", 4, 0)], [[1], [2]])
    resp, rows = run_read(spark, tmp_path, {"kind": "EsriShapefile"}, [lz], event_time=ET)
    assert [geom(r["geometry"])["type"] for r in rows] == ["LineString", "MultiLineString"]
    assert geom(rows[1]["geometry"])["coordinates"] == [[[0.0, 0.0], [1.0, 0.0]], [[5.0, 5.0], [6.0, 6.0]]]

    zz = write_shapefile_zip(tmp_path / "z.zip", "z", 15, [[[(0, 0, 7), (0, 1, 8), (1, 1, 9), (0, 0, 7)]]],
                             [("ID", "N", 4, 0)], [[1]])
    pz = write_shapefile_zip(tmp_path / "pz.zip", "pz", 11, [(1.0, 2.0, 3.5)], [("ID", "N", 4, 0)], [[1]])
    _, rows = run_read(spark, tmp_path, {"kind": "EsriShapefile"}, [zz, pz], event_time=ET)
    assert [geom(r["geometry"]) for r in rows] == [  # Z is kept
        {"type": "MultiPolygon",
         "coordinates": [[[[0.0, 0.0, 7.0], [0.0, 1.0, 8.0], [1.0, 1.0, 9.0], [0.0, 0.0, 7.0]]]]},
        {"type": "Point", "coordinates": [1.0, 2.0, 3.5]}]


# ---------------------------------------------------------------------------------------------------- preprocess


def test_preprocess_single_query(spark, tmp_path):
    f = tmp_path / "in.csv"
    f.write_text("2024-01-01,a,1\n2024-01-02,b,2\n")
    resp, rows = run_read(spark, tmp_path, {"kind": "Csv", "schema": ["d DATE", "name STRING", "n INT"]}, [f],
                          preprocess={"kind": "Sql", "engine": "spark", "query":
                                      "SELECT CAST(d AS TIMESTAMP) AS event_time, upper(name) AS name, n * 10 AS n "
                                      "FROM input WHERE n > 1"})
    assert resp["status"] == "Success", resp
    assert rows == [{"event_time": utc(2024, 1, 2), "name": "B", "n": 20}]


def test_preprocess_multi_step_queries(spark, tmp_path):
    f = tmp_path / "in.csv"
    f.write_text("a,1\nb,2\na,3\n")
    resp, rows = run_read(spark, tmp_path, {"kind": "Csv", "schema": ["k STRING", "n INT"]}, [f], event_time=ET,
                          preprocess={"kind": "sql", "engine": "SPARK", "queries": [
                              {"alias": "doubled", "query": "SELECT k, n * 2 AS n FROM input"},
                              {"alias": "sums", "query": "SELECT k, sum(n) AS total FROM doubled GROUP BY k"},
                              {"query": "SELECT * FROM sums ORDER BY k"}]})
    assert resp["status"] == "Success", resp
    assert [(r["k"], r["total"]) for r in rows] == [("a", 8), ("b", 4)]
    assert not any(t.name in ("input", "doubled", "sums") for t in spark.catalog.listTables())


def test_preprocess_errors(spark, tmp_path):
    f = tmp_path / "in.csv"
    f.write_text("a,1\n")
    step = {"kind": "Csv", "schema": ["k STRING", "n INT"]}
    resp, _ = run_read(spark, tmp_path, step, [f], event_time=ET,
                       preprocess={"kind": "Sql", "engine": "flink", "query": "SELECT * FROM input"})
    assert resp == {"status": "InvalidInput", "message": "preprocess engine 'flink' is not supported by the Spark "
                    "engine; use engine 'spark'"}
    resp, _ = run_read(spark, tmp_path, step, [f], event_time=ET,
                       preprocess={"kind": "Sql", "engine": "spark", "query": "SELECT nope FROM input"})
    assert resp["status"] == "InvalidInput" and "preprocess query 1 (output) failed" in resp["message"]
    assert "nope" in resp["message"] and resp["file"] == str(f)
    # an ANSI runtime error inside the query is the user's data/SQL problem, not an internal error
    resp, _ = run_read(spark, tmp_path, step, [f], event_time=ET,
                       preprocess={"kind": "Sql", "engine": "spark", "query": "SELECT CAST(k AS INT) AS k FROM input"})
    assert resp["status"] == "InvalidInput" and "'a'" in resp["message"], resp


# ---------------------------------------------------------------------------------------------------- event time


def test_event_time_from_source_per_input_file(spark, tmp_path):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text("x\n")
    b.write_text("y\n")
    req = {"phases": ["read"], "read": {
        "inputs": [{"path": str(a), "eventTime": "2024-01-01T00:00:00Z"},
                   {"path": str(b), "eventTime": "2024-02-01T00:00:00.5+00:00"}],
        "readStep": {"kind": "Csv", "schema": ["v STRING"]}, "outputPath": str(tmp_path / "r.parquet")}}
    assert run_request(spark, req)["status"] == "Success"
    rows = pq.read_table(tmp_path / "r.parquet").to_pylist()
    assert [(r["v"], r["event_time"]) for r in rows] == [("x", utc(2024, 1, 1)),
                                                         ("y", utc(2024, 2, 1, 0, 0, 0, 500000))]


def test_event_time_errors(spark, tmp_path):
    f = tmp_path / "in.csv"
    f.write_text("x\n")
    resp, _ = run_read(spark, tmp_path, {"kind": "Csv", "schema": ["v STRING"]}, [f], event_time=None)
    assert resp["status"] == "InvalidInput" and "no event-time column 'event_time'" in resp["message"]
    resp, _ = run_read(spark, tmp_path, {"kind": "Csv", "schema": ["event_time STRING"]}, [f], event_time=ET)
    assert resp["status"] == "InvalidInput" and "has type STRING" in resp["message"]


def test_sub_millisecond_and_zone_less_timestamps_are_normalized(spark, tmp_path):
    f = tmp_path / "in.csv"
    f.write_text("2024-01-01T00:00:00.123999Z,2024-01-01 05:00:00.000999\n")
    resp, rows = run_read(spark, tmp_path, {"kind": "Csv", "schema": ["event_time TIMESTAMP", "local TIMESTAMP_NTZ"]},
                          [f])
    assert resp["status"] == "Success", resp
    assert rows == [{"event_time": utc(2024, 1, 1, 0, 0, 0, 123000), "local": utc(2024, 1, 1, 5)}]
    assert pq.read_schema(tmp_path / "read.parquet").field("local").type == pa.timestamp("ms", tz="UTC")


def test_empty_input_reads_zero_records(spark, tmp_path):
    f = tmp_path / "empty.csv"
    f.write_text("")
    resp, rows = run_read(spark, tmp_path, {"kind": "Csv", "schema": ["event_time TIMESTAMP", "v INT"]}, [f])
    assert resp["status"] == "Success" and resp["read"]["numRecords"] == 0 and rows == []
    assert pq.read_schema(tmp_path / "read.parquet").names[:2] == ["event_time", "v"]


def test_malformed_second_input_is_the_one_named(spark, tmp_path):
    good, bad = tmp_path / "good.csv", tmp_path / "bad.csv"
    good.write_text("1\n2\n")
    bad.write_text("3\nfour\n")
    resp, _ = run_read(spark, tmp_path, {"kind": "Csv", "schema": ["n INT"]}, [good, bad], event_time=ET)
    assert (resp["status"], resp["file"], resp["line"]) == ("InvalidInput", str(bad), 2)
