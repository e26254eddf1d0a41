"""Airflow runs against a throw-away AIRFLOW_HOME (SQLite, no examples); connections come from env vars."""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

# Airflow reads its configuration when first imported (test collection), so the environment is set right here;
# the session fixture below owns the directory's lifetime.
_HOME = tempfile.mkdtemp(prefix="odf-airflow-home-")
os.environ["AIRFLOW_HOME"] = _HOME
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = os.path.join(_HOME, "dags")
os.environ.setdefault("AIRFLOW__CORE__DAGBAG_IMPORT_ERROR_TRACEBACKS", "False")

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "dags_examples"


@pytest.fixture(scope="session", autouse=True)
def airflow_home():
    yield Path(_HOME)
    shutil.rmtree(_HOME, ignore_errors=True)


def conn_env(monkeypatch: pytest.MonkeyPatch, conn_id: str, **fields) -> None:
    """Define a connection the way deployments do: ``AIRFLOW_CONN_<ID>`` holding the JSON form."""
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(fields))


@pytest.fixture
def workspace(tmp_path):
    """A real workspace holding the example datasets (created from their snapshots; no Spark involved)."""
    from odf_core.snapshots import add_snapshots, load_snapshot_files
    from odf_core.workspace import Workspace

    ws = Workspace.init(str(tmp_path / "ws" / ".odf"))
    add_snapshots(ws, load_snapshot_files(sorted((EXAMPLES / "datasets").glob("*.yaml"))))
    return ws


@pytest.fixture(scope="session")
def migrated_airflow_db(tmp_path_factory) -> Path:
    """An Airflow metadata DB (SQLite) migrated once per session, in a home of its own: a test that needs a migrated
    DB in its own AIRFLOW_HOME copies it there (:func:`copy_migrated_db`) instead of running ``airflow db migrate``
    (a process of ~20-40 s under CI's load) again."""
    import subprocess
    import sys

    home = tmp_path_factory.mktemp("airflow-migrated")
    env = {**os.environ, "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    env.pop("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", None)
    airflow = Path(sys.executable).parent / "airflow"
    done = subprocess.run([str(airflow), "db", "migrate"], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (home / "airflow.db").exists(), list(home.iterdir())
    return home / "airflow.db"


def copy_migrated_db(migrated: Path, home: Path) -> Path:
    """The session's migrated DB as ``home``'s ``airflow.db`` (Airflow's default SQLite path under AIRFLOW_HOME)."""
    home.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copyfile(migrated, home / "airflow.db"))


@pytest.fixture(scope="session")
def airflow_db(airflow_home, migrated_airflow_db):
    """The metadata DB of the throw-away AIRFLOW_HOME (what ``dag.test()`` needs): the session's migrated copy."""
    return copy_migrated_db(migrated_airflow_db, airflow_home)
