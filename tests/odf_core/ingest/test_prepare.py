"""PrepStep Decompress (gzip, zip) and Pipe on real files and real processes."""
from __future__ import annotations

import gzip
import os
import time
import zipfile
from pathlib import Path

import pytest

from odf_core.ingest import FetchedFile, PrepareError, read_prepare_manifest
from odf_core.ingest.prepare import prepare
from odf_core.ingest.fetch import fetch
from odf_core.ingest.manifest import read_fetch_manifest
from odf_core.metadata import (
    CompressionFormat,
    EventTimeSourceFromPath,
    FetchStepFilesGlob,
    PrepStepDecompress,
    PrepStepPipe,
    Timestamp,
)

T = Timestamp.parse("2024-05-06T07:08:09Z")
GZIP = PrepStepDecompress(format=CompressionFormat.GZIP)
UPPER = PrepStepPipe(command=("tr", "a-z", "A-Z"))
CSV = b"id,name\n1,alpha\n2,beta\n"


def _fetched(staging: Path, name: str, data: bytes) -> FetchedFile:
    path = staging / "fetch" / f"000000-{name}"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return FetchedFile(path=str(path), event_time=T, name=f"http://example.org/{name}")


def _zip(members: dict[str, bytes]) -> bytes:
    import io

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


def test_gzip_streamed(tmp_path: Path) -> None:
    big = CSV * 50_000  # > several chunks
    f = _fetched(tmp_path, "data.csv.gz", gzip.compress(big))
    (out,) = prepare((GZIP,), (f,), staging_dir=str(tmp_path))
    assert Path(out.path).read_bytes() == big
    assert os.path.basename(out.path) == "000000-data.csv"  # no .gz: Spark would try to decompress again
    assert (out.event_time, out.name) == (f.event_time, f.name)
    assert read_prepare_manifest(str(tmp_path)) == (out,)
    assert Path(f.path).exists()  # fetched files are never modified or removed


def test_bad_gzip(tmp_path: Path) -> None:
    f = _fetched(tmp_path, "data.csv.gz", b"not gzip at all")
    with pytest.raises(PrepareError, match=f"Decompress Gzip: {f.path} is not a valid gzip file"):
        prepare((GZIP,), (f,), staging_dir=str(tmp_path))
    assert not (tmp_path / "prepare.json").exists()


def test_zip_sub_path_selects_members_in_name_order(tmp_path: Path) -> None:
    data = _zip({"data/b.csv": b"b\n", "README.txt": b"read me", "data/a.csv": b"a\n", "data/deep/c.csv": b"c\n"})
    f = _fetched(tmp_path, "bundle.zip", data)
    step = PrepStepDecompress(format=CompressionFormat.ZIP, sub_path="data/*.csv")
    out = prepare((step,), (f,), staging_dir=str(tmp_path))
    assert [Path(o.path).read_bytes() for o in out] == [b"a\n", b"b\n"]  # '*' stays in one directory
    assert all(o.event_time == T and o.name == f.name for o in out)
    deep = prepare((PrepStepDecompress(format=CompressionFormat.ZIP, sub_path="**/*.csv"),), (f,),
                   staging_dir=str(tmp_path))
    assert [Path(o.path).read_bytes() for o in deep] == [b"a\n", b"b\n", b"c\n"]


def test_zip_single_member_without_sub_path(tmp_path: Path) -> None:
    f = _fetched(tmp_path, "one.zip", _zip({"only.csv": CSV}))
    (out,) = prepare((PrepStepDecompress(format=CompressionFormat.ZIP),), (f,), staging_dir=str(tmp_path))
    assert Path(out.path).read_bytes() == CSV and out.path.endswith("000000-only.csv")


def test_zip_no_match_names_archive_pattern_and_members(tmp_path: Path) -> None:
    f = _fetched(tmp_path, "bundle.zip", _zip({"x.csv": b"1", "y.csv": b"2"}))
    with pytest.raises(PrepareError) as e:
        prepare((PrepStepDecompress(format=CompressionFormat.ZIP, sub_path="*.json"),), (f,), staging_dir=str(tmp_path))
    assert str(e.value) == (
        f"Decompress Zip: no member of {f.path} matches subPath '*.json'; members: ['x.csv', 'y.csv']"
    )
    with pytest.raises(PrepareError, match="holds 2 files, set subPath"):
        prepare((PrepStepDecompress(format=CompressionFormat.ZIP),), (f,), staging_dir=str(tmp_path))


def test_pipe(tmp_path: Path) -> None:
    f = _fetched(tmp_path, "data.csv", CSV)
    (out,) = prepare((UPPER,), (f,), staging_dir=str(tmp_path))
    assert Path(out.path).read_bytes() == CSV.upper()
    assert (out.event_time, out.name) == (T, f.name)


def test_pipe_failure_reports_code_and_stderr(tmp_path: Path) -> None:
    f = _fetched(tmp_path, "data.csv", CSV)
    with pytest.raises(PrepareError) as e:
        prepare((PrepStepPipe(command=("sh", "-c", "echo boom >&2; exit 3")),), (f,), staging_dir=str(tmp_path))
    assert "exited with code 3" in str(e.value) and str(e.value).endswith("boom")
    assert f.path in str(e.value)
    leftovers = [n for _, _, names in os.walk(tmp_path / "prepare") for n in names]
    assert leftovers == []  # no half-written output, no stderr file


def test_pipe_missing_command_and_timeout(tmp_path: Path) -> None:
    f = _fetched(tmp_path, "data.csv", CSV)
    with pytest.raises(PrepareError, match="Pipe 'no-such-command-odf x' on .* cannot start"):
        prepare((PrepStepPipe(command=("no-such-command-odf", "x")),), (f,), staging_dir=str(tmp_path))
    pid_file = tmp_path / "child.pid"
    # the command would run 30 s: the timeout fired (how soon after 0.3 s: benchmarks/bench_limits.py)
    with pytest.raises(PrepareError, match="timed out after 0.3 s and was killed"):
        prepare((PrepStepPipe(command=("sh", "-c", f"sleep 30 & echo $! > {pid_file}; wait")),), (f,),
                staging_dir=str(tmp_path), timeout_s=0.3)
    assert _gone_soon(int(pid_file.read_text()))  # the shell's child was in the killed process group too


def _gone_soon(pid: int, within_s: float = 3.0) -> bool:
    """True once the process is gone or a zombie (SIGKILL is delivered asynchronously, so poll briefly)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.01)
    return False


def test_steps_chain_in_order(tmp_path: Path) -> None:
    files = (
        _fetched(tmp_path, "a.csv.gz", gzip.compress(b"one\n")),
        FetchedFile(path=str(tmp_path / "fetch" / "000001-b.csv.gz"), event_time=None, name="/in/b.csv.gz"),
    )
    Path(files[1].path).write_bytes(gzip.compress(b"two\n"))
    rev = PrepStepPipe(command=("sh", "-c", "cat; echo end"))
    out = prepare((GZIP, UPPER, rev), files, staging_dir=str(tmp_path))
    assert [Path(o.path).read_bytes() for o in out] == [b"ONE\nend\n", b"TWO\nend\n"]
    assert [(o.event_time, o.name) for o in out] == [(T, files[0].name), (None, "/in/b.csv.gz")]
    assert all("/prepare/step-2/" in o.path for o in out)
    assert os.listdir(tmp_path / "prepare" / "step-1") == []  # intermediates removed once consumed


def test_no_steps_passes_files_through(tmp_path: Path) -> None:
    f = _fetched(tmp_path, "data.csv", CSV)
    assert prepare(None, (f,), staging_dir=str(tmp_path)) == (f,)
    assert read_prepare_manifest(str(tmp_path)) == (f,)
    assert prepare((GZIP,), (), staging_dir=str(tmp_path)) == ()


def test_rerun_into_same_staging_is_safe(tmp_path: Path) -> None:
    f = _fetched(tmp_path, "bundle.zip", _zip({"a.csv": b"a", "b.csv": b"b"}))
    both = prepare((PrepStepDecompress(format=CompressionFormat.ZIP, sub_path="*.csv"),), (f,),
                   staging_dir=str(tmp_path))
    assert len(both) == 2
    again = prepare((PrepStepDecompress(format=CompressionFormat.ZIP, sub_path="b.csv"),), (f,),
                    staging_dir=str(tmp_path))
    produced = sorted(str(p) for p in (tmp_path / "prepare").rglob("*") if p.is_file())
    assert produced == [again[0].path] and Path(again[0].path).read_bytes() == b"b"
    assert read_prepare_manifest(str(tmp_path)) == again


def test_fetch_then_prepare_through_manifests(tmp_path: Path) -> None:
    """The two steps as separate tasks would run them: each loads the previous step's manifest."""
    src = tmp_path / "src"
    src.mkdir()
    for day in ("2024-01-01", "2024-01-02"):
        (src / f"obs-{day}.csv.gz").write_bytes(gzip.compress(f"day\n{day}\n".encode()))
    staging = tmp_path / "staging"
    step = FetchStepFilesGlob(path=f"{src}/obs-*.csv.gz", event_time=EventTimeSourceFromPath(pattern=r"obs-(.+)\.csv"))
    fetch(step, staging_dir=str(staging), source_state=None, system_time=T, already_ingested=False)
    fetched = read_fetch_manifest(str(staging))
    prepare((GZIP,), fetched.files, staging_dir=str(staging))
    (ready,) = read_prepare_manifest(str(staging))
    assert Path(ready.path).read_text() == "day\n2024-01-01\n"
    assert ready.event_time == Timestamp.parse("2024-01-01T00:00:00Z")
    assert ready.name == str(src / "obs-2024-01-01.csv.gz")
