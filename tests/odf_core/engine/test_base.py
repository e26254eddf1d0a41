"""The engine's log files (odf_core/engine/base.py): traces of failures and appended logs stay bounded on a machine
that runs for months (an Airflow worker retrying a flaky source writes a trace per failure)."""
from __future__ import annotations

import os
import time

from odf_core.engine import base


def test_an_error_log_names_its_command_and_old_traces_go_as_new_ones_come(tmp_path, monkeypatch):
    monkeypatch.setenv("ODF_LOG_DIR", str(tmp_path))
    old = tmp_path / "20261001T120000-123-odf-pull.log"
    old.write_text("old trace")
    then = time.time() - (base.ERROR_LOG_DAYS + 1) * 86400
    os.utime(old, (then, then))
    recent = tmp_path / "20261201T120000-124-odf-pull.log"
    recent.write_text("recent trace")
    appended = tmp_path / "spark-driver.log"  # not a trace: never removed by age
    appended.write_text("driver")
    os.utime(appended, (then, then))
    path = base.write_error_log("odf pull a.b", "Traceback ...")
    assert path is not None and path.parent == tmp_path and path.name.endswith("-odf-pull-a.b.log")
    assert path.read_text() == "Traceback ..."
    assert not old.exists() and recent.exists() and appended.exists()


def test_rotate_if_large_keeps_one_older_copy(tmp_path):
    log = tmp_path / "engine.log"
    base.rotate_if_large(log, limit=10)  # no log yet: nothing to do
    log.write_text("small")
    base.rotate_if_large(log, limit=10)
    assert log.read_text() == "small" and not (tmp_path / "engine.log.1").exists()
    log.write_text("first large run")
    base.rotate_if_large(log, limit=10)
    assert not log.exists() and (tmp_path / "engine.log.1").read_text() == "first large run"
    log.write_text("second large run")
    base.rotate_if_large(log, limit=10)
    assert (tmp_path / "engine.log.1").read_text() == "second large run"
