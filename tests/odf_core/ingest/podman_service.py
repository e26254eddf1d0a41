"""A private podman API service speaking the Docker API, for machines without a Docker engine (tests, CI, dev).

Everything lives under one base directory: the socket, image storage (``vfs`` driver, which works on any file
system, also inside containers), run state and a ``containers.conf`` (cgroupfs, no default ulimits), passed through
``CONTAINERS_CONF`` so the host configuration is not touched.  With no registry reachable, images are built locally:
:func:`import_busybox_image` packs ``busybox-static`` into a one-layer image.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import time
from dataclasses import dataclass, field

from odf_core.errors import OdfError

BUSYBOX_TAG = "localhost/odf-test-busybox:latest"
_CONF = '[containers]\ndefault_ulimits = []\n[engine]\ncgroup_manager = "cgroupfs"\nevents_logger = "file"\n'
_BUSYBOX_PATHS = ("/bin/busybox", "/usr/bin/busybox")


class PodmanError(OdfError):
    """podman is missing or its service did not come up."""


def podman_missing() -> str | None:
    """Why a podman service cannot be started here, or None when it can."""
    if shutil.which("podman") is None:
        return "podman is not installed (apt-get install -y podman runc busybox-static)"
    return None


@dataclass
class PodmanService:
    """A running ``podman system service``; ``docker_host`` is the URL for ``docker.DockerClient(base_url=...)``."""

    base_dir: str
    docker_host: str
    process: subprocess.Popen = field(repr=False)
    env: dict[str, str] = field(repr=False)
    global_args: tuple[str, ...] = field(repr=False)

    def podman(self, *args: str, timeout_s: float = 120) -> subprocess.CompletedProcess:
        """Run a podman CLI command against this service's storage."""
        cmd = ["podman", *self.global_args, *args]
        proc = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=timeout_s)
        if proc.returncode != 0:
            raise PodmanError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
        return proc

    def stop(self, *, remove_storage: bool = True) -> None:
        """Stop the service (and its containers) and, by default, delete its storage."""
        if self.process.poll() is None:
            try:
                self.podman("rm", "--all", "--force", timeout_s=60)
            except (PodmanError, subprocess.TimeoutExpired):
                pass
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=15)
        _unmount_below(self.base_dir)
        if remove_storage:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def __enter__(self) -> "PodmanService":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_podman_service(base_dir: str, *, timeout_s: float = 30.0) -> PodmanService:
    """Start a podman service with private storage under ``base_dir`` and wait until it answers."""
    missing = podman_missing()
    if missing:
        raise PodmanError(missing)
    base_dir = os.path.abspath(base_dir)
    os.makedirs(base_dir, exist_ok=True)
    conf = os.path.join(base_dir, "containers.conf")
    with open(conf, "w", encoding="utf-8") as f:
        f.write(_CONF)
    env = dict(os.environ, CONTAINERS_CONF=conf)
    global_args = [
        "--root", os.path.join(base_dir, "root"),
        "--runroot", os.path.join(base_dir, "run"),
        "--tmpdir", os.path.join(base_dir, "tmp"),
        "--storage-driver", "vfs",
        "--cgroup-manager", "cgroupfs",
        "--events-backend", "file",
    ]  # fmt: skip
    runc = shutil.which("runc") or ("/usr/sbin/runc" if os.path.exists("/usr/sbin/runc") else None)
    if runc:
        global_args += ["--runtime", runc]
    socket_path = os.path.join(base_dir, "podman.sock")
    docker_host = f"unix://{socket_path}"
    log = open(os.path.join(base_dir, "service.log"), "wb")
    process = subprocess.Popen(
        ["podman", *global_args, "system", "service", "--time=0", docker_host],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    log.close()
    service = PodmanService(base_dir, docker_host, process, env, tuple(global_args))
    try:
        _wait_ready(service, socket_path, timeout_s)
    except BaseException:
        service.stop(remove_storage=False)
        raise
    return service


def _wait_ready(service: PodmanService, socket_path: str, timeout_s: float) -> None:
    import http.client
    import socket

    deadline = time.monotonic() + timeout_s
    last_error = "socket not created"
    while time.monotonic() < deadline:
        if service.process.poll() is not None:
            raise PodmanError(f"podman service exited with {service.process.returncode}: {_log_tail(service)}")
        if os.path.exists(socket_path):
            try:
                conn = http.client.HTTPConnection("localhost", timeout=2)
                conn.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                conn.sock.settimeout(2)
                conn.sock.connect(socket_path)
                conn.request("GET", "/_ping")
                if conn.getresponse().status == 200:
                    return
            except OSError as e:
                last_error = str(e)
            finally:
                conn.close()
        time.sleep(0.05)  # polling a starting daemon
    raise PodmanError(f"podman service at {socket_path} not ready after {timeout_s:g} s ({last_error})")


def _log_tail(service: PodmanService) -> str:
    try:
        with open(os.path.join(service.base_dir, "service.log"), "rb") as f:
            return f.read()[-2000:].decode("utf-8", "replace").strip()
    except OSError:
        return ""


def _unmount_below(path: str) -> None:
    """Storage drivers may leave bind mounts under the storage root; unmount them so the tree can be deleted."""
    try:
        with open("/proc/self/mounts", encoding="utf-8") as f:
            points = [line.split()[1] for line in f]
    except OSError:
        return
    prefix = path.rstrip("/") + "/"
    for point in sorted((p for p in points if p.startswith(prefix)), key=len, reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True)


def import_busybox_image(service: PodmanService, tag: str = BUSYBOX_TAG) -> str:
    """Build ``tag`` from the host's static busybox (``/bin/sh`` and applets, ``/tmp``); returns the tag."""
    busybox = next((p for p in _BUSYBOX_PATHS if os.path.exists(p)), None)
    if busybox is None:
        raise PodmanError("busybox is not installed (apt-get install -y busybox-static)")
    tar_path = os.path.join(service.base_dir, "busybox-rootfs.tar")
    with tarfile.open(tar_path, "w") as tar:
        for d in ("bin", "tmp", "etc"):
            info = tarfile.TarInfo(d)
            info.type = tarfile.DIRTYPE
            info.mode = 0o1777 if d == "tmp" else 0o755
            tar.addfile(info)
        tar.add(busybox, arcname="bin/busybox")
        for applet in ("sh", "cat", "echo", "printf", "sleep", "head", "tr", "env", "ls", "touch"):
            link = tarfile.TarInfo(f"bin/{applet}")
            link.type = tarfile.SYMTYPE
            link.linkname = "busybox"
            tar.addfile(link)
    service.podman("import", "--change", "ENV PATH=/bin", tar_path, tag)
    os.remove(tar_path)
    return tag
