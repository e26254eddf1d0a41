"""ODF hooks."""
from airflow_provider_odf.hooks.odf import OdfHook

__all__ = ["OdfHook"]
