"""Upgrading the package keeps derivatives running (docs/upgrading.md).

- A new build whose engine *code* differs (any release: a comment under ``spark_jobs/`` is enough) keeps every
  derivative running with no manual step: the recorded code digest is provenance, not a gate.
- A build whose engine *semantics* differ stops a derivative with one line naming ``odf set-transform
  --upgrade-engine``; running exactly that command records the choice in the chain and the next pull succeeds.
- ``odf verify`` reports reproductions by other engine semantics as their own outcome, never as tampering.
- A workspace written by an earlier build (a checked-in fixture) ingests, pulls and verifies with today's code.

The CLI runs in this process and reuses the test's Spark session (as tests/odf_core/test_cli_spark.py does).
"""
from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import odf_core.engine.version as version
from odf_core.cli import main
from odf_core.engine import LocalEngine
from odf_core.engine.version import EngineVersion, engine_version, same_semantics
from odf_core.metadata import ExecuteTransform, SetTransform
from odf_core.transform import verify
from odf_core.workspace import Workspace

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "workspaces"
#: The earliest fixture: written by main at e74da84 (2026-12-06), before the semantics version existed.
E74DA84 = FIXTURES / "e74da84"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def fresh_version(monkeypatch):
    """Each test computes this build's engine version anew (it is cached per process)."""
    version.engine_version.cache_clear()
    yield
    version.engine_version.cache_clear()


# -- the policy, without Spark ------------------------------------------------------------------------------------


def test_version_text_and_semantics():
    v = EngineVersion.parse("spark-4.2.0+sem-3+jobs-4b4264bb358dc23a")
    assert v == EngineVersion("4.2.0", 3, "4b4264bb358dc23a") and v.semantics_key == "spark-4.2/sem-3"
    assert v.text() == "spark-4.2.0+sem-3+jobs-4b4264bb358dc23a"
    legacy = EngineVersion.parse("spark-4.2.0+jobs-329e5f92f3756702")  # written before the policy: semantics 1
    assert legacy is not None and legacy.semantics_key == "spark-4.2/sem-1"
    assert EngineVersion.parse("0.21.0") is None  # another engine's version string


@pytest.mark.parametrize("recorded, running, same", [
    ("spark-4.2.0+jobs-4b4264bb358dc23a", "spark-4.2.0+sem-1+jobs-329e5f92f3756702", True),  # a new build, same sem
    ("spark-4.2.0+sem-1+jobs-aaaa", "spark-4.2.1+sem-1+jobs-bbbb", True),  # a Spark patch release
    ("spark-4.2.0+sem-1+jobs-aaaa", "spark-4.2.0+sem-2+jobs-aaaa", False),  # declared semantics bumped
    ("spark-4.2.0+sem-1+jobs-aaaa", "spark-4.3.0+sem-1+jobs-aaaa", False),  # a Spark minor upgrade
    ("0.21.0", "spark-4.2.0+sem-1+jobs-aaaa", False),  # set for another engine
    (None, "spark-4.2.0+sem-1+jobs-aaaa", True),  # no version recorded: nothing to compare
])
def test_same_semantics(recorded, running, same):
    assert same_semantics(recorded, running) is same


def test_this_build_declares_its_semantics(fresh_version):
    v = EngineVersion.parse(engine_version())
    assert v is not None and v.semantics == version.SEMANTICS and v.code


# -- on a real workspace ------------------------------------------------------------------------------------------

ROOT = """
kind: DatasetSnapshot
version: 1
content:
  name: sales
  kind: Root
  metadata:
    - kind: AddPushSource
      sourceName: app
      read: {kind: NdJson, schema: ["event_time TIMESTAMP", "city STRING", "amount BIGINT"]}
      merge: {kind: Append}
"""
BY_CITY = """
kind: DatasetSnapshot
version: 1
content:
  name: by-city
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs: [{datasetRef: sales}]
      transform:
        kind: Sql
        engine: spark
        query: select max(event_time) as event_time, city, sum(amount) as total from sales group by city
"""


def _ingest(capsys, ws: str, tmp: Path, rows: list[tuple[str, str, int]]) -> None:
    f = tmp / f"batch-{len(list(tmp.glob('batch-*')))}.ndjson"
    f.write_text("".join(json.dumps({"event_time": t, "city": c, "amount": a}) + "\n" for t, c, a in rows))
    code, out, err = run(capsys, "-w", ws, "ingest", "sales", str(f))
    assert code == 0, err


def _latest(ws: str, name: str) -> dict[str, dict]:
    """Each key's current row of a derivative's output changelog (appends and corrections, in offset order)."""
    data = Path(ws) / "datasets" / name / "data"
    rows = pa.concat_tables([pq.read_table(f) for f in data.iterdir()]).sort_by("offset").to_pylist()
    return {r["city"]: r for r in rows if r["op"] in (0, 3)}


def _totals(ws: str) -> dict[str, int]:
    return {city: r["total"] for city, r in _latest(ws, "by-city").items()}


@pytest.fixture
def workspace(tmp_path, capsys, spark):
    ws = str(tmp_path / ".odf")
    (tmp_path / "sales.yaml").write_text(ROOT)
    (tmp_path / "by-city.yaml").write_text(BY_CITY)
    assert run(capsys, "-w", ws, "init")[0] == 0
    assert run(capsys, "-w", ws, "add", str(tmp_path / "sales.yaml"), str(tmp_path / "by-city.yaml"))[0] == 0
    _ingest(capsys, ws, tmp_path, [("2026-12-01T10:00:00Z", "Oslo", 5), ("2026-12-01T11:00:00Z", "Riga", 7)])
    code, out, err = run(capsys, "-w", ws, "pull", "by-city")
    assert code == 0, err
    return ws


def _transforms(ws: str, name: str) -> list[str]:
    h = Workspace.open(ws).get(name)
    return [b.event.transform.version for _, b in h.chain.iter_blocks() if isinstance(b.event, SetTransform)][::-1]


@pytest.mark.spark
def test_a_new_build_of_the_engine_code_keeps_derivatives_running(workspace, tmp_path, capsys, monkeypatch,
                                                                  fresh_version):
    """A release changes files under spark_jobs/ (here: a comment): the engine digest changes, the derivative
    ingests, pulls and verifies with exit 0 and no manual step."""
    import spark_jobs

    recorded = _transforms(workspace, "by-city")[-1]
    build = tmp_path / "release" / "spark_jobs"
    shutil.copytree(Path(spark_jobs.__file__).parent, build, ignore=shutil.ignore_patterns("__pycache__"))
    planning = build / "transform" / "planning.py"
    planning.write_text(planning.read_text() + "\n# a comment added by the next release\n")
    monkeypatch.setattr(spark_jobs, "__file__", str(build / "__init__.py"))
    version.engine_version.cache_clear()
    running = engine_version()
    assert running != recorded and same_semantics(recorded, running)  # the digest alone moved

    _ingest(capsys, workspace, tmp_path, [("2026-12-02T10:00:00Z", "Oslo", 3)])
    code, out, err = run(capsys, "-w", workspace, "pull", "by-city")
    assert code == 0 and "by-city: 2 records" in out, err  # -C/+C of the changed group
    assert _transforms(workspace, "by-city") == [recorded]  # nothing appended: no manual step, no new SetTransform
    assert _totals(workspace) == {"Oslo": 8, "Riga": 7}
    code, out, err = run(capsys, "-w", workspace, "verify", "by-city")
    assert code == 0 and "reproduction ok: 2 transformation(s)" in out and "another engine" not in out, err


@pytest.mark.spark
def test_a_semantics_bump_stops_the_pull_with_the_command_that_records_the_choice(workspace, tmp_path, capsys,
                                                                                 monkeypatch, fresh_version):
    monkeypatch.setattr(version, "SEMANTICS", version.SEMANTICS + 1)
    _ingest(capsys, workspace, tmp_path, [("2026-12-02T10:00:00Z", "Riga", 1)])
    code, out, err = run(capsys, "-w", workspace, "pull", "by-city")
    lines = err.strip().splitlines()
    assert code == 1 and len(lines) == 1, err
    assert "sem-1" in lines[0] and f"sem-{version.SEMANTICS}" in lines[0] and "Traceback" not in err
    command = lines[0].split("run: ", 1)[1]
    assert command == f"odf --workspace {Workspace.open(workspace).url} set-transform --upgrade-engine by-city"
    assert _totals(workspace) == {"Oslo": 5, "Riga": 7}  # nothing ran

    argv = shlex.split(command)
    assert argv[0] == "odf"
    code, out, err = run(capsys, *argv[1:])  # exactly the command the error named
    assert code == 0 and "transform recorded for this engine in block" in out, err
    assert _transforms(workspace, "by-city")[-1] == engine_version()
    code, out, err = run(capsys, *argv[1:])  # again: nothing to record
    assert code == 0 and "already recorded" in out, err

    code, out, err = run(capsys, "-w", workspace, "pull", "by-city")
    assert code == 0 and "by-city: 2 records" in out, err  # -C/+C of the changed group
    assert _totals(workspace) == {"Oslo": 5, "Riga": 8}
    # the first block was made under semantics 1: verify reproduces it with this engine and says so
    code, out, err = run(capsys, "-w", workspace, "verify", "by-city")
    assert code == 0, err
    assert ("reproduced with engine spark-4.2/sem-2, recorded spark-4.2/sem-1: hashes match" in out
            and "(1 by another engine's semantics)" in out), out


@pytest.mark.spark
def test_upgrade_engine_without_a_derivative_or_with_a_file_is_one_line(workspace, tmp_path, capsys):
    code, out, err = run(capsys, "-w", workspace, "set-transform", "--upgrade-engine", "sales")
    assert code == 1 and err.strip() == "odf: error: dataset 'sales' is not a derivative dataset", err
    code, out, err = run(capsys, "-w", workspace, "set-transform", "--upgrade-engine", "by-city", "x.yaml")
    assert code == 1 and "drop the file argument 'x.yaml'" in err and len(err.strip().splitlines()) == 1


class SkewedEngine(LocalEngine):
    """The real in-process engine whose transform answers gain one row: an engine that computes differently. (A
    stand-in for a future release: no build with other semantics exists to run.)"""

    def execute(self, request, *, what="engine request"):
        response = super().execute(request, what=what)
        path = getattr(getattr(request, "request", None), "new_data_path", None)
        if path and Path(path).exists():
            t = pq.read_table(path)
            pq.write_table(pa.concat_tables([t, t.slice(0, 1)]), path)
        return response


@pytest.mark.spark
def test_verify_reports_a_difference_under_other_semantics_as_its_own_outcome(workspace, capsys, monkeypatch, spark,
                                                                             fresh_version):
    ws = Workspace.open(workspace)
    skewed = SkewedEngine.with_session(spark)
    same = verify(ws, "by-city", engine=skewed)  # same semantics: a difference is a failure of verification
    assert not same.ok and not same.engine_differs and "logical hash of the reproduced data" in same.problem
    assert same.summary().startswith("verification failed at block")

    monkeypatch.setattr(version, "SEMANTICS", version.SEMANTICS + 1)
    version.engine_version.cache_clear()
    other = verify(ws, "by-city", engine=skewed)
    assert not other.ok and other.engine_differs and len(other.other_engine) == 1
    assert other.other_engine[0].endswith("recorded spark-4.2/sem-1: hashes differ")
    assert other.summary().startswith("not reproducible with this engine: 1 transformation(s) were recorded with "
                                      "other engine semantics")
    # the command: its own exit code (3) and no 'verification failed'
    monkeypatch.setattr("odf_core.cli._engine", lambda args: skewed)
    code, out, err = run(capsys, "-w", workspace, "verify", "by-city")
    assert code == 3 and "hashes differ" in out and "not reproducible with this engine" in err, (out, err)
    assert "verification failed" not in err


# -- a workspace written by an earlier build ----------------------------------------------------------------------


@pytest.mark.spark
@pytest.mark.parametrize("fixture", [E74DA84], ids=lambda p: p.name)
def test_a_workspace_written_by_an_earlier_build_keeps_working(fixture, tmp_path, capsys):
    """The fixture: a root, a stateful (GROUP BY with a DOUBLE avg: exact-sum state) and a stateless derivative, two
    transactions each, with checkpoints. Today's code ingests into it, pulls both derivatives incrementally and
    verifies every dataset (integrity and reproduction), with no manual step."""
    shutil.copytree(fixture / "workspace", tmp_path / "ws")
    ws = str(tmp_path / "ws")
    recorded = _transforms(ws, "by-city")[-1]
    assert recorded != engine_version() and same_semantics(recorded, engine_version())
    code, out, err = run(capsys, "-w", ws, "ingest", "sales", str(fixture / "inputs" / "batch-3.ndjson"))
    assert code == 0 and "2 records at offsets (5, 6)" in out, err
    code, out, err = run(capsys, "-w", ws, "pull", "by-city", "big-sales")
    assert code == 0, err
    assert "by-city: 4 records" in out and "big-sales: 1 records" in out, out  # two groups corrected
    h = Workspace.open(ws).get("by-city")
    last = next(b for _, b in h.chain.iter_blocks() if isinstance(b.event, ExecuteTransform))
    assert last.event.prev_checkpoint is not None  # it continued from the old build's checkpoint
    rows = {c: (r["n"], r["total"], r["avg_price"]) for c, r in _latest(ws, "by-city").items()}
    assert rows == {"Oslo": (3, 44, pytest.approx((1.5 + 0.1 + 2.0) / 3)),
                    "Riga": (3, 53, pytest.approx((2.25 + 0.7 + 0.95) / 3)), "Tartu": (1, 5, 3.0)}
    big = pa.concat_tables([pq.read_table(f) for f in (Path(ws) / "datasets" / "big-sales" / "data").iterdir()])
    assert big.sort_by("offset").column("amount").to_pylist() == [12, 30, 40, 10]
    for name in ("sales", "by-city", "big-sales"):
        code, out, err = run(capsys, "-w", ws, "verify", name)
        assert code == 0 and "ok" in out and "another engine" not in out, (name, out, err)
