"""Planning's files for the engine (odf_core/transform/planning.py): an input's schema file is written once per
schema and reused (issue #64: writing it needs pyarrow, whose import a warm step's client otherwise does without)."""
from __future__ import annotations

import os
import subprocess
import sys
import threading

import pyarrow.parquet as pq

from odf_core.commit import commit_data, describe_slice
from odf_core.transform.planning import schema_file, schemas_dir
from odf_core.workspace import Workspace

from ..chain.builders import T0, new_root, write_slice


def _root_with_data(tmp_path):
    ws = Workspace.init(tmp_path / "ws")
    h = new_root(ws)
    path = write_slice(tmp_path / "s.parquet", 0, 2)
    commit_data(h.chain, base_head=h.chain.head(), slice_file=describe_slice(path, "offset", 0),
                checkpoint_path=None, system_time=T0)
    return ws, h


def test_an_inputs_schema_file_is_written_once_per_schema_and_holds_that_schema(tmp_path):
    ws, h = _root_with_data(tmp_path)
    state = h.state()
    directory = schemas_dir(ws)
    path = schema_file(h, state, directory)
    assert os.path.dirname(path) == directory and os.listdir(directory) == [os.path.basename(path)]
    assert pq.read_schema(path).names == ["offset", "op", "system_time", "event_time", "v"]
    assert pq.read_metadata(path).num_rows == 0
    written = os.stat(path).st_mtime_ns
    assert schema_file(h, state, directory) == path and os.stat(path).st_mtime_ns == written  # reused, not rewritten


def test_reusing_a_schema_file_does_not_import_pyarrow(tmp_path):
    ws, h = _root_with_data(tmp_path)
    schema_file(h, h.state(), schemas_dir(ws))
    code = ("import sys\nfrom odf_core.workspace import Workspace\nfrom odf_core.transform.planning import "
            "schema_file, schemas_dir\nws = Workspace.open(sys.argv[1])\nh = ws.get('root')\n"
            "print(schema_file(h, h.state(), schemas_dir(ws)), 'pyarrow' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code, ws.store.root], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [schema_file(h, h.state(), schemas_dir(ws)), "False"]


def test_steps_writing_the_same_schema_file_at_once_leave_one_complete_file(tmp_path):
    ws, h = _root_with_data(tmp_path)
    state, directory = h.state(), schemas_dir(ws)
    paths: list[str] = []
    threads = [threading.Thread(target=lambda: paths.append(schema_file(h, state, directory))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(paths)) == 1 and os.listdir(directory) == [os.path.basename(paths[0])]  # no temporary files left
    assert pq.read_schema(paths[0]).names[-1] == "v"
