"""Dataset names, aliases and references (the spec's PEG grammar, conformance §3).

Names compare case-insensitively but keep the spelling they were written with, so ``NY-NewYork`` is shown as the
user wrote it and still finds ``ny-newyork``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from odf_core.errors import InvalidIdentifier
from odf_core.identity.dataset_id import DatasetID

_SUBDOMAIN = r"[a-zA-Z0-9]+(?:-[a-zA-Z0-9]+)*"
_HOSTNAME = rf"{_SUBDOMAIN}(?:\.{_SUBDOMAIN})*"
HOSTNAME_RE = re.compile(rf"^{_HOSTNAME}$")
_URL_RE = re.compile(r"^[a-zA-Z0-9]+(?:\+[a-zA-Z0-9]+)*://[^\n]+$")


def _check(kind: str, text: str) -> str:
    if not isinstance(text, str) or not HOSTNAME_RE.match(text):
        raise InvalidIdentifier(
            f"invalid {kind} {text!r}: expected dot-separated parts of letters, digits and single inner dashes "
            "(e.g. 'my.dataset-name')"
        )
    return text


@dataclass(frozen=True)
class Name:
    """A hostname-like name (dataset, account or repository) that compares case-insensitively."""

    text: str
    key: str = field(init=False, repr=False, compare=True)

    def __post_init__(self):
        _check(self.KIND_TEXT, self.text)
        object.__setattr__(self, "key", self.text.lower())

    KIND_TEXT = "name"

    def __str__(self) -> str:
        return self.text

    def __eq__(self, other) -> bool:
        return isinstance(other, Name) and type(self) is type(other) and self.key == other.key

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.key))


class DatasetName(Name):
    KIND_TEXT = "dataset name"


class AccountName(Name):
    KIND_TEXT = "account name"


class RepoName(Name):
    KIND_TEXT = "repository name"


@dataclass(frozen=True)
class DatasetAlias:
    """``(account "/")? name`` within one workspace."""

    name: DatasetName
    account: AccountName | None = None

    @classmethod
    def parse(cls, text: str) -> "DatasetAlias":
        if not isinstance(text, str):
            raise InvalidIdentifier(f"invalid dataset alias {text!r}: expected a string")
        parts = text.split("/")
        try:
            if len(parts) == 1:
                return cls(DatasetName(parts[0]))
            if len(parts) == 2:
                return cls(DatasetName(parts[1]), AccountName(parts[0]))
        except InvalidIdentifier as e:
            raise InvalidIdentifier(f"invalid dataset alias {text!r}: {e}") from None
        raise InvalidIdentifier(f"invalid dataset alias {text!r}: expected 'name' or 'account/name'")

    def __str__(self) -> str:
        return f"{self.account}/{self.name}" if self.account else str(self.name)


@dataclass(frozen=True)
class DatasetRef:
    """A local reference: a dataset ID or an alias."""

    id: DatasetID | None = None
    alias: DatasetAlias | None = None

    @classmethod
    def parse(cls, text: str) -> "DatasetRef":
        if isinstance(text, str) and text.startswith("did:"):
            return cls(id=DatasetID.parse(text))
        return cls(alias=DatasetAlias.parse(text))

    def __str__(self) -> str:
        return str(self.id) if self.id else str(self.alias)


@dataclass(frozen=True)
class DatasetRefRemote:
    """A reference to a dataset in a repository: ``repo/id``, ``repo/(account/)name`` or a URL."""

    repo: RepoName | None = None
    id: DatasetID | None = None
    alias: DatasetAlias | None = None
    url: str | None = None

    @classmethod
    def parse(cls, text: str) -> "DatasetRefRemote":
        if not isinstance(text, str):
            raise InvalidIdentifier(f"invalid remote dataset reference {text!r}")
        if "://" in text:
            if not _URL_RE.match(text):
                raise InvalidIdentifier(f"invalid dataset URL {text!r}")
            return cls(url=text)
        if text.startswith("did:"):
            return cls(id=DatasetID.parse(text))
        parts = text.split("/")
        try:
            if len(parts) == 2 and parts[1].startswith("did:"):
                return cls(repo=RepoName(parts[0]), id=DatasetID.parse(parts[1]))
            if len(parts) == 2:
                return cls(repo=RepoName(parts[0]), alias=DatasetAlias(DatasetName(parts[1])))
            if len(parts) == 3:
                return cls(repo=RepoName(parts[0]), alias=DatasetAlias(DatasetName(parts[2]), AccountName(parts[1])))
        except InvalidIdentifier as e:
            raise InvalidIdentifier(f"invalid remote dataset reference {text!r}: {e}") from None
        raise InvalidIdentifier(
            f"invalid remote dataset reference {text!r}: expected 'repo/name', 'repo/account/name', "
            "'repo/did:odf:…' or a URL"
        )

    def __str__(self) -> str:
        if self.url:
            return self.url
        tail = str(self.id) if self.id else str(self.alias)
        return f"{self.repo}/{tail}" if self.repo else tail


def parse_ref_any(text: str) -> DatasetRef | DatasetRefRemote:
    """``DatasetRefAny``: a local ref when it parses as one, else a remote one."""
    try:
        return DatasetRef.parse(text)
    except InvalidIdentifier:
        return DatasetRefRemote.parse(text)
