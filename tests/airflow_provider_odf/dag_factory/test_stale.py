"""The real dag-processor path: one broken snapshot must not make the folder's other DAGs stale.

An in-process DagBag hides what matters here: the dag-processor marks every DAG of a file with an import error as
stale (no longer scheduled). So this runs the Airflow CLI in a subprocess with its own AIRFLOW_HOME (SQLite) —
a copy of the session's migrated DB, ``airflow dags reserialize`` — and reads the metadata DB's rows; then
``airflow tasks test`` runs the broken dataset's problem task the way a worker does (re-parsing the file for that
one DAG). One setup for the module: it costs about 15 s.
"""
from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from airflow_provider_odf.dag_factory.problems import TAG, TASK_ID

from ..conftest import EXAMPLES, REPO, copy_migrated_db

pytestmark = pytest.mark.airflow  # airflow db migrate, dags reserialize, tasks test: processes of their own
AIRFLOW = str(Path(sys.executable).parent / "airflow")
GOOD = ["odf__com_example_ratings", "odf__com_example_trips", "odf__sync"]
BROKEN = ["odf__com_example_busy_cities", "odf__com_example_cities", "odf__com_example_trips_by_city",
          "odf__definition_errors"]


@dataclass
class Reserialized:
    db: Path
    cities: Path
    garbage: Path
    task_test: subprocess.CompletedProcess[str]

    def rows(self, query: str) -> list[tuple]:
        with sqlite3.connect(self.db) as c:
            return c.execute(query).fetchall()


def _airflow(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([AIRFLOW, *args], env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def reserialized(tmp_path_factory, migrated_airflow_db) -> Reserialized:
    home = tmp_path_factory.mktemp("airflow-stale")
    dags = home / "dags"
    shutil.copytree(EXAMPLES / "datasets", dags / "datasets")
    for f in ("odf_dags.py", "odf-dags.yaml"):
        shutil.copy(EXAMPLES / f, dags / f)
    cities = dags / "datasets" / "cities.yaml"
    cities.write_text(cities.read_text().replace("primaryKey:", "primaryKeyz:"))  # readable name, bad property
    garbage = dags / "datasets" / "garbage.yaml"
    garbage.write_text("kind: DatasetSnapshot\ncontent: [unclosed\n")  # no readable name
    env = {**os.environ, "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    env.pop("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", None)
    copy_migrated_db(migrated_airflow_db, home)  # the session's `airflow db migrate`, copied
    done = _airflow(env, "dags", "reserialize")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    task_test = _airflow(env, "tasks", "test", "odf__com_example_cities", TASK_ID)
    return Reserialized(home / "airflow.db", cities, garbage, task_test)


def test_every_dag_of_the_folder_stays_scheduled(reserialized):
    rows = dict(reserialized.rows("select dag_id, is_stale from dag"))
    assert {d: rows.get(d) for d in GOOD} == dict.fromkeys(GOOD, 0)  # an import error made them stale (1)
    assert sorted(rows) == sorted(GOOD + BROKEN)
    assert [d for d, stale in rows.items() if stale] == []
    assert reserialized.rows("select filename, stacktrace from import_error") == []


def test_each_problem_is_a_dag_that_says_what_is_wrong(reserialized):
    tagged = {d for (d,) in reserialized.rows(f"select dag_id from dag_tag where name = '{TAG}'")}
    assert tagged == set(BROKEN)
    descriptions = dict(reserialized.rows("select dag_id, description from dag"))
    assert descriptions["odf__com_example_cities"].startswith(
        f"Broken ODF definition: {reserialized.cities}:23: content.metadata[0].merge.primaryKeyz: unknown property")
    assert str(reserialized.garbage) in descriptions["odf__definition_errors"]
    schedules = dict(reserialized.rows("select dag_id, timetable_summary from dag"))
    assert schedules["odf__com_example_cities"] == "*/30 * * * *"  # the sync schedule of odf-dags.yaml


def test_the_problem_task_fails_with_the_one_line_error_when_a_worker_runs_it(reserialized):
    out = reserialized.task_test.stdout + reserialized.task_test.stderr
    # `tasks test` removes its throw-away run afterwards: the state change is in its log, not in the DB
    assert any("Task instance state updated" in line and "new_state=failed" in line for line in out.splitlines()), \
        out[-3000:]
    assert (f"{reserialized.cities}:23: content.metadata[0].merge.primaryKeyz: unknown property of Snapshot "
            "(allowed: primaryKey, compareColumns)") in out
