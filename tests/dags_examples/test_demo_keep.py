"""``./dev demo --keep`` tells the UI address, the user and the generated password (no demo run: the two pieces)."""
from __future__ import annotations

import json

from dags_examples import demo


def test_keep_message_names_url_user_and_the_generated_password(tmp_path, monkeypatch):
    monkeypatch.setattr(demo, "AIRFLOW_HOME", tmp_path)
    (tmp_path / "simple_auth_manager_passwords.json.generated").write_text(json.dumps({"admin": "s3cret"}))
    message = demo.keep_message("http://127.0.0.1:8080", demo.admin_password())
    assert message == "Airflow keeps running: UI http://127.0.0.1:8080, user admin, password s3cret; Ctrl-C stops it"
