"""``odf serve``: a read-only HTTP repository over a workspace (the Simple Transfer Protocol's ``GET {key}``).

``GET /<dataset>/refs/head``, ``/<dataset>/blocks/<hash>``, ``/<dataset>/data/<hash>``,
``/<dataset>/checkpoints/<hash>`` (and ``HEAD`` of each); everything else is 404 — keys, caches, staging and the
registry are never served. Objects stream from the workspace's store, local or S3.
"""
from __future__ import annotations

import logging
import shutil
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from odf_core.errors import OdfError
from odf_core.storage import DatasetLayout, ObjectNotFound
from odf_core.storage.keys import validate_key
from odf_core.workspace import Workspace

log = logging.getLogger("odf.serve")

SERVED = (DatasetLayout.BLOCKS, DatasetLayout.DATA, DatasetLayout.CHECKPOINTS)


def _handler(ws: Workspace) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: a pull reuses its connections
        server_version = "odf-serve"

        def log_message(self, format: str, *args: object) -> None:
            log.debug("%s " + format, self.address_string(), *args)

        def _target(self):
            path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path).strip("/")
            name, _, key = path.partition("/")
            folder = key.partition("/")[0]
            if not (key == DatasetLayout.head_ref or (folder in SERVED and key.count("/") == 1)):
                return None
            try:
                return ws.get(name).store, validate_key(key)
            except OdfError:
                return None

        def _send(self, body: bool) -> None:
            target = self._target()
            if target is None:
                self._empty(404)
                return
            store, key = target
            try:
                if key == DatasetLayout.head_ref:
                    data = (store.get_ref(key) or "").encode()
                    if not data:
                        raise ObjectNotFound(key, store.url)
                    self._headers(len(data))
                    if body:
                        self.wfile.write(data)
                    return
                size = store.size(key)
                self._headers(size)
                if body:
                    with store.open_read(key) as f:
                        shutil.copyfileobj(f, self.wfile, 1 << 20)
            except ObjectNotFound:
                self._empty(404)
            except OdfError as e:
                log.warning("serving %s: %s", self.path, e)
                self._empty(500)

        def _headers(self, size: int) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(size))
            self.end_headers()

        def _empty(self, status: int) -> None:
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self) -> None:
            self._send(True)

        def do_HEAD(self) -> None:
            self._send(False)

    return Handler


def make_server(ws: Workspace, host: str = "127.0.0.1", port: int = 8080) -> ThreadingHTTPServer:
    """The server, bound (port 0: any free port; see ``server.server_address``), not yet serving."""
    server = ThreadingHTTPServer((host, port), _handler(ws))
    server.daemon_threads = True
    return server
