"""``ReadStep::GeoJson`` (a FeatureCollection) and ``ReadStep::NdGeoJson`` (one Feature per line): properties become
columns, the geometry a GeoJSON text column ``geometry``."""
from __future__ import annotations

import json
from typing import Any, Iterator

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StringType, StructField, StructType

from odf_core.engine.protocol import IngestInputFile
from odf_core.metadata import ReadStepGeoJson, ReadStepNdGeoJson
from spark_jobs.errors import InputRejected
from spark_jobs.ingest.readers import SourceInfo, WorkDir, reader, schema_of
from spark_jobs.ingest.readers.json import dump, load_json_document, read_ndjson_file, records_to_ndjson, write_ndjson

GEOMETRY = "geometry"


def geo_schema(step: Any) -> StructType | None:
    """The user's schema with the ``geometry`` column (GeoJSON text) appended when it does not list it."""
    schema = schema_of(step)
    if schema is None:
        return None
    if GEOMETRY in schema.names:
        if not isinstance(schema[GEOMETRY].dataType, StringType):
            raise InputRejected("readStep.schema: the geometry column holds GeoJSON text and must be STRING")
        return schema
    return StructType(schema.fields + [StructField(GEOMETRY, StringType())])


def feature_record(feat: Any, where: str) -> tuple[dict[str, Any], str]:
    """A GeoJSON Feature -> (properties + geometry text, error or '')."""
    if not isinstance(feat, dict) or feat.get("type") != "Feature":
        return {}, f"{where} is not a GeoJSON Feature"
    props = feat.get("properties") or {}
    if not isinstance(props, dict):
        return {}, f"{where}: 'properties' is not an object"
    if GEOMETRY in props:
        return {}, f"{where}: a property named '{GEOMETRY}' clashes with the geometry column"
    geom = feat.get(GEOMETRY)
    rec = dict(props)
    # Keys sorted, as the reference implementation writes geometry text: the same feature gives the same text.
    rec[GEOMETRY] = dump(geom, sort_keys=True) if geom is not None else None
    return rec, ""


@reader(ReadStepGeoJson)
def read_geojson(spark: SparkSession, step: ReadStepGeoJson, inp: IngestInputFile, work: WorkDir
                 ) -> tuple[DataFrame, SourceInfo]:
    doc = load_json_document(inp, "utf-8")
    if not isinstance(doc, dict) or doc.get("type") != "FeatureCollection" or not isinstance(doc.get("features"),
                                                                                             list):
        raise InputRejected(f"cannot read {inp.display_name}: expected a GeoJSON FeatureCollection with a "
                            "'features' array", file=inp.display_name)

    def records() -> Iterator[dict[str, Any]]:
        for i, feat in enumerate(doc["features"], 1):
            rec, err = feature_record(feat, f"feature {i}")
            if err:
                raise InputRejected(f"cannot read {inp.display_name}: {err}", file=inp.display_name, record=i)
            yield rec

    tmp = work.path("features.ndjson")
    order = records_to_ndjson(records(), tmp, trailing=(GEOMETRY,))
    df = read_ndjson_file(spark, tmp, geo_schema(step), {}, order, inp.display_name)
    return df, SourceInfo(inp.display_name, tmp, "json", {}, df.schema, "utf-8", "record")


@reader(ReadStepNdGeoJson)
def read_ndgeojson(spark: SparkSession, step: ReadStepNdGeoJson, inp: IngestInputFile, work: WorkDir
                   ) -> tuple[DataFrame, SourceInfo]:
    order: dict[str, None] = {}

    def lines() -> Iterator[str]:
        with open(inp.path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    yield ""  # keep line numbers aligned with the original file
                    continue
                try:
                    feat = json.loads(line)
                except ValueError as e:
                    raise InputRejected(f"cannot read {inp.display_name}: line {n}: invalid JSON: {e}",
                                        file=inp.display_name, line=n) from None
                rec, err = feature_record(feat, f"line {n}")
                if err:
                    raise InputRejected(f"cannot read {inp.display_name}: {err}", file=inp.display_name, line=n)
                order.update(dict.fromkeys(rec))
                yield dump(rec)

    tmp = work.path("features.ndjson")
    write_ndjson(tmp, lines())
    keys = [k for k in order if k != GEOMETRY] + ([GEOMETRY] if GEOMETRY in order else [])
    df = read_ndjson_file(spark, tmp, geo_schema(step), {}, keys, inp.display_name)
    return df, SourceInfo(inp.display_name, tmp, "json", {}, df.schema, "utf-8", "line")
