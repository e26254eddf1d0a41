"""A real S3 API on loopback for tests and benchmarks: moto's server (``moto_server``) in its own process on a free
port, with conditional writes (If-None-Match / If-Match) honoured like AWS S3 does."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class S3Server:
    """A running moto server: ``endpoint``, ``env()`` for child processes, ``bucket()`` for a fresh bucket."""

    proc: subprocess.Popen
    endpoint: str
    created: list[str] = field(default_factory=list)

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        env = dict(os.environ if base is None else base)
        env.update(AWS_ENDPOINT_URL=self.endpoint, AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
                   AWS_DEFAULT_REGION="us-east-1")
        env.pop("AWS_PROFILE", None)
        return env

    def client(self):
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                            aws_access_key_id="testing", aws_secret_access_key="testing")

    def bucket(self, prefix: str = "odf") -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        self.created.append(name)
        return name

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)


def start_s3_server(timeout_s: float = 30.0) -> S3Server:
    """Start ``moto_server -H 127.0.0.1 -p PORT`` and return once it accepts connections."""
    exe = shutil.which("moto_server") or str(Path(sys.executable).parent / "moto_server")
    port = free_port()
    proc = subprocess.Popen([exe, "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
        except OSError:
            try:
                code = proc.wait(timeout=0.05)  # waits at most 50 ms, and notices a server that died
                raise RuntimeError(f"moto_server exited with code {code} before listening on port {port}")
            except subprocess.TimeoutExpired:
                pass
            if time.monotonic() > deadline:
                os.killpg(proc.pid, signal.SIGKILL)
                raise RuntimeError(f"moto_server did not listen on port {port} within {timeout_s} s") from None
    return S3Server(proc, f"http://127.0.0.1:{port}")
