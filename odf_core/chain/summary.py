"""``info/summary``: the chain's current state cached next to it, bound to its head and authenticated.

The chain is the only truth; the summary only saves folding it. Anyone who can write the dataset can edit the file, so
a summary is trusted only with a valid HMAC-SHA256 under a key kept *outside* the dataset (the workspace's
``keys/``, see ``odf_core.workspace``). The MAC covers the whole state including ``head``, and the state at a head
is a function of that head alone (blocks are content-addressed and hash-linked), so an authentic summary is correct
for its head wherever it is found; a summary at an older head is caught up block by block. Anything else (no key, no
MAC, a wrong MAC, an unreadable file) means: fold the blocks instead.

File format 2, two lines of JSON: a header ``{"format": 2, "mac": "<hex>"}`` (no ``mac`` when written without a
key), then the state. The MAC covers a domain tag plus the state line's exact bytes, so checking it costs one HMAC,
no re-serialization. Format 1 (one JSON object: ``format`` and the state fields, no MAC) is still read, as
unauthenticated.
"""
from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass

from odf_core.chain.state import ChainState, state_from_dict, state_to_dict
from odf_core.storage import DatasetLayout

SUMMARY_KEY = DatasetLayout.info_key("summary")
FORMAT = 2
_LEGACY_FORMAT = 1
_DOMAIN = b"odf/chain-summary/2\n"
MIN_KEY_BYTES = 16


@dataclass(frozen=True)
class StoredSummary:
    """What was found in ``info/summary``: the state it claims (None if unreadable) and whether it is authentic."""

    state: ChainState | None
    authentic: bool
    problem: str | None = None  # why it is not authentic, for the log
    suspicious: bool = False  # unreadable or a wrong MAC: not just written without a key


def _mac(key: bytes, state_line: bytes) -> str:
    return hmac.new(key, _DOMAIN + state_line, hashlib.sha256).hexdigest()


def encode_summary(state: ChainState, key: bytes | None) -> bytes:
    state_line = json.dumps(state_to_dict(state), separators=(",", ":")).encode()
    header: dict = {"format": FORMAT}
    if key is not None:
        header["mac"] = _mac(key, state_line)
    return json.dumps(header, separators=(",", ":")).encode() + b"\n" + state_line


def decode_summary(raw: bytes, key: bytes | None) -> StoredSummary:
    """Parse a summary and check its MAC under ``key`` (never raises: a summary is only a cache)."""
    try:
        head_line, _, state_line = raw.partition(b"\n")
        header = json.loads(head_line)
        if not isinstance(header, dict):
            raise ValueError("not a JSON object")
        fmt = header.get("format")
        if fmt == _LEGACY_FORMAT and not state_line.strip():
            state_dict = {k: v for k, v in header.items() if k != "format"}
            mac = None
        elif fmt == FORMAT:
            state_dict, mac = json.loads(state_line), header.get("mac")
            if not isinstance(state_dict, dict):
                raise ValueError("the state is not a JSON object")
        else:
            raise ValueError(f"unknown format {fmt!r}")
        state = state_from_dict(state_dict)
    except Exception as e:  # noqa: BLE001 - any malformed content: the caller folds the chain instead
        return StoredSummary(None, False, f"unreadable ({type(e).__name__}: {str(e)[:120]})", True)
    if key is None:
        return StoredSummary(state, False, "no key to authenticate it")
    if not isinstance(mac, str):
        return StoredSummary(state, False, "it carries no MAC")
    if not hmac.compare_digest(mac, _mac(key, state_line)):
        return StoredSummary(state, False, "its MAC does not match its content (edited, or written under another key)",
                             True)
    return StoredSummary(state, True)
