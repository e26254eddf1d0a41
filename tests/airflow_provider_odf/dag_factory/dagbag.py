"""Loading DAG files the way Airflow's dag-processor does (DagBag, then serialization)."""
from __future__ import annotations

from pathlib import Path


def load(path: Path):
    """A DagBag of one DAG file (or folder); every bagged DAG must also serialize, as the dag-processor does."""
    from airflow.dag_processing.dagbag import DagBag
    from airflow.serialization.serialized_objects import DagSerialization

    bag = DagBag(dag_folder=str(path), bundle_path=path if path.is_dir() else path.parent)
    for dag in bag.dags.values():
        DagSerialization.to_dict(dag)
    return bag


def edges(dag) -> set[tuple[str, str]]:
    return {(t.task_id, d) for t in dag.tasks for d in t.downstream_task_ids}


def asset_uris(condition) -> set[str]:
    return {a.uri for a in condition.objects}


def write_dag_file(folder: Path, body: str = 'dags_from_folder("datasets", globals())') -> Path:
    f = folder / "odf_dags.py"
    f.write_text(f"from airflow_provider_odf.dag_factory import dags_from_folder\n{body}\n", encoding="utf-8")
    return f
