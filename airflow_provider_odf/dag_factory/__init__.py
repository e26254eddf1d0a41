"""DAGs from a folder of DatasetSnapshot YAML files — a DAG file of two lines::

    from airflow_provider_odf.dag_factory import dags_from_folder
    dags_from_folder("datasets", globals())

Parsing only reads YAML and constructs DAG objects: no workspace, Spark, JVM or network (the dag-processor parses
this file every few seconds). Snapshots reach the workspace through the ``odf__sync`` DAG, never at parse time.

**Problems never hide unrelated DAGs, and never disappear.** A broken snapshot, a duplicate name, a missing
input, a dependency cycle or a bad per-dataset setting only stop the DAGs concerned; every other DAG is built. No
such problem is raised out of this function: Airflow's dag-processor marks *every* DAG of a file that fails to
import as stale (no longer scheduled), whatever the error says. Each problem instead becomes a DAG whose only task
fails with it — ``odf__<dataset>`` when the dataset's name can be read, ``odf__definition_errors`` otherwise — and
an ``ERROR`` line in the parse log (see :mod:`.problems`). The one exception is a broken top level or ``defaults``
section of the sidecar ``odf-dags.yaml``: then no DAG of the folder can be trusted (which workspace? which
schedule?), and the file fails to import, like a syntax error in the DAG file itself.
"""
from __future__ import annotations

import logging
import os
import sys
from functools import partial
from pathlib import Path
from typing import Any, Callable

from airflow.sdk import DAG, get_parsing_context

from airflow_provider_odf.dag_factory.build import Builder
from airflow_provider_odf.dag_factory.config import DagSettings, FolderSettings, load_settings
from airflow_provider_odf.dag_factory.plan import (
    ERRORS_DAG_ID,
    GRAPH_DAG_ID,
    SYNC_DAG_ID,
    DatasetPlan,
    FolderPlan,
    Problem,
    dag_id_of,
    plan_folder,
)
from airflow_provider_odf.dag_factory.problems import problem_dag

__all__ = ["dags_from_folder", "DagSettings", "FolderSettings", "FolderPlan", "DatasetPlan", "Problem", "dag_id_of",
           "SYNC_DAG_ID", "GRAPH_DAG_ID", "ERRORS_DAG_ID", "CONFIG_FILE"]

CONFIG_FILE = "odf-dags.yaml"
log = logging.getLogger(__name__)


def _base_dir(namespace: dict[str, Any]) -> Path:
    file = namespace.get("__file__")
    return Path(file).resolve().parent if file else Path.cwd()


def dags_from_folder(folder: str | os.PathLike[str], namespace: dict[str, Any] | None = None, *,
                     config: str | os.PathLike[str] | None = None) -> dict[str, DAG]:
    """Build the DAGs of a snapshot folder and register them in ``namespace`` (the DAG file's ``globals()``).

    :param folder: snapshot folder; relative paths are relative to the DAG file.
    :param namespace: where to register the DAGs (default: the caller's globals).
    :param config: sidecar settings file; default ``odf-dags.yaml`` next to the DAG file, if there is one.
    :return: the DAGs by id, the problem DAGs included.
    """
    if namespace is None:
        namespace = sys._getframe(1).f_globals
    base = _base_dir(namespace)
    root = (base / folder).resolve()
    if config is None:
        config_path = base / CONFIG_FILE if (base / CONFIG_FILE).is_file() else None
    else:
        config_path = base / config  # an explicit file that is missing is an error of load_settings
    settings = load_settings(config_path)
    plan = plan_folder(root)
    problems = list(plan.problems)
    for key, message in settings.dataset_errors.items():
        problems.append(Problem(message, plan.seen.get(key)))
    for key in settings.datasets:
        if key not in plan.seen:
            problems.append(Problem(f"{settings.file}: datasets.{key}: no DatasetSnapshot of this name in {root}"))

    wanted = get_parsing_context().dag_id  # set when a worker runs one task: build only that DAG
    builder = Builder(settings, str(root))
    dags: dict[str, DAG] = {}

    def build(dag_id: str, dataset: str | None, where: str, make: Callable[[], DAG]) -> None:
        if wanted and wanted != dag_id:
            return
        try:
            dag = make()
            dag.validate()  # what the DagBag would do; failing here keeps the message ours and complete
            dags[dag_id] = dag
        except Exception as e:  # noqa: BLE001 - any failure becomes this DAG's problem DAG
            problems.append(Problem(f"{where}: cannot build DAG '{dag_id}': {type(e).__name__}: {e}", dataset))

    if not settings.whole_graph:
        build(SYNC_DAG_ID, None, str(settings.file or root), builder.sync_dag)
    graph: list[DatasetPlan] = []
    for d in plan.datasets:
        if d.key in settings.dataset_errors:
            continue
        if settings.whole_graph and not d.manual:
            graph.append(d)
            continue
        build(d.dag_id, d.name, f"{d.file}: dataset '{d.name}'", partial(builder.dataset_dag, d))
    if settings.whole_graph:
        build(GRAPH_DAG_ID, None, str(settings.file or root), lambda: builder.graph_dag(graph))

    if not wanted:
        for p in problems:
            log.error("ODF DAG definition problem: %s", p.message)
    dags.update(_problem_dags(problems, settings, str(root), wanted))
    namespace.update(dags)
    return dags


def _problem_dags(problems: list[Problem], settings: FolderSettings, folder: str, wanted: str | None
                  ) -> dict[str, DAG]:
    """One failing DAG per dataset with problems, one for the folder's other problems (see :mod:`.problems`)."""
    by_dag: dict[str, list[str]] = {}
    for p in problems:
        by_dag.setdefault(p.dag_id, [])
        if p.message not in by_dag[p.dag_id]:
            by_dag[p.dag_id].append(p.message)
    schedule = settings.defaults.schedule if settings.whole_graph else settings.sync_schedule
    return {dag_id: problem_dag(dag_id, messages, schedule=schedule, owner=settings.defaults.owner, folder=folder)
            for dag_id, messages in by_dag.items() if not wanted or wanted == dag_id}
