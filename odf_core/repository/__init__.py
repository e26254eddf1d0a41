"""Repositories: moving datasets between workspaces and remote locations by their content-addressed objects.

``remote`` parses and opens remote dataset locations (``file://``, ``s3://``, ``http(s)://``, ``REPO/NAME``),
``registry`` keeps named repositories and each dataset's remote, ``transfer`` is the Simple Transfer Protocol
(missing objects only, in parallel, each checked against its hash, head moved last by compare-and-swap),
``sync`` is push and pull of workspace datasets, ``serve`` a read-only HTTP repository over a workspace.

The names below load on first use (:mod:`odf_core.lazy_exports`): every ``odf pull`` asks the registry whether a
dataset is a replica, and most never transfer anything.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from odf_core.lazy_exports import lazy_exports

_WHERE = {"RepoRegistry": "registry", "pull_remote": "sync", "push": "sync", "SyncResult": "transfer",
          "Diverged": "transfer"}  # the transfer itself is odf_core.repository.transfer.sync (``sync``: the module)
__all__ = ["RepoRegistry", "pull_remote", "push", "SyncResult", "Diverged"]
__getattr__ = lazy_exports(globals(), _WHERE)

if TYPE_CHECKING:
    from odf_core.repository.registry import RepoRegistry
    from odf_core.repository.sync import pull_remote, push
    from odf_core.repository.transfer import Diverged, SyncResult
