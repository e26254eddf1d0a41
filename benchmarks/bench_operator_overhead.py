"""Ingest through the Airflow operators (``dag.test()`` of a generated root DAG) vs ``odf pull`` on the same data.

Run: ``.venv/bin/python benchmarks/bench_operator_overhead.py [ROWS]``; writes the ``### operators vs odf pull``
subsection of ``## bench_airflow`` in ``benchmarks/RESULTS.md``. Both sides start from a fresh workspace holding the
same snapshot (a FilesGlob CSV source, Append) and ingest the same file; each side runs in a fresh process so both
pay their JVM starts: ``odf pull`` one in-process Spark session, the DAG one ``spark-submit`` per Spark task (read,
merge) plus Airflow's task bookkeeping on SQLite. Medians of 3 alternating runs.

``--engine [ROWS]`` (default 10 rows): the same two ways on one warm engine (``odf engine serve``, started first and
warmed up): the DAG's tasks call it through the connection's ``engine_url``, ``odf pull --engine`` likewise; writes
``### operators vs odf pull on a warm engine`` (target: operators <= 1.2x pull).
"""
from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv

REPO = Path(__file__).resolve().parents[1]
RESULTS_FILE = Path(__file__).with_name("RESULTS.md")
VENV_BIN = Path(sys.executable).parent
REPETITIONS = 3
SNAPSHOT = """kind: DatasetSnapshot
version: 1
content:
  name: bench.events
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch: {kind: FilesGlob, path: "%s/events-*.csv"}
      read: {kind: Csv, header: true, schema: ["event_time TIMESTAMP", "id BIGINT", "category STRING", "value DOUBLE"]}
      merge: {kind: Append}
"""
SIDECAR = "defaults:\n  schedule: null\n  sync_schedule: null\n  retries: 0\n  sensor: none\n  verify: none\n"
DAG_FILE = 'from airflow_provider_odf.dag_factory import dags_from_folder\ndags_from_folder("datasets", globals())\n'
CHILD = r"""
import json, sys, time
from pathlib import Path
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder=sys.argv[1], bundle_path=Path(sys.argv[1]))
assert not bag.import_errors, bag.import_errors
bag.dags["odf__sync"].test()
t0 = time.perf_counter()
dr = bag.dags["odf__bench_events"].test()
elapsed = time.perf_counter() - t0
states = {ti.task_id: str(ti.state) for ti in dr.get_task_instances()}
print(json.dumps({"elapsed": elapsed, "state": str(dr.state), "tasks": states}))
"""


def make_csv(folder: Path, rows: int) -> Path:
    rng = np.random.default_rng(1)
    t = pa.table({
        "event_time": pa.array(np.datetime64("2024-01-01T00:00:00") + np.arange(rows).astype("timedelta64[s]")),
        "id": pa.array(np.arange(rows, dtype=np.int64)),
        "category": pa.array(rng.choice(["a", "b", "c", "d"], rows)),
        "value": pa.array(rng.random(rows)),
    })
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "events-0001.csv"
    pcsv.write_csv(t, path)
    return path


def via_pull(tmp: Path, src: Path, engine_url: str | None = None) -> float:
    ws = tmp / f"pull-{time.monotonic_ns()}" / ".odf"
    snap = ws.parent / "events.yaml"
    ws.parent.mkdir(parents=True)
    snap.write_text(SNAPSHOT % src)
    odf = str(VENV_BIN / "odf")
    subprocess.run([odf, "-w", str(ws), "init"], check=True, capture_output=True)
    subprocess.run([odf, "-w", str(ws), "add", str(snap)], check=True, capture_output=True)
    t0 = time.perf_counter()
    spark = ["--engine", engine_url] if engine_url else ["--master", "local[2]"]
    r = subprocess.run([odf, "-w", str(ws), "pull", "bench.events", *spark], capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    assert r.returncode == 0, r.stderr[-2000:]
    return elapsed


def via_dag(tmp: Path, src: Path, engine_url: str | None = None) -> float:
    run_dir = tmp / f"dag-{time.monotonic_ns()}"
    home, dags = run_dir / "airflow", run_dir / "airflow" / "dags"
    (dags / "datasets").mkdir(parents=True)
    (dags / "datasets" / "events.yaml").write_text(SNAPSHOT % src)
    (dags / "odf-dags.yaml").write_text(SIDECAR)
    (dags / "odf_dags.py").write_text(DAG_FILE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update({
        "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__DAGS_FOLDER": str(dags), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW_CONN_ODF_DEFAULT": json.dumps({"conn_type": "odf", "extra": {
            "workspace": str(run_dir / "ws"), "engine_options": {"conf": {"spark.sql.shuffle.partitions": "2"}},
            **({"engine_url": engine_url} if engine_url else {})}}),
        "PATH": f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}",
    })
    subprocess.run([str(VENV_BIN / "airflow"), "db", "migrate"], env=env, check=True, capture_output=True)
    r = subprocess.run([sys.executable, "-c", CHILD, str(dags)], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["state"] == "success", out
    return out["elapsed"]


def update_results(section_text: str) -> None:
    text = RESULTS_FILE.read_text() if RESULTS_FILE.exists() else "# Benchmark results\n"
    sub = section_text.split("\n", 1)[0]
    if "## bench_airflow" not in text:
        text += "\n## bench_airflow\n"
    pattern = re.compile(rf"{re.escape(sub)}\n.*?(?=\n### |\n## |\Z)", re.S)
    if pattern.search(text):
        text = pattern.sub(section_text.rstrip("\n"), text)
    else:
        head, _, tail = text.partition("## bench_airflow\n")
        nxt = tail.find("\n## ")
        body, rest = (tail, "") if nxt < 0 else (tail[:nxt + 1], tail[nxt + 1:])
        text = head + "## bench_airflow\n" + body.rstrip("\n") + "\n\n" + section_text.rstrip("\n") + "\n\n" + rest
    RESULTS_FILE.write_text(text)


def start_engine(tmp: Path) -> tuple[subprocess.Popen, str]:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    log = tmp / "engine.log"
    proc = subprocess.Popen([str(VENV_BIN / "odf"), "engine", "serve", "--port", str(port), "--master", "local[2]",
                             "--conf", "spark.sql.shuffle.partitions=2"], stdout=subprocess.DEVNULL,
                            stderr=log.open("w"))
    while "odf engine ready" not in log.read_text():
        if proc.poll() is not None:
            raise RuntimeError(log.read_text()[-2000:])
        time.sleep(0.2)
    return proc, f"grpc://127.0.0.1:{port}"


def main_engine(rows: int) -> int:
    with tempfile.TemporaryDirectory(prefix="odf-bench-ops-engine-") as tmp:
        tmp = Path(tmp)
        src = make_csv(tmp / "src", rows)
        proc, url = start_engine(tmp)
        try:
            via_pull(tmp, src.parent, url), via_dag(tmp, src.parent, url)  # warm-up: the engine's first requests
            pulls, dags = [], []
            for _ in range(REPETITIONS):
                pulls.append(via_pull(tmp, src.parent, url))
                dags.append(via_dag(tmp, src.parent, url))
                print(f"pull {pulls[-1]:.2f} s, DAG {dags[-1]:.2f} s", flush=True)
        finally:
            proc.terminate()
            proc.wait(60)
    p, d = statistics.median(pulls), statistics.median(dags)
    verdict = "yes" if d / p <= 1.2 else "**NO**"
    text = (f"### operators vs odf pull on a warm engine\n\nIngest of one {rows:,}-row CSV file into a fresh "
            "workspace, both through one warm engine (`odf engine serve`, warmed up first): `dag.test()` of the "
            "generated root DAG (fetch → prepare → read → merge → commit; read keeps its rows in the engine for "
            "merge), timed around `test()` in a process that has Airflow imported, vs the `odf pull --engine` "
            f"command (its own Python start included). Medians of {REPETITIONS} alternating runs. Machine: "
            f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}.\n\n"
            "| path | median | runs |\n|---|---|---|\n"
            f"| `odf pull --engine` | {p:.2f} s | {', '.join(f'{x:.2f}' for x in pulls)} |\n"
            f"| Airflow operators (`dag.test()`, `engine_url`) | {d:.2f} s | {', '.join(f'{x:.2f}' for x in dags)} |"
            f"\n\nRatio operators / pull: **{d / p:.2f}** (target <= 1.2: {verdict}).\n")
    update_results(text)
    print(text)
    return 0


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--engine":
        return main_engine(int(sys.argv[2]) if len(sys.argv) > 2 else 10)
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    with tempfile.TemporaryDirectory(prefix="odf-bench-ops-") as tmp:
        tmp = Path(tmp)
        src = make_csv(tmp / "src", rows)
        size_mb = src.stat().st_size / 1e6
        pulls, dags = [], []
        for _ in range(REPETITIONS):
            pulls.append(via_pull(tmp, src.parent))
            dags.append(via_dag(tmp, src.parent))
            print(f"pull {pulls[-1]:.1f} s, DAG {dags[-1]:.1f} s", flush=True)
    p, d = statistics.median(pulls), statistics.median(dags)
    text = (f"### operators vs odf pull\n\nIngest of one {rows:,}-row CSV file ({size_mb:.0f} MB) "
            f"into a fresh workspace: `dag.test()` of the generated root DAG (fetch → prepare → read → merge → commit;"
            f" two spark-submit JVMs) vs `odf pull` (one in-process Spark session), each in a fresh process, "
            f"medians of {REPETITIONS}. Machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}.\n\n"
            "| path | median | runs |\n|---|---|---|\n"
            f"| `odf pull` | {p:.1f} s | {', '.join(f'{x:.1f}' for x in pulls)} |\n"
            f"| Airflow operators (`dag.test()`) | {d:.1f} s | {', '.join(f'{x:.1f}' for x in dags)} |\n\n"
            f"Ratio operators / pull: **{d / p:.2f}** (report only: the DAG pays two spark-submit JVM starts, "
            "read and merge, where pull pays one in-process session, plus Airflow's per-task bookkeeping).\n")
    update_results(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
