"""``FetchStep::Container``: run an OCI image whose stdout is the data (via the Docker API; podman works too).

Interface with the image (as in the reference implementation): in ``ODF_ETAG`` / ``ODF_LAST_MODIFIED`` (previous
state, RFC 3339 for the latter, empty when none) and ``ODF_BATCH_SIZE``; out, files the container may write:
``ODF_NEW_ETAG_PATH`` / ``ODF_NEW_LAST_MODIFIED_PATH`` (new state; etag preferred) and ``ODF_NEW_HAS_MORE_DATA_PATH``
(its existence means more data is pending).  Those paths live under ``/odf/out``, a bind mount of
``<staging>/container-out``, so the engine must share the file system of the staging directory.
``env`` values are passed verbatim (the spec defines no templating); an entry without a value is taken from this
process's environment.  Empty stdout with an unchanged state is "up to date"; empty stdout with a new state yields
no file but the new state.  The container has no network unless ``container_network`` is set.
"""
from __future__ import annotations

import logging
import os
import threading
import uuid
from typing import Any

from odf_core.ingest.errors import FetchError
from odf_core.ingest.fetch_url import up_to_date
from odf_core.ingest.manifest import FetchedFile, FetchResult
from odf_core.ingest.options import DEFAULT_BATCH_SIZE, FetchOptions
from odf_core.ingest.source_state import (
    etag_state,
    last_modified_state,
    parse_last_modified,
    prev_etag,
    prev_last_modified,
)
from odf_core.ingest.staging import Progress, remove_file, reset_dir, staged_name
from odf_core.metadata import FetchStepContainer, SourceState

_log = logging.getLogger("odf.ingest")

OUT_MOUNT = "/odf/out"
_NEW_ETAG = "new-etag"
_NEW_LAST_MODIFIED = "new-last-modified"
_NEW_HAS_MORE = "new-has-more-data"
_STDERR_TAIL_LINES = 20


def fetch_container(
    step: FetchStepContainer, *, out_dir: str, work_dir: str, state: SourceState | None, options: FetchOptions
) -> FetchResult:
    """``out_dir`` receives the data file; ``work_dir`` (emptied here) is mounted as ``/odf/out``."""
    docker = _import_docker()
    env = _environment(step, state, options)
    reset_dir(work_dir)
    os.chmod(work_dir, 0o777)  # the image may run as a non-root user
    dest = os.path.join(out_dir, staged_name(0, "container-output"))
    client = _client(docker, options)
    try:
        _ensure_image(docker, client, step.image)
        size = _run(docker, client, step, env, work_dir, dest, options)
    finally:
        client.close()

    new_state = _read_new_state(step, work_dir)
    has_more = os.path.exists(os.path.join(work_dir, _NEW_HAS_MORE))
    if size == 0:
        remove_file(dest)
        if new_state == state and not has_more:
            _log.info("container %s produced no data and kept its state: up to date", step.image)
            return up_to_date(state)
        files: tuple[FetchedFile, ...] = ()
    else:
        files = (FetchedFile(path=dest, event_time=None, name=step.image),)
    return FetchResult(
        up_to_date=False, files=files, new_source_state=new_state, has_more=has_more, bytes_fetched=size
    )


def _import_docker() -> Any:
    try:
        import docker
    except ImportError:
        raise FetchError(
            "FetchStep Container needs the 'docker' Python package (pip install 'airflow-provider-odf[containers]')"
        ) from None
    return docker


def _environment(step: FetchStepContainer, state: SourceState | None, options: FetchOptions) -> dict[str, str]:
    env: dict[str, str] = {}
    for var in step.env or ():
        if var.value is not None:
            env[var.name] = var.value
        elif var.name in os.environ:
            env[var.name] = os.environ[var.name]
        else:
            raise FetchError(
                f"container {step.image}: env {var.name} has no value and is not set in the coordinator's environment"
            )
    batch = options.container_batch_size
    if batch is None:
        text = env.get("ODF_BATCH_SIZE")
        if text is not None and not text.strip().isdigit():
            raise FetchError(f"container {step.image}: env ODF_BATCH_SIZE must be an integer (got {text!r})")
        batch = int(text) if text is not None else DEFAULT_BATCH_SIZE
    last_modified = prev_last_modified(state)
    env.update(
        {
            "ODF_ETAG": prev_etag(state) or "",
            "ODF_LAST_MODIFIED": last_modified.isoformat() if last_modified else "",
            "ODF_BATCH_SIZE": str(batch),
            "ODF_NEW_ETAG_PATH": f"{OUT_MOUNT}/{_NEW_ETAG}",
            "ODF_NEW_LAST_MODIFIED_PATH": f"{OUT_MOUNT}/{_NEW_LAST_MODIFIED}",
            "ODF_NEW_HAS_MORE_DATA_PATH": f"{OUT_MOUNT}/{_NEW_HAS_MORE}",
        }
    )
    return env


def _client(docker: Any, options: FetchOptions) -> Any:
    host = options.docker_host or os.environ.get("DOCKER_HOST") or "the default Docker socket"
    # API calls must outlive the run itself; output streaming has no socket timeout anyway.
    timeout = int(options.container_timeout_s) + 60
    client = None
    try:
        if options.docker_host:
            client = docker.DockerClient(base_url=options.docker_host, timeout=timeout)
        else:
            client = docker.from_env(timeout=timeout)
        client.ping()
    except docker.errors.DockerException as e:
        if client is not None:
            client.close()
        raise FetchError(f"cannot reach the container engine at {host}: {e}") from None
    return client


def _ensure_image(docker: Any, client: Any, image: str) -> None:
    try:
        client.images.get(image)
        return
    except docker.errors.ImageNotFound:
        pass
    except docker.errors.APIError as e:
        raise FetchError(f"container image {image}: {e.explanation or e}") from None
    _log.info("pulling image %s", image)
    try:
        client.images.pull(image)
    except docker.errors.DockerException as e:
        raise FetchError(f"container image {image} is not available locally and pulling it failed: {e}") from None


def _run(
    docker: Any, client: Any, step: FetchStepContainer, env: dict[str, str], work_dir: str, dest: str,
    options: FetchOptions,
) -> int:
    name = f"odf-fetch-{uuid.uuid4().hex[:12]}"
    try:
        container = client.containers.create(
            step.image,
            name=name,
            entrypoint=list(step.command) if step.command else None,
            command=list(step.args) if step.args else None,
            environment=env,
            network_mode=options.container_network or "none",
            volumes={work_dir: {"bind": OUT_MOUNT, "mode": "rw"}},
            detach=True,
            tty=False,
            stdin_open=False,
        )
    except docker.errors.DockerException as e:
        detail = getattr(e, "explanation", None) or e
        raise FetchError(f"container {step.image}: cannot create container: {detail}") from None
    tmp = f"{dest}.part"
    stream = None
    try:
        # Attach before start so no output is lost; the stream carries stdout bytes exactly (logs may not).
        stream = container.attach(stdout=True, stderr=False, stream=True, logs=True)
        pump = _Pump(stream, tmp, f"container {step.image} stdout")
        pump.start()
        container.start()
        _log.info("started container %s (%s)", name, step.image)
        status = _wait(docker, container, step, options, pump)
        pump.join(timeout=60)
        if pump.is_alive():
            raise FetchError(f"container {step.image}: output stream did not end after the container exited")
        if pump.error is not None:
            raise FetchError(f"container {step.image}: cannot write its output to {tmp}: {pump.error}")
        if status != 0:
            raise FetchError(
                f"container {step.image} exited with code {status}; last stderr lines:\n{_stderr_tail(container)}"
            )
        os.replace(tmp, dest)
        pump.progress.done()
        return pump.progress.bytes
    except docker.errors.DockerException as e:
        raise FetchError(f"container {step.image} failed: {getattr(e, 'explanation', None) or e}") from None
    finally:
        if stream is not None:
            _close_stream(stream)
        remove_file(tmp)
        try:
            container.remove(force=True)
        except docker.errors.DockerException as e:  # pragma: no cover - engine went away
            _log.warning("could not remove container %s: %s", name, e)


def _close_stream(stream: Any) -> None:
    """Close the attach connection.  docker's CancellableStream.close() shuts the socket under urllib3's feet
    (which then fails when collected), so close the HTTP response the stream wraps when it is reachable."""
    response = getattr(stream, "_response", None)
    try:
        if response is not None:
            response.close()
        else:
            stream.close()
    except Exception as e:  # noqa: BLE001 - cleanup only
        _log.debug("closing the container output stream: %s", e)


def _wait(docker: Any, container: Any, step: FetchStepContainer, options: FetchOptions, pump: "_Pump") -> int:
    import requests  # a dependency of docker

    try:
        result = container.wait(timeout=options.container_timeout_s)
    except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
        _log.warning("container %s timed out after %g s: killing it", step.image, options.container_timeout_s)
        try:
            container.kill()
        except docker.errors.APIError:
            pass
        pump.join(timeout=30)
        raise FetchError(
            f"container {step.image} timed out after {options.container_timeout_s:g} s and was killed"
        ) from None
    error = result.get("Error")
    if isinstance(error, dict):
        error = error.get("Message")
    if error:
        raise FetchError(f"container {step.image} failed: {error}")
    return int(result.get("StatusCode", -1))


def _stderr_tail(container: Any) -> str:
    try:
        raw = container.logs(stdout=False, stderr=True, tail=_STDERR_TAIL_LINES)
    except Exception as e:  # noqa: BLE001 - best effort for an error message
        return f"<stderr unavailable: {e}>"
    text = raw.decode("utf-8", "replace").rstrip()
    return text or "<empty>"


def _read_new_state(step: FetchStepContainer, work_dir: str) -> SourceState | None:
    etag_path = os.path.join(work_dir, _NEW_ETAG)
    if os.path.exists(etag_path):
        with open(etag_path, encoding="utf-8", errors="replace") as f:
            return etag_state(f.read().strip())
    lm_path = os.path.join(work_dir, _NEW_LAST_MODIFIED)
    if os.path.exists(lm_path):
        with open(lm_path, encoding="utf-8", errors="replace") as f:
            text = f.read().strip()
        try:
            return last_modified_state(parse_last_modified(text))
        except FetchError as e:
            raise FetchError(f"container {step.image} wrote an invalid ODF_NEW_LAST_MODIFIED_PATH: {e}") from None
    return None


class _Pump(threading.Thread):
    """Copies the attached stdout stream into a file as it arrives."""

    def __init__(self, stream: Any, path: str, what: str):
        super().__init__(daemon=True, name="odf-container-stdout")
        self.stream, self.path = stream, path
        self.progress = Progress(what)
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with open(self.path, "wb") as out:
                for chunk in self.stream:
                    out.write(chunk)
                    self.progress.add(len(chunk))
        except BaseException as e:  # noqa: BLE001 - reported by the caller
            self.error = e
