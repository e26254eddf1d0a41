"""The main job: the example dataset graph of ``dags_examples/`` run through a real Airflow, then shown and verified.

Run ``./dev demo`` (``python -m dags_examples.demo`` from the repository root). On the embedded default — a fresh
``build/demo/`` with ``AIRFLOW_HOME`` (SQLite) and the ODF workspace ``build/demo/.odf`` — it serves
``data/http/`` on http://127.0.0.1:8765 (the URL in ``datasets/cities.yaml``), starts ``airflow standalone`` with
``dags_folder`` = this folder and the ``odf_default`` connection, and drives it through the REST API:

1. ``odf__sync`` creates the workspace and the datasets of ``datasets/``;
2. the polling roots are unpaused and run for their latest schedule tick (catchup is off): cities over HTTP,
   trips from the daily files of ``data/trips/``;
3. the push root ``com.example.ratings`` is triggered once per file of ``data/ratings/`` with ``{"path": ...}``;
4. the derivatives run when the Asset events of their inputs wake them;
5. finally ``odf list``, ``odf tail`` of the derivatives and ``odf verify`` of every dataset (integrity, and for
   derivatives a replay of every transformation compared by logical hash).

Spark work goes to your own warm engine: the connection's ``engine_url`` is ``auto`` (``ODF_ENGINE_URL=auto`` for
commands), so the demo starts ``odf engine serve`` on a Unix socket only you can open (or reuses the one running),
every task and command of the demo sends its Spark steps there, and it keeps running afterwards for your own ``odf``
commands until 15 idle minutes have passed (``odf engine stop``; its log is in ``$ODF_LOG_DIR``, default
``~/.cache/odf/logs``). ``--spark-submit`` runs every Spark step as its own spark-submit job instead (what the
generated DAGs do when no engine is configured). ``--keep`` leaves Airflow (UI and REST API) running until Ctrl-C.
``--timings FILE`` writes the phases' and tasks' times as JSON (``benchmarks/bench_engine.py``).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BUILD = HERE.parent / "build" / "demo"
WORKSPACE = BUILD / ".odf"
AIRFLOW_HOME = BUILD / "airflow"
os.environ["AIRFLOW_HOME"] = str(AIRFLOW_HOME)  # before Airflow is imported: nothing of the demo lands in ~/airflow
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # Spark on this machine only (and no warning about it)

from airflow_provider_odf.dag_factory.plan import SYNC_DAG_ID, DatasetPlan, plan_folder  # noqa: E402
from dags_examples.demo_support import DagRun, FileServer, StandaloneAirflow  # noqa: E402
from odf_core.cli import main as odf  # noqa: E402
from odf_core.errors import OdfError  # noqa: E402
from odf_core.workspace import Workspace  # noqa: E402

HTTP_PORT = 8765  # fixed by the URL in datasets/cities.yaml
PUSHES = {"com.example.ratings": sorted((HERE / "data" / "ratings").glob("*.ndjson"))}
SPARK = {"conf": {"spark.sql.shuffle.partitions": "4"}}
RUN_TIMEOUT_S = 900.0  # a busy 2-core machine; a run normally takes well under a minute
FIRST_RUN_WAIT_S = 60.0


class Progress:
    """Concise lines with the seconds since the start."""

    def __init__(self) -> None:
        self.start = time.monotonic()

    def __call__(self, text: str) -> None:
        print(f"[{time.monotonic() - self.start:5.0f}s] {text}", flush=True)


def describe(af: StandaloneAirflow, run: DagRun) -> str:
    """``success in 42 s (fetch, ..., commit success); committed 5 record(s) at offsets 0..4``."""
    took = f" in {run.duration_s:.0f} s" if run.duration_s is not None else ""
    by_state: dict[str, list[str]] = {}
    for task, state in run.tasks.items():
        by_state.setdefault(state, []).append(task)
    tasks = "; ".join(f"{', '.join(t)} {s}" for s, t in by_state.items())
    text = f"{run.state}{took} ({tasks})"
    for event in af.asset_events(source_dag_id=run.dag_id, source_run_id=run.run_id):
        extra = event["extra"]
        offsets = extra.get("offsets") or [None, None]
        text += f"; committed {extra.get('records')} record(s) at offsets {offsets[0]}..{offsets[1]}"
    return text


def require(run: DagRun) -> DagRun:
    """A run that did not succeed stops the demo (with the failed task logs, see ``main``)."""
    if run.state != "success":
        raise OdfError(f"{run.dag_id} run {run.run_id} ended {run.state}: {run.tasks}")
    return run


def first_run(af: StandaloneAirflow, dag_id: str, say: Progress) -> DagRun:
    """The run the scheduler starts for the latest tick of a just-unpaused DAG (or a manual one if none comes)."""
    deadline = time.monotonic() + FIRST_RUN_WAIT_S
    while not af.runs(dag_id):
        if time.monotonic() > deadline:
            say(f"{dag_id}: no scheduled run after {FIRST_RUN_WAIT_S:.0f} s, triggering one")
            af.trigger(dag_id)
            break
        time.sleep(1.0)
    return require(af.wait_for_first_run(dag_id, RUN_TIMEOUT_S))


def run_graph(af: StandaloneAirflow, datasets: list[DatasetPlan], say: Progress) -> None:
    polling = [d for d in datasets if d.kind == "root" and not d.manual]
    pushed = [d for d in datasets if d.manual]
    derived = [d for d in datasets if d.kind == "derivative"]  # inputs before their users

    sync = af.trigger(SYNC_DAG_ID)
    af.unpause(SYNC_DAG_ID)
    say(f"{SYNC_DAG_ID}: {describe(af, require(af.wait_for_run(SYNC_DAG_ID, sync, RUN_TIMEOUT_S)))}")
    names = ", ".join(str(h.name) for h in Workspace.open(str(WORKSPACE)).list())
    say(f"workspace {WORKSPACE.relative_to(HERE.parent)} now holds {names}")

    for d in derived + pushed:
        af.unpause(d.dag_id)
    push_runs = []
    for d in pushed:
        for path in PUSHES.get(d.name, []):
            push_runs.append((d, path, af.trigger(d.dag_id, {"path": str(path)})))
            say(f"{d.dag_id}: triggered with {{\"path\": \"{path.relative_to(HERE.parent)}\"}}")
    for d in polling:
        af.unpause(d.dag_id)
    say(f"unpaused {', '.join(d.dag_id for d in polling)}: each runs for its latest schedule tick")

    for d in polling:
        say(f"{d.dag_id}: {describe(af, first_run(af, d.dag_id, say))}")
    for d, path, run_id in push_runs:
        run = require(af.wait_for_run(d.dag_id, run_id, RUN_TIMEOUT_S))
        say(f"{d.dag_id} ({path.name}): {describe(af, run)}")

    say(f"waiting for the derivatives woken by asset events: {', '.join(d.dag_id for d in derived)}")
    af.wait_until_settled([d.dag_id for d in derived], RUN_TIMEOUT_S)
    for d in derived:
        for r in af.runs(d.dag_id):
            run = require(af.run(d.dag_id, r["dag_run_id"]))
            woken_by = sorted({e["uri"].rsplit("/", 1)[-1] for e in af.upstream_asset_events(d.dag_id, run.run_id)})
            say(f"{d.dag_id} ({r['run_type']}, woken by {', '.join(woken_by) or '-'}): {describe(af, run)}")


class Engine:
    """Your own warm engine (``ODF_ENGINE_URL=auto``, :mod:`odf_core.engine.autostart`) for the demo's tasks and its
    ``odf`` commands: started in the background while Airflow starts, or reused when one runs, and left running at
    the end, as for any command of yours with ``auto`` (it stops after 15 idle minutes; ``odf engine stop``)."""

    url = "auto"

    def __init__(self, say: Progress) -> None:
        from odf_core.engine.autostart import AutoFiles, auto_version, running

        self.reused = running()
        self.log = AutoFiles.of(auto_version()).log
        self._offset = self.log.stat().st_size if self.log.exists() else 0  # this demo's part of the log
        if self.reused is not None:
            say(f"reusing your auto engine (pid {self.reused.pid}, log {self.log})")
        else:
            say("starting your auto engine (odf engine serve on a private Unix socket; ODF_ENGINE_URL=auto)")
        self.started = time.monotonic()
        self.start_s = 0.0
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._start, daemon=True)
        self._thread.start()

    def _start(self) -> None:
        from odf_core.engine.autostart import ensure_running

        try:
            ensure_running()
        except BaseException as e:  # noqa: BLE001 - reported by wait_ready, in the demo's thread
            self._error = e

    def wait_ready(self, say: Progress) -> None:
        """Spark starts while Airflow does: both are ready after the slower of the two."""
        self._thread.join(300)
        if self._thread.is_alive():
            raise OdfError(f"the auto engine did not start within 300 s (log {self.log})")
        if self._error is not None:
            raise OdfError(f"the auto engine did not start: {self._error}")
        self.start_s = 0.0 if self.reused is not None else time.monotonic() - self.started
        if self.reused is None:
            say(f"engine ready in {self.start_s:.0f} s (log {self.log})")

    def running(self) -> bool:
        from odf_core.engine.autostart import running

        return running() is not None

    def log_text(self) -> str:
        """What the engine logged since the demo started."""
        with self.log.open("rb") as f:
            f.seek(self._offset)
            return f.read().decode(errors="replace")


def task_times(af: StandaloneAirflow, datasets: list[DatasetPlan]) -> list[dict]:
    """Every task instance of the graph's DAG runs, with Airflow's own start, end and duration."""
    out = []
    for dag_id in [SYNC_DAG_ID, *(d.dag_id for d in datasets)]:
        for r in af.runs(dag_id):
            for ti in af.task_instances(dag_id, r["dag_run_id"]):
                out.append({"dag_id": dag_id, "task_id": ti["task_id"], "state": ti["state"],
                            "start": ti.get("start_date"), "end": ti.get("end_date"), "duration": ti.get("duration")})
    return out


def show(datasets: list[DatasetPlan], engine: "Engine | None") -> None:
    def cli(*argv: str) -> None:
        print(f"\n$ odf {' '.join(argv)}", flush=True)
        spark = ["--engine", engine.url] if engine and argv[0] in ("verify",) else []  # the same warm engine
        if odf(["--workspace", str(WORKSPACE), *argv, *spark]) != 0:
            raise OdfError(f"odf {' '.join(argv)} failed")

    cli("list")
    for d in datasets:
        if d.kind == "derivative":
            cli("tail", d.name, "-n", "10")
    for d in datasets:
        cli("verify", d.name)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", action="store_true", help="leave Airflow running at the end until Ctrl-C")
    ap.add_argument("--spark-submit", action="store_true",
                    help="one spark-submit job per Spark step instead of a warm engine")
    ap.add_argument("--timings", metavar="FILE", help="write the phases' and tasks' times as JSON")
    args = ap.parse_args(argv)
    keep = args.keep
    say = Progress()
    plan = plan_folder(HERE / "datasets")
    if plan.errors:
        print("dags_examples/datasets has problems:\n" + "\n".join(plan.errors), file=sys.stderr)
        return 1
    shutil.rmtree(BUILD, ignore_errors=True)
    BUILD.mkdir(parents=True)
    # the provider imported once in the scheduler, not in every task process (docs/install-airflow.md)
    (AIRFLOW_HOME / "config").mkdir(parents=True)
    (AIRFLOW_HOME / "config" / "airflow_local_settings.py").write_text("import airflow_provider_odf.preload  # noqa\n")
    say(f"fresh {BUILD.relative_to(HERE.parent)}: AIRFLOW_HOME={AIRFLOW_HOME.relative_to(HERE.parent)} (SQLite), "
        f"workspace {WORKSPACE.relative_to(HERE.parent)}")

    engine: Engine | None = None
    af: StandaloneAirflow | None = None
    timings: dict = {"mode": "spark-submit" if args.spark_submit else "engine"}
    try:
        if not args.spark_submit:
            engine = Engine(say)
        extra: dict = {"workspace": str(WORKSPACE)}
        if engine is not None:
            extra["engine_url"] = engine.url  # every task on this host shares your auto engine
        else:
            extra["engine_options"] = SPARK
        conn = {"conn_type": "odf", "extra": extra}
        af = StandaloneAirflow(AIRFLOW_HOME, HERE, env={"AIRFLOW_CONN_ODF_DEFAULT": json.dumps(conn)})
        with FileServer(HERE / "data" / "http", port=HTTP_PORT) as server:
            say(f"serving {(HERE / 'data' / 'http').relative_to(HERE.parent)} on {server.url()}")
            af.start()
            say(f"starting airflow standalone on {af.base_url} (dags_folder {HERE.relative_to(HERE.parent)}, "
                f"log {af.log_path.relative_to(HERE.parent)})")
            af.wait_until_ready()
            if engine is not None:
                engine.wait_ready(say)
                timings["engine_start_s"] = engine.start_s
            af.wait_for_dags([SYNC_DAG_ID, *(d.dag_id for d in plan.datasets)])
            say(f"airflow is up: {len(plan.datasets) + 1} DAGs parsed, no import errors")
            t0 = time.monotonic()
            run_graph(af, plan.datasets, say)
            timings["graph_s"] = time.monotonic() - t0
            timings["tasks"] = task_times(af, plan.datasets)
            show(plan.datasets, engine)
            print()
            say("done: every dataset ingested or derived through Airflow and verified")
            if args.timings:
                if engine is not None:
                    timings["engine_log"] = engine.log_text()
                Path(args.timings).write_text(json.dumps(timings, indent=2))
            if keep:
                say(keep_message(af.base_url, admin_password()))
                while af.running():
                    time.sleep(1.0)
        return 0
    except KeyboardInterrupt:
        return 130
    except OdfError as e:
        print(f"\ndemo failed: {e}\n\n{af.failure_report() if af else ''}", file=sys.stderr)
        return 1
    finally:
        if af is not None:
            stragglers = af.stop()
            say("airflow stopped" + (f"; killed leftover processes: {stragglers}" if stragglers else ""))
        if engine is not None and engine.running():
            say("your auto engine keeps running for your odf commands (export ODF_ENGINE_URL=auto); it stops after "
                "15 idle minutes, or now with: ./dev odf engine stop")


def keep_message(base_url: str, password: str) -> str:
    """What ``--keep`` tells the user: where the UI is and how to log in."""
    return f"Airflow keeps running: UI {base_url}, user admin, password {password}; Ctrl-C stops it"


def admin_password() -> str:
    """The password ``airflow standalone`` generated for the user admin (shown for ``--keep``)."""
    try:
        return json.loads((AIRFLOW_HOME / "simple_auth_manager_passwords.json.generated").read_text())["admin"]
    except (OSError, ValueError, KeyError):
        return f"(see {AIRFLOW_HOME / 'simple_auth_manager_passwords.json.generated'})"


if __name__ == "__main__":
    sys.exit(main())
