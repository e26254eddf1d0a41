"""A read-only dataset over HTTP(S): the Simple Transfer Protocol's ``GET {key}`` (an ``odf serve``, or any web
server serving a dataset directory). Keep-alive connections, one per thread, so parallel transfers reuse them."""
from __future__ import annotations

import http.client
import threading
import urllib.parse
from typing import BinaryIO

from odf_core.errors import OdfError
from odf_core.storage import ObjectNotFound
from odf_core.storage.backends import decode_ref
from odf_core.storage.keys import validate_key

TIMEOUT_S = 60.0


class HttpDataset:
    """The read side of :class:`~odf_core.storage.ObjectStore` (get, get_ref, exists, open_read) over HTTP."""

    is_local = False

    def __init__(self, url: str):
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise OdfError(f"invalid HTTP repository URL {url!r}")
        self.url = url.rstrip("/")
        self._parts = parts
        self._host: str = parts.hostname
        self._base_path = parts.path.rstrip("/")
        self._local = threading.local()

    def _conn(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            cls = http.client.HTTPSConnection if self._parts.scheme == "https" else http.client.HTTPConnection
            conn = cls(self._host, self._parts.port, timeout=TIMEOUT_S)
            self._local.conn = conn
        return conn

    def _request(self, method: str, key: str) -> http.client.HTTPResponse:
        path = f"{self._base_path}/{urllib.parse.quote(validate_key(key))}"
        for attempt in (1, 2):  # a kept-alive connection the server closed meanwhile: reconnect once
            conn = self._conn()
            try:
                conn.request(method, path)
                resp = conn.getresponse()
                break
            except (http.client.HTTPException, ConnectionError, OSError) as e:
                conn.close()
                self._local.conn = None
                if attempt == 2:
                    raise OdfError(f"GET {self.url}/{key} failed: {e}") from None
        if resp.status == 404:
            resp.read()
            raise ObjectNotFound(key, self.url)
        if resp.status != 200:
            resp.read()
            raise OdfError(f"{method} {self.url}/{key} failed: HTTP {resp.status} {resp.reason}")
        return resp

    def get(self, key: str) -> bytes:
        return self._request("GET", key).read()

    def exists(self, key: str) -> bool:
        try:
            self._request("HEAD", key).read()
            return True
        except ObjectNotFound:
            return False

    def get_ref(self, name: str) -> str | None:
        try:
            return decode_ref(self.get(name), f"{self.url}/{name}")
        except ObjectNotFound:
            return None

    def open_read(self, key: str) -> BinaryIO:
        """A stream over the object; read it to the end (or close it) before the next request of this thread."""
        resp = self._request("GET", key)
        self._local.conn = None  # the response owns this connection until read: the next request opens another
        return resp

    def __repr__(self) -> str:
        return f"HttpDataset({self.url!r})"
