"""A real HTTP server on 127.0.0.1 for fetch tests: validators, 304s, forced errors, slow answers and bodies that
trickle or stop half-way."""
from __future__ import annotations

import email.utils
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Resource:
    """``trickle``: send the body ``(n bytes, every s seconds)`` instead of at once; ``stall_after``: send only
    that many bytes, then keep the connection open and silent until the server stops."""

    body: bytes
    etag: str | None = None
    last_modified: str | None = None  # RFC 1123
    trickle: tuple[int, float] | None = None
    stall_after: int | None = None


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]


class LocalHttpServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.resources: dict[str, Resource] = {}
        self.fail: dict[str, int] = {}
        self.delay_s: float = 0.0
        self.ignore_conditional = False
        self.requests: list[Recorded] = []
        self.stopping = threading.Event()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}{path}"

    def start(self) -> "LocalHttpServer":
        threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        self.stopping.set()  # wakes handlers waiting in a delay
        self.shutdown()
        self.server_close()


class _Handler(BaseHTTPRequestHandler):
    server: LocalHttpServer

    def log_message(self, format: str, *args: object) -> None:  # keep test output quiet
        pass

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def do_GET(self) -> None:
        self._answer(body=True)

    def _answer(self, body: bool) -> None:
        srv = self.server
        srv.requests.append(Recorded(self.path, {k.lower(): v for k, v in self.headers.items()}))
        if srv.delay_s and srv.stopping.wait(srv.delay_s):
            return
        if self.path in srv.fail:
            self.send_error(srv.fail[self.path], explain=f"forced failure of {self.path}")
            return
        res = srv.resources.get(self.path)
        if res is None:
            self.send_error(404)
            return
        if not srv.ignore_conditional and self._not_modified(res):
            self.send_response(304)
            self._validators(res)
            self.end_headers()
            return
        self.send_response(200)
        self._validators(res)
        self.send_header("Content-Length", str(len(res.body)))
        self.end_headers()
        if body:
            self._send_body(res)

    def _send_body(self, res: Resource) -> None:
        stopping = self.server.stopping
        data = res.body if res.stall_after is None else res.body[: res.stall_after]
        step, every = res.trickle or (len(data), 0.0)
        try:
            for i in range(0, len(data), max(step, 1)):
                if i and stopping.wait(every):
                    return
                self.wfile.write(data[i : i + step])
                self.wfile.flush()
            if res.stall_after is not None:
                stopping.wait()  # silent, connection open: only the client's own limits end this
        except (BrokenPipeError, ConnectionResetError):  # the client gave up, as it should
            return

    def _validators(self, res: Resource) -> None:
        if res.etag:
            self.send_header("ETag", res.etag)
        if res.last_modified:
            self.send_header("Last-Modified", res.last_modified)

    def _not_modified(self, res: Resource) -> bool:
        inm = self.headers.get("If-None-Match")
        if inm is not None:
            return res.etag is not None and inm == res.etag
        ims = self.headers.get("If-Modified-Since")
        if ims is not None and res.last_modified:
            return email.utils.parsedate_to_datetime(res.last_modified) <= email.utils.parsedate_to_datetime(ims)
        return False
