"""Import what an ODF task needs before Airflow forks its task processes.

Airflow's LocalExecutor (and Celery's prefork workers) run each task in a process forked from a long-lived worker,
which re-parses the DAG file and imports the provider and ``odf_core`` first: about 0.3-0.8 s per task on a small
machine, longer than many ODF steps take on a warm engine. Importing this module from ``airflow_local_settings.py``
(which Airflow imports in the scheduler and workers before they fork) makes every task start with them loaded::

    # $AIRFLOW_HOME/config/airflow_local_settings.py
    import airflow_provider_odf.preload  # noqa: F401

Only modules are imported: no connection, thread, Spark session or gRPC channel exists before the fork (gRPC is left
out on purpose: its core must not be initialised in a process that forks).
"""
from __future__ import annotations

import importlib

MODULES = (
    "airflow_provider_odf.dag_factory",
    "airflow_provider_odf.hooks.odf",
    "airflow_provider_odf.operators.ingest",
    "airflow_provider_odf.operators.transform",
    "airflow_provider_odf.operators.repository",
    "airflow_provider_odf.sensors.odf",
    "odf_core.workspace",
    "odf_core.snapshots",
    "odf_core.ingest.transaction",
    "odf_core.transform.transaction",
    "odf_core.chain.integrity",
    "pyarrow.parquet",
)

for _name in MODULES:
    importlib.import_module(_name)
