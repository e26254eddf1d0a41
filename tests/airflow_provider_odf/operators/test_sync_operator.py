"""The ``odf__sync`` task with changed snapshots: it appends what changed, leaves a broken snapshot out and then fails
(without retries) naming it, and passes again once the file is fixed. ``execute`` is called directly: the operator
reads nothing from its context, and no Spark job is needed for these changes."""
from __future__ import annotations

import copy

import pytest
import yaml
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_odf.operators import OdfSyncOperator
from odf_core.metadata import SetInfo, SetPollingSource
from odf_core.workspace import Workspace

from ...odf_core.test_snapshots import FOLDER, PUSH, edit, events_since, snapshot, write
from ..conftest import conn_env


def test_sync_task_appends_changes_and_fails_listing_what_it_left_out(tmp_path, monkeypatch):
    folder = tmp_path / "snapshots"
    write(folder, copy.deepcopy(FOLDER))
    conn_env(monkeypatch, "odf_sync", conn_type="odf", extra={"workspace": str(tmp_path / "ws")})
    task = OdfSyncOperator(task_id="sync", folder=str(folder), odf_conn_id="odf_sync")
    assert len(task.execute({})) == 3  # the workspace is created, then every dataset

    ws = Workspace.open(str(tmp_path / "ws"))
    heads = {str(h.name): h.chain.head() for h in ws.list()}
    edit(folder, "cities.yaml", lambda c: c["metadata"][0]["merge"].update(primaryKey=["city", "population"]))
    edit(folder, "cities.yaml", lambda c: c["metadata"][1].update(description="Cities of the world"))
    broken = folder / "broken.yaml"
    broken.write_text(yaml.safe_dump(snapshot("broken", "Root", {**PUSH, "merge": {"kind": "Apend"}})))
    with pytest.raises(AirflowFailException) as ei:
        task.execute({})
    assert str(ei.value).startswith(f"1 snapshot problem(s) in {folder} (everything else is synced): {broken}:")
    assert "unknown MergeStrategy kind" in str(ei.value)
    assert [type(e) for e in events_since(ws, "cities", heads["cities"])] == [SetPollingSource, SetInfo]
    assert {str(h.name): h.chain.head() for h in ws.list() if str(h.name) != "cities"} == \
        {n: h for n, h in heads.items() if n != "cities"}
    assert not ws.exists("broken")

    broken.write_text(yaml.safe_dump(snapshot("broken", "Root", PUSH)))
    assert task.execute({}) == [f"added broken from {broken}"]
    assert task.execute({}) == []  # in line: nothing more to append
