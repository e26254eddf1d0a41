"""``info/summary``: the chain's current state cached next to it, bound to its head and authenticated.

The chain is the only truth; the summary only saves folding it. Anyone who can write the dataset can edit the file, so
a summary is trusted only with a valid HMAC-SHA256 under a key kept *outside* the dataset (the workspace's
``keys/``, see ``odf_core.workspace``). The MAC covers the whole state including ``head``, and the state at a head
is a function of that head alone (blocks are content-addressed and hash-linked), so an authentic summary is correct
for its head wherever it is found; a summary at an older head is caught up block by block. Anything else (no key, no
MAC, a wrong MAC, an unreadable file) means: fold the blocks instead.

File format 2: ``{"format": 2, "state": {...}, "mac": "<hex>"}`` (``mac`` absent when written without a key). The
MAC is computed over a domain tag plus the canonical JSON of ``state`` (sorted keys, no spaces), so it does not depend
on formatting. Format 1 (the state fields at the top level, no MAC) is still read, as unauthenticated.
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


def _canonical(state_dict: dict) -> bytes:
    return json.dumps(state_dict, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def _mac(key: bytes, state_dict: dict) -> str:
    return hmac.new(key, _DOMAIN + _canonical(state_dict), hashlib.sha256).hexdigest()


def encode_summary(state: ChainState, key: bytes | None) -> bytes:
    d = state_to_dict(state)
    doc: dict = {"format": FORMAT, "state": d}
    if key is not None:
        doc["mac"] = _mac(key, d)
    return json.dumps(doc, separators=(",", ":")).encode()


def decode_summary(raw: bytes, key: bytes | None) -> StoredSummary:
    """Parse a summary and check its MAC under ``key`` (never raises: a summary is only a cache)."""
    try:
        doc = json.loads(raw)
        if not isinstance(doc, dict):
            raise ValueError("not a JSON object")
        fmt = doc.get("format")
        if fmt == _LEGACY_FORMAT:
            state_dict = {k: v for k, v in doc.items() if k != "format"}
            mac = None
        elif fmt == FORMAT:
            state_dict, mac = doc.get("state"), doc.get("mac")
            if not isinstance(state_dict, dict):
                raise ValueError("no state object")
        else:
            raise ValueError(f"unknown format {fmt!r}")
        state = state_from_dict(state_dict)
    except Exception as e:  # any malformed content: the caller folds the chain instead
        return StoredSummary(None, False, f"unreadable ({type(e).__name__}: {str(e)[:120]})", True)
    if key is None:
        return StoredSummary(state, False, "no key to authenticate it")
    if not isinstance(mac, str):
        return StoredSummary(state, False, "it carries no MAC")
    if not hmac.compare_digest(mac, _mac(key, state_dict)):
        return StoredSummary(state, False, "its MAC does not match its content (edited, or written under another key)",
                             True)
    return StoredSummary(state, True)
