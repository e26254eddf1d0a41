"""What Airflow knows about a dataset: the DAGs whose tasks produce its Asset and its last verify task.

Read from the api-server's metadata DB. The verify task of a producer is an ``OdfVerifyOperator`` in the same DAG
and task group as the producing task (what the DAG factory builds, and the natural way to write it by hand).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from airflow_provider_odf.assets import asset_uri

log = logging.getLogger(__name__)
VERIFY_OPERATOR = "OdfVerifyOperator"


@dataclass(frozen=True)
class Producer:
    dag_id: str
    task_id: str


@dataclass(frozen=True)
class Verification:
    dag_id: str
    task_id: str
    run_id: str
    state: str
    end_date: str | None


@dataclass(frozen=True)
class AirflowInfo:
    producers: tuple[Producer, ...] = ()
    verification: Verification | None = None


def _group(task_id: str) -> str:
    return task_id.rpartition(".")[0]


def airflow_info(asset_namespace: str, datasets: list[str]) -> dict[str, AirflowInfo]:
    """Producers and the last finished verification of each dataset (empty when Airflow has none)."""
    try:
        return _query(asset_namespace, datasets)
    except Exception as e:  # noqa: BLE001 - the page still shows the workspace when the metadata DB is not reachable
        log.warning("ODF view: cannot read Airflow's metadata DB: %s", e)
        return {}


def _query(asset_namespace: str, datasets: list[str]) -> dict[str, AirflowInfo]:
    from sqlalchemy import select

    from airflow.models.asset import AssetModel, TaskOutletAssetReference
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    uris = {}
    for d in datasets:
        try:
            uris[asset_uri(asset_namespace, d)] = d
        except ValueError:
            continue
    out: dict[str, AirflowInfo] = {}
    with create_session() as session:
        rows = session.execute(
            select(AssetModel.uri, TaskOutletAssetReference.dag_id, TaskOutletAssetReference.task_id)
            .join(TaskOutletAssetReference, TaskOutletAssetReference.asset_id == AssetModel.id)
            .where(AssetModel.uri.in_(list(uris)))
            .order_by(TaskOutletAssetReference.dag_id, TaskOutletAssetReference.task_id)
        ).all()
        producers: dict[str, list[Producer]] = {}
        for uri, dag_id, task_id in rows:
            producers.setdefault(uris[uri], []).append(Producer(dag_id, task_id))
        for dataset, prods in producers.items():
            latest: tuple[str, str, str, str, datetime] | None = None
            for p in prods:
                ti = session.execute(
                    select(TaskInstance.dag_id, TaskInstance.task_id, TaskInstance.run_id, TaskInstance.state,
                           TaskInstance.end_date)
                    .where(TaskInstance.dag_id == p.dag_id, TaskInstance.operator == VERIFY_OPERATOR,
                           TaskInstance.state.in_(["success", "failed"]), TaskInstance.end_date.is_not(None))
                    .order_by(TaskInstance.end_date.desc())
                ).all()
                for dag_id, task_id, run_id, state, end in ti:
                    if _group(task_id) != _group(p.task_id):
                        continue
                    if end is not None and (latest is None or end > latest[4]):
                        latest = (dag_id, task_id, run_id, str(state), end)
                    break
            verification = None
            if latest is not None:
                verification = Verification(latest[0], latest[1], latest[2], latest[3].rsplit(".", 1)[-1].lower(),
                                            latest[4].isoformat(timespec="seconds"))
            out[dataset] = AirflowInfo(tuple(prods), verification)
    return out
