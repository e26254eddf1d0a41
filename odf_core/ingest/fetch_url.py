"""``FetchStep::Url`` for ``http(s)://`` and ``file://`` sources, with conditional requests.

HTTP: the response ``ETag`` (preferred) or ``Last-Modified`` becomes the source state and is sent back next time as
``If-None-Match`` / ``If-Modified-Since``; a 304, or a 200 carrying the validator we already hold, is "up to date".
A download runs under :class:`~odf_core.ingest.options.FetchOptions` limits: a per-read timeout, a total deadline
and a minimum rate (:mod:`odf_core.ingest.transfer_limits`); breaking one leaves no file behind.
``file://``: the state is the file's mtime rounded to milliseconds as ``odf/last-modified`` (RFC 3339); the mtime is
read before copying, so a file changed during the copy is fetched again next time rather than missed.
"""
from __future__ import annotations

import http.client
import logging
import os
import socket
import stat
import time
import urllib.error
import urllib.parse
import urllib.request

from odf_core.ingest import event_time as et
from odf_core.ingest.errors import FetchError
from odf_core.ingest.manifest import FetchedFile, FetchResult
from odf_core.ingest.options import FetchOptions
from odf_core.ingest.source_state import (
    etag_state,
    http_date,
    last_modified_state,
    parse_http_date,
    prev_etag,
    prev_last_modified,
)
from odf_core.ingest.staging import (
    CHUNK,
    Progress,
    link_or_copy,
    part_file,
    source_basename,
    staged_name,
)
from odf_core.ingest.transfer_limits import TransferLimits, TransferWatch
from odf_core.metadata import FetchStepUrl, SourceState, Timestamp

_log = logging.getLogger("odf.ingest")
_USER_AGENT = "odf-core-fetch/1"


def up_to_date(state: SourceState | None) -> FetchResult:
    return FetchResult(up_to_date=True, files=(), new_source_state=state, has_more=False, bytes_fetched=0)


def fetch_url(
    step: FetchStepUrl, *, out_dir: str, state: SourceState | None, system_time: Timestamp, options: FetchOptions
) -> FetchResult:
    scheme = urllib.parse.urlsplit(step.url).scheme.lower()
    if scheme in ("http", "https"):
        return _fetch_http(step, out_dir, state, system_time, options)
    if scheme == "file":
        return _fetch_file(step, out_dir, state, system_time, options)
    raise FetchError(f"{step.url}: unsupported URL scheme {scheme!r} (supported: http, https, file)")


# --- event time --------------------------------------------------------------------------------------------------


def _event_time(
    step: FetchStepUrl, name: str, metadata_time: Timestamp | None, system_time: Timestamp
) -> Timestamp | None:
    source = step.event_time
    if source is None or isinstance(source, et.EventTimeSourceFromMetadata):
        return metadata_time
    if isinstance(source, et.EventTimeSourceFromSystemTime):
        return system_time
    return et.from_path(source, name, step.url)


# --- file:// -----------------------------------------------------------------------------------------------------


def _fetch_file(
    step: FetchStepUrl, out_dir: str, state: SourceState | None, system_time: Timestamp, options: FetchOptions
) -> FetchResult:
    parts = urllib.parse.urlsplit(step.url)
    if parts.netloc not in ("", "localhost"):
        raise FetchError(f"{step.url}: file URLs must name a local file (host {parts.netloc!r} given)")
    path = urllib.request.url2pathname(parts.path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise FetchError(f"{step.url}: file {path} does not exist") from None
    except OSError as e:
        raise FetchError(f"{step.url}: cannot read {path}: {e.strerror or e}") from None
    if not stat.S_ISREG(st.st_mode):
        raise FetchError(f"{step.url}: {path} is not a regular file")
    mtime = Timestamp.from_millis((st.st_mtime_ns + 500_000) // 1_000_000)
    if prev_last_modified(state) == mtime:
        _log.info("%s unchanged since %s: up to date", step.url, mtime)
        return up_to_date(state)
    name = os.path.basename(path)
    dest = os.path.join(out_dir, staged_name(0, name))
    try:
        size = link_or_copy(path, dest, allow_link=options.hardlink)
    except OSError as e:
        raise FetchError(f"{step.url}: cannot copy {path} into staging: {e.strerror or e}") from None
    fetched = FetchedFile(path=dest, event_time=_event_time(step, name, mtime, system_time), name=step.url)
    return FetchResult(
        up_to_date=False,
        files=(fetched,),
        new_source_state=last_modified_state(mtime),
        has_more=False,
        bytes_fetched=size,
    )


# --- http(s):// --------------------------------------------------------------------------------------------------


def _fetch_http(
    step: FetchStepUrl, out_dir: str, state: SourceState | None, system_time: Timestamp, options: FetchOptions
) -> FetchResult:
    url = step.url
    headers = {"User-Agent": _USER_AGENT}
    for h in step.headers or ():
        headers[h.name] = h.value
    etag, last_modified = prev_etag(state), prev_last_modified(state)
    if etag is not None:
        headers["If-None-Match"] = etag
    elif last_modified is not None:
        headers["If-Modified-Since"] = http_date(last_modified)
    request = urllib.request.Request(url, headers=headers, method="GET")
    recorder = _SocketRecorder()
    started = time.monotonic()
    # the deadline also bounds connecting and waiting for the headers
    first_timeout = min(options.timeout_s, options.deadline_s)
    try:
        response = _opener(recorder).open(request, timeout=first_timeout)
    except urllib.error.HTTPError as e:
        with e:
            if e.code == 304:
                _log.info("GET %s: 304 Not Modified: up to date", url)
                return up_to_date(state)
            detail = _body_excerpt(e)
        raise FetchError(f"GET {url} failed: HTTP {e.code} {e.reason}{detail}") from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
        reason = e.reason if isinstance(e, urllib.error.URLError) else e
        if isinstance(reason, TimeoutError) and time.monotonic() - started >= options.deadline_s:
            raise FetchError(f"GET {url} failed: no answer within the deadline of {options.deadline_s:g} s") from None
        raise FetchError(f"GET {url} failed: {_describe(reason, url, first_timeout)}") from None

    with response:
        new_etag = response.headers.get("ETag")
        lm_header = response.headers.get("Last-Modified")
        lm_time = parse_http_date(lm_header) if lm_header else None
        if lm_header and lm_time is None:
            _log.warning("GET %s: ignoring unparseable Last-Modified %r", url, lm_header)
        if new_etag:
            new_state: SourceState | None = etag_state(new_etag)
        elif lm_time is not None:
            new_state = last_modified_state(lm_time)
        else:
            new_state = None
        if state is not None and new_state == state:
            # The server ignored the conditional request but still reports the validator we hold.
            _log.info("GET %s: validator unchanged (%s): up to date", url, state.value)
            return up_to_date(state)
        name = source_basename(url)
        dest = os.path.join(out_dir, staged_name(0, name))
        limits = TransferLimits(options.deadline_s, options.min_bytes_per_s, options.stall_window_s)
        watch = TransferWatch(limits, started=started, body_started=time.monotonic())
        size = _download(response, recorder.sock, dest, url, options.timeout_s, watch)

    fetched = FetchedFile(path=dest, event_time=_event_time(step, name, lm_time, system_time), name=url)
    return FetchResult(
        up_to_date=False, files=(fetched,), new_source_state=new_state, has_more=False, bytes_fetched=size
    )


def _download(response: http.client.HTTPResponse, sock: socket.socket | None, dest: str, url: str,
              timeout_s: float, watch: TransferWatch) -> int:
    """Stream the body into ``dest`` (via ``dest.part``), one socket read at a time, under the watch's limits."""
    progress = Progress(f"GET {url}")
    expected = response.headers.get("Content-Length")
    expected = expected if expected is not None and expected.isdigit() else None

    def received() -> str:
        return f"{watch.total} of {expected} bytes" if expected else f"{watch.total} bytes"

    try:
        with part_file(dest) as tmp, open(tmp, "wb") as out:
            while True:
                breach_at = watch.next_breach_at()
                wait = breach_at - time.monotonic()
                limited = sock is not None and wait < timeout_s  # then a limit, not the read timeout, ends the read
                if sock is not None:
                    sock.settimeout(max(min(wait, timeout_s), 0.001))
                try:
                    chunk = response.read1(CHUNK)
                except TimeoutError:
                    if not limited:
                        raise
                    # the socket timed out when the limit broke: judge at that moment, whatever the clock rounding
                    breach = watch.breach(max(time.monotonic(), breach_at))
                    raise FetchError(f"GET {url} failed: {breach} ({received()} received)") from None
                if not chunk:
                    break
                out.write(chunk)
                progress.add(len(chunk))
                now = time.monotonic()
                watch.add(len(chunk), now)
                breach = watch.breach(now)
                if breach:
                    raise FetchError(f"GET {url} failed: {breach} ({received()} received)")
            if expected is not None and int(expected) != watch.total:
                raise FetchError(f"GET {url} failed: connection closed after {received()}")
    except (OSError, http.client.HTTPException) as e:
        raise FetchError(f"GET {url} failed while reading the body: {_describe(e, url, timeout_s)}") from None
    progress.done()
    return watch.total


def _body_excerpt(e: urllib.error.HTTPError) -> str:
    try:
        text = e.read(300).decode("utf-8", "replace").strip()
    except (OSError, http.client.HTTPException):
        return ""
    return f": {text}" if text else ""


def _describe(reason: object, url: str, timeout_s: float) -> str:
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused"
    if isinstance(reason, socket.gaierror):
        host = urllib.parse.urlsplit(url).hostname
        return f"cannot resolve host {host!r} ({reason.strerror or reason})"
    if isinstance(reason, TimeoutError):  # socket.timeout is TimeoutError
        return f"timed out after {timeout_s:g} s"
    if isinstance(reason, OSError) and reason.strerror:
        return reason.strerror
    return str(reason) or type(reason).__name__


# --- the socket a response is read from ---------------------------------------------------------------------------


class _SocketRecorder:
    """Holds the socket of the last connection made, so the download loop can tighten its read timeout."""

    sock: socket.socket | None = None


def _opener(recorder: _SocketRecorder) -> urllib.request.OpenerDirector:
    """urllib's usual opener (proxies, redirects, TLS) whose HTTP(S) connections report their socket."""

    class Recording:
        def do_open(self, http_class, req, **kwargs):
            class Connection(http_class):  # type: ignore[misc, valid-type]
                def connect(self) -> None:
                    super().connect()
                    recorder.sock = self.sock

            return super().do_open(Connection, req, **kwargs)  # type: ignore[misc]

    class HTTP(Recording, urllib.request.HTTPHandler):
        pass

    class HTTPS(Recording, urllib.request.HTTPSHandler):
        pass

    return urllib.request.build_opener(HTTP, HTTPS)
