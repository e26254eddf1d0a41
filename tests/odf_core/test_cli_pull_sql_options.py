"""Options of the Spark-backed commands that had no test: ``pull --once``, ``pull --fetch-timeout``, ``sql --limit``
and ``sql -i`` — through the CLI's entry point in this process (its Spark session is the test run's)."""
from __future__ import annotations

from pathlib import Path

import pytest

from odf_core.workspace import Workspace

from ..cli_process import OdfCli
from ..snapshot_yaml import root_snapshot
from .ingest.http_server import LocalHttpServer, Resource

pytestmark = pytest.mark.spark

CITIES_CSV = '{kind: Csv, header: true, schema: ["city STRING", "population BIGINT"]}'
GLOB = root_snapshot("cities", CITIES_CSV, "{kind: Ledger, primaryKey: [city]}",
                     fetch='{kind: FilesGlob, path: "%s/cities-*.csv"}')
HTTP = root_snapshot("served", CITIES_CSV, "{kind: Snapshot, primaryKey: [city]}", fetch='{kind: Url, url: "%s"}')
PUSHED = root_snapshot("nums", '{kind: NdJson, schema: ["v INT"]}', "{kind: Append}", push="app")


def _blocks(tmp_path: Path, name: str) -> int:
    return Workspace.open(str(tmp_path / ".odf")).get(name).state().block_count


def _records(tmp_path: Path, name: str) -> int:
    return Workspace.open(str(tmp_path / ".odf")).get(name).state().num_records


def test_pull_once_takes_one_transaction_per_dataset(odf_cli: OdfCli, tmp_path: Path, spark) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "cities-1.csv").write_text("city,population\nOslo,700000\n")
    (src / "cities-2.csv").write_text("city,population\nRiga,600000\nVienna,1980000\n")
    (tmp_path / "cities.yaml").write_text(GLOB % src)
    odf_cli.ok("init")
    odf_cli.ok("add", "cities.yaml")
    out = odf_cli.ok("pull", "cities", "--once")
    assert out.startswith("cities: 1 records at offsets") and out.count("\n") == 1, out
    assert _records(tmp_path, "cities") == 1  # the first file only
    out = odf_cli.ok("pull", "cities")  # without --once: everything that is left
    assert out.startswith("cities: 2 records at offsets"), out
    assert _records(tmp_path, "cities") == 3
    assert odf_cli.ok("pull", "cities", "--once") == "cities: up to date\n"


def test_pull_fetch_timeout_abandons_a_slow_server_and_commits_nothing(odf_cli: OdfCli, tmp_path: Path,
                                                                       spark) -> None:
    server = LocalHttpServer().start()
    try:
        server.resources["/cities.csv"] = Resource(b"city,population\nOslo,700000\n", etag='"1"')
        server.delay_s = 3.0  # every answer waits 3 s
        (tmp_path / "served.yaml").write_text(HTTP % server.url("/cities.csv"))
        odf_cli.ok("init")
        odf_cli.ok("add", "served.yaml")
        before = _blocks(tmp_path, "served")
        err = odf_cli.error("pull", "served", "--fetch-timeout", "0.5")
        assert err == f"odf: error: GET {server.url('/cities.csv')} failed: timed out after 0.5 s"
        assert _blocks(tmp_path, "served") == before
        out = odf_cli.ok("pull", "served", "--fetch-timeout", "30")
        assert out.startswith("served: 1 records"), out
    finally:
        server.stop()


def test_sql_limit_and_interactive_statements_after_the_query(odf_cli: OdfCli, tmp_path: Path, spark) -> None:
    (tmp_path / "nums.yaml").write_text(PUSHED)
    (tmp_path / "nums.ndjson").write_text("".join(f'{{"v": {i}}}\n' for i in range(5)))
    odf_cli.ok("init")
    odf_cli.ok("add", "nums.yaml")
    odf_cli.ok("ingest", "nums", "nums.ndjson")
    out = odf_cli.ok("sql", "select v from nums order by v", "--limit", "2")
    assert [line.split() for line in out.splitlines()] == [["v"], ["0"], ["1"]]
    assert len(odf_cli.ok("sql", "select v from nums").splitlines()) == 6  # the default limit (1000) keeps all
    # -i: the query first, then the statements of stdin; a failing one is reported and the exit code is 1
    done = odf_cli.run("sql", "select count(*) as n from nums", "-i", "--limit", "1",
                       input="select max(v) as top from nums;\nselect nope from nums;\nselect 7 as seven;\n")
    assert done.returncode == 1, done.stderr
    assert [line.split() for line in done.stdout.splitlines()] == [["n"], ["5"], ["top"], ["4"], ["seven"], ["7"]]
    errors = [line for line in done.stderr.splitlines() if line.startswith("odf: error: ")]
    assert len(errors) == 1 and "nope" in errors[0], done.stderr
