"""Push and pull of workspace datasets: which remote, which local dataset, and remembering the remote.

Rules: ``pull URL|REPO/NAME [--as NAME]`` creates or updates the local dataset NAME (default: the remote's last path
component) as a replica of the remote; the dataset then remembers the remote (``info/remote``), so ``odf pull NAME``
syncs it again and ``odf push NAME`` pushes it back. ``push NAME --to URL|REPO/NAME`` sends a dataset anywhere
writable and remembers that target when the dataset had no remote yet. A dataset with a remote and no source of its
own (no polling source, no transform) is a replica: ``odf pull NAME`` syncs it from the remote.
"""
from __future__ import annotations

from odf_core.chain import ChainState
from odf_core.errors import DatasetNotFound, OdfError
from odf_core.identity import DatasetName, Multihash
from odf_core.repository.registry import RepoRegistry, remember_remote, remote_of
from odf_core.repository.remote import RemoteDataset, resolve
from odf_core.repository.transfer import WORKERS, SyncResult, sync
from odf_core.workspace import DATASETS, Workspace


def resolve_remote(ws: Workspace, text: str) -> RemoteDataset:
    return resolve(text, RepoRegistry(ws.store).all())


def push(ws: Workspace, dataset: str, to: str | None = None, *, force: bool = False, workers: int = WORKERS,
         storage_options: dict | None = None) -> SyncResult:
    """Send ``dataset``'s missing objects to ``to`` (or its remembered remote), then move the remote's head.
    ``storage_options``: credentials/endpoint of an ``s3://`` remote (default: the ``AWS_*`` variables)."""
    handle = ws.get(dataset)
    target_text = to or remote_of(handle.store)
    if target_text is None:
        raise OdfError(f"dataset '{handle.name}' has no remote: push it with --to URL or --to REPO/NAME")
    remote = resolve_remote(ws, target_text)
    result = sync(handle.store, remote.writer(storage_options), force=force, workers=workers,
                  label=f"push {handle.name}")
    if remote_of(handle.store) is None:
        remember_remote(handle.store, remote.url)
    return result


def pull_remote(ws: Workspace, source: str, as_name: str | None = None, *, force: bool = False,
                workers: int = WORKERS, storage_options: dict | None = None) -> tuple[str, SyncResult]:
    """Bring the remote dataset ``source`` into the workspace as ``as_name``; returns (local name, result)."""
    remote = resolve_remote(ws, source)
    name = DatasetName(as_name) if as_name else DatasetName(remote.name)
    try:
        handle = ws.get(str(name))
        store, chain = handle.store, handle.chain
    except DatasetNotFound:
        store = ws.store.child(f"{DATASETS}/{name}")
        chain = None

    def base_state(head: Multihash | None) -> ChainState:
        if head is None or chain is None:
            return ChainState()
        state = chain.state()
        return state if state.head == head else chain.state_at(head)

    result = sync(remote.reader(storage_options), store, force=force, workers=workers, label=f"pull {name}",
                  base_state=base_state)
    if remote_of(store) != remote.url:
        remember_remote(store, remote.url)
    ws.get(str(name)).state()  # refresh the cached state now, not at the next command
    return str(name), result


def describe(result: SyncResult) -> str:
    """One line for the console."""
    if result.up_to_date:
        return f"up to date (head {result.new_head})"
    mb = result.nbytes / 1e6
    return (f"{result.new_blocks} new block(s), {result.copied} object(s) copied ({mb:.1f} MB), {result.present} "
            f"already there, head {result.new_head} ({result.seconds:.1f}s)")
