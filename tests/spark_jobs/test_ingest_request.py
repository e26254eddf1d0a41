"""Request parsing of the ingest job: ODF fragments, RFC-013 names, times; no Spark needed."""
from __future__ import annotations

import pytest

from spark_jobs.ingest import (
    InvalidInput,
    Vocab,
    format_time_ms,
    match_enum,
    parse_read_step,
    parse_request,
    parse_strategy,
    parse_time_ms,
    parse_transform,
)


def _request(**overrides) -> dict:
    req = {"phases": ["read", "merge"],
           "read": {"inputs": [{"path": "/in/0.csv", "eventTime": "2024-01-01T00:00:00Z"}],
                    "readStep": {"kind": "Csv"}},
           "merge": {"strategy": {"kind": "Append"}, "systemTime": "2024-01-02T00:00:00Z",
                     "outputPath": "/out/slice.parquet"},
           "responsePath": "/out/response.json"}
    req.update(overrides)
    return req


@pytest.mark.parametrize("spelling", ["NdJson", "ndJson", "ndjson"])
def test_rfc013_accepts_pascal_camel_and_lower_case(spelling):
    assert match_enum(spelling, ["Csv", "NdJson"], "kind") == "NdJson"


@pytest.mark.parametrize("spelling", ["nDjson", "NDJSON", "Nd_Json", None])
def test_rfc013_rejects_other_spellings(spelling):
    with pytest.raises(InvalidInput, match="unknown kind"):
        match_enum(spelling, ["Csv", "NdJson"], "read.readStep")


def test_read_step_rejects_properties_of_other_formats():
    with pytest.raises(InvalidInput, match="'subPath' is not valid for Csv"):
        parse_read_step({"kind": "csv", "subPath": "a"})
    with pytest.raises(InvalidInput, match=r"readStep.header: expected bool"):
        parse_read_step({"kind": "Csv", "header": "yes"})
    step = parse_read_step({"kind": "esriShapefile", "subPath": "x/*.shp", "schema": ["a INT", "b STRING"]})
    assert step.kind == "EsriShapefile" and step.schema_ddl == "a INT, b STRING"


def test_transform_query_is_shorthand_for_one_step_and_engine_is_case_insensitive():
    assert parse_transform({"kind": "sql", "engine": "Spark", "query": "SELECT 1"}, "ds").steps == ((None, "SELECT 1"),)
    t = parse_transform({"kind": "Sql", "engine": "spark",
                         "queries": [{"alias": "a", "query": "SELECT 1"}, {"query": "SELECT * FROM a"}]}, "ds")
    assert t.steps == (("a", "SELECT 1"), (None, "SELECT * FROM a"))


def test_transform_with_other_engine_names_engine_and_dataset():
    with pytest.raises(InvalidInput, match=r"engine 'flink' is not supported by this Spark ingest \(dataset my\.ds\)"):
        parse_transform({"kind": "Sql", "engine": "flink", "query": "SELECT 1"}, "my.ds")


def test_transform_needs_exactly_one_result_step():
    with pytest.raises(InvalidInput, match="exactly one step must have no alias"):
        parse_transform({"kind": "Sql", "engine": "spark",
                         "queries": [{"alias": "a", "query": "SELECT 1"}, {"alias": "b", "query": "SELECT 2"}]}, None)
    with pytest.raises(InvalidInput, match="exactly one of 'query' and 'queries'"):
        parse_transform({"kind": "Sql", "engine": "spark"}, None)


def test_strategy_parsing():
    assert parse_strategy({"kind": "append"}).kind == "Append"
    s = parse_strategy({"kind": "snapshot", "primaryKey": ["id"], "compareColumns": ["v"]})
    assert (s.kind, s.primary_key, s.compare_columns) == ("Snapshot", ("id",), ("v",))
    with pytest.raises(InvalidInput, match="primaryKey"):
        parse_strategy({"kind": "Ledger", "primaryKey": []})
    with pytest.raises(InvalidInput, match="'compareColumns' is not valid for Ledger"):
        parse_strategy({"kind": "Ledger", "primaryKey": ["id"], "compareColumns": ["x"]})


def test_times_are_rfc3339_utc_milliseconds():
    assert parse_time_ms("1970-01-01T00:00:01.2345Z", "t") == 1234
    assert parse_time_ms("2024-01-01T02:00:00+02:00", "t") == parse_time_ms("2024-01-01T00:00:00Z", "t")
    assert format_time_ms(parse_time_ms("2024-01-01T00:00:00.120Z", "t")) == "2024-01-01T00:00:00.120Z"
    assert format_time_ms(parse_time_ms("2024-01-01T00:00:00Z", "t")) == "2024-01-01T00:00:00Z"
    with pytest.raises(InvalidInput, match="no time zone"):
        parse_time_ms("2024-01-01T00:00:00", "merge.systemTime")
    with pytest.raises(InvalidInput, match="merge.systemTime: not an RFC 3339"):
        parse_time_ms("yesterday", "merge.systemTime")


def test_full_request_defaults_and_vocab():
    req = parse_request(_request(vocab={"offsetColumn": "o", "eventTimeColumn": "t"}))
    assert req.phases == ("read", "merge")
    assert req.vocab == Vocab(offset="o", op="op", system_time="system_time", event_time="t")
    assert req.read.inputs[0].event_time_ms == parse_time_ms("2024-01-01T00:00:00Z", "t")
    assert req.merge.input_path is None and req.merge.prev_offset is None
    # vocab may also be given inside "merge", as in the coordinator's first draft of the format
    merge = dict(_request()["merge"], vocab={"operationTypeColumn": "kind"})
    assert parse_request(_request(merge=merge)).vocab.op == "kind"


@pytest.mark.parametrize("change, message", [
    ({"phases": []}, "phases"),
    ({"phases": ["merge", "write"]}, "phases"),
    ({"phases": ["read"]}, "read.outputPath is required"),
    ({"phases": ["merge"]}, r"merge.inputPath is required"),
    ({"read": {"inputs": [], "readStep": {"kind": "Csv"}}}, "read.inputs"),
    ({"merge": {"strategy": {"kind": "Ledger", "primaryKey": ["id"]}, "systemTime": "2024-01-02T00:00:00Z",
                "outputPath": "/o"}}, "newCheckpointPath is required for the Ledger"),
    ({"merge": {"strategy": {"kind": "Append"}, "systemTime": "2024-01-02T00:00:00Z", "outputPath": "/o",
                "prevOffset": -1}}, "prevOffset"),
])
def test_bad_requests_name_the_field(change, message):
    with pytest.raises(InvalidInput, match=message):
        parse_request(_request(**change))
