"""Malformed inputs through the CLI: an HTML error page where a CSV was expected, header and field counts that do not
match, bytes invalid in the declared encoding, broken JSON, a value that does not fit its column, a broken snapshot.

Each must end in one line naming the file (or URL) and line, with the dataset exactly as it was — a Snapshot source
in particular must not read a bad answer as "every row is gone". One child process runs every command (one Spark
start), against a real HTTP server on 127.0.0.1.
"""
from __future__ import annotations

import pytest

from odf_core.ingest import transaction as tx
from odf_core.metadata import (
    AddPushSource,
    DatasetKind,
    DatasetSnapshot,
    FetchStepUrl,
    MergeStrategyAppend,
    MergeStrategySnapshot,
    ReadStepCsv,
    ReadStepNdJson,
    SetPollingSource,
)
from odf_core.workspace import Workspace
from tests.odf_core.ingest.http_server import LocalHttpServer, Resource

from .scenarios import error_lines, intact, is_one_clear_line, run_cli_batch, staged

pytestmark = pytest.mark.spark


@pytest.fixture
def http_server():
    server = LocalHttpServer().start()
    yield server
    server.stop()


def test_malformed_inputs_are_one_line_and_change_nothing(tmp_path, engine, http_server, fault_ledger):
    ws_dir = str(tmp_path / "ws")
    ws = Workspace.init(ws_dir)
    http_server.resources["/cities.csv"] = Resource(b"city,population\nOslo,700000\nRiga,600000\n", etag='"1"')
    url = http_server.url("/cities.csv")
    ws.create(DatasetSnapshot(name="cities", kind=DatasetKind.ROOT, metadata=(SetPollingSource(
        fetch=FetchStepUrl(url=url), read=ReadStepCsv(header=True, schema=("city STRING", "population BIGINT")),
        merge=MergeStrategySnapshot(primary_key=("city",))),)))
    ws.create(DatasetSnapshot(name="counts", kind=DatasetKind.ROOT, metadata=(AddPushSource(
        source_name="csv", read=ReadStepCsv(header=True, schema=("name STRING", "n BIGINT")),
        merge=MergeStrategyAppend()),)))
    ws.create(DatasetSnapshot(name="events", kind=DatasetKind.ROOT, metadata=(AddPushSource(
        source_name="app", read=ReadStepNdJson(schema=("k STRING", "v BIGINT")), merge=MergeStrategyAppend()),)))
    tx.pull(ws, "cities", engine)
    good = tmp_path / "good.csv"
    good.write_text("name,n\na,1\n")
    tx.push(ws, "counts", str(good), engine=engine)
    (tmp_path / "good.json").write_text('{"k": "a", "v": 1}\n')
    tx.push(ws, "events", str(tmp_path / "good.json"), engine=engine)
    before = {h.name: (h.chain.head(), h.state().num_records) for h in ws.list()}
    # the HTTP source now answers 200 with an HTML error page
    http_server.resources["/cities.csv"] = Resource(b"<html><body>Service unavailable</body></html>\n", etag='"2"')

    def push_file(name: str, body: bytes) -> str:
        path = tmp_path / name
        path.write_bytes(body)
        return str(path)

    bad_yaml = push_file("broken.yaml", b"kind: DatasetSnapshot\nversion: 1\ncontent:\n  name: x\n  kind: [Root\n")
    cases = [  # (what, argv, dataset, text the line must hold)
        ("an HTML error page instead of a CSV", ["pull", "cities"], "cities", f"{url}"),
        ("a header with more fields than the schema",
         ["ingest", "counts", push_file("wide.csv", b"name,n,extra\na,1,2\n")], "counts", "line 1"),
        ("a row with fewer fields than the header",
         ["ingest", "counts", push_file("short.csv", b"name,n\na,1\nb\n")], "counts", "line 3"),
        ("bytes that are not UTF-8",
         ["ingest", "counts", push_file("latin1.csv", b"name,n\nZ\xfcrich,2\n")], "counts", "not valid utf-8"),
        ("a value that does not fit its column",
         ["ingest", "counts", push_file("type.csv", b"name,n\na,1\nb,zz\n")], "counts", "line 3"),
        ("broken JSON", ["ingest", "events", push_file("broken.json", b'{"k": "b", "v": 2}\n{"k": [1,2\n')],
         "events", "line 2"),
        ("a broken DatasetSnapshot YAML", ["add", bad_yaml], None, "broken.yaml:5"),
    ]
    results = run_cli_batch([{"odf": ["-w", ws_dir, *argv, *(["--master", "local[1]"] if argv[0] in (
        "pull", "ingest") else [])]} for _, argv, _, _ in cases], env={"ODF_LOG_DIR": str(tmp_path / "logs")})

    failures = []
    for (what, argv, dataset, text), r in zip(cases, results):
        lines = error_lines(r["err"])
        traceback = not is_one_clear_line(r["err"])
        problems = []
        if r["code"] != 1:
            problems.append(f"exit code {r['code']}")
        if text not in r["err"]:
            problems.append(f"the error does not name {text!r}")
        if dataset is not None:
            h = ws.get(dataset)
            if (h.chain.head(), h.state().num_records) != before[h.name] or intact(h) is not None:
                problems.append("the dataset changed")
        if staged(ws):
            problems.append(f"staged files left: {staged(ws)}")
        fault_ledger.record("malformed input", f"odf {argv[0]}", what, traceback=traceback,
                            lost_or_corrupted=bool(problems))
        if problems or traceback:
            failures.append(f"{what}: {problems} {lines}")
    assert not failures, "\n".join(failures)
