"""The crash-point hook itself, in real child processes (a firing hook must kill only the child)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from odf_core.storage import crash_env, was_killed
from odf_core.storage.faults import ENV_VAR

SCRIPT = """
from odf_core.storage.faults import crash_point
for step in ("a", "b", "a", "b", "b"):
    crash_point(step)
    print(step, flush=True)
"""


def run(spec: str | None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop(ENV_VAR, None)
    if spec is not None:
        env[ENV_VAR] = spec
    return subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=60)


@pytest.mark.parametrize(
    "spec, printed, killed",
    [
        (None, "ababb", False),
        ("", "ababb", False),
        ("other.point", "ababb", False),
        ("a", "", True),
        ("b", "a", True),
        ("a@2", "ab", True),
        ("b@3", "abab", True),
        ("b@4", "ababb", False),
        ("x, b@2 ,", "aba", True),
    ],
)
def test_crash_point_fires_exactly_where_named(spec: str | None, printed: str, killed: bool) -> None:
    proc = run(spec)
    assert "".join(proc.stdout.split()) == printed
    assert was_killed(proc.returncode) is killed
    assert proc.returncode == (-signal.SIGKILL if killed else 0)


def test_malformed_spec_is_a_clear_error() -> None:
    proc = run("a@0")
    assert proc.returncode == 1 and "ODF_CRASH_AT" in proc.stderr and "'a@0'" in proc.stderr


def test_crash_env() -> None:
    assert crash_env("p", base={"X": "1"}) == {"X": "1", ENV_VAR: "p"}
    assert crash_env("p", 3, base={})[ENV_VAR] == "p@3"
    assert was_killed(0) is False and was_killed(None) is False and was_killed(-9) is True


# -- full disks ---------------------------------------------------------------------------------------------------

from odf_core.errors import FileSystemError  # noqa: E402
from odf_core.storage import ObjectStore  # noqa: E402
from odf_core.storage.faults import ENOSPC_ENV_VAR, count_writes, inject_enospc  # noqa: E402


def _writes(store: ObjectStore) -> None:
    store.put_if_absent("blocks/b1", b"block")
    store.put("info/summary", b"cache")
    store.compare_and_swap_ref("refs/head", None, "b1")


def _temp_files(root) -> list[str]:
    return [n for _, _, files in os.walk(root) for n in files if n.startswith(".tmp-")]


def test_every_write_of_the_local_store_fails_as_one_line_naming_the_object(tmp_path) -> None:
    with count_writes() as counted:
        _writes(ObjectStore.open(str(tmp_path / "count")))
    # the root and 3 directories created on the way; a temp file filled, then linked or renamed into place, per write
    assert len(counted.paths) == 10, counted.paths
    for n in range(1, len(counted.paths) + 1):
        root = tmp_path / f"s{n}"
        store = ObjectStore.open(str(root))
        with pytest.raises(FileSystemError) as ei, inject_enospc(n):
            _writes(store)
        message = str(ei.value)
        assert message.startswith("no space left on device while ") and "\n" not in message
        assert ".tmp-" not in message and str(root) in message  # the object's own path, never the temp file's
        assert _temp_files(root) == []
        assert store.get_ref("refs/head") is None  # the head moves last: nothing of a failed write is visible


def test_the_memory_store_fails_the_same_way() -> None:
    import uuid

    store = ObjectStore.open(f"memory://odf-faults-{uuid.uuid4().hex}")
    with pytest.raises(FileSystemError, match="no space left on device while writing .*blocks/b1"), inject_enospc(1):
        _writes(store)
    assert not store.exists("blocks/b1")


def test_only_counts_the_writes_under_a_path(tmp_path) -> None:
    store = ObjectStore.open(str(tmp_path / "s"))
    with pytest.raises(FileSystemError, match="refs/head"), inject_enospc(2, only="/refs/"):
        _writes(store)
    assert store.exists("blocks/b1") and store.exists("info/summary")


def test_a_real_os_error_is_one_line_too(tmp_path) -> None:
    store = ObjectStore.open(str(tmp_path / "s"))
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "blocks").write_bytes(b"a file where a directory must be")
    with pytest.raises(FileSystemError) as ei:
        store.put_if_absent("blocks/b1", b"block")
    assert str(ei.value) == f"file exists while writing {tmp_path / 's' / 'blocks' / 'b1'}"


def test_enospc_in_a_child_process_through_the_environment(tmp_path) -> None:
    code = ("import sys; from odf_core.storage import ObjectStore\n"
            "s = ObjectStore.open(sys.argv[1])\n"
            "s.put_if_absent('a/x', b'1'); s.put_if_absent('a/y', b'2')\n")
    env = dict(os.environ)
    env[ENOSPC_ENV_VAR] = "5"  # mkdir s, mkdir a, a/x: fill, link; a/y: fill
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "s")], capture_output=True, text=True,
                          env=env, timeout=60)
    assert proc.returncode == 1 and proc.stderr.strip().splitlines()[-1] == (
        f"odf_core.errors.FileSystemError: no space left on device while writing {tmp_path / 's' / 'a' / 'y'}")
    assert os.listdir(tmp_path / "s" / "a") == ["x"]
    env[ENOSPC_ENV_VAR] = "0"
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "t")], capture_output=True, text=True,
                          env=env, timeout=60)
    assert proc.returncode == 1 and f"{ENOSPC_ENV_VAR}: invalid value '0'" in proc.stderr
