"""Runs a task in a container with podman or docker, whichever the node has.

Each attempt is one detached container named after the task and attempt
(`cortex-<task id>-<attempt>`, labelled likewise), so a container left by an
older attempt is found and removed before a new one starts, and a node that
restarted can reattach to the one it was running. Output comes from the
runtime's log (`logs -f`), which outlives the node process; the exit code
from `wait`. The runtime runs with the node's own environment (so a
`CONTAINERS_CONF` there applies); the container sees only the task's
variables, and of the attempt's directory only its context file (at
`/cortex/context.json`, so a workflow task can update the context).

This module holds the options, the executor and how an attempt is followed
to its result; the runtime commands themselves are in
`cortex.executors.container_runtime`."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from cortex.executors.base import Execution, ExecutionResult, ExecutorSettings, TailBuffer
from cortex.executors.container_runtime import (
    LogFollower,
    StartFailure,
    container_exit_code,
    container_status,
    ensure_image,
    quick_output,
    remove_container,
    remove_stale_containers,
    start_container,
    wait_or_stop,
)
from cortex.spec import describe_validation_error

log = logging.getLogger(__name__)

RUNTIMES = ("podman", "docker")
_STREAMS = ("stdout", "stderr")
# Where the attempt's context file appears inside (the file alone: the rest
# of the attempt's directory, its handle included, stays out of reach).
CONTAINER_DIR = "/cortex"
CONTAINER_CONTEXT_FILE = f"{CONTAINER_DIR}/context.json"
# What finding the runtime may take: `podman info` answers in a quarter of a
# second on an idle machine, and took over 1.8 s (the budget then) on a busy
# one while other containers started, which left the node without container
# tasks until it restarted. Within the wait for every fingerprint
# (`discovery.FINGERPRINT_TIMEOUT_S`).
_FINGERPRINT_BUDGET_S = 8.0
_FINGERPRINT_TTL_S = 30.0


def _absolute_path(value: str, what: str) -> str:
    if not value.startswith("/"):
        raise ValueError(f"{what} must be an absolute path")
    if any(ch in value for ch in ":,\x00"):
        raise ValueError(f"{what} may not contain ':', ',' or a NUL byte")
    return value


class ContainerMount(BaseModel):
    """A host directory or file bound into the container (read-only unless
    `readOnly` is false); the host path must lie under one of the node's
    `container_mounts` prefixes, which is checked on the node that runs it."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    source: str
    target: str
    read_only: bool = Field(True, alias="readOnly", strict=True)

    @field_validator("source")
    @classmethod
    def _source_path(cls, value: str) -> str:
        return _absolute_path(value, "a mount source")

    @field_validator("target")
    @classmethod
    def _target_path(cls, value: str) -> str:
        _absolute_path(value, "a mount target")
        if value.rstrip("/") in ("", CONTAINER_DIR) or value.startswith(CONTAINER_DIR + "/"):
            raise ValueError(f"a mount target may not be / or lie under {CONTAINER_DIR}")
        return value


class ContainerOptions(BaseModel):
    """Options of the `container` executor. The command and environment are
    the spec's own `command` and `env`; `workdir` is a directory inside the
    container (the spec's `cwd`, a host path, does not apply)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    image: str = Field(min_length=1, max_length=1024)
    memory_mb: int | None = Field(None, alias="memoryMb", gt=0, strict=True)
    cpus: float | None = Field(None, gt=0, le=1024, allow_inf_nan=False)
    mounts: list[ContainerMount] = Field(default_factory=list, max_length=64)
    network: Literal["none", "host", "bridge"] = "none"
    workdir: str | None = None
    user: str | None = Field(None, min_length=1, max_length=256)

    @field_validator("image")
    @classmethod
    def _image_reference(cls, value: str) -> str:
        # A leading '-' would reach the runtime as one of its own options.
        if value.startswith("-") or any(ch.isspace() or ch == "\x00" for ch in value):
            raise ValueError("not an image reference (no spaces, not starting with '-')")
        return value

    @field_validator("memory_mb", mode="before")
    @classmethod
    def _whole_megabytes(cls, value: Any) -> Any:
        # JSON (and protobuf's Struct) has one number type: 512.0 is 512.
        if isinstance(value, float) and value.is_integer():
            return int(value)
        return value

    @field_validator("workdir")
    @classmethod
    def _workdir_path(cls, value: str | None) -> str | None:
        return None if value is None else _absolute_path(value, "workdir")

    @field_validator("user")
    @classmethod
    def _user_name(cls, value: str | None) -> str | None:
        if value is not None and any(ch.isspace() or ch == "\x00" for ch in value):
            raise ValueError("a user is a name or uid[:gid], without spaces")
        return value


@dataclass(frozen=True)
class _Runtime:
    path: str
    name: str
    version: str


def container_name(task_id: str, attempt: int) -> str:
    return f"cortex-{task_id}-{attempt}"


def mount_problems(mounts: list[ContainerMount], allowed: tuple[str, ...]) -> list[str]:
    """Mounts whose source (symlinks resolved) lies under none of the
    `allowed` prefixes or does not exist, each naming its field."""
    prefixes = [os.path.realpath(p) for p in allowed if p]
    problems = []
    for i, mount in enumerate(mounts):
        where = f"spec.options.mounts.{i}.source"
        real = os.path.realpath(mount.source)
        if not any(real == p or real.startswith(p.rstrip("/") + "/") for p in prefixes):
            allowed_text = ", ".join(prefixes) or "none are configured"
            problems.append(
                f"{where}: {mount.source} is not under a path this node allows "
                f"to be mounted (container_mounts: {allowed_text})"
            )
        elif not os.path.exists(real):
            problems.append(f"{where}: {mount.source} does not exist on this node")
    return problems


class ContainerExecutor:
    name = "container"
    uses_work_dir = True
    options_model = ContainerOptions

    def __init__(self, settings: ExecutorSettings) -> None:
        self._settings = settings
        self._lock = threading.Lock()
        self._runtime: _Runtime | None = None
        self._checked_at: float | None = None

    # -- what this node can run ------------------------------------------------

    def fingerprint(self) -> dict[str, str] | None:
        """The runtime found (configured, else podman then docker on PATH)
        and its version; None when none answers `info`."""
        runtime = self._find_runtime()
        if runtime is None:
            return None
        return {"container.runtime": runtime.name, "container.version": runtime.version}

    def _find_runtime(self) -> _Runtime | None:
        """The runtime, found again after `_FINGERPRINT_TTL_S` (every attempt
        asks, and `info` costs a fraction of a second); none found is never
        remembered: the next ask looks again."""
        with self._lock:
            now = time.monotonic()
            if (
                self._runtime is None
                or self._checked_at is None
                or now - self._checked_at > _FINGERPRINT_TTL_S
            ):
                try:
                    self._runtime = self._probe(now + _FINGERPRINT_BUDGET_S)
                except Exception:
                    log.exception("probing the container runtime failed")
                    self._runtime = None
                self._checked_at = now
            return self._runtime

    def _probe(self, deadline: float) -> _Runtime | None:
        configured = self._settings.container_runtime
        for candidate in (configured,) if configured else RUNTIMES:
            path = shutil.which(candidate)
            if path is None:
                continue
            info, why = quick_output(path, ["info"], deadline)
            if info is None:
                log.warning("container runtime %s does not answer `info`: %s", path, why)
                continue
            version, _ = quick_output(
                path, ["version", "--format", "{{.Client.Version}}"], deadline
            )
            return _Runtime(path, os.path.basename(candidate), (version or "").strip() or "unknown")
        return None

    # -- running an attempt ----------------------------------------------------

    def run(self, execution: Execution, cancel: threading.Event) -> ExecutionResult:
        """Starts the container, saves its handle, follows its output and
        waits for it; a cancel or timeout stops it (SIGTERM, SIGKILL after
        the grace period). The container is removed at the end either way."""
        try:
            options = ContainerOptions.model_validate(execution.spec.options)
        except ValidationError as err:
            detail = describe_validation_error(err, "spec.options.")
            return ExecutionResult(exit_code=-1, error=f"invalid spec: {detail}", permanent=True)
        problems = mount_problems(options.mounts, self._settings.container_mounts)
        if problems:
            return ExecutionResult(exit_code=-1, error="; ".join(problems), permanent=True)
        runtime = self._find_runtime()
        if runtime is None:
            return ExecutionResult(exit_code=-1, error="no container runtime on this node")
        name = container_name(execution.task_id, execution.attempt)
        try:
            remove_stale_containers(runtime.path, execution.task_id, execution.attempt)
            ensure_image(runtime.path, options.image, cancel)
            if cancel.is_set():
                return ExecutionResult(exit_code=-1, cancelled=True)
            container_id = start_container(runtime.path, self._run_args(execution, options, name))
        except StartFailure as err:
            return ExecutionResult(exit_code=-1, error=err.message, permanent=err.permanent)
        handle = {
            "runtime": runtime.path,
            "name": name,
            "container_id": container_id,
            "started_at": time.time(),
        }
        try:
            execution.save_handle(handle)
        except OSError as err:
            log.warning("task %s attempt %d: cannot save the container's handle (%s); "
                        "a restart of this node will not find it", execution.task_id,
                        execution.attempt, err)  # fmt: skip
        log.info("task %s attempt %d: container %s started", execution.task_id,
                 execution.attempt, name)  # fmt: skip
        return _follow(execution, handle, cancel, {"stdout": 0, "stderr": 0})

    def recover(
        self, execution: Execution, handle: dict[str, Any], cancel: threading.Event
    ) -> ExecutionResult:
        """Reattaches to the container `handle` names: its output from where
        the attempt's log stops, then its end. LookupError when it is gone."""
        name = handle.get("name")
        if not isinstance(name, str) or name != container_name(
            execution.task_id, execution.attempt
        ):
            raise LookupError(f"the handle names no container of this attempt: {handle!r}")
        # The node's own runtime, never a program the handle names.
        runtime = self._find_runtime()
        if runtime is None:
            raise LookupError("no container runtime on this node any more")
        path = runtime.path
        status = container_status(path, name)
        if status is None:
            raise LookupError(f"container {name} no longer exists")
        if status == "created":
            remove_container(path, name)
            raise LookupError(f"container {name} was created but never started")
        offsets = {stream: int(execution.output_offsets.get(stream, 0)) for stream in _STREAMS}
        log.info("task %s attempt %d: reattached to container %s (%s)", execution.task_id,
                 execution.attempt, name, status)  # fmt: skip
        return _follow(execution, {**handle, "runtime": path}, cancel, offsets)

    def _run_args(self, execution: Execution, options: ContainerOptions, name: str) -> list[str]:
        spec = execution.spec
        args = [
            "run", "--detach", f"--name={name}",
            f"--label=cortex.task={execution.task_id}",
            f"--label=cortex.attempt={execution.attempt}",
            f"--network={options.network}",
        ]  # fmt: skip
        if options.memory_mb is not None:
            args.append(f"--memory={options.memory_mb}m")
        if options.cpus is not None:
            args.append(f"--cpus={options.cpus:g}")
        if options.workdir:
            args.append(f"--workdir={options.workdir}")
        if options.user:
            args.append(f"--user={options.user}")
        env = {**spec.env, **execution.env}
        context_file = execution.env.get("CORTEX_CONTEXT_FILE", "")
        if context_file and os.path.isfile(context_file):
            args.append(f"--volume={context_file}:{CONTAINER_CONTEXT_FILE}:rw")
            env["CORTEX_CONTEXT_FILE"] = CONTAINER_CONTEXT_FILE
        else:
            env.pop("CORTEX_CONTEXT_FILE", None)
        for mount in options.mounts:
            mode = "ro" if mount.read_only else "rw"
            args.append(f"--volume={os.path.realpath(mount.source)}:{mount.target}:{mode}")
        args += [f"--env={key}={value}" for key, value in env.items()]
        args.append(options.image)
        if isinstance(spec.command, str):
            args += ["/bin/sh", "-c", spec.command]
        elif spec.command:
            args += list(spec.command)
        return args


def _sink_writer(
    execution: Execution, stream: str, files: contextlib.ExitStack
) -> Callable[[bytes], None]:
    """Where a stream goes: the attempt's output sink, else a file of that
    name in its work dir."""
    sink = execution.output
    if sink is not None:
        return lambda data: sink.write(stream, data)
    os.makedirs(execution.work_dir, exist_ok=True)
    handle = files.enter_context(open(os.path.join(execution.work_dir, stream), "ab"))

    def write(data: bytes) -> None:
        handle.write(data)
        handle.flush()

    return write


def _follow(
    execution: Execution, handle: dict[str, Any], cancel: threading.Event, skip: dict[str, int]
) -> ExecutionResult:
    """Streams the container's log into the attempt's output until it ends
    (stopping it on cancel or timeout), then removes it, whatever happened."""
    path, name = handle["runtime"], handle["name"]
    timeout_ms = execution.spec.timeout_ms
    started = float(handle.get("started_at") or time.time())
    deadline = started + timeout_ms / 1000 if timeout_ms else None
    tails = {stream: TailBuffer(execution.tail_bytes) for stream in _STREAMS}
    try:
        with contextlib.ExitStack() as files:
            writers = {stream: _sink_writer(execution, stream, files) for stream in _STREAMS}
            with LogFollower(path, name, writers, tails, skip):
                ending = wait_or_stop(path, name, cancel, deadline, execution.kill_grace_s)
        exit_code = (
            ending.exit_code if ending.exit_code is not None else container_exit_code(path, name)
        )
    finally:
        remove_container(path, name)
    cancelled, timed_out = ending.cancelled, ending.timed_out
    result = ExecutionResult(
        exit_code=-1 if cancelled or exit_code is None else exit_code,
        stdout=tails["stdout"].value(),
        stderr=tails["stderr"].value(),
        stdout_truncated=tails["stdout"].truncated,
        stderr_truncated=tails["stderr"].truncated,
        timed_out=timed_out,
        cancelled=cancelled,
    )
    if timed_out:
        result.error = f"timed out after {timeout_ms} ms"
    elif exit_code is None and not cancelled:
        result.error = f"container {name} ended without an exit code (removed from outside?)"
    return result
