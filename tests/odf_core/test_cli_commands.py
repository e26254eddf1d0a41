"""The ``odf`` commands that had no test as commands — ``rename``, ``delete``, ``repo delete``, ``serve``,
``log --limit``, ``push/pull --force`` — run through the CLI's entry point on real workspaces (built without Spark:
tests/odf_core/repository/datasets.py), checked by what is on disk afterwards; ``odf serve`` and one failing command
run as the real console script in a child process."""
from __future__ import annotations

import re
from pathlib import Path

from odf_core.workspace import Workspace

from ..cli_process import OdfCli, stop
from .chain.builders import new_root
from .repository.datasets import chain_hashes, grow, workspace_with_root

DERIVED = """kind: DatasetSnapshot
version: 1
content:
  name: doubled
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs: [{datasetRef: root}]
      transform: {kind: Sql, engine: spark, query: "select event_time, v * 2 as v from root"}
"""


def _with_derivative(tmp_path: Path) -> Workspace:
    ws, _ = workspace_with_root(str(tmp_path / ".odf"), tmp_path, slices=1)
    (tmp_path / "doubled.yaml").write_text(DERIVED)
    return ws


def test_rename_moves_the_dataset_and_its_old_name_is_gone(odf_cli: OdfCli, tmp_path: Path) -> None:
    ws = _with_derivative(tmp_path)
    head = chain_hashes(ws.get("root"))
    assert odf_cli.ok("rename", "root", "readings") == "Renamed root to readings\n"
    assert [str(h.name) for h in Workspace.open(ws.url).list()] == ["readings"]
    assert chain_hashes(Workspace.open(ws.url).get("readings")) == head  # the same chain under its new name
    assert "readings" in odf_cli.ok("list")
    assert re.fullmatch(r"odf: error: .*'root'.*", odf_cli.error("log", "root"))
    # a taken name is refused and nothing moves
    new_root(Workspace.open(ws.url), "other")
    assert "'other' already exists" in odf_cli.error("rename", "readings", "other")
    assert sorted(str(h.name) for h in Workspace.open(ws.url).list()) == ["other", "readings"]


def test_delete_refuses_an_input_of_another_dataset_unless_forced(odf_cli: OdfCli, tmp_path: Path) -> None:
    ws = _with_derivative(tmp_path)
    odf_cli.ok("add", str(tmp_path / "doubled.yaml"))
    err = odf_cli.error("delete", "root")
    assert "'root' is an input of doubled" in err
    assert sorted(str(h.name) for h in Workspace.open(ws.url).list()) == ["doubled", "root"]
    assert odf_cli.ok("delete", "root", "--force") == "Deleted root\n"
    assert [str(h.name) for h in Workspace.open(ws.url).list()] == ["doubled"]
    assert not (tmp_path / ".odf" / "datasets" / "root").exists()
    assert odf_cli.ok("delete", "doubled") == "Deleted doubled\n"
    assert "nope" in odf_cli.error("delete", "nope")


def test_repo_delete_forgets_the_repository(odf_cli: OdfCli, tmp_path: Path) -> None:
    Workspace.init(str(tmp_path / ".odf"))
    odf_cli.ok("repo", "add", "shared", f"file://{tmp_path}/repo")
    assert odf_cli.ok("repo", "list") == f"shared\tfile://{tmp_path}/repo\n"
    assert odf_cli.ok("repo", "delete", "shared") == "deleted repository shared\n"
    assert odf_cli.ok("repo", "list").startswith("no repositories (add one with 'odf repo add NAME URL')")
    assert "shared" in odf_cli.error("repo", "delete", "shared")


def test_log_limit_prints_that_many_blocks_newest_first(odf_cli: OdfCli, tmp_path: Path) -> None:
    ws, h = workspace_with_root(str(tmp_path / ".odf"), tmp_path, slices=2)
    hashes = chain_hashes(h)
    assert len(hashes) > 3
    for args, n in ((("-n", "1"), 1), (("--limit", "3"), 3), ((), len(hashes))):
        out = odf_cli.ok("log", "root", *args)
        assert re.findall(r"^# Block: (\S+)$", out, re.M) == hashes[:n], args


def test_serve_prints_its_address_and_a_pull_from_it_copies_the_chain(odf_process: OdfCli, tmp_path: Path) -> None:
    """``odf serve --port 0`` takes a free port and says which; a second workspace pulls the dataset over HTTP;
    Ctrl-C stops it with exit code 0."""
    ws, h = workspace_with_root(str(tmp_path / ".odf"), tmp_path, slices=2)
    proc, m = odf_process.start("serve", "--port", "0",
                            ready=r"read-only at (http://127\.0\.0\.1:(\d+))/<dataset> \(Ctrl-C stops\)")
    try:
        assert int(m.group(2)) > 0
        other = tmp_path / "other"
        other.mkdir()
        cli2 = OdfCli(other, {}, process=False)
        cli2.ok("init")
        out = cli2.ok("pull", f"{m.group(1)}/root", "--as", "copy")
        assert out.startswith("copy: ") and f"head {h.chain.head()}" in out
        assert chain_hashes(Workspace.open(str(other / ".odf")).get("copy")) == chain_hashes(h)
        cli2.ok("verify", "copy", "--integrity")
    finally:
        code = stop(proc)
    assert code == 0, proc.stderr.read() if proc.stderr else ""


def test_push_and_pull_force_replace_a_diverged_chain(odf_cli: OdfCli, tmp_path: Path) -> None:
    ws, origin = workspace_with_root(str(tmp_path / ".odf"), tmp_path, slices=2)
    url = f"file://{tmp_path}/repo/root"
    odf_cli.ok("push", "root", "--to", url)
    replica_dir = tmp_path / "replica"
    replica_dir.mkdir()
    replica = OdfCli(replica_dir, {}, process=False)
    replica.ok("init")
    replica.ok("pull", url, "--as", "root")
    grow(origin, tmp_path, 1, tag="a")  # the origin commits a block and pushes it; the replica commits another
    assert odf_cli.ok("push", "root").startswith(f"root -> {url}: 1 new block(s)")  # its remembered remote
    rws = Workspace.open(str(replica_dir / ".odf"))
    grow(rws.get("root"), tmp_path, 1, tag="z")
    theirs = chain_hashes(rws.get("root"))
    remote_head = (tmp_path / "repo" / "root" / "refs" / "head").read_text()

    for refused in (("push", "root"), ("pull", "root")):
        err = replica.error(*refused)
        assert "has diverged" in err and "--force replaces it" in err, refused
    assert chain_hashes(rws.get("root")) == theirs  # refused: both sides untouched
    assert (tmp_path / "repo" / "root" / "refs" / "head").read_text() == remote_head

    # push --force: the remote takes the replica's chain
    assert replica.ok("push", "root", "--force").startswith(f"root -> {url}")
    assert (tmp_path / "repo" / "root" / "refs" / "head").read_text().strip() == theirs[0]
    assert "has diverged" in odf_cli.error("push", "root")
    # pull --force: the origin takes the remote's (the replica's) chain
    assert odf_cli.ok("pull", "root", "--force").startswith("root: ")
    assert chain_hashes(Workspace.open(ws.url).get("root")) == theirs
    odf_cli.ok("verify", "root", "--integrity")


def test_a_failing_command_in_a_real_process_prints_one_line_and_exits_1(odf_process: OdfCli,
                                                                          tmp_path: Path) -> None:
    ws, _ = workspace_with_root(str(tmp_path / ".odf"), tmp_path, slices=0)
    new_root(ws, "other")
    err = odf_process.error("rename", "root", "other")  # exit 1, one line, no traceback (OdfCli.error)
    assert re.fullmatch(r"odf: error: dataset 'other' already exists in workspace \S+", err)
