"""``./dev demo --keep`` tells the UI address, the user and the generated password (no demo run: the two pieces)."""
from __future__ import annotations

import importlib
import json
import os


def test_keep_message_names_url_user_and_the_generated_password(tmp_path, monkeypatch):
    # importing the demo points AIRFLOW_HOME at build/demo (its own Airflow): on a copy of the environment, so the
    # session's Airflow (tests/airflow_provider_odf/conftest.py) keeps its home for the tests that run after this one
    monkeypatch.setattr(os, "environ", dict(os.environ))
    demo = importlib.import_module("dags_examples.demo")
    monkeypatch.setattr(demo, "AIRFLOW_HOME", tmp_path)
    (tmp_path / "simple_auth_manager_passwords.json.generated").write_text(json.dumps({"admin": "s3cret"}))
    message = demo.keep_message("http://127.0.0.1:8080", demo.admin_password())
    assert message == "Airflow keeps running: UI http://127.0.0.1:8080, user admin, password s3cret; Ctrl-C stops it"
