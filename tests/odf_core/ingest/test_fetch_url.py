"""FetchStep::Url against a real local HTTP server and real files."""
from __future__ import annotations

import logging
import os
import socket
from pathlib import Path

import pytest

from odf_core.ingest import FetchError, FetchOptions, read_fetch_manifest
from odf_core.ingest.fetch import fetch
from odf_core.ingest.source_state import etag_state
from odf_core.metadata import (
    EventTimeSourceFromPath,
    EventTimeSourceFromSystemTime,
    FetchStepUrl,
    RequestHeader,
    SourceCachingForever,
    SourceState,
    Timestamp,
)
from tests.odf_core.ingest.http_server import LocalHttpServer, Resource

SYSTEM_TIME = Timestamp.parse("2030-01-01T00:00:00Z")
LM = "Tue, 02 Jan 2024 03:04:05 GMT"
LM_TS = Timestamp.parse("2024-01-02T03:04:05Z")


def _fetch(step, staging: Path, state: SourceState | None = None, *, ingested: bool = False, **opts):
    return fetch(
        step,
        staging_dir=str(staging),
        source_state=state,
        system_time=SYSTEM_TIME,
        already_ingested=ingested,
        options=FetchOptions(**opts),
    )


def test_etag_round_trip_then_304(
    http_server: LocalHttpServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    http_server.resources["/data.csv"] = Resource(b"a,b\n1,2\n", etag='"v1"', last_modified=LM)
    step = FetchStepUrl(url=http_server.url("/data.csv"))

    with caplog.at_level(logging.INFO, logger="odf.ingest"):
        first = _fetch(step, tmp_path / "s1")
    assert f"GET {step.url}: 8 bytes" in caplog.messages  # progress is logged in bytes fetched
    assert not first.up_to_date and not first.has_more
    assert first.new_source_state == SourceState(source_name="default", kind="odf/etag", value='"v1"')
    (f,) = first.files
    assert Path(f.path).read_bytes() == b"a,b\n1,2\n"
    assert Path(f.path).parent == tmp_path / "s1" / "fetch"
    assert f.name == step.url and f.event_time == LM_TS  # FromMetadata is the default: Last-Modified
    assert first.bytes_fetched == 8
    assert read_fetch_manifest(str(tmp_path / "s1")) == first
    assert "if-none-match" not in http_server.requests[0].headers

    second = _fetch(step, tmp_path / "s2", first.new_source_state)
    assert http_server.requests[1].headers["if-none-match"] == '"v1"'
    assert second.up_to_date and second.files == () and second.bytes_fetched == 0
    assert second.new_source_state == first.new_source_state  # carried, unchanged
    assert read_fetch_manifest(str(tmp_path / "s2")) == second

    http_server.resources["/data.csv"] = Resource(b"a,b\n3,4\n", etag='"v2"', last_modified=LM)
    third = _fetch(step, tmp_path / "s3", first.new_source_state)
    assert third.new_source_state == etag_state('"v2"')
    assert Path(third.files[0].path).read_bytes() == b"a,b\n3,4\n"


def test_last_modified_only(http_server: LocalHttpServer, tmp_path: Path) -> None:
    http_server.resources["/d"] = Resource(b"x\n", last_modified=LM)
    step = FetchStepUrl(url=http_server.url("/d"))
    first = _fetch(step, tmp_path / "a")
    assert first.new_source_state == SourceState(
        source_name="default", kind="odf/last-modified", value="2024-01-02T03:04:05Z"
    )
    second = _fetch(step, tmp_path / "b", first.new_source_state)
    assert http_server.requests[1].headers["if-modified-since"] == LM
    assert "if-none-match" not in http_server.requests[1].headers
    assert second.up_to_date

    later = "Wed, 03 Jan 2024 00:00:00 GMT"
    http_server.resources["/d"] = Resource(b"y\n", last_modified=later)
    third = _fetch(step, tmp_path / "c", first.new_source_state)
    assert not third.up_to_date
    assert third.new_source_state.value == "2024-01-03T00:00:00Z"
    assert third.files[0].event_time == Timestamp.parse("2024-01-03T00:00:00Z")


def test_no_validators_no_state_and_no_event_time(http_server: LocalHttpServer, tmp_path: Path) -> None:
    http_server.resources["/plain"] = Resource(b"p")
    result = _fetch(FetchStepUrl(url=http_server.url("/plain")), tmp_path)
    assert result.new_source_state is None and result.files[0].event_time is None


def test_server_ignoring_conditional_request_with_same_etag_is_up_to_date(
    http_server: LocalHttpServer, tmp_path: Path
) -> None:
    http_server.resources["/d"] = Resource(b"x", etag="W/\"1\"")
    http_server.ignore_conditional = True
    result = _fetch(FetchStepUrl(url=http_server.url("/d")), tmp_path, etag_state('W/"1"'))
    assert result.up_to_date and os.listdir(tmp_path / "fetch") == []


def test_request_headers_are_sent(http_server: LocalHttpServer, tmp_path: Path) -> None:
    http_server.resources["/h"] = Resource(b"ok")
    step = FetchStepUrl(
        url=http_server.url("/h"),
        headers=(RequestHeader(name="Authorization", value="Bearer s3cret"), RequestHeader(name="X-Odf", value="1")),
    )
    _fetch(step, tmp_path)
    got = http_server.requests[0].headers
    assert got["authorization"] == "Bearer s3cret" and got["x-odf"] == "1"


@pytest.mark.parametrize("status", [404, 500])
def test_http_errors(http_server: LocalHttpServer, tmp_path: Path, status: int) -> None:
    http_server.resources["/e"] = Resource(b"never")
    http_server.fail["/e"] = status
    url = http_server.url("/e")
    with pytest.raises(FetchError, match=rf"GET {url} failed: HTTP {status}"):
        _fetch(FetchStepUrl(url=url), tmp_path)
    assert os.listdir(tmp_path / "fetch") == []
    assert not (tmp_path / "fetch.json").exists()


def test_missing_resource_is_404(http_server: LocalHttpServer, tmp_path: Path) -> None:
    with pytest.raises(FetchError, match="HTTP 404"):
        _fetch(FetchStepUrl(url=http_server.url("/nope")), tmp_path)


def test_connection_refused(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port that was free a moment ago and has no listener now
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/x"
    with pytest.raises(FetchError, match=rf"GET {url} failed: connection refused"):
        _fetch(FetchStepUrl(url=url), tmp_path)


def test_dns_error(tmp_path: Path) -> None:
    with pytest.raises(FetchError, match=r"cannot resolve host 'no-such-host\.invalid'"):
        _fetch(FetchStepUrl(url="http://no-such-host.invalid/data.csv"), tmp_path)


def test_timeout(http_server: LocalHttpServer, tmp_path: Path) -> None:
    http_server.resources["/slow"] = Resource(b"late")
    http_server.delay_s = 2.0
    # the server answers after 2 s: had the timeout not fired the fetch would succeed (how soon after 0.5 s it
    # fires is measured by benchmarks/bench_limits.py)
    with pytest.raises(FetchError, match=r"timed out after 0.5 s"):
        _fetch(FetchStepUrl(url=http_server.url("/slow")), tmp_path, timeout_s=0.5)
    assert os.listdir(tmp_path / "fetch") == []


def test_unsupported_scheme(tmp_path: Path) -> None:
    with pytest.raises(FetchError, match="unsupported URL scheme 'ftp'"):
        _fetch(FetchStepUrl(url="ftp://example.org/x.csv"), tmp_path)


def test_cache_forever(http_server: LocalHttpServer, tmp_path: Path) -> None:
    http_server.resources["/once"] = Resource(b"1")
    step = FetchStepUrl(url=http_server.url("/once"), cache=SourceCachingForever())
    first = _fetch(step, tmp_path / "a", ingested=False)
    assert not first.up_to_date and len(http_server.requests) == 1
    again = _fetch(step, tmp_path / "b", first.new_source_state, ingested=True)
    assert again.up_to_date and len(http_server.requests) == 1  # no request at all


def test_event_time_from_path_and_system_time(http_server: LocalHttpServer, tmp_path: Path) -> None:
    http_server.resources["/reports/sales_2023-07-15.csv"] = Resource(b"r", last_modified=LM)
    url = http_server.url("/reports/sales_2023-07-15.csv")
    by_path = _fetch(
        FetchStepUrl(url=url, event_time=EventTimeSourceFromPath(pattern=r"sales_(\d{4}-\d{2}-\d{2})")), tmp_path / "a"
    )
    assert by_path.files[0].event_time == Timestamp.parse("2023-07-15T00:00:00Z")
    by_system = _fetch(FetchStepUrl(url=url, event_time=EventTimeSourceFromSystemTime()), tmp_path / "b")
    assert by_system.files[0].event_time == SYSTEM_TIME


# --- file:// -------------------------------------------------------------------------------------------------------


def test_file_url_unchanged_is_up_to_date(tmp_path: Path) -> None:
    src = tmp_path / "src" / "data.csv"
    src.parent.mkdir()
    src.write_bytes(b"a\n1\n")
    os.utime(src, ns=(1_700_000_000_123_456_789, 1_700_000_000_123_456_789))
    step = FetchStepUrl(url=src.as_uri())

    first = _fetch(step, tmp_path / "s1")
    mtime = Timestamp.from_millis(1_700_000_000_123)
    assert first.new_source_state == SourceState(
        source_name="default", kind="odf/last-modified", value=mtime.isoformat()
    )
    assert first.new_source_state.value == "2023-11-14T22:13:20.123Z"
    (f,) = first.files
    assert f.event_time == mtime and Path(f.path).read_bytes() == b"a\n1\n"

    assert _fetch(step, tmp_path / "s2", first.new_source_state).up_to_date

    os.utime(src, ns=(1_700_000_100_000_000_000, 1_700_000_100_000_000_000))
    changed = _fetch(step, tmp_path / "s3", first.new_source_state)
    assert not changed.up_to_date and changed.files[0].event_time == Timestamp.from_millis(1_700_000_100_000)


def test_file_url_copy_instead_of_link(tmp_path: Path) -> None:
    src = tmp_path / "d.csv"
    src.write_bytes(b"z")
    linked = _fetch(FetchStepUrl(url=src.as_uri()), tmp_path / "a")
    copied = _fetch(FetchStepUrl(url=src.as_uri()), tmp_path / "b", hardlink=False)
    assert os.stat(linked.files[0].path).st_ino == os.stat(src).st_ino
    assert os.stat(copied.files[0].path).st_ino != os.stat(src).st_ino
    assert Path(copied.files[0].path).read_bytes() == b"z"


def test_file_url_missing(tmp_path: Path) -> None:
    missing = tmp_path / "gone.csv"
    with pytest.raises(FetchError, match=f"file {missing} does not exist"):
        _fetch(FetchStepUrl(url=missing.as_uri()), tmp_path / "s")


def test_rerun_into_same_staging_is_safe(http_server: LocalHttpServer, tmp_path: Path) -> None:
    http_server.resources["/r.csv"] = Resource(b"1\n", etag='"e"')
    step = FetchStepUrl(url=http_server.url("/r.csv"))
    staging = tmp_path / "staging"
    (staging / "fetch").mkdir(parents=True)
    (staging / "fetch" / "leftover.part").write_bytes(b"half-written by a killed attempt")
    (staging / "other-step-output").write_bytes(b"not ours")
    first = _fetch(step, staging)
    again = _fetch(step, staging)
    assert again == first
    assert os.listdir(staging / "fetch") == [os.path.basename(first.files[0].path)]
    assert (staging / "other-step-output").read_bytes() == b"not ours"

    http_server.fail["/r.csv"] = 500  # a failed retry leaves no manifest behind, so nobody reads stale results
    with pytest.raises(FetchError):
        _fetch(step, staging)
    assert not (staging / "fetch.json").exists() and os.listdir(staging / "fetch") == []


# --- limits of one download: total deadline and stall rule ---------------------------------------------------------


def _received(message: str) -> int:
    """N of a limit's message ending "(N of M bytes received)"."""
    return int(message.rsplit("(", 1)[1].split(" of ")[0])


def test_a_trickling_download_ends_at_its_deadline(http_server: LocalHttpServer, tmp_path: Path) -> None:
    # 20 bytes every 50 ms: every read gets data, so a per-read timeout alone would wait the whole 5 s
    http_server.resources["/slow.csv"] = Resource(b"x" * 2000, trickle=(20, 0.05))
    url = http_server.url("/slow.csv")
    with pytest.raises(FetchError) as info:
        _fetch(FetchStepUrl(url=url), tmp_path, deadline_s=0.6, min_bytes_per_s=0)
    message = str(info.value)
    assert message.startswith(f"GET {url} failed: not finished within the deadline of 0.6 s (")
    assert message.endswith(" of 2000 bytes received)") and "\n" not in message
    assert 0 < _received(message) < 2000  # ended while the body was still coming (all of it would take 5 s)
    assert os.listdir(tmp_path / "fetch") == [] and not (tmp_path / "fetch.json").exists()  # no half file


def test_a_download_slower_than_the_minimum_rate_is_stalled(http_server: LocalHttpServer, tmp_path: Path) -> None:
    # 5 bytes every 50 ms = 100 bytes/s, against a minimum of 400 bytes/s over 0.4 s
    http_server.resources["/trickle.csv"] = Resource(b"y" * 1000, trickle=(5, 0.05))
    url = http_server.url("/trickle.csv")
    with pytest.raises(FetchError) as info:
        _fetch(FetchStepUrl(url=url), tmp_path, min_bytes_per_s=400, stall_window_s=0.4)
    message = str(info.value)
    assert message.startswith(f"GET {url} failed: stalled: ")
    assert " bytes in the last 0.4 s, below the minimum of 400 bytes/s (" in message
    assert message.endswith(" of 1000 bytes received)")
    got = int(message.split("stalled: ")[1].split(" ")[0])
    assert 0 < got < 160  # 0.4 s of a 100 bytes/s trickle
    assert got <= _received(message) < 1000  # ended while the body was still coming (all of it would take 10 s)
    assert os.listdir(tmp_path / "fetch") == []


def test_a_body_that_goes_silent_is_stalled_long_before_the_read_timeout(
    http_server: LocalHttpServer, tmp_path: Path
) -> None:
    http_server.resources["/half.csv"] = Resource(b"z" * 100, stall_after=30)
    url = http_server.url("/half.csv")
    # the stall rule's message, not the 30 s read timeout's: the socket timeout was tightened to the stall window
    with pytest.raises(FetchError, match=rf"GET {url} failed: stalled: 0 bytes in the last 0.3 s, below the minimum "
                                         r"of 10 bytes/s \(30 of 100 bytes received\)$"):
        _fetch(FetchStepUrl(url=url), tmp_path, timeout_s=30, min_bytes_per_s=10, stall_window_s=0.3)
    assert os.listdir(tmp_path / "fetch") == []


def test_the_deadline_also_bounds_waiting_for_the_answer(http_server: LocalHttpServer, tmp_path: Path) -> None:
    http_server.resources["/late"] = Resource(b"late")
    http_server.delay_s = 3.0
    url = http_server.url("/late")
    # the server answers after 3 s, within the 30 s timeout: only the deadline ends the wait
    with pytest.raises(FetchError, match=rf"GET {url} failed: no answer within the deadline of 0.4 s$"):
        _fetch(FetchStepUrl(url=url), tmp_path, timeout_s=30, deadline_s=0.4)


def test_a_slow_download_above_the_limits_completes(http_server: LocalHttpServer, tmp_path: Path) -> None:
    # 10 bytes every 20 ms = 500 bytes/s against a minimum of 40 bytes/s over 0.3 s: done in about 0.8 s
    body = bytes(range(200)) * 2
    http_server.resources["/ok.bin"] = Resource(body, etag='"ok"', trickle=(10, 0.02))
    result = _fetch(FetchStepUrl(url=http_server.url("/ok.bin")), tmp_path, deadline_s=10, min_bytes_per_s=40,
                    stall_window_s=0.3)
    assert Path(result.files[0].path).read_bytes() == body and result.bytes_fetched == 400


@pytest.mark.parametrize("bad", [{"deadline_s": 0}, {"stall_window_s": -1}, {"min_bytes_per_s": -5},
                                 {"min_bytes_per_s": 1.5}, {"timeout_s": True}])
def test_fetch_options_refuse_bad_limits(bad: dict) -> None:
    name, value = next(iter(bad.items()))
    with pytest.raises(FetchError, match=rf"^fetch option {name}: expected .*, got {value!r}$"):
        FetchOptions(**bad)
