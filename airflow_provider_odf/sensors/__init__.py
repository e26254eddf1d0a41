"""ODF sensors."""
from airflow_provider_odf.sensors.odf import OdfDatasetSensor, OdfSourceSensor

__all__ = ["OdfSourceSensor", "OdfDatasetSensor"]
