"""S3 paths that had no test: the conditional-write probe's failure branches — a store that ignores
``If-None-Match`` or ``If-Match`` (here: the moto server behind a real HTTP proxy on loopback that drops that header,
as some S3-compatible stores do) — and ``odf gc`` on an S3 workspace."""
from __future__ import annotations

import http.client
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from odf_core.storage import DatasetLayout, ObjectStore
from odf_core.workspace import Workspace

from ...cli_process import OdfCli
from ..repository.datasets import chain_hashes, workspace_with_root


class _DroppingProxy(ThreadingHTTPServer):
    """Forwards every request to ``upstream`` without the headers named in ``drop``."""

    daemon_threads = True

    def __init__(self, upstream: str, drop: set[str]) -> None:
        super().__init__(("127.0.0.1", 0), _Forward)
        self.upstream = urlsplit(upstream)
        self.drop = {h.lower() for h in drop}
        self.dropped = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Forward(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # keep test output quiet
        pass

    def _forward(self) -> None:
        srv: _DroppingProxy = self.server  # type: ignore[assignment]
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {}
        for k, v in self.headers.items():
            if k.lower() in srv.drop:
                srv.dropped += 1
            elif k.lower() != "host":
                headers[k] = v
        conn = http.client.HTTPConnection(srv.upstream.hostname, srv.upstream.port, timeout=30)
        try:
            conn.request(self.command, self.path, body=body or None, headers=headers)
            answer = conn.getresponse()
            data = answer.read()
        finally:
            conn.close()
        self.send_response(answer.status, answer.reason)
        for k, v in answer.getheaders():
            if k.lower() not in ("transfer-encoding", "content-length", "connection"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward


@pytest.fixture
def dropping_proxy(s3_server, monkeypatch) -> Iterator[callable]:
    started: list[_DroppingProxy] = []

    def start(*drop: str) -> _DroppingProxy:
        proxy = _DroppingProxy(s3_server.endpoint, set(drop))
        threading.Thread(target=proxy.serve_forever, daemon=True).start()
        started.append(proxy)
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", proxy.url)  # this process's S3 clients go through it
        return proxy

    yield start
    for proxy in started:
        proxy.shutdown()
        proxy.server_close()


@pytest.mark.parametrize("drop,what", [
    ("If-None-Match", "a create with If-None-Match: * overwrote an existing object"),
    ("If-Match", "an update with a stale If-Match ETag was accepted"),
])
def test_the_probe_names_the_condition_a_store_ignores(s3_server, dropping_proxy, drop: str, what: str) -> None:
    bucket = s3_server.bucket()
    proxy = dropping_proxy(drop)
    store = ObjectStore.open(f"s3://{bucket}/ws")
    ok, how = store.fs.probe_conditional_writes(store.root)
    assert (ok, how) == (False, what)
    assert proxy.dropped > 0  # the header really was sent, and dropped on the way
    listed = s3_server.client().list_objects_v2(Bucket=bucket).get("Contents", [])
    assert listed == []  # the probe's scratch object is removed on failure too


def test_gc_on_an_s3_workspace_removes_only_the_orphans(s3_server, odf_cli: OdfCli, tmp_path: Path) -> None:
    url = f"s3://{s3_server.bucket()}/ws"
    ws, h = workspace_with_root(url, tmp_path, slices=2)
    before = chain_hashes(h)
    referenced = {k for folder in ("data", "checkpoints", "blocks") for k in h.store.list(folder)}
    orphans = [DatasetLayout.data_key("f1620" + "ab" * 32), DatasetLayout.checkpoint_key("f1620" + "cd" * 32)]
    for key in orphans:  # what a commit that failed after publishing its files leaves behind
        h.store.put_if_absent(key, b"orphan")
    dry = odf_cli.ok("-w", url, "gc", "--dry-run", "--min-age", "0")
    assert all(key in dry for key in orphans), dry
    assert all(h.store.exists(key) for key in orphans)
    assert odf_cli.ok("-w", url, "gc", "--min-age", "0")
    left = {k for folder in ("data", "checkpoints", "blocks") for k in h.store.list(folder)}
    assert left == referenced
    assert chain_hashes(Workspace.open(url).get("root")) == before
    odf_cli.ok("-w", url, "verify", "root", "--integrity")
    # young orphans are kept by default (a commit may be publishing them right now)
    h.store.put_if_absent(orphans[0], b"orphan")
    odf_cli.ok("-w", url, "gc")
    assert h.store.exists(orphans[0])
