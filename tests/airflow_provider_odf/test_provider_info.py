"""Provider registration: the metadata fits Airflow's schemas and Airflow actually discovers the provider."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

import airflow
from airflow_provider_odf import get_provider_info

AIRFLOW_DIR = Path(airflow.__file__).parent


def _schema(name: str) -> dict:
    return json.loads((AIRFLOW_DIR / name).read_text())


def test_provider_info_matches_runtime_schema():
    """What ProvidersManager validates every provider against at discovery."""
    jsonschema.validate(get_provider_info(), _schema("provider_info.schema.json"))


def test_connection_types_match_provider_yaml_schema():
    """The runtime schema leaves connection-types open; the provider.yaml schema defines conn-fields and
    ui-field-behaviour (declarative since Airflow 3.2): our entries must satisfy that one too."""
    item = _schema("provider.yaml.schema.json")["properties"]["connection-types"]["items"]
    entries = get_provider_info()["connection-types"]
    assert [e["connection-type"] for e in entries] == ["odf"]
    for entry in entries:
        jsonschema.validate(entry, item)


def test_schema_catches_a_broken_entry():
    """Guards the two tests above: the schemas do reject what Airflow would reject."""
    bad = get_provider_info()
    bad["connection-types"][0]["conn-fields"]["workspace"]["schema"]["format"] = "not-a-format"
    item = _schema("provider.yaml.schema.json")["properties"]["connection-types"]["items"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad["connection-types"][0], item)
    bad = get_provider_info()
    bad["triggers"][0]["unexpected"] = 1
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, _schema("provider_info.schema.json"))


def test_every_listed_module_and_class_imports():
    import importlib

    info = get_provider_info()
    for section in ("hooks", "operators", "sensors", "triggers"):
        for entry in info[section]:
            for module in entry["python-modules"]:
                importlib.import_module(module)
    for conn in info["connection-types"]:
        module, _, cls = conn["hook-class-name"].rpartition(".")
        hook = getattr(importlib.import_module(module), cls)
        assert hook.conn_type == conn["connection-type"]
    for uris in info["asset-uris"]:
        module, _, fn = uris["handler"].rpartition(".")
        assert callable(getattr(importlib.import_module(module), fn))


@pytest.mark.airflow
def test_airflow_providers_list_shows_the_provider(airflow_home):
    env = {**os.environ, "AIRFLOW_HOME": str(airflow_home / "cli"), "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    out = subprocess.run([str(Path(sys.executable).with_name("airflow")), "providers", "list", "-o", "json"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    providers = {p["package_name"]: p for p in json.loads(out.stdout[out.stdout.index("["):])}
    assert providers["airflow-provider-odf"]["version"] == "0.1.0"
    assert "Open Data Fabric" in providers["airflow-provider-odf"]["description"]


def test_providers_manager_registers_connection_form_triggers_and_asset_scheme():
    from airflow.providers_manager import ProvidersManager
    from airflow.sdk.providers_manager_runtime import ProvidersManagerTaskRuntime

    assert ProvidersManagerTaskRuntime().hooks["odf"].hook_class_name == "airflow_provider_odf.hooks.odf.OdfHook"
    pm = ProvidersManager()
    widgets = pm.connection_form_widgets
    assert widgets["extra__odf__workspace"].field["schema"]["title"] == "Workspace URL"
    assert {"extra__odf__spark_conn_id", "extra__odf__engine_options", "extra__odf__storage_options"} <= set(widgets)
    behaviour = pm.field_behaviours["odf"]
    assert "host" in behaviour["hidden_fields"] and behaviour["relabeling"]["password"] == "Object store secret key"
    triggers = {t.package_name: t for t in pm.trigger}
    assert "airflow_provider_odf.triggers.odf" in triggers["airflow-provider-odf"].trigger_class_name
    from airflow.sdk import Asset

    # The registered handler normalizes and validates odf:// URIs wherever an Asset is declared.
    assert Asset(uri="odf://Odf_Default/Com.Example.Cities").uri == "odf://odf_default/com.example.cities"
    with pytest.raises(ValueError, match="not a dataset name"):
        Asset(uri="odf://odf_default/a/b")
