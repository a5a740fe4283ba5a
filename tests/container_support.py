"""What the container tests need: podman with runc, a `containers.conf` that
works on a machine without systemd cgroups or a registry, and a test image
built from the node's static busybox (no registry is reachable). Where
something is missing, `missing()` says exactly what, and the tests are
skipped with that reason.

`python -m tests.container_support` sets it all up (CI runs it) and prints
what is missing, if anything."""

from __future__ import annotations

import fcntl
import functools
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

TEST_IMAGE = "localhost/cortex-test:1"
BUSYBOX = "/bin/busybox"
# crun's rlimit and cgroup set-up are refused on these machines; runc works.
CONTAINERS_CONF_TEXT = """\
[containers]
default_ulimits = []

[engine]
runtime = "runc"
"""
_SETUP_DIR = Path(tempfile.gettempdir()) / "cortex-containers"


def containers_conf() -> str:
    """The `containers.conf` podman uses: `CONTAINERS_CONF` when it names a
    file, else one written (once) beside the test image's build files."""
    configured = os.environ.get("CONTAINERS_CONF")
    if configured and os.path.isfile(configured):
        return configured
    path = _SETUP_DIR / "containers.conf"
    if not path.exists() or path.read_text() != CONTAINERS_CONF_TEXT:
        _SETUP_DIR.mkdir(parents=True, exist_ok=True)
        scratch = path.with_suffix(".tmp")
        scratch.write_text(CONTAINERS_CONF_TEXT)
        scratch.replace(path)
    return str(path)


def runtime_env() -> dict[str, str]:
    """What a process running podman (a test, a node) adds to its environment."""
    return {"CONTAINERS_CONF": containers_conf()}


def podman(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["podman", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **runtime_env()},
        stdin=subprocess.DEVNULL,
    )


def _is_static_elf(path: str) -> bool:
    """Whether `path` is an ELF executable without a program interpreter
    (statically linked): only such a busybox runs alone in an image."""
    with open(path, "rb") as f:
        head = f.read(64)
        if head[:4] != b"\x7fELF" or head[4] != 2:
            return False
        order = "little" if head[5] == 1 else "big"
        phoff = int.from_bytes(head[32:40], order)
        phentsize = int.from_bytes(head[54:56], order)
        phnum = int.from_bytes(head[56:58], order)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    pt_interp = 3
    return all(
        int.from_bytes(table[i * phentsize : i * phentsize + 4], order) != pt_interp
        for i in range(phnum)
    )


def _rootfs_tar() -> bytes:
    """A root file system of busybox and a link per applet."""
    applets = subprocess.run(
        [BUSYBOX, "--list"], capture_output=True, text=True, check=True, timeout=10
    ).stdout.split()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for directory in ("bin", "tmp", "etc", "proc", "sys", "dev", "root"):
            info = tarfile.TarInfo(directory)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if directory == "tmp" else 0o755
            tar.addfile(info)
        tar.add(BUSYBOX, arcname="bin/busybox")
        for applet in applets:
            if applet != "busybox":
                link = tarfile.TarInfo(f"bin/{applet}")
                link.type, link.linkname, link.mode = tarfile.SYMTYPE, "busybox", 0o777
                tar.addfile(link)
        passwd = b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n"
        info = tarfile.TarInfo("etc/passwd")
        info.size, info.mode = len(passwd), 0o644
        tar.addfile(info, io.BytesIO(passwd))
    return buffer.getvalue()


@contextmanager
def _setup_lock() -> Iterator[None]:
    """One build at a time across processes (tests run side by side)."""
    _SETUP_DIR.mkdir(parents=True, exist_ok=True)
    with open(_SETUP_DIR / "setup.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def build_test_image() -> str | None:
    """Imports the busybox image unless it is there; what went wrong, or None."""
    with _setup_lock():
        if podman("image", "exists", TEST_IMAGE).returncode == 0:
            return None
        tar_path = _SETUP_DIR / "rootfs.tar"
        tar_path.write_bytes(_rootfs_tar())
        done = podman("import", str(tar_path), TEST_IMAGE, timeout=120)
        tar_path.unlink(missing_ok=True)
        if done.returncode != 0:
            return f"`podman import` of the busybox root failed: {done.stderr.strip()}"
    return None


@functools.cache
def missing() -> str | None:
    """Why containers cannot run here (naming exactly what is missing), or
    None once podman has run the test image."""
    for program, package in (("podman", "podman"), ("runc", "runc")):
        if shutil.which(program) is None:
            return f"{program} is not installed (apt-get install {package})"
    if not os.path.exists(BUSYBOX):
        return f"{BUSYBOX} is missing (apt-get install busybox-static)"
    if not _is_static_elf(BUSYBOX):
        return f"{BUSYBOX} is not statically linked (apt-get install busybox-static)"
    info = podman("info", timeout=30)
    if info.returncode != 0:
        return f"`podman info` fails: {info.stderr.strip()[-300:]}"
    problem = build_test_image()
    if problem:
        return problem
    smoke = podman("run", "--rm", "--network=none", TEST_IMAGE, "sh", "-c", "echo ready")
    if smoke.returncode != 0 or smoke.stdout.strip() != "ready":
        return (
            f"podman cannot run a container here (CONTAINERS_CONF={containers_conf()}): "
            f"{smoke.stderr.strip()[-300:]}"
        )
    return None


def require_containers() -> None:
    """Skips the calling test, saying what is missing, unless containers run."""
    reason = missing()
    if reason:
        pytest.skip(f"container runtime unavailable: {reason}")


def containers_named(prefix: str) -> list[str]:
    """Names of every container (running or not) whose name starts with `prefix`."""
    done = podman("ps", "--all", f"--filter=name=^{prefix}", "--format={{.Names}}")
    return [name for name in done.stdout.split() if name.startswith(prefix)]


if __name__ == "__main__":
    reason = missing()
    if reason:
        print(f"the container tests will be skipped: {reason}")
        sys.exit(1)
    print(f"containers: ok ({TEST_IMAGE}, CONTAINERS_CONF={containers_conf()})")
