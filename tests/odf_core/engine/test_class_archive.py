"""The JVM class-data-sharing archive of fresh Spark drivers (odf_core/engine/class_archive.py): one driver writes it
as its JVM exits, later ones map it, a damaged one costs nothing but the sharing, and it never fails a command."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from odf_core.engine import class_archive
from odf_core.engine.serve import wait_ready

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def archive_dir(tmp_path, monkeypatch):
    d = tmp_path / "jvm"
    monkeypatch.setenv(class_archive.DIR_ENV, str(d))
    monkeypatch.delenv(class_archive.SWITCH_ENV, raising=False)
    return d


def test_one_driver_writes_the_archive_others_wait_then_map_it(archive_dir):
    first = class_archive.for_driver()
    assert first is not None and first.writing is not None and first.lock is not None and first.lock.exists()
    assert first.options == f"-XX:ArchiveClassesAtExit={first.writing} {class_archive.QUIET}"
    assert class_archive.for_driver() is None  # a second driver while the first writes: no archive, no wait
    first.writing.write_bytes(b"archive")  # what the JVM writes as it exits
    first.finish(ok=True)
    assert first.final.read_bytes() == b"archive" and not first.lock.exists() and not first.writing.exists()
    assert class_archive._intact(first.final)
    later = class_archive.for_driver()
    assert later is not None and later.writing is None
    assert later.options == f"-XX:SharedArchiveFile={first.final} -Xshare:auto {class_archive.QUIET}"
    conf = class_archive.with_options({"spark.driver.extraJavaOptions": "-Dx=1"}, later)
    assert conf["spark.driver.extraJavaOptions"] == f"-Dx=1 {later.options}"


def test_a_failed_driver_leaves_no_archive_and_a_dead_writers_lock_is_taken_over(archive_dir):
    first = class_archive.for_driver()
    assert first is not None and first.writing is not None and first.lock is not None
    first.writing.write_bytes(b"half")
    first.finish(ok=False)  # the job failed: what its JVM wrote may be partial
    assert not first.final.exists() and not first.writing.exists() and not first.lock.exists()
    again = class_archive.for_driver()
    assert again is not None and again.lock is not None
    old = time.time() - class_archive.STALE_LOCK_S - 5
    os.utime(again.lock, (old, old))  # its driver died before finishing
    taken = class_archive.for_driver()
    assert taken is not None and taken.writing is not None


def test_archives_can_be_turned_off(archive_dir, monkeypatch):
    monkeypatch.setenv(class_archive.SWITCH_ENV, "off")
    assert class_archive.for_driver() is None and not archive_dir.exists()
    assert class_archive.with_options({"a": "b"}, None) == {"a": "b"}


SESSION = """
import sys
from odf_core.engine.local import LocalEngine
assert LocalEngine(master="local[1]").session().range(3).count() == 3
print("ok")
"""


def _jvm_env(env: dict[str, str], extra_jvm: str) -> dict[str, str]:
    """``env`` for a process of this checkout whose driver JVM gets ``extra_jvm`` too."""
    return dict(env, SPARK_SUBMIT_OPTS=f"{env.get('SPARK_SUBMIT_OPTS', '')} {extra_jvm}".strip(),
                PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])))


def _driver(env: dict[str, str], cwd: Path, extra_jvm: str = "") -> str:
    """One fresh driver; ``cwd`` (the test's directory) would hold a crashed JVM's hs_err file."""
    done = subprocess.run([sys.executable, "-c", SESSION], capture_output=True, text=True, cwd=cwd,
                          env=_jvm_env(env, extra_jvm), timeout=300)
    assert done.returncode == 0 and done.stdout == "ok\n", done.stdout + done.stderr  # nothing of the JVM's
    return done.stdout


@pytest.mark.spark
def test_a_fresh_driver_writes_the_archive_at_exit_the_next_maps_its_classes_a_damaged_one_is_ignored(tmp_path):
    """Real JVMs: the first in-process engine's JVM writes the archive as the command exits; the next one loads
    Spark's classes from it (the JVM's class-load log names the archive as their source); an archive cut short is
    not handed to the next driver (the JVM would crash on it): that one runs without and writes it again."""
    d = tmp_path / "jvm"
    env = {**os.environ, class_archive.DIR_ENV: str(d), "ODF_LOG_DIR": str(tmp_path / "logs")}
    env.pop(class_archive.SWITCH_ENV, None)
    _driver(env, tmp_path)
    archives = sorted(d.glob("spark-*.jsa"))
    assert len(archives) == 1 and archives[0].stat().st_size > 10_000_000, sorted(d.iterdir())
    assert not list(d.glob("*.lock")) and not list(d.glob("*.tmp"))
    loads = tmp_path / "class-load.log"
    _driver(env, tmp_path, f"-Xlog:class+load=info:file={loads}")
    text = loads.read_text()
    assert "org.apache.spark.sql.SparkSession " in text
    assert "source: shared objects file (top)" in text  # the dynamic archive's classes (the JDK's base is below)
    with archives[0].open("r+b") as f:  # cut short: the JVM would map it and crash (SIGBUS)
        f.truncate(archives[0].stat().st_size // 3)
    loads.unlink()
    _driver(env, tmp_path, f"-Xlog:class+load=info:file={loads}")  # runs without it and writes it again
    assert "source: shared objects file (top)" not in loads.read_text()
    assert class_archive._intact(archives[0]) and archives[0].stat().st_size > 10_000_000

    # a long-lived engine (`odf engine serve`, what an auto engine runs) maps it too, and writes none
    sock, loads, out = tmp_path / "e.sock", tmp_path / "serve-load.log", tmp_path / "serve.log"
    with out.open("w") as log:  # the engine's log: a file, not a pipe nobody drains
        proc = subprocess.Popen([sys.executable, "-m", "odf_core.cli", "engine", "serve", "--socket", str(sock),
                                 "--master", "local[1]", "--conf", "spark.ui.enabled=false"], cwd=tmp_path,
                                env=_jvm_env(env, f"-Xlog:class+load=info:file={loads}"),
                                stdout=subprocess.DEVNULL, stderr=log)
    try:
        assert wait_ready("127.0.0.1", 0, proc, timeout_s=240, socket_path=str(sock)), out.read_text()[-3000:]
        assert "source: shared objects file (top)" in loads.read_text()
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    assert sorted(d.glob("spark-*.jsa")) == archives and not list(d.glob("*.lock")) and not list(d.glob("*.tmp"))


def _archive(d: Path, key: str, used_days_ago: float) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    jsa = d / f"spark-{key}.jsa"
    jsa.write_bytes(b"x" * 10)
    size = jsa.with_suffix(".size")
    size.write_text("10")
    when = time.time() - used_days_ago * 86400
    os.utime(size, (when, when))
    os.utime(jsa, (when - 86400 * 30, when - 86400 * 30))  # written long ago: its use is what counts
    return jsa


def test_writing_a_new_archive_removes_those_unused_for_a_week_and_dead_writers_files(archive_dir):
    """An upgrade makes a new archive; the old version's is never mapped again and is removed when a later one is
    written, once a week has passed since its last use. Archives in use (mapped recently) stay."""
    old = _archive(archive_dir, "0ld0ld0ld0ld0ld0", class_archive.UNUSED_DAYS + 1)
    recent = _archive(archive_dir, "recentrecentrece", class_archive.UNUSED_DAYS - 1)
    dead_tmp = archive_dir / "spark-0ld0ld0ld0ld0ld0.123.jsa.tmp"
    dead_tmp.write_bytes(b"half")
    stale = time.time() - class_archive.STALE_LOCK_S - 5
    os.utime(dead_tmp, (stale, stale))
    live_tmp = archive_dir / "spark-recentrecentrece.456.jsa.tmp"  # another version's writer, now
    live_tmp.write_bytes(b"half")
    unrelated = archive_dir / "notes.txt"
    unrelated.write_text("mine")
    writer = class_archive.for_driver()
    assert writer is not None and writer.writing is not None
    assert not old.exists() and not old.with_suffix(".size").exists() and not dead_tmp.exists()
    assert recent.exists() and live_tmp.exists() and unrelated.exists() and writer.lock.exists()


def test_mapping_an_archive_marks_it_used(archive_dir):
    first = class_archive.for_driver()
    assert first is not None and first.writing is not None
    first.writing.write_bytes(b"archive")
    first.finish(ok=True)
    size = first.final.with_suffix(".size")
    long_ago = time.time() - 86400 * (class_archive.UNUSED_DAYS + 3)
    os.utime(size, (long_ago, long_ago))
    assert class_archive.for_driver() is not None  # maps it
    assert time.time() - size.stat().st_mtime < 60
    assert class_archive.prune(archive_dir, keep=archive_dir / "spark-other.jsa") == []


def test_a_long_lived_engine_maps_an_archive_but_never_writes_one(archive_dir):
    assert class_archive.for_driver(write=False) is None and not list(archive_dir.glob("*.lock"))
    first = class_archive.for_driver()
    assert first is not None and first.writing is not None
    first.writing.write_bytes(b"archive")
    first.finish(ok=True)
    mapped = class_archive.for_driver(write=False)
    assert mapped is not None and mapped.writing is None and str(first.final) in mapped.options
