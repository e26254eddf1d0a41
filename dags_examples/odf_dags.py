"""The example datasets of ``datasets/`` as Airflow DAGs; Airflow settings live in ``odf-dags.yaml`` next to it."""
from airflow_provider_odf.dag_factory import dags_from_folder

dags_from_folder("datasets", globals())
