"""The Airflow plugin of the ODF view: the ``/odf`` FastAPI app and its entry in the UI's navigation.

Registered through the ``airflow.plugins`` entry point. Loading it imports nothing but Airflow's plugin base: the
app itself (FastAPI routes, templates, odf_core) is built on its first request.
"""
from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from airflow_provider_odf.links import UI_PREFIX
from airflow_provider_odf.plugins.app_loader import LazyApp


class OdfUiPlugin(AirflowPlugin):
    name = "odf"
    fastapi_apps = [{"app": LazyApp(), "url_prefix": UI_PREFIX, "name": "Open Data Fabric datasets"}]
    external_views = [{
        "name": "ODF datasets",
        "href": f"{UI_PREFIX}/",
        "icon": f"{UI_PREFIX}/icon.svg",
        "url_route": "odf",
        "destination": "nav",
        "category": "browse",
    }]
