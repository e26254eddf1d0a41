"""Settings of the fetch step that are not part of the ODF metadata (they belong to the coordinator)."""
from __future__ import annotations

from dataclasses import dataclass

from odf_core.ingest.errors import FetchError, IngestError

DEFAULT_BATCH_SIZE = 10_000


@dataclass(frozen=True)
class FetchOptions:
    """``timeout_s``: HTTP connect and per-read timeout.  ``deadline_s``: one whole HTTP download, connect to last
    byte (default one hour, like ``container_timeout_s``).  ``min_bytes_per_s`` / ``stall_window_s``: an HTTP body
    bringing fewer than this many bytes per second over the last window is abandoned as stalled (default 1 KiB/s over
    60 s, which no working link is slower than; 0 turns the rule off).  ``glob_batch``: take all pending glob files
    in one transaction instead of one per transaction (the reference behaviour).  ``hardlink``: stage local files by
    hard link when possible instead of copying.  ``container_batch_size``: ``ODF_BATCH_SIZE`` for containers (else
    the step's own ``ODF_BATCH_SIZE`` env var, else 10000).  ``docker_host``: engine URL (else ``DOCKER_HOST`` /
    default).  ``container_network``: network mode, None = no network.  ``container_timeout_s``: the container is
    killed after.
    """

    timeout_s: float = 60.0
    deadline_s: float = 3600.0
    min_bytes_per_s: int = 1024
    stall_window_s: float = 60.0
    glob_batch: bool = False
    hardlink: bool = True
    container_batch_size: int | None = None
    docker_host: str | None = None
    container_network: str | None = None
    container_timeout_s: float = 3600.0

    def __post_init__(self) -> None:
        for name in ("timeout_s", "deadline_s", "stall_window_s", "container_timeout_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise FetchError(f"fetch option {name}: expected a positive number of seconds, got {value!r}")
        value = self.min_bytes_per_s
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise FetchError(f"fetch option min_bytes_per_s: expected a whole number >= 0, got {value!r}")


DUPLICATES = ("first", "error")


@dataclass(frozen=True)
class IngestOptions:
    """Settings of the merge step that are not part of the ODF metadata (the chain's blocks stay byte-identical).

    ``duplicates``: what a Ledger merge does with rows whose primary key repeats that of an earlier row of the same
    input (conformance difference D1): ``first`` keeps the first in event-time order (ties: input order), drops the
    others and reports how many (the command's summary, a WARNING log line with a key, the OpenLineage block facet);
    ``error`` refuses the input (nothing is committed). Set by ``odf pull|ingest --duplicates`` and the Airflow
    merge/push operators' ``duplicates`` parameter.
    """

    duplicates: str = "first"

    def __post_init__(self) -> None:
        if self.duplicates not in DUPLICATES:
            raise IngestError(f"ingest option duplicates: expected one of {', '.join(DUPLICATES)}, "
                              f"got {self.duplicates!r}")
