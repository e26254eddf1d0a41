"""DAGs from a folder of DatasetSnapshot YAML files — a DAG file of two lines::

    from airflow_provider_odf.dag_factory import dags_from_folder
    dags_from_folder("datasets", globals())

Parsing only reads YAML and constructs DAG objects: no workspace, Spark, JVM or network (the dag-processor parses
this file every few seconds). Snapshots reach the workspace through the ``odf__sync`` DAG, never at parse time.

**Problems never hide unrelated DAGs.** A broken snapshot, a duplicate name, a missing input, a dependency cycle
or a bad per-dataset setting only drop the DAGs concerned. All problems are then reported as the *import error of
this DAG file* (file, property path, problem), while every other DAG still loads: the factory registers one
extra DAG object whose ``validate()`` raises the collected problems. Airflow's DagBag validates each DAG of a file
separately and records a failing one as the file's import error without discarding its siblings (unlike an
exception raised while the file executes, which discards every DAG of the file).
"""
from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any, Callable

from airflow.sdk import DAG, get_parsing_context

from airflow_provider_odf.dag_factory.build import START_DATE, Builder
from airflow_provider_odf.dag_factory.config import DagSettings, FolderSettings, load_settings
from airflow_provider_odf.dag_factory.plan import (
    ERRORS_DAG_ID,
    GRAPH_DAG_ID,
    SYNC_DAG_ID,
    DatasetPlan,
    FolderPlan,
    dag_id_of,
    plan_folder,
)
from airflow_provider_odf.errors import OdfDagDefinitionError

__all__ = ["dags_from_folder", "DagSettings", "FolderSettings", "FolderPlan", "DatasetPlan", "dag_id_of",
           "SYNC_DAG_ID", "GRAPH_DAG_ID", "ERRORS_DAG_ID", "CONFIG_FILE"]

CONFIG_FILE = "odf-dags.yaml"
log = logging.getLogger(__name__)


class DefinitionErrors(DAG):
    """Carrier of the folder's problems: never bagged, its validation failure becomes the file's import error."""

    odf_problems: list[str] = []

    def validate(self) -> None:
        raise OdfDagDefinitionError(
            f"{len(self.odf_problems)} problem(s) in the ODF DAG definitions (every other DAG of this file "
            "loaded):\n- " + "\n- ".join(self.odf_problems)
        )


def _errors_dag(problems: list[str]) -> DefinitionErrors:
    dag = DefinitionErrors(ERRORS_DAG_ID, schedule=None, start_date=START_DATE,
                           description="Never scheduled: reports ODF definition problems as an import error")
    dag.odf_problems = list(problems)
    return dag


def _base_dir(namespace: dict[str, Any]) -> Path:
    file = namespace.get("__file__")
    return Path(file).resolve().parent if file else Path.cwd()


def dags_from_folder(folder: str | os.PathLike[str], namespace: dict[str, Any] | None = None, *,
                     config: str | os.PathLike[str] | None = None) -> dict[str, DAG]:
    """Build the DAGs of a snapshot folder and register them in ``namespace`` (the DAG file's ``globals()``).

    :param folder: snapshot folder; relative paths are relative to the DAG file.
    :param namespace: where to register the DAGs (default: the caller's globals).
    :param config: sidecar settings file; default ``odf-dags.yaml`` next to the DAG file, if there is one.
    :return: the DAGs by id (without the problem carrier).
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
    problems = [*plan.errors, *settings.dataset_errors.values()]
    for key in settings.datasets:
        if key not in plan.seen:
            problems.append(f"{settings.file}: datasets.{key}: no DatasetSnapshot of this name in {root}")

    wanted = get_parsing_context().dag_id  # set when a worker runs one task: build only that DAG
    builder = Builder(settings, str(root))
    dags: dict[str, DAG] = {}

    def build(dag_id: str, where: str, make: Callable[[], DAG]) -> None:
        if wanted and wanted != dag_id:
            return
        try:
            dag = make()
            dag.validate()  # what the DagBag would do; failing here keeps the message ours and complete
            dags[dag_id] = dag
        except Exception as e:
            problems.append(f"{where}: cannot build DAG '{dag_id}': {type(e).__name__}: {e}")

    if not settings.whole_graph:
        build(SYNC_DAG_ID, str(settings.file or root), builder.sync_dag)
    graph: list[DatasetPlan] = []
    for d in plan.datasets:
        if d.key in settings.dataset_errors:
            continue
        if settings.whole_graph and not d.manual:
            graph.append(d)
            continue
        build(d.dag_id, f"{d.file}: dataset '{d.name}'", lambda d=d: builder.dataset_dag(d))
    if settings.whole_graph:
        build(GRAPH_DAG_ID, str(settings.file or root), lambda: builder.graph_dag(graph))

    namespace.update(dags)
    if problems and not wanted:
        for p in problems:
            log.error("ODF DAG definition problem: %s", p)
        namespace[ERRORS_DAG_ID] = _errors_dag(problems)
    return dags
