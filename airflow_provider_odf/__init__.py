"""Airflow provider for Open Data Fabric datasets: a thin layer over ``odf_core`` (the protocol library).

Registered through the ``apache_airflow_provider`` entry point; Airflow reads :func:`get_provider_info` without
importing hooks or operators, so this module imports nothing heavy.
"""
from __future__ import annotations

__version__ = "0.1.0"

INTEGRATION = "Open Data Fabric"


def _modules(*names: str) -> list[dict]:
    return [{"integration-name": INTEGRATION, "python-modules": [f"airflow_provider_odf.{n}" for n in names]}]


def get_provider_info() -> dict:
    """Provider metadata in the shape of Airflow's ``provider_info.schema.json`` (validated in the tests)."""
    return {
        "package-name": "airflow-provider-odf",
        "name": INTEGRATION,
        "description": "Open Data Fabric (v0.34.1) datasets ingested and transformed with Apache Spark, "
        "orchestrated by Apache Airflow.",
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": INTEGRATION,
                "external-doc-url": "https://docs.kamu.dev/odf/",
                "tags": ["software"],
            }
        ],
        "hooks": _modules("hooks.odf"),
        "operators": _modules("operators.ingest", "operators.transform", "operators.repository"),
        "sensors": _modules("sensors.odf"),
        "triggers": _modules("triggers.odf"),
        "asset-uris": [
            {"schemes": ["odf"], "handler": "airflow_provider_odf.assets.normalize_odf_uri",
             "to_openlineage_converter": "airflow_provider_odf.lineage.naming.asset_to_openlineage"},
        ],
        "extra-links": ["airflow_provider_odf.links.OdfDatasetLink"],
        "connection-types": [
            {
                "connection-type": "odf",
                "hook-class-name": "airflow_provider_odf.hooks.odf.OdfHook",
                "hook-name": "Open Data Fabric workspace",
                "conn-fields": {
                    "workspace": {
                        "label": "Workspace URL",
                        "description": "Local path (/data/odf/.odf) or object-store URL (s3://bucket/prefix) "
                        "of the ODF workspace.",
                        "schema": {"type": "string", "minLength": 1},
                    },
                    "spark_conn_id": {
                        "label": "Spark connection id",
                        "description": "A 'spark' connection giving the master (local[*], spark://host:7077, "
                        "yarn, k8s://...). Empty: local[*].",
                        "schema": {"type": ["string", "null"]},
                    },
                    "engine_url": {
                        "label": "Engine URL",
                        "description": "A warm engine started with 'odf engine serve' (grpc://host:5544, "
                        "grpcs://host:5544 for TLS, unix:///path/engine.sock): every Spark step becomes a call to "
                        "it; the password is its token. Empty: one spark-submit job per step.",
                        "schema": {"type": ["string", "null"]},
                    },
                    "engine_ca": {
                        "label": "Engine CA file",
                        "description": "grpcs:// engines: a PEM file on the worker with the CA that signed the "
                        "engine's certificate. Empty: $ODF_ENGINE_CA_FILE, else the system's CAs.",
                        "schema": {"type": ["string", "null"]},
                    },
                    "engine_client_cert": {
                        "label": "Engine client certificate file",
                        "description": "An engine started with --tls-client-ca (mutual TLS): this worker's "
                        "certificate (PEM file). Empty: $ODF_ENGINE_CLIENT_CERT.",
                        "schema": {"type": ["string", "null"]},
                    },
                    "engine_client_key": {
                        "label": "Engine client key file",
                        "description": "The client certificate's private key (PEM file on the worker). Empty: "
                        "$ODF_ENGINE_CLIENT_KEY.",
                        "schema": {"type": ["string", "null"]},
                    },
                    "engine_options": {
                        "label": "Engine options (JSON)",
                        "description": 'Spark job options, e.g. {"conf": {"spark.executor.memory": "2g"}, '
                        '"timeout_s": 3600}.',
                        "schema": {"type": ["object", "null"], "format": "json"},
                    },
                    "aws_conn_id": {
                        "label": "AWS connection id",
                        "description": "An 'aws' connection with the S3 key id/secret (login/password) and extra "
                        "endpoint_url/region_name, for an s3:// workspace and s3:// repositories. Empty: the "
                        "worker's AWS_* variables.",
                        "schema": {"type": ["string", "null"]},
                    },
                    "storage_options": {
                        "label": "Storage options (JSON)",
                        "description": 'Non-secret fsspec options of the object store, e.g. '
                        '{"endpoint_url": "http://minio:9000"}.',
                        "schema": {"type": ["object", "null"], "format": "json"},
                    },
                },
                "ui-field-behaviour": {
                    "hidden-fields": ["host", "schema", "port", "extra"],
                    "relabeling": {"login": "Object store key id", "password": "Object store secret key"},
                    "placeholders": {
                        "login": "only for s3:// or az:// workspaces without an engine URL",
                        "password": "with an engine URL: the engine's token; else the s3:// or az:// secret",
                    },
                },
            }
        ],
    }
