"""Airflow provider for Open Data Fabric datasets."""


def get_provider_info() -> dict:
    return {
        "package-name": "airflow-provider-odf",
        "name": "Open Data Fabric",
        "description": "Open Data Fabric datasets ingested and transformed with Spark, orchestrated by Airflow.",
        "versions": ["0.1.0"],
    }
