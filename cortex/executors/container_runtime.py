"""The podman or docker commands the `container` executor runs: one-off
calls bounded in time, removing a task's stale containers, pulling its
image, starting its container, following its log (`logs --follow`, each
stream on a thread of its own), waiting for it or stopping it, and removing
it. The runtime runs with the node's own environment, so a
`CONTAINERS_CONF` there applies."""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO

from cortex.executors.base import TailBuffer

log = logging.getLogger(__name__)

_COMMAND_TIMEOUT_S = 30.0
_POLL_S = 0.05
# How long the log follower may lag behind the container's end.
_DRAIN_S = 5.0


class StartFailure(Exception):
    """The attempt could not start; `permanent` when no retry can help."""

    def __init__(self, message: str, permanent: bool) -> None:
        super().__init__(message)
        self.message = message
        self.permanent = permanent


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no message"


def quick_output(path: str, args: list[str], deadline: float) -> tuple[str | None, str]:
    """`path args` within the time left before `deadline`: its stdout, or
    None and why there is none."""
    left = deadline - time.monotonic()
    if left <= 0:
        return None, "no time was left to ask"
    try:
        done = subprocess.run(
            [path, *args], capture_output=True, text=True, timeout=left, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        return None, f"no answer within {left:.1f} s"
    except OSError as err:
        return None, f"cannot run it: {err.strerror}"
    if done.returncode != 0:
        return None, f"exit code {done.returncode}: {_last_line(done.stderr)}"
    return done.stdout, ""


def runtime_call(
    path: str, args: list[str], timeout: float = _COMMAND_TIMEOUT_S
) -> tuple[int, str, str]:
    """`path args`: its exit code, stdout and stderr; -1 and the reason
    when it could not run or did not answer within `timeout`."""
    try:
        done = subprocess.run(
            [path, *args], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        return -1, "", f"{os.path.basename(path)} {args[0]} did not answer within {timeout:g} s"
    except OSError as err:
        return -1, "", f"cannot run {path}: {err.strerror}"
    return done.returncode, done.stdout, done.stderr


def remove_container(path: str, name: str) -> None:
    """Removes the container, killing it first if it still runs (docker's
    `rm --force` does; podman's waits 10 s for a SIGTERM unless told not to)."""
    podman = "podman" in os.path.basename(path)
    code, _, err = runtime_call(path, ["rm", "--force", *(["--time=0"] if podman else []), name])
    if code != 0 and "no such container" not in err.lower() and "no container" not in err.lower():
        log.warning("removing container %s failed: %s", name, _last_line(err))


def remove_stale_containers(path: str, task_id: str, attempt: int) -> None:
    """Removes this task's containers from older attempts (zombies from
    before a failure) and a leftover of this one; a newer attempt's stays."""
    code, out, err = runtime_call(
        path, ["ps", "--all", f"--filter=label=cortex.task={task_id}", "--format={{.Names}}"]
    )
    if code != 0:
        raise StartFailure(f"listing containers failed: {_last_line(err)}", permanent=False)
    for name in out.split():
        number = name.rpartition("-")[2]
        if not number.isdigit() or int(number) <= attempt:
            log.info("task %s: removing container %s left by attempt %s", task_id, name, number)
            remove_container(path, name)


def ensure_image(path: str, image: str, cancel: threading.Event) -> None:
    """The image is here, or pulled now; otherwise the attempt cannot start."""
    code, _, _ = runtime_call(path, ["image", "inspect", "--format={{.Id}}", image])
    if code == 0:
        return
    process = subprocess.Popen(
        [path, "pull", "--quiet", image],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    while process.poll() is None:
        if cancel.wait(_POLL_S):
            process.kill()
    _, err = process.communicate()
    if process.returncode != 0 and not cancel.is_set():
        raise StartFailure(
            f"image {image} is not on this node and could not be pulled: {_last_line(err)}",
            permanent=True,
        )


def start_container(path: str, args: list[str]) -> str:
    """Starts the container; its id. The runtime's own failures (125) and a
    command that cannot be run in the image (126, 127) fail the attempt."""
    code, out, err = runtime_call(path, args)
    if code == 0:
        return out.strip()
    name = next(arg.partition("=")[2] for arg in args if arg.startswith("--name="))
    remove_container(path, name)
    message = _last_line(err)
    if code in (126, 127):
        raise StartFailure(f"could not start the container's command: {message}", permanent=True)
    permanent = "no command or entrypoint" in message or "invalid" in message.lower()
    raise StartFailure(f"could not start the container: {message}", permanent=permanent)


def container_status(path: str, name: str) -> str | None:
    """The container's state (`running`, `exited`, `created` ...); None when it is gone."""
    code, out, _ = runtime_call(path, ["container", "inspect", "--format={{.State.Status}}", name])
    return out.strip() if code == 0 and out.strip() else None


def container_exit_code(path: str, name: str) -> int | None:
    code, out, _ = runtime_call(
        path, ["container", "inspect", "--format={{.State.ExitCode}}", name]
    )
    text = out.strip()
    return int(text) if code == 0 and text.lstrip("-").isdigit() else None


def _pump(pipe: IO[bytes], write: Callable[[bytes], None], tail: TailBuffer, skip: int) -> None:
    """Copies a stream of the log to the attempt's output, leaving out its
    first `skip` bytes (already there before a restart); the tail keeps
    them, so it is the same tail an uninterrupted run would keep."""
    failed = False
    while chunk := os.read(pipe.fileno(), 65536):
        tail.write(chunk)
        if skip:
            dropped = min(skip, len(chunk))
            chunk, skip = chunk[dropped:], skip - dropped
        if chunk and not failed:
            try:
                write(chunk)
            except Exception:
                log.exception("writing task output failed; keeping only its tail")
                failed = True
    pipe.close()


class LogFollower:
    """`<runtime> logs --follow`, each stream pumped on a thread of its own;
    leaving the block waits (briefly) for the log to be read to its end."""

    def __init__(
        self,
        path: str,
        name: str,
        writers: dict[str, Callable[[bytes], None]],
        tails: dict[str, TailBuffer],
        skip: dict[str, int],
    ) -> None:
        self._process = subprocess.Popen(
            [path, "logs", "--follow", name],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        pipes = {"stdout": self._process.stdout, "stderr": self._process.stderr}
        self._pumps = [
            threading.Thread(
                target=_pump, args=(pipe, writers[s], tails[s], skip.get(s, 0)), daemon=True
            )
            for s, pipe in pipes.items()
            if pipe is not None
        ]
        for pump in self._pumps:
            pump.start()

    def __enter__(self) -> LogFollower:
        return self

    def __exit__(self, *exc: object) -> None:
        for pump in self._pumps:
            pump.join(_DRAIN_S)
        if self._process.poll() is None:
            self._process.kill()
        self._process.wait()
        for pump in self._pumps:
            pump.join(_DRAIN_S)


@dataclass(frozen=True)
class ContainerEnding:
    """How the wait ended: the exit code `wait` gave (None without one),
    and whether the container was stopped for a cancel or a timeout."""

    exit_code: int | None
    cancelled: bool = False
    timed_out: bool = False


def wait_or_stop(
    path: str, name: str, cancel: threading.Event, deadline: float | None, grace_s: float
) -> ContainerEnding:
    """Waits for the container to exit; on cancel or at `deadline` (wall
    clock, so it holds across a restart) stops it: SIGTERM, then SIGKILL
    after `grace_s`."""
    waiter = subprocess.Popen(
        [path, "wait", name], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    cancelled = timed_out = False
    while waiter.poll() is None:
        if cancel.is_set() or (deadline is not None and time.time() >= deadline):
            cancelled, timed_out = cancel.is_set(), not cancel.is_set()
            grace = max(0, round(grace_s))
            runtime_call(path, ["stop", "-t", str(grace), name], timeout=grace + 30)
            break
        with contextlib.suppress(subprocess.TimeoutExpired):
            waiter.wait(_POLL_S)
    try:
        out = waiter.communicate(timeout=_COMMAND_TIMEOUT_S)[0].strip()
    except subprocess.TimeoutExpired:
        waiter.kill()
        waiter.wait()
        out = ""
    code = int(out) if out.lstrip("-").isdigit() else None
    return ContainerEnding(code, cancelled, timed_out)
