"""Triggers of the deferrable ODF sensors."""
from airflow_provider_odf.triggers.odf import OdfDatasetTrigger, OdfSourceTrigger

__all__ = ["OdfSourceTrigger", "OdfDatasetTrigger"]
