"""Named repositories of a workspace (``repos.yaml`` at its root) and the remote each dataset syncs with
(``info/remote`` in the dataset: it moves with the dataset on rename and goes with it on delete)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from odf_core.errors import DatasetNotFound, OdfError
from odf_core.repository.remote import check_repo_name, check_url
from odf_core.storage import DatasetLayout, ObjectNotFound, ObjectStore

if TYPE_CHECKING:
    from odf_core.workspace import Workspace

REPOS_KEY = "repos.yaml"
REMOTE_KEY = DatasetLayout.info_key("remote")


class RepoRegistry:
    """``odf repo add|list|delete``: name -> URL, stored in the workspace."""

    def __init__(self, store: ObjectStore):
        self.store = store

    def all(self) -> dict[str, str]:
        import yaml  # here, not with the module: every `odf pull` imports this one and most never read repos.yaml

        try:
            raw = self.store.get(REPOS_KEY)
        except ObjectNotFound:
            return {}
        try:
            data = yaml.safe_load(raw) or {}
        except yaml.YAMLError as e:
            raise OdfError(f"{self.store.url}/{REPOS_KEY}: not valid YAML: {str(e).splitlines()[0]}") from None
        repos = data.get("repositories") if isinstance(data, dict) else None
        if not isinstance(repos, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in repos.items()):
            raise OdfError(f"{self.store.url}/{REPOS_KEY}: repositories: expected a mapping of name to URL")
        return dict(repos)

    def _save(self, repos: dict[str, str]) -> None:
        import yaml

        self.store.put(REPOS_KEY, yaml.safe_dump({"repositories": dict(sorted(repos.items()))}).encode())

    def add(self, name: str, url: str) -> None:
        repos = self.all()
        name, url = check_repo_name(name), check_url(url)
        if name in repos:
            raise OdfError(f"repository {name!r} already exists ({repos[name]}): delete it first")
        repos[name] = url
        self._save(repos)

    def delete(self, name: str) -> None:
        repos = self.all()
        if name not in repos:
            raise OdfError(f"no repository named {name!r}")
        del repos[name]
        self._save(repos)


def remote_of(store: ObjectStore) -> str | None:
    """The URL a dataset (its store) was pulled from or last pushed to, or None."""
    try:
        return store.get(REMOTE_KEY).decode().strip() or None
    except ObjectNotFound:
        return None


def remember_remote(store: ObjectStore, url: str) -> None:
    store.put(REMOTE_KEY, url.encode())


def tracked_remote(ws: Workspace, dataset: str) -> str | None:
    """The remote a replica syncs from: set, and the dataset has no polling source or transform of its own."""
    try:
        handle = ws.get(dataset)
    except (DatasetNotFound, OdfError):
        return None
    url = remote_of(handle.store)
    if url is None:
        return None
    state = handle.state()
    if state.polling_source is not None or state.transform is not None:
        return None
    return url
