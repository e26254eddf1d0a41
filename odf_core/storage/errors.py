"""Errors raised by the storage layer (all :class:`~odf_core.errors.OdfError`, so they print as one clear line)."""
from __future__ import annotations

from odf_core.errors import OdfError


class ObjectNotFound(OdfError):
    """A key that does not name a stored object."""

    def __init__(self, key: str, url: str):
        self.key, self.url = key, url
        super().__init__(f"object {key!r} not found in {url}")


class UnsafeRefUpdate(OdfError):
    """The backend cannot compare-and-swap a ref atomically and the caller did not opt in to unsafe updates."""


class StoreEscape(OdfError):
    """A key whose path resolves (through a symlink) outside the store's root: never followed."""

    def __init__(self, key: str, url: str, target: str, root: str):
        self.key, self.url, self.target, self.root = key, url, target, root
        super().__init__(
            f"{key!r} in {url} resolves to {target}, outside the store root {root}: refusing to follow a symlink "
            "out of the store"
        )
