"""Validation of object keys: relative ``/``-separated paths that can never escape the store root.

Keys reach file systems and object stores as paths, so anything that could climb out of the root (``..``, absolute
paths, backslashes on a Windows share, NUL) is rejected up front rather than normalized. Components may not start
with ``.``: that namespace is reserved for the store's own temp files (``.tmp-…``) and lock files (``.head.lock``),
which therefore can never collide with a user key and are hidden from listings.
"""
from __future__ import annotations

import re

from odf_core.errors import InvalidIdentifier

TEMP_PREFIX = ".tmp-"
"""Name prefix of in-flight temp files; leftovers of crashed writers are removed by ``remove_stale_temp``."""

MAX_COMPONENT_BYTES = 200  # below the usual 255-byte file-name limit, leaving room for the temp-file prefix

_COMPONENT = re.compile(r"[A-Za-z0-9_\-+=@,~:][A-Za-z0-9._\-+=@,~:]*")


def _check(text: object, what: str, *, allow_empty: bool) -> tuple[str, ...]:
    if not isinstance(text, str):
        raise InvalidIdentifier(f"invalid {what} {text!r}: must be a string")
    if text == "":
        if allow_empty:
            return ()
        raise InvalidIdentifier(f"invalid {what} '': must not be empty")

    def bad(reason: str) -> InvalidIdentifier:
        return InvalidIdentifier(f"invalid {what} {text!r}: {reason}")

    if "\x00" in text:
        raise bad("contains a NUL character")
    if "\\" in text:
        raise bad("contains a backslash; use '/' as separator")
    if text.startswith("/"):
        raise bad("must be relative to the store root, not an absolute path")
    parts = text.split("/")
    for part in parts:
        if part == "":
            raise bad("has an empty path component ('//' or a leading/trailing '/')")
        if part in (".", ".."):
            raise bad(f"path component {part!r} is not allowed (keys may not escape the store root)")
        if part.startswith("."):
            raise bad(f"component {part!r} starts with '.', which is reserved for temp and lock files")
        if not _COMPONENT.fullmatch(part):
            raise bad(f"component {part!r} may only contain letters, digits and . _ - + = @ , ~ :")
        if len(part.encode()) > MAX_COMPONENT_BYTES:
            raise bad(f"component is longer than {MAX_COMPONENT_BYTES} bytes")
    return tuple(parts)


def validate_key(key: object) -> str:
    """Return ``key`` unchanged if it is a safe relative object key, else raise :class:`InvalidIdentifier`."""
    _check(key, "object key", allow_empty=False)
    assert isinstance(key, str)  # _check refused anything else
    return key


def validate_prefix(prefix: object) -> str:
    """Validate a directory prefix (``""`` = the whole store; one trailing ``/`` allowed); returns it without ``/``."""
    if isinstance(prefix, str) and prefix.endswith("/") and prefix != "/":
        prefix = prefix[:-1]
    _check(prefix, "key prefix", allow_empty=True)
    assert isinstance(prefix, str)  # _check refused anything else
    return prefix


def is_internal_name(name: str) -> bool:
    """True for file names the store uses for itself (temp and lock files)."""
    return name.startswith(".")


def validate_ref_value(ref: str, value: object) -> str:
    """A ref holds one token of printable ASCII without spaces (in practice a multihash in multibase text)."""
    if not isinstance(value, str) or not value:
        raise InvalidIdentifier(f"invalid value for ref {ref!r}: {value!r}: must be a non-empty string")
    if not all("!" <= c <= "~" for c in value):
        raise InvalidIdentifier(f"invalid value for ref {ref!r}: {value!r}: only printable ASCII without spaces")
    return value
