"""The helpers of the end-to-end tests and the demo: the file server and stopping a standalone Airflow's processes."""
from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.error
import urllib.request
from email.utils import formatdate

import pytest

from dags_examples.demo_support import FileServer, StandaloneAirflow, processes_with_env
from dags_examples.demo_support.standalone import _cmdline, _render_log_line


def _get(url: str, method: str = "GET", headers: dict[str, str] | None = None) -> int:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method=method, headers=headers or {})) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_file_server_fails_the_first_gets_then_serves_like_a_static_server(tmp_path):
    (tmp_path / "a.csv").write_text("x\n1\n")
    with FileServer(tmp_path, fail_first={"/a.csv": 2}) as server:
        assert _get(server.url("a.csv"), "HEAD") == 200  # HEAD probes are not failed
        assert [_get(server.url("a.csv")) for _ in range(3)] == [500, 500, 200]
        later = formatdate(os.stat(tmp_path / "a.csv").st_mtime + 60, usegmt=True)
        assert _get(server.url("a.csv"), headers={"If-Modified-Since": later}) == 304
        assert server.gets("/a.csv") == [500, 500, 200, 304]
    with pytest.raises(Exception, match="not started"):
        _ = server.port


def test_file_server_names_a_busy_port(tmp_path):
    with FileServer(tmp_path) as first:
        with pytest.raises(Exception, match=f"127.0.0.1:{first.port}.*is another demo or test still running"):
            FileServer(tmp_path, port=first.port).start()


FAKE_STANDALONE = """#!/bin/sh
# Stands in for `airflow standalone`: a component in the group, and a job that left it (as spark-submit does).
sleep 300 &
setsid sleep 301 &
echo started
wait
"""


def test_stop_kills_the_group_and_then_whatever_left_it(tmp_path):
    fake = tmp_path / "airflow"
    fake.write_text(FAKE_STANDALONE)
    fake.chmod(0o755)
    af = StandaloneAirflow(tmp_path / "home", tmp_path, airflow=str(fake))
    # a process of the caller that shares AIRFLOW_HOME (the demo's own Spark JVM) is not the standalone's to kill
    bystander = subprocess.Popen(["sleep", "302"], env={**os.environ, "AIRFLOW_HOME": str(af.home)})
    try:
        af.start()
        deadline = time.monotonic() + 10

        def commands() -> list[str]:
            return [_cmdline(pid) for pid in af.processes()]

        # the script and both children; `setsid` calls setsid() before it execs sleep, so once "sleep 301" shows
        # it has left the group (counting processes alone races with the fork under load)
        while not ("sleep 301" in commands() and len(af.processes()) == 3) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(af.processes()) == 3 and af.running()
        stragglers = af.stop(timeout_s=5)
        assert len(stragglers) == 1 and "sleep 301" in stragglers[0]
        assert af.processes() == [] and not af.running()
        assert bystander.poll() is None and processes_with_env("AIRFLOW_HOME", str(af.home)) == [bystander.pid]
        assert "started" in af.log_tail()
    finally:
        af.stop(timeout_s=5)
        bystander.kill()
        bystander.wait()


def test_task_log_lines_are_rendered_with_their_exception():
    line = json.dumps({"level": "error", "event": "Task failed with exception", "error_detail": [
        {"exc_type": "FetchError", "exc_value": "HTTP 500", "frames": [{"filename": "f.py", "lineno": 3}]}]})
    assert _render_log_line(line) == "ERROR Task failed with exception\n    FetchError: HTTP 500 (f.py:3)"
    assert _render_log_line("plain text") == "plain text"
