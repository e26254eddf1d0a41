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

``--keep`` leaves Airflow running at the end (UI and REST API) until Ctrl-C.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
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


def show(datasets: list[DatasetPlan]) -> None:
    def cli(*argv: str) -> None:
        print(f"\n$ odf {' '.join(argv)}", flush=True)
        if odf(["--workspace", str(WORKSPACE), *argv]) != 0:
            raise OdfError(f"odf {' '.join(argv)} failed")

    cli("list")
    for d in datasets:
        if d.kind == "derivative":
            cli("tail", d.name, "-n", "10")
    for d in datasets:
        cli("verify", d.name)


def main(argv: list[str] | None = None) -> int:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--keep", action="store_true", help="leave Airflow running at the end until Ctrl-C")
    keep = args.parse_args(argv).keep
    say = Progress()
    plan = plan_folder(HERE / "datasets")
    if plan.errors:
        print("dags_examples/datasets has problems:\n" + "\n".join(plan.errors), file=sys.stderr)
        return 1
    shutil.rmtree(BUILD, ignore_errors=True)
    BUILD.mkdir(parents=True)
    say(f"fresh {BUILD.relative_to(HERE.parent)}: AIRFLOW_HOME={AIRFLOW_HOME.relative_to(HERE.parent)} (SQLite), "
        f"workspace {WORKSPACE.relative_to(HERE.parent)}")

    conn = {"conn_type": "odf", "extra": {"workspace": str(WORKSPACE), "engine_options": SPARK}}
    af = StandaloneAirflow(AIRFLOW_HOME, HERE, env={"AIRFLOW_CONN_ODF_DEFAULT": json.dumps(conn)})
    try:
        with FileServer(HERE / "data" / "http", port=HTTP_PORT) as server:
            say(f"serving {(HERE / 'data' / 'http').relative_to(HERE.parent)} on {server.url()}")
            af.start()
            say(f"starting airflow standalone on {af.base_url} (dags_folder {HERE.relative_to(HERE.parent)}, "
                f"log {af.log_path.relative_to(HERE.parent)})")
            af.wait_until_ready()
            af.wait_for_dags([SYNC_DAG_ID, *(d.dag_id for d in plan.datasets)])
            say(f"airflow is up: {len(plan.datasets) + 1} DAGs parsed, no import errors")
            run_graph(af, plan.datasets, say)
            show(plan.datasets)
            print()
            say("done: every dataset ingested or derived through Airflow and verified")
            if keep:
                say(f"Airflow keeps running at {af.base_url} (user admin, password in "
                    f"{AIRFLOW_HOME / 'simple_auth_manager_passwords.json.generated'}); Ctrl-C stops it")
                while af.running():
                    time.sleep(1.0)
        return 0
    except KeyboardInterrupt:
        return 130
    except OdfError as e:
        print(f"\ndemo failed: {e}\n\n{af.failure_report()}", file=sys.stderr)
        return 1
    finally:
        stragglers = af.stop()
        say("airflow stopped" + (f"; killed leftover processes: {stragglers}" if stragglers else ""))


if __name__ == "__main__":
    sys.exit(main())
