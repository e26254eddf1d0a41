"""S3 (and any S3-compatible store) through boto3: a small fsspec file system for reads and listings, and a backend
whose writes are *conditional* — ``If-None-Match: *`` to create an object, ``If-Match: <etag>`` to move a ref — so
refs get a real compare-and-swap on the store itself and no concurrent writer can lose an update.

Why boto3 (not obstore): it is the client every S3-compatible store documents, it reads the standard ``AWS_*``
variables and profiles (including ``AWS_ENDPOINT_URL``) with no extra switches for plain-HTTP endpoints, its clients
are thread-safe (parallel transfers share one connection pool), and it exposes ``IfNoneMatch``/``IfMatch`` on
``put_object``. The fsspec layer is ours so ``s3fs`` is not needed.
"""
from __future__ import annotations

import io
import os
import threading
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, BinaryIO, Callable, Iterator

from fsspec import AbstractFileSystem
from fsspec.spec import AbstractBufferedFile

from odf_core.errors import OdfError, RefConflict
from odf_core.storage.backends import decode_ref
from odf_core.storage.faults import write_fault

POOL_SIZE = 32  # connections per client: parallel transfers use up to this many threads


class S3Error(OdfError):
    """A request the store refused (no bucket, no credentials, access denied, …), as one line."""


class PreconditionFailed(Exception):
    """A conditional write lost: the object exists (create) or changed (update)."""


@dataclass(frozen=True)
class S3Settings:
    """Where and as whom to talk to S3. Unset fields come from the standard ``AWS_*`` variables and profiles."""

    endpoint_url: str | None = None
    key: str | None = None
    secret: str | None = None
    token: str | None = None
    region: str | None = None

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> "S3Settings":
        """From ``ObjectStore.open`` storage options (s3fs-like names are accepted too)."""
        client_kwargs = options.get("client_kwargs") or {}
        unknown = set(options) - {"endpoint_url", "key", "secret", "token", "region", "region_name",
                                  "aws_access_key_id", "aws_secret_access_key", "aws_session_token",
                                  "client_kwargs"}
        if unknown:
            raise OdfError(f"unknown S3 option(s) {', '.join(sorted(unknown))}: expected endpoint_url, key, secret, "
                           "token, region")
        return cls(
            endpoint_url=options.get("endpoint_url") or client_kwargs.get("endpoint_url"),
            key=options.get("key") or options.get("aws_access_key_id"),
            secret=options.get("secret") or options.get("aws_secret_access_key"),
            token=options.get("token") or options.get("aws_session_token"),
            region=options.get("region") or options.get("region_name") or client_kwargs.get("region_name"),
        )


_clients: dict[tuple, Any] = {}
_clients_lock = threading.Lock()


def client_for(settings: S3Settings) -> Any:
    """One shared, thread-safe boto3 client per settings (clients are costly to build: ~50 ms)."""
    region = settings.region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    endpoint = settings.endpoint_url or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    cache_key = (settings, region, endpoint, os.environ.get("AWS_ACCESS_KEY_ID"), os.environ.get("AWS_PROFILE"))
    with _clients_lock:
        client = _clients.get(cache_key)
        if client is None:
            try:
                import boto3
                from botocore.config import Config
            except ImportError:
                raise OdfError("s3:// needs boto3: pip install 'airflow-provider-odf[s3]'") from None
            config = Config(max_pool_connections=POOL_SIZE, retries={"max_attempts": 4, "mode": "standard"},
                            s3={"addressing_style": "path"} if endpoint else {})
            client = boto3.session.Session().client(
                "s3", endpoint_url=endpoint, region_name=region or "us-east-1",
                aws_access_key_id=settings.key, aws_secret_access_key=settings.secret,
                aws_session_token=settings.token, config=config)
            _clients[cache_key] = client
        return client


def _code(e: Exception) -> str:
    response = getattr(e, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def _status(e: Exception) -> int:
    response = getattr(e, "response", None) or {}
    return int(response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)


_NOT_FOUND = {"NoSuchKey", "404", "NotFound"}
_PRECONDITION = {"PreconditionFailed", "412", "ConditionalRequestConflict", "409"}


def _split(path: str) -> tuple[str, str]:
    bucket, _, key = path.partition("/")
    if not bucket:
        raise OdfError(f"invalid S3 location {path!r}: no bucket name")
    return bucket, key


class S3FileSystem(AbstractFileSystem):
    """The fsspec calls :class:`~odf_core.storage.ObjectStore` makes, on boto3. Paths are ``bucket/key``."""

    protocol = ("s3", "s3a")
    root_marker = ""
    cachable = False

    def __init__(self, settings: S3Settings | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        self.settings = settings or S3Settings()

    @property
    def client(self) -> Any:
        return client_for(self.settings)

    def _call(self, what: str, path: str, fn: Callable[..., Any], **kwargs: Any) -> Any:
        """One request; errors become FileNotFoundError, PreconditionFailed or a one-line :class:`S3Error`."""
        try:
            from botocore.exceptions import BotoCoreError, ClientError
        except ImportError:
            raise OdfError("s3:// needs boto3: pip install 'airflow-provider-odf[s3]'") from None
        try:
            return fn(**kwargs)
        except ClientError as e:
            code = _code(e)
            if code in _NOT_FOUND or (_status(e) == 404 and code != "NoSuchBucket"):
                raise FileNotFoundError(path) from None
            if code in _PRECONDITION:
                raise PreconditionFailed(path) from None
            msg = (e.response.get("Error", {}).get("Message") or str(e)).rstrip(".")
            raise S3Error(f"S3 {what} s3://{path} failed: {code}: {msg}") from None
        except BotoCoreError as e:
            raise S3Error(f"S3 {what} s3://{path} failed: {e}") from None

    # -- reads --------------------------------------------------------------------------------------------------

    def get_with_etag(self, path: str) -> tuple[bytes, str]:
        """The object's bytes and ETag (for a following ``If-Match``); FileNotFoundError if absent."""
        bucket, key = _split(path)
        r = self._call("reading", path, self.client.get_object, Bucket=bucket, Key=key)
        return r["Body"].read(), r["ETag"]

    def cat_file(self, path: str, start: int | None = None, end: int | None = None, **kwargs: Any) -> bytes:
        path = self._strip_protocol(path)
        bucket, key = _split(path)
        extra = {}
        if start is not None or end is not None:
            extra["Range"] = f"bytes={start or 0}-{'' if end is None else end - 1}"
        r = self._call("reading", path, self.client.get_object, Bucket=bucket, Key=key, **extra)
        return r["Body"].read()

    def stream(self, path: str) -> BinaryIO:
        """A streaming body over the object (read it in chunks: it is not seekable)."""
        bucket, key = _split(self._strip_protocol(path))
        return self._call("reading", path, self.client.get_object, Bucket=bucket, Key=key)["Body"]

    def _head(self, path: str) -> dict[str, Any]:
        bucket, key = _split(path)
        if not key:
            raise FileNotFoundError(path)
        return self._call("checking", path, self.client.head_object, Bucket=bucket, Key=key)

    def info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        path = self._strip_protocol(path)
        try:
            h = self._head(path)
            return {"name": path, "size": h["ContentLength"], "type": "file", "LastModified": h["LastModified"],
                    "ETag": h.get("ETag")}
        except FileNotFoundError:
            bucket, key = _split(path)
            r = self._call("listing", path, self.client.list_objects_v2, Bucket=bucket,
                           Prefix=f"{key}/" if key else "", MaxKeys=1)
            if r.get("KeyCount", 0) or not key:
                return {"name": path, "size": 0, "type": "directory"}
            raise

    def isfile(self, path: str) -> bool:
        try:
            self._head(self._strip_protocol(path))
            return True
        except FileNotFoundError:
            return False

    def modified(self, path: str) -> datetime:
        return self._head(self._strip_protocol(path))["LastModified"]

    def _pages(self, path: str, **kwargs: Any) -> Iterator[dict[str, Any]]:
        bucket, _ = _split(path)
        token = None
        while True:
            extra: dict[str, Any] = {"ContinuationToken": token} if token else {}
            r = self._call("listing", path, self.client.list_objects_v2, Bucket=bucket, **kwargs, **extra)
            yield r
            if not r.get("IsTruncated"):
                return
            token = r["NextContinuationToken"]

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> list[Any]:
        path = self._strip_protocol(path)
        bucket, key = _split(path)
        prefix = f"{key}/" if key else ""
        out: list[dict[str, Any]] = []
        for page in self._pages(path, Prefix=prefix, Delimiter="/"):
            for p in page.get("CommonPrefixes", []):
                out.append({"name": f"{bucket}/{p['Prefix'].rstrip('/')}", "size": 0, "type": "directory"})
            for o in page.get("Contents", []):
                out.append({"name": f"{bucket}/{o['Key']}", "size": o["Size"], "type": "file",
                            "LastModified": o["LastModified"]})
        if not out and key:
            try:
                return [self.info(path)] if detail else [path]
            except FileNotFoundError:
                raise FileNotFoundError(path) from None
        return out if detail else [o["name"] for o in out]

    def find(self, path: str, maxdepth: int | None = None, withdirs: bool = False, detail: bool = False,
             **kwargs: Any) -> Any:
        path = self._strip_protocol(path)
        bucket, key = _split(path)
        found: dict[str, dict[str, Any]] = {}
        for page in self._pages(path, Prefix=f"{key}/" if key else ""):
            for o in page.get("Contents", []):
                name = f"{bucket}/{o['Key']}"
                found[name] = {"name": name, "size": o["Size"], "type": "file", "LastModified": o["LastModified"]}
        return found if detail else sorted(found)

    def _open(self, path: str, mode: str = "rb", block_size: int | None = None, autocommit: bool = True,
              cache_options: dict | None = None, **kwargs: Any) -> "S3File":
        if mode != "rb":
            raise OdfError(f"s3://{path}: objects are written whole through the store, not opened for writing")
        return S3File(self, path, mode, block_size=block_size or 8 << 20, cache_type="readahead",
                      cache_options=cache_options)

    # -- writes ---------------------------------------------------------------------------------------------------

    def put_object(self, path: str, body: bytes | BinaryIO, *, if_none_match: bool = False,
                   if_match: str | None = None) -> str:
        """One PUT (optionally conditional); returns the new ETag. PreconditionFailed when the condition fails."""
        bucket, key = _split(self._strip_protocol(path))
        extra: dict[str, str] = {}
        if if_none_match:
            extra["IfNoneMatch"] = "*"
        if if_match is not None:
            extra["IfMatch"] = if_match
        write_fault(path)
        return self._call("writing", path, self.client.put_object, Bucket=bucket, Key=key, Body=body,
                          **extra).get("ETag", "")

    def pipe_file(self, path: str, value: bytes, **kwargs: Any) -> None:
        self.put_object(path, value)

    def put_file(self, lpath: str, rpath: str, **kwargs: Any) -> None:
        with open(lpath, "rb") as f:
            self.put_object(rpath, f)

    def cp_file(self, path1: str, path2: str, **kwargs: Any) -> None:
        b1, k1 = _split(self._strip_protocol(path1))
        b2, k2 = _split(self._strip_protocol(path2))
        self._call("copying", path1, self.client.copy_object, Bucket=b2, Key=k2,
                   CopySource={"Bucket": b1, "Key": k1})

    def rm_file(self, path: str) -> None:
        bucket, key = _split(self._strip_protocol(path))
        self._call("deleting", path, self.client.delete_object, Bucket=bucket, Key=key)

    def rm(self, path: Any, recursive: bool = False, maxdepth: int | None = None) -> None:
        paths = path if isinstance(path, list) else [path]
        for p in paths:
            p = self._strip_protocol(p)
            bucket, _ = _split(p)
            keys = [n.partition("/")[2] for n in (self.find(p) if recursive else [])]
            if self.isfile(p):
                keys.append(p.partition("/")[2])
            for i in range(0, len(keys), 1000):
                batch = [{"Key": k} for k in keys[i:i + 1000]]
                self._call("deleting", p, self.client.delete_objects, Bucket=bucket,
                           Delete={"Objects": batch, "Quiet": True})

    def probe_conditional_writes(self, path: str) -> tuple[bool, str]:
        """Whether the store honours ``If-None-Match: *`` and ``If-Match``, tried on a scratch object under
        ``path`` (removed afterwards): (True, how) or (False, what it did instead)."""
        probe = f"{self._strip_protocol(path).rstrip('/')}/.odf-probe-{uuid.uuid4().hex}"
        try:
            etag = self.put_object(probe, b"1", if_none_match=True)
            try:
                self.put_object(probe, b"2", if_none_match=True)
                return False, "a create with If-None-Match: * overwrote an existing object"
            except PreconditionFailed:
                pass
            try:
                self.put_object(probe, b"3", if_match='"0000"')
                return False, "an update with a stale If-Match ETag was accepted"
            except PreconditionFailed:
                pass
            self.put_object(probe, b"4", if_match=etag)
            return True, "conditional writes honoured (If-None-Match on create, If-Match on update)"
        finally:
            try:
                self.rm_file(probe)
            except (OdfError, FileNotFoundError):
                pass


class S3File(AbstractBufferedFile):
    """Read-only, seekable view of one object: ranged GETs through the readahead cache."""

    def _fetch_range(self, start: int, end: int) -> bytes:
        if start >= end:
            return b""
        return self.fs.cat_file(self.path, start, end)


class S3Backend:
    """Writes with conditional PUTs: create-only objects and ETag-checked ref updates, atomic on the store."""

    def __init__(self, fs: S3FileSystem):
        self.fs = fs

    def put_if_absent(self, path: str, data: bytes, private: bool = False) -> bool:
        return self._create(path, lambda: data)

    def put_file_if_absent(self, path: str, src: str, move: bool) -> bool:
        def body() -> BinaryIO:
            return open(src, "rb")
        published = self._create(path, body)
        if move:
            os.unlink(src)
        return published

    def _create(self, path: str, body: Callable[[], bytes | BinaryIO]) -> bool:
        for _ in range(5):  # 409: a concurrent conditional write of the same key is in flight; ask again
            b = body()
            try:
                self.fs.put_object(path, b, if_none_match=True)
                return True
            except PreconditionFailed:
                if self.fs.isfile(path):
                    return False
            finally:
                if isinstance(b, io.IOBase):
                    b.close()
        raise S3Error(f"S3 writing s3://{path} failed: concurrent conditional writes kept conflicting")

    def put(self, path: str, data: bytes, private: bool = False) -> None:
        self.fs.put_object(path, data)

    def _read(self, name: str, path: str) -> tuple[str | None, str | None]:
        try:
            raw, etag = self.fs.get_with_etag(path)
        except FileNotFoundError:
            return None, None
        return decode_ref(raw, f"s3://{path}"), etag

    def read_ref(self, name: str, path: str) -> str | None:
        return self._read(name, path)[0]

    def compare_and_swap(self, name: str, path: str, expected: str | None, new: str) -> None:
        actual, etag = self._read(name, path)
        if actual != expected:
            raise RefConflict(name, expected, actual)
        try:
            if etag is None:
                self.fs.put_object(path, new.encode("ascii"), if_none_match=True)
            else:
                self.fs.put_object(path, new.encode("ascii"), if_match=etag)
        except PreconditionFailed:
            raise RefConflict(name, expected, self.read_ref(name, path)) from None
