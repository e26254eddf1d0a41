"""A local HTTP server for a folder of files: the data publisher of a ``Url`` polling source in tests and the demo.

It answers like a static web server (``Last-Modified``, ``If-Modified-Since`` → 304, ``HEAD``), records every
request, and can answer ``500`` to the first GETs of a path, to show how an Airflow retry recovers a failed fetch.
"""
from __future__ import annotations

import functools
import threading
from dataclasses import dataclass
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from odf_core.errors import OdfError


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    status: int


class _Handler(SimpleHTTPRequestHandler):
    server: "_Server"

    def do_GET(self) -> None:
        if self.server.owner._take_failure(self.path):
            self.send_error(500, "injected failure")
            return
        super().do_GET()

    def send_response(self, code: int, message: str | None = None) -> None:
        self.server.owner._record(Request(self.command, self.path, code))
        super().send_response(code, message)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # requests are recorded, not printed


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: "FileServer"


class FileServer:
    """Serve ``folder`` on ``host:port`` (0: a free port) in a background thread.

    :param fail_first: URL path → how many GETs of it are answered with HTTP 500 before it is served.
    """

    def __init__(self, folder: str | Path, *, host: str = "127.0.0.1", port: int = 0,
                 fail_first: dict[str, int] | None = None) -> None:
        self.folder = Path(folder)
        if not self.folder.is_dir():
            raise OdfError(f"cannot serve {self.folder}: not a folder")
        self.host = host
        self._port = port
        self._failures = dict(fail_first or {})
        self._lock = threading.Lock()
        self.requests: list[Request] = []
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        if self._server is None:
            raise OdfError("the file server is not started")
        return self._server.server_address[1]

    def url(self, name: str = "") -> str:
        return f"http://{self.host}:{self.port}/{name.lstrip('/')}"

    def start(self) -> "FileServer":
        handler = functools.partial(_Handler, directory=str(self.folder))
        try:
            server = _Server((self.host, self._port), handler)
        except OSError as e:
            raise OdfError(f"cannot serve {self.folder} on {self.host}:{self._port}: {e} "
                           "(is another demo or test still running?)") from None
        server.owner = self
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="odf-file-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def gets(self, path: str) -> list[int]:
        """Statuses of the GET requests of ``path``, in order."""
        with self._lock:
            return [r.status for r in self.requests if r.method == "GET" and r.path == path]

    def _take_failure(self, path: str) -> bool:
        with self._lock:
            left = self._failures.get(path, 0)
            if left > 0:
                self._failures[path] = left - 1
                return True
            return False

    def _record(self, request: Request) -> None:
        with self._lock:
            self.requests.append(request)

    def __enter__(self) -> "FileServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
