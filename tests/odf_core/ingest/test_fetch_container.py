"""FetchStep::Container through a real podman engine speaking the Docker API."""
from __future__ import annotations

from pathlib import Path

import docker
import pytest

from odf_core.ingest import FetchError, FetchOptions, read_fetch_manifest
from odf_core.ingest.fetch import fetch
from odf_core.ingest.source_state import etag_state, last_modified_state
from odf_core.metadata import EnvVar, FetchStepContainer, SourceState, Timestamp
from tests.odf_core.ingest.conftest import Podman

SYSTEM_TIME = Timestamp.parse("2030-01-01T00:00:00Z")

# A paged source: each run emits one page after ODF_ETAG, records the new position, and says whether more is left.
PAGED = r"""
echo "etag-in=[$ODF_ETAG] lm-in=[$ODF_LAST_MODIFIED] batch=$ODF_BATCH_SIZE" >&2
case "$ODF_ETAG" in
  "")  printf 'id,city,greeting\n1,A,%s\n2,B,%s\n' "$GREETING" "$GREETING"; printf 2 > "$ODF_NEW_ETAG_PATH"
       touch "$ODF_NEW_HAS_MORE_DATA_PATH" ;;
  2)   printf 'id,city,greeting\n3,C,%s\n' "$ODF_BATCH_SIZE"; echo 3 > "$ODF_NEW_ETAG_PATH" ;;
  *)   printf '%s' "$ODF_ETAG" > "$ODF_NEW_ETAG_PATH" ;;
esac
"""


def _step(podman: Podman, script: str, env: tuple[EnvVar, ...] | None = None) -> FetchStepContainer:
    return FetchStepContainer(image=podman.image, command=("/bin/sh", "-c"), args=(script,), env=env)


def _fetch(podman: Podman, step, staging: Path, state: SourceState | None = None, **opts):
    return fetch(step, staging_dir=str(staging), source_state=state, system_time=SYSTEM_TIME,
                 already_ingested=state is not None, options=FetchOptions(docker_host=podman.docker_host, **opts))


def _leftover_containers(podman: Podman) -> list[str]:
    client = docker.DockerClient(base_url=podman.docker_host)
    try:
        return [c.name for c in client.containers.list(all=True) if c.name.startswith("odf-fetch-")]
    finally:
        client.close()


def test_container_pages_through_source_state(podman: Podman, tmp_path: Path) -> None:
    step = _step(podman, PAGED, env=(EnvVar(name="GREETING", value="hi there"),))
    first = _fetch(podman, step, tmp_path / "tx1", container_batch_size=7)
    assert not first.up_to_date and first.has_more
    assert first.new_source_state == SourceState(source_name="default", kind="odf/etag", value="2")
    (f,) = first.files
    assert Path(f.path).read_text() == "id,city,greeting\n1,A,hi there\n2,B,hi there\n"
    assert f.event_time is None and f.name == podman.image
    assert first.bytes_fetched == len(Path(f.path).read_bytes())
    assert read_fetch_manifest(str(tmp_path / "tx1")) == first

    second = _fetch(podman, step, tmp_path / "tx2", first.new_source_state, container_batch_size=7)
    assert Path(second.files[0].path).read_text() == "id,city,greeting\n3,C,7\n"  # ODF_ETAG and ODF_BATCH_SIZE in
    assert second.new_source_state == etag_state("3") and not second.has_more  # newline stripped

    third = _fetch(podman, step, tmp_path / "tx3", second.new_source_state)
    assert third.up_to_date and third.files == () and third.new_source_state == etag_state("3")
    assert _leftover_containers(podman) == []


def test_last_modified_state_and_env_from_coordinator(
    podman: Podman, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ODF_TEST_TOKEN", "from-host")
    script = 'printf "%s|%s|%s\\n" "$ODF_TEST_TOKEN" "$ODF_LAST_MODIFIED" "$ODF_BATCH_SIZE"; ' \
             'echo 2024-02-03T04:05:06Z > "$ODF_NEW_LAST_MODIFIED_PATH"'
    step = _step(podman, script, env=(EnvVar(name="ODF_TEST_TOKEN"), EnvVar(name="ODF_BATCH_SIZE", value="55")))
    prev = last_modified_state(Timestamp.parse("2024-01-01T00:00:00.5Z"))
    r = _fetch(podman, step, tmp_path, prev)
    assert Path(r.files[0].path).read_text() == "from-host|2024-01-01T00:00:00.500Z|55\n"
    assert r.new_source_state == last_modified_state(Timestamp.parse("2024-02-03T04:05:06Z"))

    monkeypatch.delenv("ODF_TEST_TOKEN")
    with pytest.raises(FetchError, match="env ODF_TEST_TOKEN has no value and is not set"):
        _fetch(podman, step, tmp_path, prev)


def test_container_has_no_network(podman: Podman, tmp_path: Path) -> None:
    r = _fetch(podman, _step(podman, "ls /sys/class/net"), tmp_path)
    assert Path(r.files[0].path).read_text().split() == ["lo"]


def test_binary_stdout_is_exact(podman: Podman, tmp_path: Path) -> None:
    # 3 MB of all byte values, without a trailing newline: the attached stream must not alter a byte.
    script = "i=0; while [ $i -lt 12288 ]; do printf '%s' \"$BLOCK\"; i=$((i+1)); done; printf '\\000\\377'"
    block = "".join(f"\\{n:03o}" for n in range(1, 256)) + "\\n"
    step = _step(podman, f'BLOCK="$(printf \'{block}\')"; {script}')
    r = _fetch(podman, step, tmp_path)
    expected_block = bytes(range(1, 256))  # $(...) strips the trailing newline
    data = Path(r.files[0].path).read_bytes()
    assert data == expected_block * 12288 + b"\x00\xff" and r.bytes_fetched == len(data)


def test_non_zero_exit(podman: Podman, tmp_path: Path) -> None:
    step = _step(podman, "echo 'partial,row'; echo 'line one' >&2; echo 'something broke' >&2; exit 7")
    with pytest.raises(FetchError) as e:
        _fetch(podman, step, tmp_path)
    msg = str(e.value)
    assert f"container {podman.image} exited with code 7" in msg and msg.endswith("line one\nsomething broke")
    assert list((tmp_path / "fetch").iterdir()) == [] and not (tmp_path / "fetch.json").exists()
    assert _leftover_containers(podman) == []


def test_entrypoint_not_in_image(podman: Podman, tmp_path: Path) -> None:
    step = FetchStepContainer(image=podman.image, command=("/bin/no-such-program",))
    with pytest.raises(FetchError, match=f"container {podman.image} failed: .*no-such-program"):
        _fetch(podman, step, tmp_path)
    assert _leftover_containers(podman) == []


def test_timeout_kills_container(podman: Podman, tmp_path: Path) -> None:
    # the container would run 60 s: the timeout fired and killed it (a speed figure belongs in benchmarks/)
    with pytest.raises(FetchError, match="timed out after 1 s and was killed"):
        _fetch(podman, _step(podman, "echo started; sleep 60"), tmp_path, container_timeout_s=1)
    assert _leftover_containers(podman) == []


def test_missing_image_and_unreachable_engine(podman: Podman, tmp_path: Path) -> None:
    step = FetchStepContainer(image="localhost/odf-no-such-image:1", command=("/bin/true",))
    with pytest.raises(FetchError, match="odf-no-such-image:1 is not available locally and pulling it failed"):
        _fetch(podman, step, tmp_path)
    with pytest.raises(FetchError, match="cannot reach the container engine at unix:///nonexistent/podman.sock"):
        fetch(step, staging_dir=str(tmp_path), source_state=None, system_time=SYSTEM_TIME, already_ingested=False,
              options=FetchOptions(docker_host="unix:///nonexistent/podman.sock"))


def test_rerun_into_same_staging(podman: Podman, tmp_path: Path) -> None:
    step = _step(podman, PAGED, env=(EnvVar(name="GREETING", value="x"),))
    first = _fetch(podman, step, tmp_path)
    # A retry starts from an empty /odf/out: outputs of an earlier attempt are not taken for this run's.
    (tmp_path / "container-out" / "new-has-more-data").unlink()
    (tmp_path / "container-out" / "stale").write_text("from an earlier attempt")
    retry = _fetch(podman, step, tmp_path)
    assert retry == first
    assert sorted(p.name for p in (tmp_path / "container-out").iterdir()) == ["new-etag", "new-has-more-data"]
