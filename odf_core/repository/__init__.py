"""Repositories: moving datasets between workspaces and remote locations by their content-addressed objects.

``remote`` parses and opens remote dataset locations (``file://``, ``s3://``, ``http(s)://``, ``REPO/NAME``),
``registry`` keeps named repositories and each dataset's remote, ``transfer`` is the Simple Transfer Protocol
(missing objects only, in parallel, each checked against its hash, head moved last by compare-and-swap),
``sync`` is push and pull of workspace datasets, ``serve`` a read-only HTTP repository over a workspace.
"""
from odf_core.repository.registry import RepoRegistry
from odf_core.repository.sync import pull_remote, push
from odf_core.repository.transfer import Diverged, SyncResult, sync

__all__ = ["RepoRegistry", "pull_remote", "push", "sync", "SyncResult", "Diverged"]
