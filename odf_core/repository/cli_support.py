"""What the ``odf`` repository commands do, apart from parsing arguments: print one line per dataset."""
from __future__ import annotations

from odf_core.errors import OdfError
from odf_core.repository.registry import RepoRegistry, tracked_remote
from odf_core.repository.remote import is_remote_ref
from odf_core.workspace import Workspace


def pull_remotes(ws: Workspace, targets: list[str], *, as_name: str | None, force: bool,
                 recursive: bool = False) -> list[str]:
    """Pull every remote target (URL, REPO/NAME, or a replica's name) and return the rest, for ingest/transform."""
    remote = [t for t in targets if is_remote_ref(t)]
    if as_name is not None and (len(targets) != 1 or not remote):
        raise OdfError("--as names the local copy of exactly one remote dataset (a URL or REPO/NAME)")
    rest = []
    for t in targets:
        url = t if t in remote else tracked_remote(ws, t)
        if url is None:
            rest.append(t)
            continue
        from odf_core.repository.sync import describe, pull_remote  # a replica's pull: most pulls have none

        name, result = pull_remote(ws, url, as_name or (None if t in remote else t), force=force)
        print(f"{name}: {describe(result)}")
    return rest


def push_datasets(ws: Workspace, datasets: list[str], *, to: str | None, force: bool) -> int:
    from odf_core.repository.sync import describe, push

    if to is not None and len(datasets) > 1 and "://" in to:
        raise OdfError("--to URL names one dataset's location: push one dataset, or use --to REPO/NAME per dataset")
    for name in datasets:
        result = push(ws, name, to, force=force)
        print(f"{name} -> {result.dst}: {describe(result)}")
    return 0


def repo_add(ws: Workspace, name: str, url: str) -> int:
    RepoRegistry(ws.store).add(name, url)
    print(f"added repository {name}: {url}")
    return 0


def repo_list(ws: Workspace) -> int:
    repos = RepoRegistry(ws.store).all()
    if not repos:
        print("no repositories (add one with 'odf repo add NAME URL')")
    for name, url in sorted(repos.items()):
        print(f"{name}\t{url}")
    return 0


def repo_delete(ws: Workspace, name: str) -> int:
    RepoRegistry(ws.store).delete(name)
    print(f"deleted repository {name}")
    return 0


def serve(ws: Workspace, host: str, port: int) -> int:
    from odf_core.repository.serve import make_server

    server = make_server(ws, host, port)
    h, p = server.server_address[:2]
    h = h.decode() if isinstance(h, bytes) else h
    print(f"serving {ws.url} read-only at http://{h}:{p}/<dataset> (Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
