"""Helpers to run ODF DAG folders in a real Airflow: a local file server standing in for a data publisher and a
driver for ``airflow standalone`` through its REST API. Used by the demo, the end-to-end tests and the benchmarks;
stdlib only."""
from dags_examples.demo_support.http_source import FileServer
from dags_examples.demo_support.standalone import (
    AirflowApiError,
    DagRun,
    StandaloneAirflow,
    free_port,
    processes_with_env,
)

__all__ = ["FileServer", "StandaloneAirflow", "DagRun", "AirflowApiError", "free_port", "processes_with_env"]
