"""Reading a dataset whose data file is gone (``odf tail``, ``odf sql``): the one-line integrity error of ``odf verify
--integrity`` naming the file, no trace; and ``odf sql`` reads only the datasets a query names, so one broken dataset
does not break queries over the others. Real CLI runs, real files, the test run's Spark session."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from odf_core.cli import main
from odf_core.query import data_files, referenced_datasets
from odf_core.workspace import Workspace

SNAPSHOT = """
kind: DatasetSnapshot
version: 1
content:
  name: {name}
  kind: Root
  metadata:
    - kind: AddPushSource
      sourceName: app
      read: {{kind: NdJson, schema: ["city STRING", "v INT"]}}
      merge: {{kind: Append}}
"""


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_query_names_the_datasets_it_reads():
    names = ["good.one", "broken", "other"]
    assert referenced_datasets("select v from good.one", names) == {"good.one"}
    assert referenced_datasets("select broken.v from `broken` join good.one g on true", names) == {"broken",
                                                                                                   "good.one"}
    assert referenced_datasets("select 'other' -- other\nfrom good.one", names) == {"good.one"}


@pytest.mark.spark
def test_tail_and_sql_of_a_dataset_with_a_missing_file_give_the_integrity_error(tmp_path, capsys, spark):
    ws = str(tmp_path / ".odf")
    assert run(capsys, "-w", ws, "init")[0] == 0
    for name in ("good.one", "broken"):
        (tmp_path / f"{name}.yaml").write_text(SNAPSHOT.format(name=name))
        assert run(capsys, "-w", ws, "add", str(tmp_path / f"{name}.yaml"))[0] == 0
        data = tmp_path / f"{name}.ndjson"
        data.write_text('{"city": "Oslo", "v": 1}\n{"city": "Riga", "v": 2}\n')
        code, _, err = run(capsys, "-w", ws, "ingest", name, str(data))
        assert code == 0, err
    h = Workspace.open(ws).get("broken")
    files = [Path(h.store.local_path(k)) for k in data_files(h)]
    assert len(files) == 1
    os.remove(files[0])

    code, _, verify_err = run(capsys, "-w", ws, "verify", "--integrity", "broken")
    assert code == 1 and verify_err.startswith("odf: error: broken: integrity check failed: block ")
    assert verify_err.rstrip("\n").endswith(" is missing") and verify_err.count("\n") == 1

    code, out, err = run(capsys, "-w", ws, "tail", "broken")
    assert (code, out, err) == (1, "", verify_err)
    code, out, err = run(capsys, "-w", ws, "sql", "select sum(v) as total from broken")
    assert (code, out, err) == (1, "", verify_err)
    # the broken dataset is not read by queries that do not name it
    code, out, err = run(capsys, "-w", ws, "sql", "select sum(v) as total from good.one")
    assert (code, out.split()) == (0, ["total", "3"]), err
    code, out, err = run(capsys, "-w", ws, "tail", "good.one")
    assert code == 0 and "Riga" in out, err
