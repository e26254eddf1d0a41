"""ODF operators (import from here or from the defining modules)."""
from airflow_provider_odf.operators.base import OdfBaseOperator, OdfCommittingOperator, txn_id
from airflow_provider_odf.operators.ingest import (
    OdfCommitOperator,
    OdfFetchOperator,
    OdfMergeOperator,
    OdfPrepareOperator,
    OdfPushIngestOperator,
    OdfReadOperator,
)
from airflow_provider_odf.operators.repository import OdfRepositorySyncOperator
from airflow_provider_odf.operators.transform import OdfSyncOperator, OdfTransformOperator, OdfVerifyOperator

__all__ = [
    "OdfBaseOperator", "OdfCommittingOperator", "txn_id",
    "OdfFetchOperator", "OdfPrepareOperator", "OdfReadOperator", "OdfMergeOperator", "OdfCommitOperator",
    "OdfPushIngestOperator", "OdfTransformOperator", "OdfVerifyOperator", "OdfSyncOperator",
    "OdfRepositorySyncOperator",
]
