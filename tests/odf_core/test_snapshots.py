"""Snapshots → workspace: a batch is validated whole before anything is written, existing datasets can be skipped or
updated, and the sync appends exactly what changed (issue #17), through the library and ``odf add --update``."""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

from odf_core.cli import main
from odf_core.errors import OdfError
from odf_core.metadata import AddPushSource, SetInfo, SetLicense, SetPollingSource, SetVocab
from odf_core.metadata.yaml_serde import manifest_from_data
from odf_core.snapshots import add_snapshots, load_snapshot_files, plan_changes, read_snapshot_files, sync_snapshots
from odf_core.workspace import Workspace


def snapshot(name: str, kind: str, *events: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "DatasetSnapshot", "version": 1, "content": {"name": name, "kind": kind, "metadata": list(events)}}


POLLING = {"kind": "SetPollingSource", "fetch": {"kind": "FilesGlob", "path": "/data/cities-*.csv"},
           "read": {"kind": "Csv", "header": True, "schema": ["city STRING", "population BIGINT"]},
           "merge": {"kind": "Ledger", "primaryKey": ["city"]}}
PUSH = {"kind": "AddPushSource", "sourceName": "app", "read": {"kind": "NdJson", "schema": ["city STRING", "r INT"]},
        "merge": {"kind": "Append"}}
TRANSFORM = {"kind": "SetTransform", "inputs": [{"datasetRef": "ratings"}],
             "transform": {"kind": "Sql", "engine": "spark", "query": "select * from ratings"}}
LICENSE = {"kind": "SetLicense", "shortName": "CC0", "name": "Creative Commons Zero", "spdxId": "CC0-1.0",
           "websiteUrl": "https://creativecommons.org/publicdomain/zero/1.0/"}
FOLDER = {
    "cities.yaml": snapshot("cities", "Root", POLLING, {"kind": "SetInfo", "description": "Cities"}),
    "ratings.yaml": snapshot("ratings", "Root", PUSH),
    "derived.yaml": snapshot("derived", "Derivative", TRANSFORM),
}


def write(folder: Path, files: dict[str, dict[str, Any]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (folder / name).write_text(yaml.safe_dump(data, sort_keys=False))


def events_since(ws: Workspace, name: str, head) -> list:
    """The events appended after ``head``, oldest first."""
    out = []
    for h, block in ws.get(name).chain.iter_blocks():
        if h == head:
            break
        out.append(block.event)
    return out[::-1]


@pytest.fixture
def synced(tmp_path) -> tuple[Workspace, Path]:
    folder = tmp_path / "snapshots"
    write(folder, copy.deepcopy(FOLDER))
    ws = Workspace.init(str(tmp_path / ".odf"))
    result = sync_snapshots(ws, folder, engine=None)
    assert result.problems == [] and len(result.messages) == 3
    return ws, folder


def run_library(ws: Workspace, folder: Path) -> list[str]:
    result = sync_snapshots(ws, folder, engine=None)
    assert result.problems == []
    return result.messages


def run_cli(ws: Workspace, folder: Path) -> list[str]:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["-w", ws.url, "add", "--update", "--recursive", str(folder)]) == 0
    lines = out.getvalue().splitlines()
    return [] if lines == ["Everything is up to date"] else lines


def edit(folder: Path, file: str, change: Callable[[dict], None]) -> dict:
    data = yaml.safe_load((folder / file).read_text())
    change(data["content"])
    (folder / file).write_text(yaml.safe_dump(data, sort_keys=False))
    return data


def _polling(c: dict) -> None:
    c["metadata"][0]["merge"]["primaryKey"] = ["city", "population"]


def _push(c: dict) -> None:
    c["metadata"][0]["read"]["schema"].append("comment STRING")


def _second_push(c: dict) -> None:
    c["metadata"].append({**PUSH, "sourceName": "batch", "read": {"kind": "Csv", "schema": ["city STRING"]}})


def _info(c: dict) -> None:
    c["metadata"][1]["description"] = "Cities of the world"


def _license(c: dict) -> None:
    c["metadata"].append(LICENSE)


def _vocab(c: dict) -> None:
    c["metadata"].append({"kind": "SetVocab", "eventTimeColumn": "ts"})


CHANGES = {  # kind of change: (file, edit, dataset, expected event type)
    "polling source": ("cities.yaml", _polling, "cities", SetPollingSource),
    "push source": ("ratings.yaml", _push, "ratings", AddPushSource),
    "second push source": ("ratings.yaml", _second_push, "ratings", AddPushSource),
    "info": ("cities.yaml", _info, "cities", SetInfo),
    "license": ("cities.yaml", _license, "cities", SetLicense),
    "vocabulary (no data yet)": ("ratings.yaml", _vocab, "ratings", SetVocab),
}


@pytest.mark.parametrize("run", [run_library, run_cli], ids=["library", "cli"])
@pytest.mark.parametrize("change", list(CHANGES))
def test_a_changed_snapshot_appends_exactly_its_change_once(synced, run, change):
    ws, folder = synced
    file, how, name, kind = CHANGES[change]
    heads = {str(h.name): h.chain.head() for h in ws.list()}
    data = edit(folder, file, how)
    messages = run(ws, folder)
    assert len(messages) == 1 and name in messages[0], messages
    (event,) = events_since(ws, name, heads[name])
    wanted = [e for e in manifest_from_data(data).metadata if isinstance(e, kind)][-1]
    assert isinstance(event, kind) and event == ws.normalize_event(wanted, manifest_from_data(data))
    assert {str(h.name): h.chain.head() for h in ws.list() if str(h.name) != name} == \
        {n: h for n, h in heads.items() if n != name}  # nothing else appended anywhere
    assert run(ws, folder) == []  # in line now: a second sync appends nothing
    assert events_since(ws, name, heads[name]) == [event]


def test_a_removed_event_stays_in_force(synced):
    ws, folder = synced
    head = ws.get("cities").chain.head()
    edit(folder, "cities.yaml", lambda c: c["metadata"].pop(1))  # SetInfo gone from the snapshot
    assert run_library(ws, folder) == [] and ws.get("cities").chain.head() == head


def test_the_kind_of_a_dataset_cannot_change(synced):
    ws, folder = synced
    derivative = snapshot("ratings", "Derivative", {**TRANSFORM, "inputs": [{"datasetRef": "cities"}]})
    write(folder, {"ratings.yaml": derivative})
    result = sync_snapshots(ws, folder, engine=None)
    (problem,) = result.problems
    assert problem.startswith(f"{folder / 'ratings.yaml'}:5: content.kind: dataset 'ratings' is a Root dataset")


def test_the_sync_applies_what_is_valid_and_reports_the_rest(synced):
    ws, folder = synced
    heads = {str(h.name): h.chain.head() for h in ws.list()}
    edit(folder, "cities.yaml", _info)
    edit(folder, "ratings.yaml", lambda c: c["metadata"][0]["read"]["schema"].append("x STRANG"))
    write(folder, {"new.yaml": snapshot("new", "Root", PUSH),
                   "new-broken.yaml": snapshot("new.broken", "Root", {**PUSH, "merge": {"kind": "Apend"}}),
                   "after-broken.yaml": snapshot("after", "Derivative",
                                                 {**TRANSFORM, "inputs": [{"datasetRef": "new.broken"}]})})
    result = sync_snapshots(ws, folder, engine=None)
    assert sorted(result.messages) == sorted([f"updated the info of cities from {folder / 'cities.yaml'}",
                                              f"added new from {folder / 'new.yaml'}"])
    def line(file: str, text: str) -> str:
        n = next(i for i, t in enumerate((folder / file).read_text().splitlines(), 1) if text in t)
        return f"{folder / file}:{n}"

    assert [p.split(": ", 1)[0] for p in result.problems] == [
        line("new-broken.yaml", "Apend"), line("ratings.yaml", "x STRANG"), f"{folder / 'after-broken.yaml'}"]
    assert "its input 'new.broken' has a problem" in result.problems[2]
    assert ws.get("ratings").chain.head() == heads["ratings"]
    assert not ws.exists("new.broken") and not ws.exists("after")


# -- add ---------------------------------------------------------------------------------------------------------


def test_a_batch_with_one_invalid_snapshot_creates_nothing(tmp_path):
    """A snapshot can be valid YAML and still break a chain rule (here: a transform in a root): the whole batch is
    checked before the first dataset is created."""
    write(tmp_path, {"a.yaml": snapshot("a", "Root", PUSH),
                     "b.yaml": snapshot("b", "Root", PUSH, TRANSFORM | {"inputs": [{"datasetRef": "a"}]})})
    ws = Workspace.init(str(tmp_path / ".odf"))
    batch = load_snapshot_files([tmp_path / "a.yaml", tmp_path / "b.yaml"])
    with pytest.raises(OdfError) as ei:
        add_snapshots(ws, batch)
    assert str(ei.value) == f"{tmp_path / 'b.yaml'}: content.metadata[1]: SetTransform is only allowed in " \
                            "derivative datasets"
    assert ws.list() == []


def test_inputs_must_exist_or_come_with_the_batch(tmp_path):
    write(tmp_path, {"d.yaml": snapshot("d", "Derivative", TRANSFORM)})
    ws = Workspace.init(str(tmp_path / ".odf"))
    plan = plan_changes(ws, read_snapshot_files([tmp_path / "d.yaml"]))
    assert plan.problems == [f"{tmp_path / 'd.yaml'}:9: content.metadata[0].inputs[0].datasetRef: input dataset does "
                             "not exist in the workspace (nor is it added with it) (got 'ratings')"]
    write(tmp_path, {"r.yaml": snapshot("ratings", "Root", PUSH)})
    plan = plan_changes(ws, read_snapshot_files([tmp_path / "d.yaml", tmp_path / "r.yaml"]))
    assert plan.problems == [] and [c.name for c in plan.changes] == ["ratings", "d"]


def test_existing_datasets_are_refused_skipped_or_updated(synced):
    ws, folder = synced
    edit(folder, "cities.yaml", _info)
    docs = read_snapshot_files(sorted(folder.glob("*.yaml")))
    refused = plan_changes(ws, docs, "add")
    assert len(refused.problems) == 3 and all("already exists" in p for p in refused.problems)
    skipped = plan_changes(ws, docs, "exist_ok")
    assert skipped.problems == [] and skipped.changes == [] and len(skipped.skipped) == 3
    updated = plan_changes(ws, docs, "update")
    assert [c.message for c in updated.changes] == [f"updated the info of cities from {folder / 'cities.yaml'}"]


def test_duplicates_and_cycles_are_problems_of_the_batch(tmp_path):
    write(tmp_path, {"a.yaml": snapshot("a", "Root", PUSH), "a2.yaml": snapshot("A", "Root", PUSH),
                     "c1.yaml": snapshot("c1", "Derivative", {**TRANSFORM, "inputs": [{"datasetRef": "c2"}]}),
                     "c2.yaml": snapshot("c2", "Derivative", {**TRANSFORM, "inputs": [{"datasetRef": "c1"}]})})
    ws = Workspace.init(str(tmp_path / ".odf"))
    plan = plan_changes(ws, read_snapshot_files(sorted(tmp_path.glob("*.yaml"))))
    assert plan.changes == []
    assert plan.problems[0].startswith("dataset 'a' is defined more than once:")
    assert plan.problems[1].startswith("dataset dependency cycle: c1 -> c2 -> c1")
