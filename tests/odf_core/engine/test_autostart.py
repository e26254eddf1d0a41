"""``ODF_ENGINE_URL=auto`` (odf_core/engine/autostart.py): the user's own engine, started by the first command,
reused by the next, replaced when dead, stopped when idle or of another version.

The fast tests cover the pure parts with real files, sockets and processes (no JVM): the private directory, the
state file, liveness of a dead pid or a silent socket, the start lock, a failed start, the server's idle clock. The
lifecycle tests run the real thing: ``odf engine serve`` (spark-submit, ``local[1]``) started detached by real
``odf`` commands.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from odf_core.cli import main as odf
from odf_core.engine import EngineError
from odf_core.engine import autostart as auto
from odf_core.engine import base
from odf_core.engine.autostart import AutoFiles, AutoState


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


@pytest.fixture
def engine_env(tmp_path, monkeypatch):
    """A private engine directory and log directory for this test (short paths: a socket path has ~100 bytes)."""
    d = tmp_path / "e"
    monkeypatch.setenv(auto.DIR_ENV, str(d))
    monkeypatch.setenv("ODF_LOG_DIR", str(tmp_path / "logs"))
    monkeypatch.delenv("ODF_ENGINE_URL", raising=False)
    monkeypatch.delenv(auto.IDLE_EXIT_ENV, raising=False)
    monkeypatch.delenv(auto.ARGS_ENV, raising=False)
    return d


# -- pure parts (no JVM) -----------------------------------------------------------------------------------------


def test_the_directory_is_private_and_found_in_runtime_then_cache(tmp_path, monkeypatch):
    monkeypatch.delenv(auto.DIR_ENV, raising=False)
    run = tmp_path / "run"
    run.mkdir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
    assert auto.engine_dir() == run / "odf" and mode(run / "odf") == 0o700
    os.chmod(run / "odf", 0o755)  # widened by someone: tightened again before use
    auto.engine_dir()
    assert mode(run / "odf") == 0o700

    monkeypatch.delenv("XDG_RUNTIME_DIR")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert auto.engine_dir(create=False) == tmp_path / "home" / ".cache" / "odf" / "engine"
    assert not (tmp_path / "home").exists()  # looking creates nothing
    assert mode(auto.engine_dir()) == 0o700

    monkeypatch.setenv(auto.DIR_ENV, str(tmp_path / "mine"))
    assert auto.engine_dir() == tmp_path / "mine" and mode(tmp_path / "mine") == 0o700


def test_one_set_of_files_per_version(engine_env):
    a, b = AutoFiles.of("0.1.0+spark-4.2.0+sem-1"), AutoFiles.of("0.2.0+spark-4.2.0+sem-1")
    assert a == AutoFiles.of("0.1.0+spark-4.2.0+sem-1") and a.key != b.key
    assert a.socket.parent == engine_env and a.url == f"unix://{a.socket}"
    assert {a.socket.name, a.lock.name, a.state.name} == {f"engine-{a.key}.sock", f"engine-{a.key}.lock",
                                                           f"engine-{a.key}.json"}


def test_a_socket_path_too_long_is_refused_before_anything_starts(tmp_path, monkeypatch, engine_env):
    long_dir = tmp_path / ("x" * 90)
    monkeypatch.setenv(auto.DIR_ENV, str(long_dir))
    with pytest.raises(EngineError, match=f"longer than a Unix socket allows.*set {auto.DIR_ENV}"):
        auto.resolve_auto("v1")
    assert not list(long_dir.glob("engine-*"))


def test_state_file_round_trip_private_and_a_torn_one_is_no_engine(engine_env):
    files = AutoFiles.of("v1")
    state = AutoState(1234, "v1", str(files.socket), "2026-01-01T00:00:00Z", "/logs/x.log", ("--master", "local[1]"))
    state.save(files.state)
    assert AutoState.load(files.state) == state and mode(files.state) == 0o600
    files.state.write_text('{"pid": 12')
    assert AutoState.load(files.state) is None


def test_live_only_with_a_running_pid_and_an_accepting_socket(engine_env):
    files = AutoFiles.of("v1")
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(files.socket))
        server.listen()
        AutoState(os.getpid(), "v1", str(files.socket), "t", "log").save(files.state)
        assert auto.live_state(files) is not None
        AutoState(dead_pid(), "v1", str(files.socket), "t", "log").save(files.state)
        assert auto.live_state(files) is None  # a killed engine whose socket file another process took
    AutoState(os.getpid(), "v1", str(files.socket), "t", "log").save(files.state)
    assert auto.live_state(files) is None  # the socket file stays, nobody listens: stale
    assert auto.running("v1") is None


def test_a_zombie_is_dead():
    p = subprocess.Popen(["true"])
    deadline = time.monotonic() + 10
    while open(f"/proc/{p.pid}/stat").read().rpartition(")")[2].split()[0] != "Z":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert not auto.pid_alive(p.pid) and auto.pid_alive(os.getpid())
    p.wait()


def test_the_start_lock_lets_one_starter_in_at_a_time(engine_env):
    files = AutoFiles.of("v1")
    order: list[str] = []

    def second() -> None:
        with auto._locked(files.lock):
            order.append("second")

    with auto._locked(files.lock):
        t = threading.Thread(target=second)
        t.start()
        t.join(0.5)
        assert t.is_alive()  # waits for the first starter
        order.append("first")
    t.join(5)
    assert order == ["first", "second"]


def test_a_failed_start_is_one_line_naming_the_log(engine_env, monkeypatch, tmp_path):
    monkeypatch.setenv(auto.ARGS_ENV, "--port not-a-port")  # refused by the launcher's flags: no JVM starts
    with pytest.raises(EngineError, match=r"the auto engine did not start \(exit code 2\); see its log (\S+)") as e:
        auto.resolve_auto("v1", timeout_s=60)
    log = Path(str(e.value).rsplit(" ", 1)[1])
    assert log.parent == tmp_path / "logs" and "not-a-port" in log.read_text()
    assert not AutoFiles.of("v1").state.exists()


def test_a_start_sets_a_large_log_aside_and_appends_to_a_small_one(engine_env, monkeypatch, tmp_path):
    """The engine's log grows by every start and step; past 10 MB a start moves it to ``.log.1`` (one copy kept)."""
    monkeypatch.setenv(auto.ARGS_ENV, "--port not-a-port")  # a start that fails at once, no JVM
    monkeypatch.setattr(auto, "rotate_if_large", lambda path: base.rotate_if_large(path, limit=1000))
    log = AutoFiles.of("v1").log
    log.parent.mkdir(parents=True)
    log.write_text("earlier start\n")
    with pytest.raises(EngineError):
        auto.resolve_auto("v1", timeout_s=60)
    assert log.read_text().startswith("earlier start\n") and "not-a-port" in log.read_text()  # appended
    log.write_text("x" * 1001)
    with pytest.raises(EngineError):
        auto.resolve_auto("v1", timeout_s=60)
    aside = log.with_name(log.name + ".1")
    assert aside.read_text() == "x" * 1001 and "not-a-port" in log.read_text() and not log.read_text().startswith("x")


def test_bad_settings_are_one_line(engine_env, monkeypatch):
    monkeypatch.setenv(auto.IDLE_EXIT_ENV, "soon")
    with pytest.raises(EngineError, match=f"{auto.IDLE_EXIT_ENV}='soon': expected seconds"):
        auto.resolve_auto("v1")
    monkeypatch.setenv(auto.IDLE_EXIT_ENV, "5")
    monkeypatch.setenv(auto.ARGS_ENV, "--conf 'unbalanced")
    with pytest.raises(EngineError, match=auto.ARGS_ENV):
        auto.resolve_auto("v1")


def test_cli_stop_and_status_without_an_auto_engine(engine_env, monkeypatch, capsys):
    assert odf(["engine", "stop"]) == 0
    assert "no auto engine was running" in capsys.readouterr().out
    assert odf(["engine", "stop", "--engine", "grpc://127.0.0.1:5544"]) == 1
    assert "stops this user's auto engines (ODF_ENGINE_URL=auto) only" in capsys.readouterr().err
    monkeypatch.setenv("ODF_ENGINE_URL", "auto")
    assert odf(["engine", "status"]) == 1
    assert "no auto engine runs for this version" in capsys.readouterr().err
    assert not engine_env.exists()  # looking started nothing


def test_serve_refuses_a_negative_idle_exit_before_spark_starts(tmp_path, capsys):
    assert odf(["engine", "serve", "--socket", str(tmp_path / "s.sock"), "--idle-exit", "-1"]) == 2
    assert "--idle-exit -1: expected seconds >= 0" in capsys.readouterr().err


def test_the_airflow_connection_accepts_auto_without_starting_anything(engine_env, monkeypatch, tmp_path):
    from airflow_provider_odf.hooks.odf import OdfHook

    monkeypatch.setenv("AIRFLOW_CONN_ODF_AUTO", json.dumps(
        {"conn_type": "odf", "extra": {"workspace": str(tmp_path / "ws"), "engine_url": "auto"}}))
    assert OdfHook("odf_auto").settings().engine_url == "auto"  # resolved when a task runs, on its worker
    assert not engine_env.exists()


def test_the_engine_idle_clock(tmp_path):
    """The server's side of ``--idle-exit``: a request in flight keeps it up, a touch of its socket file counts as
    use, and once it decided to stop it refuses calls (health too) instead of running them."""
    from spark_jobs.server import EngineServer

    sock = tmp_path / "s.sock"
    srv = EngineServer(None, "127.0.0.1", 0, 1, 1.0, socket_path=str(sock))
    try:
        srv.start()
        time.sleep(0.3)
        assert srv.idle_s() >= 0.3 and not srv.stop_if_idle(5)
        os.utime(sock)  # a client picked this engine
        assert srv.idle_s() < 0.2
        srv._waiting = 1  # a request admitted, waiting for a slot
        time.sleep(0.3)
        assert srv.idle_s() == 0 and not srv.stop_if_idle(0.1)
        srv._waiting = 0
        assert srv.stop_if_idle(0.1) and srv._stopping
        from odf_core.engine import EngineUnavailable, remote_engine

        with pytest.raises(EngineUnavailable, match="shutting down"):
            remote_engine(f"unix://{sock}").health(timeout_s=5)
    finally:
        srv.server.stop(0)


# -- the real engine -----------------------------------------------------------------------------------------------


def listening_lines(log: Path) -> int:
    return log.read_text().count("odf engine listening on")


def wait_dead(pid: int, timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    while auto.pid_alive(pid):
        assert time.monotonic() < deadline, f"pid {pid} still runs"
        time.sleep(0.2)


def odf_cmd(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "odf_core.cli", *argv], env=env, capture_output=True, text=True,
                          timeout=300)


@pytest.fixture
def auto_env(engine_env, tmp_path, monkeypatch):
    """``ODF_ENGINE_URL=auto`` with a one-core engine; every auto engine of the test is stopped at its end."""
    monkeypatch.setenv(auto.ARGS_ENV, "--master local[1] --conf spark.ui.enabled=false")
    monkeypatch.setenv(auto.IDLE_EXIT_ENV, "600")
    monkeypatch.setenv("ODF_ENGINE_URL", "auto")
    ws = tmp_path / "ws" / ".odf"
    assert odf(["-w", str(ws), "init"]) == 0
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    yield env, ws
    for _files, state in auto.all_states():
        if auto.pid_alive(state.pid):
            os.kill(state.pid, signal.SIGTERM)
    auto.stop_all(wait_s=30)


@pytest.mark.spark
@pytest.mark.slow
def test_first_commands_start_one_engine_later_ones_reuse_it_a_killed_one_is_replaced(auto_env, tmp_path):
    env, ws = auto_env
    sql = ["-w", str(ws), "sql", "SELECT 40 + 2 AS answer"]

    # two commands at once, no engine yet: one starts it, the other waits on the lock and reuses it
    t0 = time.monotonic()
    both = [subprocess.Popen([sys.executable, "-m", "odf_core.cli", *sql], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in both]
    first_s = time.monotonic() - t0
    assert [p.returncode for p in both] == [0, 0], outs
    assert all("42" in out for out, _ in outs)
    files = AutoFiles.of(auto.auto_version())
    state = AutoState.load(files.state)
    assert state is not None and auto.pid_alive(state.pid)
    log = Path(state.log)
    assert log.parent == tmp_path / "logs" and listening_lines(log) == 1  # exactly one engine started,
    assert log.read_text().count(" starting: ") == 1  # and no second start that lost the race for the socket
    assert mode(files.socket) == 0o600 and mode(files.directory) == 0o700
    assert stat.S_ISSOCK(os.stat(files.socket).st_mode)

    # reuse: the same engine, no start
    t0 = time.monotonic()
    again = odf_cmd(*sql, env=env)
    reuse_s = time.monotonic() - t0
    assert again.returncode == 0 and "42" in again.stdout, again.stderr
    assert AutoState.load(files.state) == state and listening_lines(log) == 1
    print(f"auto engine: first two commands at once {first_s:.1f} s, a later command {reuse_s:.1f} s")

    status = odf_cmd("engine", "status", env=env)
    assert status.returncode == 0, status.stderr
    assert f"unix://{files.socket}: up" in status.stdout and f"auto engine: pid {state.pid}" in status.stdout

    # an Airflow task on this host (the odf connection's engine_url: auto) gets the same engine
    from airflow_provider_odf.hooks.odf import OdfHook

    os.environ["AIRFLOW_CONN_ODF_AUTO"] = json.dumps(
        {"conn_type": "odf", "extra": {"workspace": str(ws), "engine_url": "auto"}})
    try:
        engine = OdfHook("odf_auto").get_engine()
    finally:
        del os.environ["AIRFLOW_CONN_ODF_AUTO"]
    assert isinstance(engine, auto.AutoEngine) and engine.url == files.url
    assert engine.health().running == 0 and listening_lines(log) == 1

    # killed with -9: the client's next request finds the pid dead and the socket silent, and starts a new engine
    os.kill(state.pid, signal.SIGKILL)
    wait_dead(state.pid)
    assert files.socket.exists()  # the dead engine's socket file is left behind
    assert engine.health().running == 0
    new = AutoState.load(files.state)
    assert new is not None and new.pid != state.pid and auto.pid_alive(new.pid) and listening_lines(log) == 2
    engine.close()
    replaced = odf_cmd(*sql, env=env)  # and the next command uses it
    assert replaced.returncode == 0 and "42" in replaced.stdout, replaced.stderr
    assert AutoState.load(files.state) == new and listening_lines(log) == 2

    stop = odf_cmd("engine", "stop", env=env)
    assert stop.returncode == 0 and f"(pid {new.pid}, unix://{files.socket})" in stop.stdout, stop.stderr
    wait_dead(new.pid, 5)
    assert not files.state.exists() and not files.socket.exists()


@pytest.mark.spark
@pytest.mark.slow
def test_another_version_stops_the_old_engine_and_an_idle_engine_exits(auto_env, monkeypatch):
    old_url = auto.resolve_auto("version-1")
    old = AutoState.load(AutoFiles.of("version-1").state)
    assert old is not None and old_url == AutoFiles.of("version-1").url

    # an upgrade: the new version starts its own engine and the old, idle one is asked to stop
    monkeypatch.setenv(auto.IDLE_EXIT_ENV, "3")
    files = AutoFiles.of("version-2")
    engine = auto.AutoEngine("version-2")
    assert engine.url == files.url
    new = AutoState.load(files.state)
    assert new is not None and new.pid != old.pid
    wait_dead(old.pid, 60)
    assert not AutoFiles.of("version-1").socket.exists() or not auto.accepts(AutoFiles.of("version-1").socket)

    # three seconds without a request: the engine stops by itself; the client's next request starts a new one
    wait_dead(new.pid, 90)
    assert auto.running("version-2") is None
    monkeypatch.setenv(auto.IDLE_EXIT_ENV, "600")
    assert engine.health().running == 0
    again = AutoState.load(files.state)
    assert again is not None and again.pid != new.pid and auto.pid_alive(again.pid)
    engine.close()
