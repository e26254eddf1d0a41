"""Planning's files for the engine (odf_core/transform/planning.py): an input's schema file comes from the user's
cache, written once per schema (issue #64: writing one needs pyarrow, whose import a warm step's client otherwise
does without), and the step's own copy goes with its staging."""
from __future__ import annotations

import os
import subprocess
import sys
import threading

import pyarrow.parquet as pq

from odf_core.commit import commit_data, describe_slice
from odf_core.transform.planning import cached_schema_file, schema_cache_dir, schema_file
from odf_core.workspace import Workspace

from ..chain.builders import T0, new_root, write_slice


def _root_with_data(tmp_path):
    ws = Workspace.init(tmp_path / "ws")
    h = new_root(ws)
    path = write_slice(tmp_path / "s.parquet", 0, 2)
    commit_data(h.chain, base_head=h.chain.head(), slice_file=describe_slice(path, "offset", 0),
                checkpoint_path=None, system_time=T0)
    return ws, h


def test_an_inputs_schema_file_is_written_once_per_schema_and_copied_for_each_step(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    _, h = _root_with_data(tmp_path)
    state = h.state()
    step = schema_file(h, state, str(tmp_path / "step-schema.parquet"))
    assert pq.read_schema(step).names == ["offset", "op", "system_time", "event_time", "v"]
    assert pq.read_metadata(step).num_rows == 0
    cache = schema_cache_dir()
    assert cache == str(tmp_path / "cache" / "odf" / "schemas") and len(os.listdir(cache)) == 1
    cached = cached_schema_file(bytes(state.schema))
    assert cached is not None and open(cached, "rb").read() == open(step, "rb").read()
    written = os.stat(cached).st_mtime_ns
    schema_file(h, state, str(tmp_path / "again.parquet"))
    assert os.stat(cached).st_mtime_ns == written and os.listdir(cache) == [os.path.basename(cached)]  # reused


def test_a_cached_file_that_is_not_whole_parquet_is_written_again(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    _, h = _root_with_data(tmp_path)
    schema = bytes(h.state().schema)
    cached = cached_schema_file(schema)
    assert cached is not None
    with open(cached, "r+b") as f:
        f.truncate(os.path.getsize(cached) // 2)
    assert cached_schema_file(schema) == cached and pq.read_schema(cached).names[-1] == "v"


def test_without_a_writable_cache_the_step_writes_its_schema_file_itself(tmp_path, monkeypatch):
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    _, h = _root_with_data(tmp_path)
    assert cached_schema_file(bytes(h.state().schema)) is None
    path = schema_file(h, h.state(), str(tmp_path / "s.schema.parquet"))
    assert pq.read_schema(path).names[-1] == "v"


def test_reusing_a_cached_schema_file_does_not_import_pyarrow(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    ws, h = _root_with_data(tmp_path)
    schema_file(h, h.state(), str(tmp_path / "first.parquet"))
    code = ("import sys\nfrom odf_core.workspace import Workspace\nfrom odf_core.transform.planning import "
            "schema_file\nws = Workspace.open(sys.argv[1])\nh = ws.get('root')\n"
            "print(schema_file(h, h.state(), sys.argv[2]), 'pyarrow' in sys.modules)\n")
    out = str(tmp_path / "second.parquet")
    done = subprocess.run([sys.executable, "-c", code, ws.store.root, out], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [out, "False"]


def test_steps_caching_the_same_schema_at_once_leave_one_complete_file(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    _, h = _root_with_data(tmp_path)
    schema = bytes(h.state().schema)
    paths: list[str | None] = []
    threads = [threading.Thread(target=lambda: paths.append(cached_schema_file(schema))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(paths)) == 1 and paths[0] is not None
    assert os.listdir(schema_cache_dir()) == [os.path.basename(paths[0])]  # no temporary files left
    assert pq.read_schema(paths[0]).names[-1] == "v"
