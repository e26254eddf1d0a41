"""``ODF_ENGINE_URL=auto``: a warm engine private to this user that the first command starts and later ones reuse.

One engine per user and package version (:func:`auto_version`), serving on a Unix socket of mode 0600 in a directory
of mode 0700 (:func:`engine_dir`: ``$ODF_ENGINE_DIR``, else ``$XDG_RUNTIME_DIR/odf``, else ``~/.cache/odf/engine``).
Per version key the directory holds ``engine-<key>.sock``, ``engine-<key>.lock`` (an ``flock`` the starter holds
while it starts the engine and waits for it: a second command racing to start waits and then reuses) and
``engine-<key>.json`` (:class:`AutoState`: the pid of the engine's driver, its version, socket, start time, log).

The engine is ``odf engine serve --socket … --idle-exit …`` started detached (its own session; stdin closed, its
output in ``$ODF_LOG_DIR/engine-auto-<key>.log``); it stops by itself after ``$ODF_ENGINE_IDLE_EXIT`` seconds
(default 900) without a request. Each command that picks it touches the socket file, which counts as use, so the
engine does not idle out between a command's start and its first request. A dead engine (its pid gone or its socket
refusing) is replaced; a running engine of another package version is asked to stop (SIGTERM, when it runs no
request; else it idles out). Only this user can connect (the socket's mode), so the engine may touch every local
path (``--allow-path /``): it can reach nothing its clients could not.

Picking a live engine costs a ``stat``, a ``kill(pid, 0)`` and a socket ``connect`` (no JVM; grpc only when a
request is sent): :class:`AutoEngine` does it before every request, so a command that outlived the engine (idle
time between two of its requests, a killed engine) starts a new one instead of failing.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from odf_core.engine.base import EngineError, log_dir, rotate_if_large
from odf_core.engine.protocol import EngineRequest, EngineResponse, HealthResponse
from odf_core.engine.remote import RemoteEngine

AUTO = "auto"
DIR_ENV = "ODF_ENGINE_DIR"
IDLE_EXIT_ENV = "ODF_ENGINE_IDLE_EXIT"
ARGS_ENV = "ODF_ENGINE_AUTO_ARGS"
DEFAULT_IDLE_EXIT_S = 900.0
START_TIMEOUT_S = 180.0
#: AF_UNIX paths are limited to 107 bytes on Linux (104 on macOS): a longer one fails only when the engine binds it.
MAX_SOCKET_PATH = 100


def is_auto(url: str | None) -> bool:
    return (url or "").strip().lower() == AUTO


def engine_dir(*, create: bool = True) -> Path:
    """The directory of this user's auto engines, created with mode 0700 (a group- or world-readable one is
    tightened; one owned by another user is refused). ``create=False``: only its path (to look, not to start)."""
    given = os.environ.get(DIR_ENV)
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if given:
        d = Path(given).expanduser()
    elif runtime and os.path.isdir(runtime) and os.access(runtime, os.W_OK | os.X_OK):
        d = Path(runtime) / "odf"
    else:
        d = Path.home() / ".cache" / "odf" / "engine"
    if not create:
        return d
    try:
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
        st = d.stat()
        if st.st_uid != os.getuid():
            raise EngineError(f"the auto engine's directory {d} belongs to another user; set {DIR_ENV} to a "
                              "directory of your own")
        if st.st_mode & 0o077:
            os.chmod(d, 0o700)
    except OSError as e:
        raise EngineError(f"the auto engine's directory {d}: {e.strerror or e}; set {DIR_ENV} to a writable "
                          "directory") from None
    return d


def auto_version() -> str:
    """What one auto engine serves: this package's version and the engine's (:func:`~odf_core.engine.version.
    engine_version`: Spark, semantics and a digest of the transform code)."""
    from importlib import metadata

    from odf_core.engine.version import engine_version

    try:
        package = metadata.version("airflow-provider-odf")
    except metadata.PackageNotFoundError:
        package = "unknown"
    return f"{package}+{engine_version()}"


def idle_exit_s() -> float:
    text = os.environ.get(IDLE_EXIT_ENV, "").strip()
    if not text:
        return DEFAULT_IDLE_EXIT_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if value < 0:
        raise EngineError(f"{IDLE_EXIT_ENV}={text!r}: expected seconds >= 0 (0: the engine never idles out)")
    return value


def extra_args() -> list[str]:
    """``$ODF_ENGINE_AUTO_ARGS``: more ``odf engine serve`` flags for the auto engine (``--master local[4]``,
    ``--conf spark.driver.memory=4g``, ``--allow-path s3://bucket``)."""
    text = os.environ.get(ARGS_ENV, "")
    try:
        return shlex.split(text)
    except ValueError as e:
        raise EngineError(f"{ARGS_ENV}={text!r}: {e}") from None


@dataclass(frozen=True)
class AutoFiles:
    """The files of one version's auto engine."""

    directory: Path
    key: str

    @staticmethod
    def of(version: str, directory: Path | None = None) -> "AutoFiles":
        key = hashlib.sha256(version.encode()).hexdigest()[:12]
        return AutoFiles(directory or engine_dir(), key)

    @property
    def socket(self) -> Path:
        return self.directory / f"engine-{self.key}.sock"

    @property
    def lock(self) -> Path:
        return self.directory / f"engine-{self.key}.lock"

    @property
    def state(self) -> Path:
        return self.directory / f"engine-{self.key}.json"

    @property
    def pid_file(self) -> Path:
        return self.directory / f"engine-{self.key}.pid"

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    @property
    def log(self) -> Path:
        """The engine's output: ``$ODF_LOG_DIR/engine-auto-<key>.log``, appended to by each start (set aside as
        ``.log.1`` at a start when it has grown past 10 MB)."""
        return log_dir() / f"engine-auto-{self.key}.log"


@dataclass(frozen=True)
class AutoState:
    """``engine-<key>.json``: written by the command that started the engine, once it answered."""

    pid: int  # the engine's driver: the process serving the socket, which SIGTERM drains
    version: str
    socket: str
    started: str  # UTC, ISO 8601
    log: str
    args: tuple[str, ...] = ()

    @staticmethod
    def load(path: Path) -> "AutoState | None":
        try:
            data = json.loads(path.read_text())
            return AutoState(int(data["pid"]), str(data["version"]), str(data["socket"]), str(data["started"]),
                             str(data["log"]), tuple(map(str, data.get("args") or ())))
        except (OSError, ValueError, KeyError, TypeError):
            return None  # none, or half-written by a starter that died: treated as no engine

    def save(self, path: Path) -> None:
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump({**asdict(self), "args": list(self.args)}, f, indent=1)
        os.replace(tmp, path)


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, which no longer serves anything, counts as dead)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return True  # no /proc (macOS): kill(0) is all we know


def accepts(path: Path | str) -> bool:
    """Whether a server listens on the Unix socket ``path``."""
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(2.0)
        try:
            s.connect(str(path))
            return True
        except OSError:
            return False


def live_state(files: AutoFiles) -> AutoState | None:
    """The state of a running engine at ``files`` (its driver alive and its socket accepting), else None."""
    state = AutoState.load(files.state)
    if state is None or state.socket != str(files.socket) or not pid_alive(state.pid) or not accepts(files.socket):
        return None
    return state


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # released when the fd closes, also when the holder is killed
        yield
    finally:
        os.close(fd)


def _touch(path: Path) -> None:
    """Mark use: the engine counts the socket file's mtime as activity (``--idle-exit``)."""
    with contextlib.suppress(OSError):
        os.utime(path)


def resolve_auto(version: str | None = None, *, idle_exit: float | None = None, args: list[str] | None = None,
                 timeout_s: float = START_TIMEOUT_S) -> str:
    """The ``unix:///…`` URL of this user's live auto engine for ``version`` (default :func:`auto_version`),
    started first if none runs (:class:`EngineError` naming its log when it does not come up)."""
    return f"unix://{ensure_running(version, idle_exit=idle_exit, args=args, timeout_s=timeout_s).socket}"


def ensure_running(version: str | None = None, *, idle_exit: float | None = None, args: list[str] | None = None,
                   timeout_s: float = START_TIMEOUT_S) -> AutoState:
    """:func:`resolve_auto`, returning the running engine's state."""
    version = version or auto_version()
    files = AutoFiles.of(version)
    if len(str(files.socket)) > MAX_SOCKET_PATH:
        raise EngineError(f"the auto engine's socket path {files.socket} is longer than a Unix socket allows "
                          f"({MAX_SOCKET_PATH} bytes); set {DIR_ENV} to a shorter directory")
    args = extra_args() if args is None else args
    state = live_state(files)
    if state is not None and tuple(state.args) == tuple(args):
        _touch(files.socket)
        return state
    with _locked(files.lock):
        state = live_state(files)  # another command may have started it while we waited for the lock
        if state is not None and tuple(state.args) == tuple(args):
            _touch(files.socket)
            return state
        _stop_pid(AutoState.load(files.state), wait_s=60.0)  # a dead, draining or differently set-up one
        for stale in (files.socket, files.state, files.pid_file):
            with contextlib.suppress(FileNotFoundError):
                os.remove(stale)
        state = _start(files, version, idle_exit_s() if idle_exit is None else idle_exit, args, timeout_s)
    stop_other_versions(files)
    return state


def _start(files: AutoFiles, version: str, idle_exit: float, args: list[str], timeout_s: float) -> AutoState:
    log = files.log
    log.parent.mkdir(parents=True, exist_ok=True)
    rotate_if_large(log)
    cmd = [sys.executable, "-m", "odf_core.cli", "engine", "serve", "--socket", str(files.socket),
           "--pid-file", str(files.pid_file), "--idle-exit", f"{idle_exit:g}", "--allow-path", "/", *args]
    env = {k: v for k, v in os.environ.items() if k != "ODF_ENGINE_URL"}
    with open(log, "ab") as out:
        out.write(f"\n{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} starting: {shlex.join(cmd)}\n".encode())
        out.flush()
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=out, cwd=files.directory, env=env,
                                start_new_session=True)  # detached: outlives this command, no terminal signals
    deadline = time.monotonic() + timeout_s
    while True:
        pid = _read_pid(files.pid_file)
        if pid is not None and accepts(files.socket):
            state = AutoState(pid, version, str(files.socket), time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                              str(log), tuple(args))
            state.save(files.state)
            return state
        code = proc.poll()
        if code is not None:
            raise EngineError(f"the auto engine did not start (exit code {code}); see its log {log}")
        if time.monotonic() > deadline:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGTERM)
            raise EngineError(f"the auto engine did not answer within {timeout_s:g} s; see its log {log}")
        time.sleep(0.1)


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _stop_pid(state: AutoState | None, wait_s: float) -> bool:
    """SIGTERM the engine's driver (it drains and stops Spark) and wait up to ``wait_s`` for it to end; True when
    it ran. Only a pid whose socket still accepts is signalled: a dead engine's pid may belong to another process
    by now."""
    if state is None or not pid_alive(state.pid) or not accepts(state.socket):
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(state.pid, signal.SIGTERM)
    deadline = time.monotonic() + wait_s
    while pid_alive(state.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    return True


def _idle(state: AutoState) -> bool:
    """Whether the engine runs no request now (asked over its socket: one health call)."""
    from odf_core.engine import remote_engine

    engine = remote_engine(f"unix://{state.socket}")
    try:
        h = engine.health(timeout_s=5.0)
        return h.running == 0 and h.queued == 0
    except EngineError:
        return False
    finally:
        engine.close()


def all_states(directory: Path | None = None) -> list[tuple[AutoFiles, AutoState]]:
    """Every auto engine recorded in the directory (running or not)."""
    d = directory or engine_dir(create=False)
    out = []
    for path in sorted(d.glob("engine-*.json")):
        state = AutoState.load(path)
        if state is not None:
            out.append((AutoFiles(d, path.stem.removeprefix("engine-")), state))
    return out


def stop_other_versions(current: AutoFiles) -> list[AutoState]:
    """Ask this user's auto engines of other versions to stop, when they run no request (a busy one idles out
    later); returns those asked."""
    asked = []
    for files, state in all_states(current.directory):
        if files.key == current.key or live_state(files) is None or not _idle(state):
            continue
        with contextlib.suppress(ProcessLookupError):
            os.kill(state.pid, signal.SIGTERM)
        asked.append(state)
    return asked


def stop_all(wait_s: float = 60.0) -> list[AutoState]:
    """``odf engine stop``: stop every auto engine of this user (each drains its running requests first); returns
    those that were running. Their files are removed."""
    stopped = []
    for files, state in all_states():
        with _locked(files.lock):
            if _stop_pid(state, wait_s):
                stopped.append(state)
            for path in (files.socket, files.state, files.pid_file):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(path)
    return stopped


def running(version: str | None = None) -> AutoState | None:
    """This version's auto engine if it runs (``odf engine status``); never starts one."""
    return live_state(AutoFiles.of(version or auto_version(), engine_dir(create=False)))


class AutoEngine(RemoteEngine):
    """The client of the auto engine. Before each request it makes sure the engine still runs, and starts a new
    one if not: a command (a long ``odf pull``, a fetch of many files) may outlive the engine's idle time between
    two of its requests, or the engine may have been killed meanwhile."""

    def __init__(self, version: str | None = None, **kwargs: Any) -> None:
        self.version = version or auto_version()
        self._state = ensure_running(self.version)
        super().__init__(f"unix://{self._state.socket}", **kwargs)

    def _ensure(self) -> None:
        state = ensure_running(self.version)
        if state.pid != self._state.pid:  # a new engine on the same path: a fresh channel, no reconnect backoff
            self.close()
        self._state = state

    def execute(self, request: EngineRequest, *, what: str = "engine request") -> EngineResponse:
        self._ensure()
        return super().execute(request, what=what)

    def health(self, timeout_s: float = 10.0) -> HealthResponse:
        self._ensure()
        return super().health(timeout_s)


def auto_engine(**kwargs: Any) -> AutoEngine:
    """``ODF_ENGINE_URL=auto``: this user's engine (started if none runs); without ``credentials`` the
    ``ODF_ENGINE_*`` variables' (as :func:`odf_core.engine.remote_engine`)."""
    from odf_core.engine.credentials import ClientCredentials

    if kwargs.get("credentials") is None:
        kwargs["credentials"] = ClientCredentials.from_env()
    return AutoEngine(**kwargs)
