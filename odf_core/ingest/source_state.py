"""The source states we record in ``AddData.newSourceState``: the two standard polling kinds and the push key.

``odf/last-modified`` values are written as RFC 3339 UTC text (what the reference implementation writes and
parses); on reading we also accept RFC 1123 HTTP dates and integer milliseconds since the epoch, so states written
by other tools still resume.  HTTP needs the RFC 1123 form, made by :func:`http_date`.

A push with an idempotency key records ``{sourceName: <the AddPushSource's sourceName>, kind:
odf-core/idempotency-key, value: <the key, verbatim>}``.  Why this shape: RFC 011 says a push source's state lives
in ``AddData.newSourceState`` under the source's own name (so several push sources never mix their keys); the spec
leaves ``kind`` open and RFC 009 asks readers to ignore kinds they do not know, so a kind of our own, outside the
reserved ``odf/`` prefix, keeps the block valid ODF for any reader (plain strings in the FlatBuffers table) without
pretending to be a standard state; the key is stored verbatim (not hashed) so ``odf log`` shows which push made
which block.  Each keyed push block carries its own key, so the chain is the record of what was pushed.
"""
from __future__ import annotations

import datetime as dt
import logging

from odf_core.ingest.errors import FetchError
from odf_core.metadata import SourceState, Timestamp
from odf_core.metadata.timestamp import InvalidTimestamp

SOURCE_NAME = "default"
KIND_ETAG = "odf/etag"
KIND_LAST_MODIFIED = "odf/last-modified"
KIND_PUSH_KEY = "odf-core/idempotency-key"

_log = logging.getLogger("odf.ingest")


def etag_state(value: str) -> SourceState:
    return SourceState(source_name=SOURCE_NAME, kind=KIND_ETAG, value=value)


def last_modified_state(ts: Timestamp) -> SourceState:
    return SourceState(source_name=SOURCE_NAME, kind=KIND_LAST_MODIFIED, value=ts.isoformat())


def push_key_state(source_name: str, key: str) -> SourceState:
    return SourceState(source_name=source_name, kind=KIND_PUSH_KEY, value=key)


def prev_etag(state: SourceState | None) -> str | None:
    return state.value if state is not None and state.kind == KIND_ETAG else None


def prev_last_modified(state: SourceState | None) -> Timestamp | None:
    if state is None or state.kind != KIND_LAST_MODIFIED:
        return None
    return parse_last_modified(state.value)


def check_kind(state: SourceState | None) -> SourceState | None:
    """Unknown kinds are ignored (fetch as if there were no state), like the reference implementation does."""
    if state is not None and state.kind not in (KIND_ETAG, KIND_LAST_MODIFIED):
        _log.warning("ignoring source state of unsupported kind %r", state.kind)
        return None
    return state


def parse_last_modified(value: str) -> Timestamp:
    text = value.strip()
    if text.isdigit():
        return Timestamp.from_millis(int(text))
    try:
        return Timestamp.parse(text)
    except InvalidTimestamp:
        pass
    parsed = parse_http_date(text)
    if parsed is None:
        raise FetchError(
            f"source state {KIND_LAST_MODIFIED} value {value!r} is neither RFC 3339, an HTTP date nor milliseconds"
        )
    return parsed


def parse_http_date(text: str) -> Timestamp | None:
    """RFC 1123 (and the obsolete forms HTTP allows); None when unparseable."""
    import email.utils  # here: HTTP sources only (~5 ms of every command's imports)

    try:
        value = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.timezone.utc)
    return Timestamp.from_datetime(value)


def http_date(ts: Timestamp) -> str:
    """RFC 1123 date for ``If-Modified-Since`` (HTTP dates have whole seconds)."""
    import email.utils

    return email.utils.format_datetime(ts.to_datetime().replace(microsecond=0), usegmt=True)
