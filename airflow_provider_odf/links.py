"""The operators' extra link to their dataset's page in the ODF view of the Airflow UI (the ``/odf`` plugin app)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from airflow.sdk import BaseOperatorLink

if TYPE_CHECKING:
    from airflow.sdk.types import TaskInstanceKey

UI_PREFIX = "/odf"


def dataset_page(dataset: str, odf_conn_id: str, asset_namespace: str | None = None, base_url: str = "") -> str:
    """The URL of a dataset's page: ``<base_url>/odf/datasets/<name>?conn=<odf connection>[&ns=<namespace>]``."""
    query = {"conn": odf_conn_id}
    if asset_namespace and asset_namespace != odf_conn_id:
        query["ns"] = asset_namespace
    return f"{base_url.rstrip('/')}{UI_PREFIX}/datasets/{quote(dataset, safe='')}?{urlencode(query)}"


def _base_url() -> str:
    """``[api] base_url`` when set (the UI on another host), else a path on the UI's own server."""
    try:
        from airflow.sdk.configuration import conf

        return conf.get("api", "base_url", fallback="") or ""
    except Exception:  # noqa: BLE001 - an unreadable config must not lose the link
        return ""


class OdfDatasetLink(BaseOperatorLink):
    """Button "ODF dataset" on the task: the dataset's chain, schema, lineage and records."""

    name = "ODF dataset"

    def get_link(self, operator: Any, *, ti_key: "TaskInstanceKey") -> str:
        dataset = getattr(operator, "dataset", None)
        if not dataset:
            return ""
        return dataset_page(str(dataset), operator.odf_conn_id, getattr(operator, "asset_namespace", None),
                            _base_url())
