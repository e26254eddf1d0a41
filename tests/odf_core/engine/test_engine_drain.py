"""The warm engine's shutdown (spark_jobs/server.py ``EngineServer.shutdown``): a request already running when the
engine is told to stop finishes in the drain time and its answer reaches its client; a request arriving meanwhile is
refused at once with one clear line and runs nothing. A server of its own on loopback (no token), on this session's
Spark: the module's other tests keep theirs running."""
from __future__ import annotations

import threading

import pytest

from odf_core.engine import EngineError, EngineUnavailable, remote_engine
from spark_jobs.server import EngineServer

from .engine_support import ingest_request, url, wait_until

pytestmark = pytest.mark.spark


def test_a_running_request_finishes_in_the_drain_time_and_a_new_one_is_refused(spark, tmp_path):
    srv = EngineServer(spark, "127.0.0.1", 0, max_concurrency=1, drain_s=120)
    srv.start()
    results: dict[str, object] = {}

    def call(name: str, slow: bool) -> None:
        try:
            results[name] = remote_engine(url(srv)).execute(ingest_request(tmp_path, name, slow=slow))
        except Exception as e:  # noqa: BLE001
            results[name] = e

    running = threading.Thread(target=call, args=("running", True))
    running.start()
    wait_until(lambda: srv.health().running == 1)
    stopping = threading.Thread(target=srv.shutdown)  # the drain time: drain_s (120 s), as SIGTERM's
    stopping.start()
    wait_until(lambda: srv._stopping)
    call("late", False)
    running.join(180)
    stopping.join(180)
    assert not stopping.is_alive() and not running.is_alive()
    # the running request was not cut short: its answer and its outputs are there
    answer = getattr(results["running"], "value", results["running"])
    assert getattr(getattr(answer, "merge", None), "num_records", None) == 2, answer
    assert (tmp_path / "running.slice.parquet").exists() and (tmp_path / "running.ckpt.parquet").exists()
    # the late one: refused at once (gRPC's stop answers it CANCELLED, which the client reports as a cancelled
    # request), one line, nothing written
    late = results["late"]
    assert isinstance(late, EngineError) and "\n" not in str(late), late
    assert not (tmp_path / "late.slice.parquet").exists() and not (tmp_path / "late.ckpt.parquet").exists()


def test_an_engine_shutting_down_refuses_a_request_that_reached_it(spark, tmp_path):
    """gRPC's own stop refuses new connections; a call that got through before it is refused by the engine itself
    (``_admit``), naming why. The stop flag is set directly: the window between the two is too short to hit."""
    srv = EngineServer(spark, "127.0.0.1", 0, max_concurrency=1, drain_s=5)
    srv.start()
    try:
        srv._stopping = True
        with pytest.raises(EngineUnavailable, match="the engine is shutting down"):
            remote_engine(url(srv)).execute(ingest_request(tmp_path, "refused"))
        assert srv.health().running == 0 and not (tmp_path / "refused.slice.parquet").exists()
    finally:
        srv.shutdown(0)
