"""Drive a real ``airflow standalone`` (scheduler, dag-processor, api-server, triggerer on SQLite) through its REST API.

Used by the end-to-end tests and the demo: start it in its own ``AIRFLOW_HOME`` and process group, wait until every
component reports healthy, log in with the generated admin password, unpause and trigger DAGs, wait for runs, and stop
it again — always with bounded waits, and without leaving any of its processes behind (Spark jobs run in process
groups of their own, so they are found by a marker in their environment, not by the group).
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from odf_core.errors import OdfError

TERMINAL = {"success", "failed"}
ACTIVE = ("queued", "running")
PASSWORDS_FILE = "simple_auth_manager_passwords.json.generated"
_STRIPPED_ENV = ("AIRFLOW__", "AIRFLOW_CONN_", "AIRFLOW_VAR_")
MARKER_ENV = "ODF_STANDALONE_HOME"


class AirflowApiError(OdfError):
    """The standalone Airflow did not start, answered an API call with an error, or a wait ran out of time."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status  # the HTTP status of a failed API call


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now (bind to port 0 and give it back)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class DagRun:
    """A DAG run as the API reports it, with the state of each task once it is finished."""

    dag_id: str
    run_id: str
    state: str
    run_type: str
    tasks: dict[str, str] = field(default_factory=dict)
    tries: dict[str, int] = field(default_factory=dict)
    duration_s: float | None = None


def _airflow_binary() -> str:
    here = Path(sys.executable).parent / "airflow"
    return str(here) if here.exists() else "airflow"


class StandaloneAirflow:
    """One ``airflow standalone`` in ``home`` serving the DAGs of ``dags_folder`` on ``127.0.0.1:port``.

    :param env: extra environment of every component (connections such as ``AIRFLOW_CONN_ODF_DEFAULT``, settings);
        ``AIRFLOW__*``, ``AIRFLOW_CONN_*`` and ``AIRFLOW_VAR_*`` of the calling process are not inherited.
    :param airflow: the ``airflow`` executable (default: the one next to this Python).
    """

    def __init__(self, home: str | Path, dags_folder: str | Path, *, port: int | None = None,
                 env: Mapping[str, str] | None = None, airflow: str | None = None) -> None:
        self.airflow = airflow or _airflow_binary()
        self.home = Path(home).resolve()
        self.dags_folder = Path(dags_folder).resolve()
        self.port = port or free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.extra_env = dict(env or {})
        self.log_path = self.home / "standalone.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self._token: str | None = None

    # -- lifecycle -----------------------------------------------------------------------------------------------

    def environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(_STRIPPED_ENV) and k != "AIRFLOW_HOME"}
        venv_bin = str(Path(sys.executable).parent)
        env["PATH"] = venv_bin + os.pathsep + env.get("PATH", "")  # spark-submit and airflow of this venv
        env.update({
            "AIRFLOW_HOME": str(self.home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags_folder),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(self.port),
            "AIRFLOW__API__BASE_URL": self.base_url,  # also where task processes find the execution API
            "AIRFLOW__API__WORKERS": "1",
            "AIRFLOW__CORE__PARALLELISM": "4",  # LocalExecutor worker processes (default 32); Spark wants the cores
            MARKER_ENV: str(self.home),  # how processes() finds them, whatever group they moved to
            "NO_COLOR": "1",
            "PYTHONUNBUFFERED": "1",
        })
        env.update(self.extra_env)
        return env

    def start(self) -> "StandaloneAirflow":
        """Start ``airflow standalone`` in a new session (its own process group), output to ``standalone.log``."""
        if self._proc is not None:
            raise AirflowApiError("this standalone Airflow is already started")
        self.home.mkdir(parents=True, exist_ok=True)
        cmd = [self.airflow, "standalone"]
        with open(self.log_path, "ab") as log:
            try:
                self._proc = subprocess.Popen(cmd, cwd=self.home, env=self.environment(), stdin=subprocess.DEVNULL,
                                              stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            except OSError as e:
                raise AirflowApiError(f"cannot start {' '.join(cmd)}: {e} (is apache-airflow installed?)") from None
        return self

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _check_alive(self) -> None:
        if self._proc is not None and self._proc.poll() is not None:
            raise AirflowApiError(f"airflow standalone exited with code {self._proc.returncode}; log tail:\n"
                                  + self.log_tail(40))

    def wait_until_ready(self, timeout_s: float = 240.0) -> dict[str, Any]:
        """Poll ``/api/v2/monitor/health`` until the database, scheduler, dag-processor and triggerer are healthy."""
        deadline = time.monotonic() + timeout_s
        last: Any = "no answer yet"
        while time.monotonic() < deadline:
            self._check_alive()
            try:
                health = self._call("GET", "/api/v2/monitor/health", auth=False)
                parts = [health.get(k) or {} for k in ("metadatabase", "scheduler", "triggerer", "dag_processor")]
                if all(p.get("status") == "healthy" for p in parts):
                    return health
                last = health
            except (AirflowApiError, OSError) as e:
                last = e
            time.sleep(1.0)
        raise AirflowApiError(f"airflow standalone not healthy after {timeout_s:g} s (last: {last}); log tail:\n"
                              + self.log_tail(40))

    def stop(self, timeout_s: float = 45.0) -> list[str]:
        """Stop every component: SIGTERM to the whole group (each component shuts down gracefully on it), SIGKILL
        to the group if that takes longer than ``timeout_s``, then kill whatever process this standalone started is
        still alive (e.g. a Spark job, which runs in a group of its own). Returns those stragglers
        (``pid cmdline``): empty when stopping the group was enough."""
        proc, self._proc = self._proc, None
        if proc is not None:
            pgid = proc.pid  # the session leader's pid is the group id
            for sig, wait_s in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 10.0)):
                if not _signal_group(pgid, sig) or _wait_group_gone(proc, pgid, wait_s):
                    break
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        stragglers = []
        for pid in self.processes():
            stragglers.append(f"{pid} {_cmdline(pid)}")
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 10
        while self.processes() and time.monotonic() < deadline:
            time.sleep(0.2)
        return stragglers

    def processes(self) -> list[int]:
        """Live processes started by this standalone: every component, task and Spark job carries the marker
        variable in its environment (the calling process does not, even when it shares ``AIRFLOW_HOME``)."""
        return processes_with_env(MARKER_ENV, str(self.home))

    def __enter__(self) -> "StandaloneAirflow":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- REST API ------------------------------------------------------------------------------------------------

    def login(self) -> str:
        """A JWT for the generated ``admin`` password (``POST /auth/token``)."""
        path = self.home / PASSWORDS_FILE
        try:
            passwords = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise AirflowApiError(f"cannot read the generated admin password in {path}: {e}") from None
        user = "admin" if "admin" in passwords else next(iter(passwords))
        answer = self._call("POST", "/auth/token", {"username": user, "password": passwords[user]}, auth=False)
        self._token = answer["access_token"]
        return self._token

    def api(self, method: str, path: str, body: Any = None, *, params: Mapping[str, Any] | None = None) -> Any:
        """Call the REST API (logging in first if needed) and return the decoded JSON answer."""
        if self._token is None:
            self.login()
        if params:
            path += "?" + urllib.parse.urlencode(params, doseq=True)
        return self._call(method, path, body, auth=True)

    def _call(self, method: str, path: str, body: Any = None, *, auth: bool) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base_url + path, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if auth and self._token:
            req.add_header("Authorization", f"Bearer {self._token}")
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as e:
            detail = e.read().decode(errors="replace")[:2000]
            raise AirflowApiError(f"{method} {path}: HTTP {e.code}: {detail}", status=e.code) from None
        except (urllib.error.URLError, OSError) as e:
            raise AirflowApiError(f"{method} {path}: {getattr(e, 'reason', e)}") from None
        return json.loads(raw) if raw else None

    def import_errors(self) -> list[dict[str, Any]]:
        return self.api("GET", "/api/v2/importErrors", params={"limit": 100})["import_errors"]

    def wait_for_dags(self, dag_ids: Iterable[str], timeout_s: float = 180.0) -> None:
        """Wait until the dag-processor has parsed every DAG; an import error fails at once, naming the file."""
        wanted = set(dag_ids)
        deadline = time.monotonic() + timeout_s
        while True:
            self._check_alive()
            errors = self.import_errors()
            if errors:
                text = "\n".join(f"{e.get('filename')}: {e.get('stack_trace')}" for e in errors)
                raise AirflowApiError(f"the DAG folder {self.dags_folder} has import errors:\n{text}")
            found = {d["dag_id"] for d in self.api("GET", "/api/v2/dags", params={"limit": 1000})["dags"]}
            if wanted <= found:
                return
            if time.monotonic() > deadline:
                raise AirflowApiError(f"DAGs {sorted(wanted - found)} not parsed after {timeout_s:g} s "
                                      f"(found {sorted(found)})")
            time.sleep(1.0)

    def unpause(self, dag_id: str) -> None:
        self.api("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": False})

    def trigger(self, dag_id: str, conf: Mapping[str, Any] | None = None) -> str:
        """Start a manual run now; returns its run id."""
        run = self.api("POST", f"/api/v2/dags/{dag_id}/dagRuns", {"logical_date": None, "conf": dict(conf or {})})
        return run["dag_run_id"]

    def runs(self, dag_id: str) -> list[dict[str, Any]]:
        """The DAG's runs, oldest first."""
        answer = self.api("GET", f"/api/v2/dags/{dag_id}/dagRuns", params={"limit": 100, "order_by": "id"})
        return answer["dag_runs"]

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        path = f"/api/v2/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id, safe='')}/taskInstances"
        return self.api("GET", path, params={"limit": 100})["task_instances"]

    def run(self, dag_id: str, run_id: str) -> DagRun:
        path = f"/api/v2/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id, safe='')}"
        r = self.api("GET", path)
        tasks = self.task_instances(dag_id, run_id) if r["state"] in TERMINAL else []
        return DagRun(dag_id, run_id, r["state"], r.get("run_type", ""),
                      {t["task_id"]: t["state"] for t in tasks}, {t["task_id"]: t["try_number"] for t in tasks},
                      _seconds_between(r.get("start_date"), r.get("end_date")))

    def upstream_asset_events(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        path = f"/api/v2/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id, safe='')}/upstreamAssetEvents"
        return self.api("GET", path)["asset_events"]

    def asset_events(self, **filters: Any) -> list[dict[str, Any]]:
        return self.api("GET", "/api/v2/assets/events", params={"limit": 100, **filters})["asset_events"]

    def queued_asset_events(self, dag_id: str) -> list[dict[str, Any]]:
        try:
            return self.api("GET", f"/api/v2/dags/{dag_id}/assets/queuedEvents")["queued_events"]
        except AirflowApiError as e:
            if e.status == 404:  # nothing queued
                return []
            raise

    def wait_for_run(self, dag_id: str, run_id: str, timeout_s: float = 300.0) -> DagRun:
        """Wait until a run succeeded or failed."""
        return self._wait(lambda: self._finished(self.run(dag_id, run_id)), timeout_s, f"run {run_id} of {dag_id}")

    def wait_for_first_run(self, dag_id: str, timeout_s: float = 300.0,
                           accept: Callable[[dict[str, Any]], bool] = lambda r: True) -> DagRun:
        """Wait for a run (the first that ``accept`` takes, e.g. one started by an asset event) and its end."""

        def first() -> DagRun | None:
            for r in self.runs(dag_id):
                if accept(r):
                    return self._finished(self.run(dag_id, r["dag_run_id"]))
            return None

        return self._wait(first, timeout_s, f"a run of {dag_id}")

    def wait_until_settled(self, dag_ids: list[str], timeout_s: float = 600.0) -> None:
        """Wait until none of the DAGs has a queued asset event or a queued or running run.

        Give asset-scheduled DAGs in dependency order: an upstream DAG found idle cannot emit new events later, and
        the queued events are read before the runs (the scheduler turns queued events into a run atomically).
        """

        def settled() -> bool | None:
            for dag_id in dag_ids:
                if self.queued_asset_events(dag_id):
                    return None
                if any(r["state"] in ACTIVE for r in self.runs(dag_id)):
                    return None
            return True

        self._wait(settled, timeout_s, f"the runs of {', '.join(dag_ids)} to settle")

    @staticmethod
    def _finished(run: DagRun) -> DagRun | None:
        return run if run.state in TERMINAL else None

    def _wait(self, probe: Callable[[], Any], timeout_s: float, what: str, poll_s: float = 0.5) -> Any:
        deadline = time.monotonic() + timeout_s
        while True:
            self._check_alive()
            result = probe()
            if result:
                return result
            if time.monotonic() > deadline:
                raise AirflowApiError(f"timed out after {timeout_s:g} s waiting for {what}")
            time.sleep(poll_s)

    # -- what to show when something went wrong -------------------------------------------------------------------

    def log_tail(self, lines: int = 60) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return "".join(deque(f, maxlen=lines))
        except OSError:
            return "(no standalone log)"

    def task_log(self, dag_id: str, run_id: str, task_id: str) -> str:
        """Every attempt of one task, with the logs of the triggers it deferred to, as text."""
        folder = self.home / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}" / f"task_id={task_id}"
        parts = []
        for path in sorted(folder.glob("attempt=*.log*")):
            lines = path.read_text(errors="replace").splitlines()
            parts.append(f"----- {path.name} -----\n" + "\n".join(_render_log_line(line) for line in lines))
        return "\n".join(parts)

    def task_logs(self, *, only_failed: bool = True, lines: int = 40) -> str:
        """The tails of the task logs under ``$AIRFLOW_HOME/logs`` (by default those holding an error)."""
        out = []
        for path in sorted((self.home / "logs").glob("dag_id=*/run_id=*/task_id=*/attempt=*.log")):
            rendered = [_render_log_line(line) for line in path.read_text(errors="replace").splitlines()]
            if only_failed and not any(r.startswith(("ERROR", "CRITICAL")) for r in rendered):
                continue
            rel = path.relative_to(self.home / "logs")
            out.append(f"----- {rel} -----\n" + "\n".join(rendered[-lines:]))
        return "\n".join(out) if out else "(no failed task logs)"

    def failure_report(self) -> str:
        return (f"===== airflow standalone log ({self.log_path}), tail =====\n{self.log_tail()}\n"
                f"===== failed task logs =====\n{self.task_logs()}")


def _seconds_between(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    return (_timestamp(end) - _timestamp(start)).total_seconds()


def _timestamp(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))  # Python 3.10 does not read "Z"


def processes_with_env(name: str, value: str) -> list[int]:
    """Live processes (not zombies) whose environment has ``name=value``, the calling process excluded. Read from
    ``/proc``: on systems without it (macOS) this finds nothing."""
    marker = f"{name}={value}".encode()
    found: list[int] = []
    proc = Path("/proc")
    if not proc.is_dir():
        return found
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z" and marker in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


def _signal_group(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
        return True
    except ProcessLookupError:
        return False


def _wait_group_gone(proc: subprocess.Popen[bytes], pgid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        proc.poll()  # reap the leader, or it stays a zombie member of the group
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    return False


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:200]
    except OSError:
        return "?"


def _render_log_line(line: str) -> str:
    """Airflow 3 task logs are JSON lines; show them as ``LEVEL event`` (plus the exception, if any)."""
    try:
        rec = json.loads(line)
    except ValueError:
        return line
    if not isinstance(rec, dict):
        return line
    text = f"{str(rec.get('level', '')).upper()} {rec.get('event', '')}"
    for err in rec.get("error_detail") or []:
        if isinstance(err, dict):
            frames = err.get("frames") or []
            where = frames[-1] if frames else {}
            text += (f"\n    {err.get('exc_type')}: {err.get('exc_value')}"
                     f" ({where.get('filename')}:{where.get('lineno')})")
    return text
