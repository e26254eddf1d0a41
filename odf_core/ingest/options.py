"""Settings of the fetch step that are not part of the ODF metadata (they belong to the coordinator)."""
from __future__ import annotations

from dataclasses import dataclass

DEFAULT_BATCH_SIZE = 10_000


@dataclass(frozen=True)
class FetchOptions:
    """``timeout_s``: HTTP connect and per-read timeout.  ``glob_batch``: take all pending glob files in one
    transaction instead of one per transaction (the reference behaviour).  ``hardlink``: stage local files by hard
    link when possible instead of copying.  ``container_batch_size``: ``ODF_BATCH_SIZE`` for containers (else the
    step's own ``ODF_BATCH_SIZE`` env var, else 10000).  ``docker_host``: engine URL (else ``DOCKER_HOST`` / default).
    ``container_network``: network mode, None = no network.  ``container_timeout_s``: the container is killed after.
    """

    timeout_s: float = 60.0
    glob_batch: bool = False
    hardlink: bool = True
    container_batch_size: int | None = None
    docker_host: str | None = None
    container_network: str | None = None
    container_timeout_s: float = 3600.0
