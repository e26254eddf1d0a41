"""A long-lived engine for tests: the server ``odf engine serve`` runs (``spark_jobs.server.EngineServer``), served
from the tests' Spark session on 127.0.0.1 (its client URL: ``tests/odf_core/engine/engine_support.url``)."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

from spark_jobs.server import EngineServer


@contextmanager
def engine_server(spark: Any, max_concurrency: int = 1) -> Iterator[EngineServer]:
    srv = EngineServer(spark, "127.0.0.1", 0, max_concurrency=max_concurrency, drain_s=5)
    srv.start()
    try:
        yield srv
    finally:
        srv.shutdown(0)
