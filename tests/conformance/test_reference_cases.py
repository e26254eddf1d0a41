"""The reference implementation's ingest tests, ported as data (``cases/*.yaml``) and run through the ``odf`` CLI.

Each case names the reference test it ports (``ref``; a case whose ``ref`` is ``decision: ...`` is not a port but pins a
behaviour the reference has and this implementation deliberately does not), creates a root dataset from its ``metadata``
events, and plays its rounds: files written into the source directory, ``odf pull`` / ``odf ingest``,
``odf add --update`` with edited events. After each round the ``expect`` block holds the reference's expected outcome.
Where this implementation deliberately differs, ``ours`` overrides part of it and ``why`` names the row of
docs/conformance.md that explains the difference; the runner checks that such a row exists, and that the case count
stated there is the real one.
"""
from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from odf_core.metadata import Timestamp

from .harness import DATASET, DEFAULT_TIME, Clock, OdfWorkspace, rows_of, set_mtime, show, snapshot_yaml
from .inputs import GENERATORS

pytestmark = pytest.mark.spark

CASES_DIR = Path(__file__).parent / "cases"
DOC = Path(__file__).parents[2] / "docs" / "conformance.md"
SYSTEM_COLUMNS = ("offset", "op", "system_time")


def load_cases() -> list[dict[str, Any]]:
    cases = []
    for f in sorted(CASES_DIR.glob("*.yaml")):
        for case in yaml.safe_load(f.read_text()):
            case["file"] = f.name
            cases.append(case)
    return cases


CASES = load_cases()


def difference_ids() -> set[str]:
    """The ids (``D1``, ``D2``, ...) of the rows of the table of intended differences in docs/conformance.md."""
    return set(re.findall(r"^\|\s*(D\d+)\s*\|", DOC.read_text(), re.MULTILINE))


def expected(round_: dict[str, Any]) -> dict[str, Any]:
    exp = copy.deepcopy(round_.get("expect") or {})
    ours = round_.get("ours")
    if ours:
        ours = dict(ours)
        why = ours.pop("why")
        assert why in difference_ids(), f"'ours' names {why}, which is not a row of docs/conformance.md"
        exp.update(ours)
    return exp


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(Timestamp, "now", classmethod(lambda cls: c.current))
    return c


def case_param(case: dict[str, Any]) -> Any:
    """A case as a test parameter; ``xfail: <reason>`` marks one this implementation does not pass yet (strict: it
    must fail, so a fix shows up as an unexpected pass)."""
    marks = [pytest.mark.xfail(reason=case["xfail"], strict=True)] if case.get("xfail") else []
    return pytest.param(case, id=case["name"], marks=marks)


@pytest.mark.parametrize("case", [case_param(c) for c in CASES])
def test_reference_case(case: dict[str, Any], tmp_path: Path, clock: Clock, spark) -> None:
    w = OdfWorkspace(tmp_path)
    w.ok("init")
    (tmp_path / "snapshot.yaml").write_text(snapshot_yaml(case["metadata"], w.src))
    w.ok("add", str(tmp_path / "snapshot.yaml"))
    mtime = [0]
    for i, round_ in enumerate(case["rounds"], 1):
        clock.set(round_.get("time", DEFAULT_TIME))
        write_files(w, round_.get("files") or {}, mtime)
        exp = expected(round_)
        where = f"{case['name']} round {i}"
        if "update" in round_:  # odf add --update with edited events, then the round's ingest
            (tmp_path / f"update-{i}.yaml").write_text(snapshot_yaml(round_["update"], w.src))
            w.ok("add", "--update", str(tmp_path / f"update-{i}.yaml"))
        before = w.head()
        result = run_round(w, round_)
        if "error" in exp:
            assert result.code == 1, f"{where}: expected an error, got: {result.out}"
            line = result.err.strip()
            assert "\n" not in line and line.startswith("odf: error: "), f"{where}: not one line: {result.err}"
            for part in exp["error"]:
                assert part in line, f"{where}: {part!r} not in {line!r}"
            assert w.head() == before, f"{where}: a failed round changed the dataset"
            continue
        assert result.code == 0, f"{where}: {result.err}"
        check_round(w, exp, before, where)


def write_files(w: OdfWorkspace, files: dict[str, Any], mtime: list[int]) -> None:
    for name, content in files.items():
        path = w.src / name
        if isinstance(content, dict):
            GENERATORS[content["generate"]](path)
        else:
            path.write_text(content)
        mtime[0] += 1  # every write is a new version of the file for a polling source
        set_mtime(path, f"2001-01-01T00:00:{mtime[0]:02d}Z")


def run_round(w: OdfWorkspace, round_: dict[str, Any]):
    if "push" in round_:
        return w.odf("ingest", DATASET, str(w.src / round_["push"]))
    if "stdin" in round_:
        return w.odf("ingest", DATASET, "-", stdin=round_["stdin"].encode())
    if round_.get("pull"):
        return w.odf("pull", DATASET)
    raise AssertionError(f"a round needs push, stdin or pull: {sorted(round_)}")


def check_round(w: OdfWorkspace, exp: dict[str, Any], before: str | None, where: str) -> None:
    blocks = w.blocks()
    head = blocks[0]["event"]
    if exp.get("nothing"):
        assert blocks[0]["hash"] == before, f"{where}: expected no new block, got {head['kind']}"
        return
    if "newData" in exp:
        assert head["kind"] == "AddData" and head.get("newData") == exp["newData"], f"{where}: {head}"
    if "watermark" in exp:
        assert show(head.get("newWatermark")) == exp["watermark"], f"{where}: {head}"
    if "sourceState" in exp:
        assert (head.get("newSourceState") is not None) == exp["sourceState"], f"{where}: {head}"
    if "schemaBlocks" in exp:
        assert len(w.schema_blocks()) == exp["schemaBlocks"], f"{where}: {[b['sequenceNumber'] for b in blocks]}"
    schema = w.data_schema()
    if "schema" in exp:
        assert {f.name: str(f.type) for f in schema} == exp["schema"], f"{where}: {schema}"
    if "schemaRequired" in exp:
        assert [f.name for f in schema if not f.nullable] == exp["schemaRequired"], f"{where}: {schema}"
    if "descriptions" in exp:
        found = {f.name: (f.metadata or {}).get(b"description", b"").decode() for f in schema}
        assert {k: found[k] for k in exp["descriptions"]} == exp["descriptions"], f"{where}: {schema}"
    if not {"rows", "types", "order", "check", "required"} & exp.keys():
        return
    table = w.last_data()
    assert table is not None, f"{where}: no data"
    if "order" in exp:
        data = [c for c in table.column_names if c not in SYSTEM_COLUMNS and c not in exp.get("skipOrder", ())]
        assert data == exp["order"], f"{where}: column order {data}"
    if "required" in exp:
        required = [f.name for f in table.schema if not f.nullable]
        assert required == exp["required"], f"{where}: not-null columns {required}"
    if "types" in exp:
        types = {c: str(table.schema.field(c).type) for c in exp["types"]}
        assert types == exp["types"], f"{where}: types {types}"
    if "rows" in exp:
        columns = exp.get("columns") or table.column_names
        assert rows_of(table, columns) == exp["rows"], f"{where}: rows {rows_of(table, columns)}"
    if "check" in exp:
        CHECKS[exp["check"]["name"]](w, table, exp["check"], where)


# -- checks that do not fit a table of rows -------------------------------------------------------------------------


def check_geometry_prefix(w: OdfWorkspace, table, spec: dict[str, Any], where: str) -> None:
    """The geometry of one row as GeoJSON, its first ring cut to ``points`` points."""
    row = next(r for r in table.to_pylist() if r[spec["key"]] == spec["value"])
    geom = json.loads(row["geometry"])
    geom["coordinates"][0][0] = geom["coordinates"][0][0][:spec["points"]]
    assert geom == spec["expected"], f"{where}: {geom}"


def check_offsets_sequential(w: OdfWorkspace, table, spec: dict[str, Any], where: str) -> None:
    """Offsets run 0..n-1 in file order (across row groups) and event times never go back."""
    offsets = table.column("offset").to_pylist()
    assert offsets == list(range(spec["rows"])), f"{where}: offsets not sequential"
    times = table.column("event_time").to_pylist()
    assert all(a <= b for a, b in zip(times, times[1:])), f"{where}: not in event-time order"
    assert str(table.column("population").type) == spec["populationType"], f"{where}: population type"


def check_parquet_encoding(w: OdfWorkspace, table, spec: dict[str, Any], where: str) -> None:
    """Compression and data-page encodings of the system columns, from the file's own metadata."""
    import pyarrow.parquet as pq

    head = next(b for b in w.blocks() if b["event"]["kind"] == "AddData")
    path = Path(w.ws) / "datasets" / DATASET / "data" / head["event"]["newData"]["physicalHash"]
    meta = pq.ParquetFile(path).metadata
    assert meta.num_row_groups == spec["rowGroups"], f"{where}: {meta.num_row_groups} row groups"
    rg = meta.row_group(0)
    for i, (name, encoding) in enumerate(spec["columns"]):
        col = rg.column(i)
        assert col.path_in_schema == name and col.compression == "SNAPPY", f"{where}: {col}"
        if encoding:
            assert encoding in col.encodings, f"{where}: {name} encodings {col.encodings}"


CHECKS = {"geometryPrefix": check_geometry_prefix, "offsetsSequential": check_offsets_sequential,
          "parquetEncoding": check_parquet_encoding}


def test_the_documented_case_count_is_the_real_one() -> None:
    refs = {c["ref"] for c in CASES if "::" in c["ref"]}
    text = DOC.read_text()
    m = re.search(r"(\d+) cases port (\d+) tests of the reference", text)
    assert m, "docs/conformance.md must state 'N cases port M tests of the reference'"
    assert (int(m.group(1)), int(m.group(2))) == (sum(1 for c in CASES if "::" in c["ref"]), len(refs))
