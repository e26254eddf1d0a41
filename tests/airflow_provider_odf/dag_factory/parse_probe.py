"""Run as a script: parse one DAG file with DagBag like a fresh dag-processor child and report, as JSON, how long it
took, what it produced and every side effect the parse must not have (audit hooks see them all)."""
from __future__ import annotations

import json
import os
import sys
import time


LAZY_MODULES = {"airflow_provider_odf.lineage.openlineage", "airflow_provider_odf.lineage.facets",
                "airflow_provider_odf.lineage.provenance", "airflow_provider_odf.plugins.app",
                "airflow_provider_odf.plugins.views", "airflow_provider_odf.plugins.graph_svg"}


def main(dag_file: str, workspace: str) -> None:
    from airflow.dag_processing.dagbag import DagBag  # Airflow itself is loaded before parsing, as in the processor

    seen: list[str] = []
    forbidden_events = {"socket.connect", "socket.getaddrinfo", "subprocess.Popen", "os.system", "os.exec",
                        "os.posix_spawn", "os.fork"}

    def audit(event: str, args: tuple) -> None:
        if event in forbidden_events:
            seen.append(f"{event} {args!r:.200}")
        elif event in ("open", "os.listdir", "os.scandir", "os.mkdir") and args:
            target = args[0]
            if isinstance(target, (str, bytes, os.PathLike)) and os.fsdecode(target).startswith(workspace):
                seen.append(f"{event} {os.fsdecode(target)}")

    sys.addaudithook(audit)
    t0 = time.perf_counter()
    bag = DagBag(dag_folder=dag_file)
    seconds = time.perf_counter() - t0
    print(json.dumps({
        "seconds": seconds,
        "dags": len(bag.dags),
        "tasks": sum(len(d.tasks) for d in bag.dags.values()),
        "import_errors": bag.import_errors,
        "side_effects": seen,
        "spark_modules": sorted(m for m in sys.modules if m.split(".")[0] in ("pyspark", "py4j")),
        # lineage and the UI are imported when OpenLineage asks or the api-server serves /odf, never by a parse
        "lineage_modules": sorted(m for m in sys.modules if m in LAZY_MODULES),
    }))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
