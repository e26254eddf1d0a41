"""The ``odf`` CLI: every command's happy path and one-line errors with exit code 1."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from odf_core.cli import main
from odf_core.hashing import logical_hash_file

ROOT_YAML = """
kind: DatasetSnapshot
version: 1
content:
  name: {name}
  kind: Root
  metadata:
    - kind: AddPushSource
      sourceName: default
      read: {{kind: NdJson, schema: ["v BIGINT"]}}
      merge: {{kind: Append}}
"""
DERIV_YAML = """
kind: DatasetSnapshot
version: 1
content:
  name: deriv
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs: [{datasetRef: root.a}]
      transform: {kind: Sql, engine: spark, query: "select * from `root.a`"}
"""


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def ws(tmp_path, capsys):
    w = str(tmp_path / ".odf")
    assert run(capsys, "--workspace", w, "init")[0] == 0
    return w


def test_init_add_list_log_verify(tmp_path, ws, capsys):
    snaps = tmp_path / "snaps" / "sub"
    snaps.mkdir(parents=True)
    (snaps.parent / "deriv.yaml").write_text(DERIV_YAML)  # needs root.a: order resolved by dependencies
    (snaps / "a.yaml").write_text(ROOT_YAML.format(name="root.a"))
    code, out, err = run(capsys, "-w", ws, "add", str(snaps.parent), "--recursive")
    assert code == 0, err
    assert out.index("Added root.a") < out.index("Added deriv")
    code, out, _ = run(capsys, "-w", ws, "list")
    assert "root.a" in out and "Derivative" in out
    code, out, _ = run(capsys, "-w", ws, "log", "root.a")
    docs = [d for d in yaml.safe_load_all(out) if d]
    assert [d["content"]["event"]["kind"] for d in docs] == ["AddPushSource", "Seed"]
    code, out, _ = run(capsys, "-w", ws, "verify", "root.a", "--integrity")
    assert code == 0 and "ok" in out


def test_add_without_recursive_skips_subfolders(tmp_path, ws, capsys):
    d = tmp_path / "snaps"
    (d / "sub").mkdir(parents=True)
    (d / "sub" / "a.yaml").write_text(ROOT_YAML.format(name="a"))
    (d / "b.yaml").write_text(ROOT_YAML.format(name="b"))
    code, out, err = run(capsys, "-w", ws, "add", str(d))
    assert code == 0, err
    assert out.splitlines()[0].startswith("Added b (Root, did:odf:") and len(out.splitlines()) == 1
    listed = [line.split()[:2] for line in run(capsys, "-w", ws, "list")[1].splitlines()[1:]]
    assert listed == [["b", "Root"]]  # b from the folder itself, nothing from its subfolder


@pytest.mark.parametrize("content,fragment", [
    (ROOT_YAML.format(name="in^valid"), ":5: content.name: "),
    (ROOT_YAML.format(name="x").replace("Append", "Merge"), ":11: content.metadata[0].merge.kind: "),
    ("kind: DatasetSnapshot\nversion: 1\ncontent: [", ":3: invalid YAML"),
    ("", ": no DatasetSnapshot document in this file"),
    ("# to do\n", ": no DatasetSnapshot document in this file"),
    (ROOT_YAML.format(name="x").replace("v BIGINT", "v STRANG"),
     ":10: content.metadata[0].read.schema[0]: invalid DDL column: unknown type 'STRANG' (did you mean STRING?)"),
    # valid YAML and model, but a chain rule breaks: found before the good snapshot is created
    (ROOT_YAML.format(name="x") + "    - kind: SetTransform\n      inputs: [{datasetRef: good}]\n"
                                  "      transform: {kind: Sql, engine: spark, query: select 1}\n",
     ":12: content.metadata[1]: SetTransform is only allowed in derivative datasets"),
])
def test_add_bad_snapshot_one_line_error_nothing_created(tmp_path, ws, capsys, content, fragment):
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(ROOT_YAML.format(name="good"))
    bad.write_text(content)
    code, out, err = run(capsys, "-w", ws, "add", str(good), str(bad))
    assert code == 1
    assert err.count("\n") == 1 and err.startswith(f"odf: error: {bad}{fragment}"), err
    assert "good" not in run(capsys, "-w", ws, "list")[1]


def test_add_exist_ok_skips_existing_datasets_with_a_line(tmp_path, ws, capsys):
    snaps = tmp_path / "snaps"
    (snaps / "sub").mkdir(parents=True)
    (snaps / "a.yaml").write_text(ROOT_YAML.format(name="root.a"))
    assert run(capsys, "-w", ws, "add", str(snaps / "a.yaml"))[0] == 0
    (snaps / "sub" / "deriv.yaml").write_text(DERIV_YAML)
    code, out, err = run(capsys, "-w", ws, "add", str(snaps), "--recursive")
    assert code == 1 and "dataset 'root.a' already exists" in err and "--exist-ok skips it" in err
    code, out, err = run(capsys, "-w", ws, "add", str(snaps), "--recursive", "--exist-ok")
    assert code == 0, err
    assert out.splitlines()[0] == f"root.a: already exists, skipped ({snaps / 'a.yaml'})"
    assert out.splitlines()[1].startswith("Added deriv (Derivative, did:odf:")
    code, out, _ = run(capsys, "-w", ws, "add", str(snaps), "-r", "--exist-ok")
    assert code == 0 and out.count("already exists, skipped") == 2


def test_add_update_reports_each_change_and_then_nothing(tmp_path, ws, capsys):
    f = tmp_path / "a.yaml"
    f.write_text(ROOT_YAML.format(name="a"))
    assert run(capsys, "-w", ws, "add", str(f))[0] == 0
    f.write_text(ROOT_YAML.format(name="a") + "    - {kind: SetInfo, description: ratings by app}\n")
    code, out, err = run(capsys, "-w", ws, "add", "--update", str(f))
    assert (code, out) == (0, f"Updated the info of a from {f}\n"), err
    assert run(capsys, "-w", ws, "add", "--update", str(f))[1] == "Everything is up to date\n"


def test_add_flags_exclude_each_other_and_empty_folders_are_errors(tmp_path, ws, capsys):
    with pytest.raises(SystemExit):
        main(["-w", ws, "add", "--exist-ok", "--update", str(tmp_path)])
    (tmp_path / "empty").mkdir()
    code, _, err = run(capsys, "-w", ws, "add", str(tmp_path / "empty"))
    assert code == 1 and f"{tmp_path / 'empty'}: no .yaml or .yml files" in err


def test_add_existing_name_and_cycle(tmp_path, ws, capsys):
    f = tmp_path / "a.yaml"
    f.write_text(ROOT_YAML.format(name="a"))
    assert run(capsys, "-w", ws, "add", str(f))[0] == 0
    code, _, err = run(capsys, "-w", ws, "add", str(f))
    assert code == 1 and "already exists" in err
    c1, c2 = tmp_path / "c1.yaml", tmp_path / "c2.yaml"
    c1.write_text(DERIV_YAML.replace("deriv", "c1").replace("root.a", "c2"))
    c2.write_text(DERIV_YAML.replace("deriv", "c2").replace("root.a", "c1"))
    code, _, err = run(capsys, "-w", ws, "add", str(c1), str(c2))
    assert code == 1 and "cycle" in err


def test_block_hash_encode_decode(tmp_path, capsys):
    f = tmp_path / "b.yaml"
    f.write_text("kind: MetadataBlock\nversion: 2\ncontent:\n  systemTime: 2050-01-01T12:00:00Z\n"
                 "  sequenceNumber: 0\n  event:\n    kind: SetInfo\n    description: foo\n")
    code, out, _ = run(capsys, "block", "hash", str(f))
    assert out.strip() == "f16205603b882241c71351baf996d6dba7e3ddbd571457e93c1cd282bdc61f9fed5f2"
    code, out, _ = run(capsys, "block", "encode", str(f), "-o", str(tmp_path / "b.bin"))
    assert code == 0 and len((tmp_path / "b.bin").read_bytes()) == 112
    code, out, _ = run(capsys, "block", "decode", str(tmp_path / "b.bin"))
    assert yaml.safe_load(out)["content"]["event"] == {"kind": "SetInfo", "description": "foo"}
    (tmp_path / "junk.bin").write_bytes(b"\x01\x02\x03")
    code, _, err = run(capsys, "block", "decode", str(tmp_path / "junk.bin"))
    assert code == 1 and "junk.bin" in err


def test_hash_commands(tmp_path, capsys):
    p = tmp_path / "d.parquet"
    pq.write_table(pa.table({"a": [1, 2, None]}), p)
    code, out, _ = run(capsys, "hash", "logical", str(p))
    assert out.strip() == str(logical_hash_file(str(p))) and out.startswith("f9680c00120")
    code, out, _ = run(capsys, "hash", "physical", str(p))
    import hashlib
    assert out.strip() == "f1620" + hashlib.sha3_256(p.read_bytes()).hexdigest()
    code, _, err = run(capsys, "hash", "physical", str(tmp_path / "missing"))
    assert code == 1 and "missing" in err


def test_console_script_exit_codes(tmp_path):
    odf = shutil.which("odf", path=str(Path(sys.executable).parent))
    nowhere = str(tmp_path / "nowhere")
    for argv in (["log", "x"], ["list"]):  # list used to print an empty table for any directory
        r = subprocess.run([odf, "-w", nowhere, *argv], capture_output=True, text=True)
        assert r.returncode == 1 and r.stderr.startswith("odf: error:") and r.stderr.count("\n") == 1, r.stderr
        assert f"{nowhere} is not an odf workspace" in r.stderr and not r.stdout
    assert not Path(nowhere).exists()
    ws = str(tmp_path / "ws")
    assert subprocess.run([odf, "-w", ws, "init"], capture_output=True).returncode == 0
    r = subprocess.run([odf, "-w", ws, "log", "../x"], capture_output=True, text=True)
    assert r.returncode == 1 and "../x" in r.stderr


POLLED_YAML = """
kind: DatasetSnapshot
version: 1
content:
  name: polled
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch: {{kind: Url, url: "{url}"}}
      read: {{kind: Csv, header: true, schema: ["v BIGINT"]}}
      merge: {{kind: Append}}
"""


def test_pull_download_limits_from_flags(tmp_path, ws, capsys):
    from odf_core.workspace import Workspace
    from tests.odf_core.ingest.http_server import LocalHttpServer, Resource

    server = LocalHttpServer().start()
    try:
        server.resources["/v.csv"] = Resource(b"v\n" + b"1\n" * 500, trickle=(10, 0.05))
        url = server.url("/v.csv")
        (tmp_path / "polled.yaml").write_text(POLLED_YAML.format(url=url))
        assert run(capsys, "-w", ws, "add", str(tmp_path / "polled.yaml"))[0] == 0
        head = Workspace.open(ws).get("polled").chain.head()
        code, out, err = run(capsys, "-w", ws, "pull", "polled", "--fetch-deadline", "0.5", "--fetch-min-rate", "0")
        assert code == 1 and out == "" and err.count("\n") == 1
        assert err.startswith(f"odf: error: GET {url} failed: not finished within the deadline of 0.5 s (")
        assert Workspace.open(ws).get("polled").chain.head() == head
        assert not [p for p in Path(ws).rglob("*") if p.is_file() and "fetch" in p.parts]  # no half file left
        code, _, err = run(capsys, "-w", ws, "pull", "polled", "--fetch-min-rate", "200", "--fetch-stall-window", "0.3")
        assert code == 1 and "stalled: " in err and "below the minimum of 200 bytes/s" in err
    finally:
        server.stop()
    with pytest.raises(SystemExit) as exit_info:
        main(["-w", ws, "pull", "polled", "--fetch-deadline", "0"])
    assert exit_info.value.code == 2
    assert "argument --fetch-deadline: expected a positive number of seconds, got '0'" in capsys.readouterr().err


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full (a device every write to fails with ENOSPC)")
def test_a_full_disk_no_command_anticipated_is_one_line_not_an_internal_error(tmp_path, capsys):
    """A write the command does not wrap (here its output file) on a full disk: the machine's state, not a bug."""
    f = tmp_path / "b.yaml"
    f.write_text("kind: MetadataBlock\nversion: 2\ncontent:\n  systemTime: 2050-01-01T12:00:00Z\n"
                 "  sequenceNumber: 0\n  event:\n    kind: SetInfo\n    description: foo\n")
    code, _, err = run(capsys, "block", "encode", str(f), "-o", "/dev/full")
    assert (code, err.strip()) == (1, "odf: error: no space left on device while running 'odf block encode'")


def _parsed(parse, argv):
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            return vars(parse(argv)), None, out.getvalue(), err.getvalue()
        except SystemExit as e:
            return None, e.code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("argv", [
    ["pull", "a.b"], ["--workspace", "w", "pull", "a", "b", "--engine", "auto"], ["-w", "w", "ingest", "d", "f"],
    ["-ww", "sql", "select 1"], ["--workspace=w", "engine", "status"], ["engine", "serve", "--port", "0"],
    ["repo", "add", "r", "file:///x"], ["hash", "logical", "f"], ["verify", "--integrity", "x"],
    # errors and help: the whole parser's messages and exit codes
    ["pull"], ["pull", "--bogus"], ["pull", "x", "stray", "--master"], ["nosuch"], ["--help"], ["pull", "--help"],
    ["engine"], ["engine", "nosuch"], ["engine", "serve", "--help"], ["--workspace"], [], ["-x", "pull"],
])
def test_a_command_is_parsed_by_its_own_parser_as_the_whole_parser_would(argv):
    """Issue #64: a command builds only its own subcommand's parser (all ~30 took ~20 ms of every command); what it
    parses, prints and exits with is the whole parser's, errors and help included."""
    from odf_core import cli

    assert _parsed(cli.parse_args, argv) == _parsed(lambda a: cli.build_parser().parse_args(a), argv)


def test_a_command_builds_one_subcommand_parser(monkeypatch):
    import argparse

    from odf_core import cli

    built: list[str] = []
    real = argparse._SubParsersAction.add_parser
    monkeypatch.setattr(argparse._SubParsersAction, "add_parser",
                        lambda self, name, **kw: built.append(name) or real(self, name, **kw))
    assert cli.parse_args(["--workspace", "w", "pull", "a"]).cmd == "pull"
    assert built == ["pull"]
    built.clear()
    with pytest.raises(SystemExit):
        _ = cli.parse_args(["pull", "--bogus"])  # refused by the one command's parser: the whole one reports it
    assert built[0] == "pull" and len(built) > 25
