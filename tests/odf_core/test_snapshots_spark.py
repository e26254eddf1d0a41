"""Transform evolution through the sync and ``odf add --update``: Spark validates the new query against the inputs
and the output schema already written (only new columns), in the test's Spark session (issue #17)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from odf_core.cli import main
from odf_core.engine import LocalEngine
from odf_core.ingest.transaction import push
from odf_core.metadata import SetTransform
from odf_core.snapshots import plan_changes, read_snapshot_files, snapshot_files, sync_snapshots
from odf_core.transform import run as run_transform
from odf_core.workspace import Workspace

from .test_snapshots import PUSH, edit, events_since, snapshot

pytestmark = pytest.mark.spark

RATINGS = snapshot("ratings", "Root", {**PUSH, "read": {"kind": "NdJson", "schema": [
    "event_time TIMESTAMP", "city STRING", "rating INT"]}})
QUERY = "select max(event_time) as event_time, city, avg(rating) as avg_rating from ratings group by city"
AVG = snapshot("avg", "Derivative", {"kind": "SetTransform", "inputs": [{"datasetRef": "ratings"}],
                                     "transform": {"kind": "Sql", "engine": "spark", "query": QUERY}})
DATA = ('{"event_time": "2024-01-01T10:00:00Z", "city": "Oslo", "rating": 4}\n'
        '{"event_time": "2024-01-01T11:00:00Z", "city": "Riga", "rating": 2}\n')


@pytest.fixture(scope="module")
def with_data(spark, tmp_path_factory) -> Path:
    """A workspace synced from a folder, ratings pushed and the derivative run once (so it has an output schema)."""
    base = tmp_path_factory.mktemp("evolve")
    folder = base / "snapshots"
    folder.mkdir()
    for name, data in (("ratings.yaml", RATINGS), ("avg.yaml", AVG)):
        (folder / name).write_text(yaml.safe_dump(data, sort_keys=False))
    ws = Workspace.init(str(base / ".odf"))
    assert sync_snapshots(ws, folder, engine=None).problems == []
    (base / "r.ndjson").write_text(DATA)
    engine = LocalEngine(master="local[2]")
    assert push(ws, "ratings", str(base / "r.ndjson"), engine=engine).block_hash is not None
    assert run_transform(ws, "avg", engine=engine) is not None
    return base


@pytest.fixture
def copy(with_data, tmp_path) -> tuple[Workspace, Path]:
    """A private copy of the prepared workspace and folder for one test."""
    shutil.copytree(with_data, tmp_path / "case")
    return Workspace.open(str(tmp_path / "case" / ".odf")), tmp_path / "case" / "snapshots"


def set_query(folder: Path, query: str) -> None:
    edit(folder, "avg.yaml", lambda c: c["metadata"][0]["transform"].update(query=query))


def test_sync_evolves_the_transform_once(copy):
    ws, folder = copy
    head = ws.get("avg").chain.head()
    new = QUERY.replace("avg(rating) as avg_rating", "avg(rating) as avg_rating, count(*) as n")
    set_query(folder, new)
    engine = LocalEngine(master="local[2]")
    result = sync_snapshots(ws, folder, engine=engine)
    assert (result.messages, result.problems) == ([f"evolved the transform of avg from {folder / 'avg.yaml'}"], [])
    (event,) = events_since(ws, "avg", head)
    assert isinstance(event, SetTransform) and event.transform.queries[0].query == new
    assert event.transform.version is not None  # the engine that validated it
    assert sync_snapshots(ws, folder, engine=engine).messages == []
    assert events_since(ws, "avg", head) == [event]


def test_cli_update_evolves_the_transform_once(copy, capsys):
    ws, folder = copy
    head = ws.get("avg").chain.head()
    new = QUERY.replace("avg(rating) as avg_rating", "avg(rating) as avg_rating, min(rating) as lowest")
    set_query(folder, new)
    args = ["-w", ws.url, "add", "--update", "-r", str(folder), "--master", "local[2]"]
    assert main(args) == 0
    assert capsys.readouterr().out == f"Evolved the transform of avg from {folder / 'avg.yaml'}\n"
    (event,) = events_since(ws, "avg", head)
    assert event.transform.queries[0].query == new
    assert main(args) == 0 and capsys.readouterr().out == "Everything is up to date\n"


def test_a_query_that_drops_a_column_is_refused_and_the_rest_is_synced(copy, capsys):
    ws, folder = copy
    heads = {n: ws.get(n).chain.head() for n in ("avg", "ratings")}
    set_query(folder, "select max(event_time) as event_time, city from ratings group by city")
    edit(folder, "ratings.yaml", lambda c: c["metadata"].append({"kind": "SetInfo", "description": "Ratings"}))
    # the CLI refuses the whole batch, in one line: Spark checks evolved queries before anything is written
    code = main(["-w", ws.url, "add", "--update", "-r", str(folder), "--master", "local[2]"])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1
    assert err.startswith(f"odf: error: {folder / 'avg.yaml'}: dataset 'avg': new query: schema change not allowed")
    assert "column 'avg_rating'" in err
    assert {n: ws.get(n).chain.head() for n in heads} == heads
    # the sync keeps the old transform of avg, applies the rest and reports the refusal
    result = sync_snapshots(ws, folder, engine=LocalEngine(master="local[2]"))
    assert result.messages == [f"updated the info of ratings from {folder / 'ratings.yaml'}"]
    assert len(result.problems) == 1 and "column 'avg_rating'" in result.problems[0]
    assert ws.get("avg").chain.head() == heads["avg"]
    assert [type(e).__name__ for e in events_since(ws, "ratings", heads["ratings"])] == ["SetInfo"]


def test_the_vocabulary_cannot_change_once_there_is_data(copy):
    ws, folder = copy
    edit(folder, "ratings.yaml", lambda c: c["metadata"].append({"kind": "SetVocab", "eventTimeColumn": "ts"}))
    plan = plan_changes(ws, read_snapshot_files(snapshot_files(folder)), "update")
    (problem,) = plan.problems
    assert problem.startswith(f"{folder / 'ratings.yaml'}:")
    assert "content.metadata[1]: the vocabulary cannot change once the dataset has data" in problem
