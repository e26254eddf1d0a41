"""Fixtures of the ingest tests: a local HTTP server and a private podman service speaking the Docker API."""
from __future__ import annotations

import tempfile
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from .podman_service import import_busybox_image, podman_missing, start_podman_service
from tests.conftest import PODMAN_SKIP
from tests.odf_core.ingest.http_server import LocalHttpServer


@pytest.fixture
def http_server() -> Iterator[LocalHttpServer]:
    server = LocalHttpServer().start()
    yield server
    server.stop()


@dataclass(frozen=True)
class Podman:
    docker_host: str
    image: str


@pytest.fixture(scope="session")
def podman() -> Iterator[Podman]:
    """A podman service on a unique socket with a local busybox image; skipped only when podman is not installed
    (and then listed at the end of the run by the hook in tests/conftest.py)."""
    missing = podman_missing()
    if missing:
        pytest.skip(f"{PODMAN_SKIP}: {missing}")
    # podman refuses a runroot longer than 50 characters: a short directory of its own, not the (xdist worker's,
    # longer) pytest temp dir; stop() deletes it
    service = start_podman_service(tempfile.mkdtemp(prefix="odf-podman-"))
    try:
        image = import_busybox_image(service)
        yield Podman(service.docker_host, image)
    finally:
        service.stop()
