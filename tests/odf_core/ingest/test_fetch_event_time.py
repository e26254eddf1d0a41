"""FromPath timestamp formats (strptime and SimpleDateFormat), source-state text forms and manifest round trips."""
from __future__ import annotations

import pytest

from odf_core.ingest import FetchedFile, FetchError, FetchResult, ManifestError, read_fetch_manifest
from odf_core.ingest.event_time import from_path, parse_timestamp, to_strptime
from odf_core.ingest.manifest import prepare_from_json, prepare_to_json
from odf_core.ingest.source_state import etag_state, http_date, parse_last_modified
from odf_core.metadata import EventTimeSourceFromPath, Timestamp


@pytest.mark.parametrize(
    ("text", "fmt", "expected"),
    [
        ("2024-03-05", None, "2024-03-05T00:00:00Z"),
        ("2024-03-05", "%Y-%m-%d", "2024-03-05T00:00:00Z"),
        ("2024-03-05", "yyyy-MM-dd", "2024-03-05T00:00:00Z"),
        ("20240305T0708", "yyyyMMdd'T'HHmm", "2024-03-05T07:08:00Z"),
        ("05.03.24 07:08:09.250", "dd.MM.yy HH:mm:ss.SSS", "2024-03-05T07:08:09.250Z"),
        ("2024-03-05T07:08:09+02:00", "yyyy-MM-dd'T'HH:mm:ssXXX", "2024-03-05T05:08:09Z"),
        ("Mar 5 2024", "MMM d yyyy", "2024-03-05T00:00:00Z"),
        ("2024-03-05T07:08:09.5Z", "rfc3339", "2024-03-05T07:08:09.500Z"),
        ("2024_065", "%Y_%j", "2024-03-05T00:00:00Z"),
    ],
)
def test_timestamp_formats(text: str, fmt: str | None, expected: str) -> None:
    assert parse_timestamp(text, fmt) == Timestamp.parse(expected)


def test_java_translation_and_errors() -> None:
    assert to_strptime("yyyy-MM-dd'T'HH:mm:ss") == "%Y-%m-%dT%H:%M:%S"
    assert to_strptime("yyyy'''s' 100%") == "%Y's 100%%"
    assert to_strptime("'it''s' yyyy") == "it's %Y"
    with pytest.raises(FetchError, match="pattern letter 'G' is not supported"):
        to_strptime("G yyyy")
    with pytest.raises(FetchError, match="does not match timestampFormat 'yyyy-MM-dd'"):
        parse_timestamp("2024/03/05", "yyyy-MM-dd")


def test_from_path_candidates_and_errors() -> None:
    src = EventTimeSourceFromPath(pattern=r"^(\d{4}-\d{2})/")
    # the file name does not match the anchored pattern; the full path (second candidate) does
    assert from_path(EventTimeSourceFromPath(pattern=r"(\d{4}-\d{2})/", timestamp_format="yyyy-MM"),
                     "x.csv", "/in/2024-02/x.csv") == Timestamp.parse("2024-02-01T00:00:00Z")
    with pytest.raises(FetchError, match="does not match 'x.csv' nor '/in/x.csv'"):
        from_path(src, "x.csv", "/in/x.csv")
    with pytest.raises(FetchError, match="no capture group"):
        from_path(EventTimeSourceFromPath(pattern=r"\d+"), "1.csv")
    with pytest.raises(FetchError, match="not a valid regular expression"):
        from_path(EventTimeSourceFromPath(pattern=r"(\d+"), "1.csv")


def test_last_modified_text_forms() -> None:
    t = Timestamp.parse("2024-01-02T03:04:05Z")
    assert http_date(t) == "Tue, 02 Jan 2024 03:04:05 GMT"
    assert parse_last_modified("2024-01-02T03:04:05Z") == t
    assert parse_last_modified("Tue, 02 Jan 2024 03:04:05 GMT") == t
    assert parse_last_modified(str(t.millis)) == t
    with pytest.raises(FetchError, match="odf/last-modified value 'yesterday'"):
        parse_last_modified("yesterday")


def test_manifest_round_trip_with_relative_paths(tmp_path) -> None:
    staging = tmp_path / "staging"
    staging.mkdir()
    files = (
        FetchedFile(path=str(staging / "fetch" / "000000-a.csv"), event_time=Timestamp(1_700_000_000_123_456_789),
                    name="http://h/a.csv"),
        FetchedFile(path="/elsewhere/b.csv", event_time=None, name="/elsewhere/b.csv"),
    )
    result = FetchResult(up_to_date=False, files=files, new_source_state=etag_state("x"), has_more=True,
                         bytes_fetched=42)
    text = result.to_json(str(staging))
    assert '"path": "fetch/000000-a.csv"' in text and '"/elsewhere/b.csv"' in text
    moved = tmp_path / "moved"
    back = FetchResult.from_json(text, str(moved))
    assert back.files[0].path == str(moved / "fetch" / "000000-a.csv")
    assert back.files[0].event_time == files[0].event_time  # nanoseconds survive
    assert FetchResult.from_json(result.to_json(), None) == result  # absolute paths without a staging dir
    assert FetchResult.from_json(text, str(staging)) == result
    assert prepare_from_json(prepare_to_json(files, str(staging)), str(staging)) == files


def test_manifest_errors(tmp_path) -> None:
    with pytest.raises(ManifestError, match="fetch step has not completed"):
        read_fetch_manifest(str(tmp_path))
    (tmp_path / "fetch.json").write_text('{"kind": "odf-prepare-result", "version": 1}')
    with pytest.raises(ManifestError, match="not a odf-fetch-result manifest"):
        read_fetch_manifest(str(tmp_path))
    bad = '{"kind": "odf-fetch-result", "version": 1, "upToDate": "no", "hasMore": false, "bytesFetched": 0, ' \
          '"files": []}'
    with pytest.raises(ManifestError, match="upToDate must be bool"):
        FetchResult.from_json(bad)
