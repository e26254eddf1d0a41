"""Where a remote dataset is: ``file://…``, ``s3://bucket/prefix/…``, ``http(s)://…`` (read-only), or ``REPO/NAME``
in a repository registered with ``odf repo add``. A repository holds one dataset per directory named after it, each
in the spec's dataset layout (``refs/head``, ``blocks/``, ``data/``, ``checkpoints/``)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from odf_core.errors import OdfError
from odf_core.identity import DatasetName
from odf_core.storage import ObjectStore

if TYPE_CHECKING:
    from odf_core.repository.http import HttpDataset

SCHEMES = ("file", "s3", "http", "https")
_REPO_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def check_repo_name(name: str) -> str:
    if not isinstance(name, str) or not _REPO_NAME.fullmatch(name):
        raise OdfError(f"invalid repository name {name!r}: letters, digits, '.', '_' and '-', starting with a letter "
                       "or digit")
    return name


def check_url(url: str) -> str:
    """A supported remote URL, unchanged (no trailing ``/``); else a one-line error naming it."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in SCHEMES or not rest.strip("/"):
        raise OdfError(f"invalid remote URL {url!r}: expected file://PATH, s3://BUCKET/PREFIX or http(s)://HOST/PATH")
    return url.rstrip("/")


def is_remote_ref(text: str) -> bool:
    """True for text that names a remote dataset (a URL or ``REPO/NAME``) rather than a workspace dataset."""
    return "://" in text or text.count("/") == 1


@dataclass(frozen=True)
class RemoteDataset:
    """One dataset in a remote location: its URL and the name it suggests for a local copy."""

    url: str

    @property
    def name(self) -> str:
        last = self.url.rstrip("/").rsplit("/", 1)[-1]
        try:
            return str(DatasetName(last))
        except OdfError:
            raise OdfError(f"cannot name a local copy of {self.url} after {last!r}: give one with --as NAME") from None

    @property
    def writable(self) -> bool:
        return not self.url.lower().startswith(("http://", "https://"))

    def _options(self, storage_options: dict | None) -> dict:
        return dict(storage_options or {}) if self.url.lower().startswith(("s3://", "s3a://")) else {}

    def reader(self, storage_options: dict | None = None) -> ObjectStore | HttpDataset:
        if not self.writable:
            from odf_core.repository.http import HttpDataset  # HTTP's client only for an http(s):// remote

            return HttpDataset(self.url)
        return ObjectStore.open(self.url, **self._options(storage_options))

    def writer(self, storage_options: dict | None = None) -> ObjectStore:
        if not self.writable:
            raise OdfError(f"{self.url}: http(s) repositories are read-only: push to a file:// or s3:// location")
        return ObjectStore.open(self.url, **self._options(storage_options))


def resolve(text: str, repos: dict[str, str]) -> RemoteDataset:
    """A URL as is, or ``REPO/NAME`` through the registered repositories ``repos`` (name -> URL)."""
    if "://" in text:
        return RemoteDataset(check_url(text))
    repo, sep, name = text.partition("/")
    if not sep or "/" in name or not name:
        raise OdfError(f"invalid remote {text!r}: expected a URL or REPO/NAME")
    url = repos.get(repo)
    if url is None:
        known = ", ".join(sorted(repos)) or "none"
        raise OdfError(f"no repository named {repo!r} (registered: {known}); add it with 'odf repo add {repo} URL'")
    return RemoteDataset(f"{url.rstrip('/')}/{DatasetName(name)}")
