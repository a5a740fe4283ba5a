"""The executor interface, in the spirit of Nomad's task drivers: an executor
declares the schema of its options, fingerprints what this node can do,
runs one attempt of a task (honouring cancellation and timeouts, streaming
its output, returning its exit code and capped output tails), and may
recover an attempt it started before the node process restarted."""

from __future__ import annotations

import json
import os
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel

from cortex.executors.environment import TaskEnvironment
from cortex.spec import TaskSpec

DEFAULT_TAIL_BYTES = 64 * 1024


class OutputSink(Protocol):
    def write(self, stream: str, data: bytes) -> None:
        """Takes a chunk of the attempt's `stdout` or `stderr` as it arrives;
        called from one thread per stream."""
        ...


@dataclass(frozen=True)
class ExecutorSettings:
    """What a node's configuration tells its executors; each executor class
    is constructed with one of these."""

    data_dir: str = ""
    # Which of the node's environment variables a task's process inherits.
    environment: TaskEnvironment = field(default_factory=TaskEnvironment)
    # "podman", "docker", or None: whichever of them is on PATH.
    container_runtime: str | None = None
    # Host path prefixes a container task may mount; nothing else.
    container_mounts: tuple[str, ...] = ()
    # The agent CLI a subagent task runs (its prompt on stdin); empty: none.
    subagent_command: tuple[str, ...] = ()
    # Where the k8s_job executor finds its cluster, e.g. {"kubeconfig": path,
    # "context": name, "namespace": "default"}.
    k8s: dict[str, Any] = field(default_factory=dict)
    # The node config's `executor_options` table, keyed by executor type:
    # settings for executors this project does not ship.
    extra: dict[str, Any] = field(default_factory=dict)

    def options_for(self, task_type: str) -> dict[str, Any]:
        """The `executor_options` entry of one executor type ({} when unset)."""
        value = self.extra.get(task_type)
        return dict(value) if isinstance(value, dict) else {}


@dataclass(frozen=True)
class Execution:
    task_id: str
    attempt: int
    spec: TaskSpec
    work_dir: str
    env: dict[str, str] = field(default_factory=dict)
    tail_bytes: int = DEFAULT_TAIL_BYTES
    kill_grace_s: float = 5.0
    # Where the full output goes as it arrives; without one, the shell
    # executor writes `stdout` and `stderr` files in the work dir.
    output: OutputSink | None = None
    # Where `save_handle` keeps what `recover` needs to find the attempt
    # again after the node process restarted; empty: nowhere.
    handle_file: str = ""
    # For a recovered attempt: bytes of each stream (`stdout`, `stderr`)
    # already in its output, which the executor must not write again.
    output_offsets: dict[str, int] = field(default_factory=dict)

    def save_handle(self, handle: dict[str, Any]) -> None:
        """Writes the attempt's handle (a JSON object) to `handle_file`,
        atomically and durably; does nothing without a `handle_file`."""
        if not self.handle_file:
            return
        directory = os.path.dirname(self.handle_file) or "."
        os.makedirs(directory, exist_ok=True)
        temporary = f"{self.handle_file}.tmp"
        with open(temporary, "w") as out:
            json.dump(handle, out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, self.handle_file)


def load_handle(path: str) -> dict[str, Any] | None:
    """The handle an attempt saved at `path`, or None when there is none (or
    it is not a JSON object)."""
    try:
        with open(path) as handle_file:
            handle = json.load(handle_file)
    except (OSError, ValueError):
        return None
    return handle if isinstance(handle, dict) else None


@dataclass
class ExecutionResult:
    exit_code: int
    stdout: bytes = b""
    stderr: bytes = b""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    timed_out: bool = False
    cancelled: bool = False
    error: str | None = None
    # The attempt failed in a way no retry can change (a missing program or
    # working directory, an unrunnable spec): the task fails without retries.
    permanent: bool = False
    pid: int | None = None
    # Top-level keys a workflow task added to or changed in its context file.
    context_update: dict[str, Any] | None = None

    @property
    def succeeded(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and not self.cancelled and not self.error

    def to_dict(self) -> dict[str, Any]:
        """The replicated form: tails as text (invalid UTF-8 replaced; the raw
        bytes stay in the attempt's output files on the executing node)."""
        data: dict[str, Any] = {
            "exit_code": self.exit_code,
            "stdout": self.stdout.decode("utf-8", errors="replace"),
            "stderr": self.stderr.decode("utf-8", errors="replace"),
            "stdout_truncated": self.stdout_truncated,
            "stderr_truncated": self.stderr_truncated,
            "timed_out": self.timed_out,
            "error": self.error,
        }
        if self.context_update is not None:
            data["context_update"] = self.context_update
        return data


class Executor(Protocol):
    # The task type it runs, e.g. "container".
    name: str
    # Whether an attempt gets a work directory with output files and a
    # context file; executors that touch nothing skip that cost.
    uses_work_dir: bool

    @property
    def options_model(self) -> type[BaseModel]:
        """The schema of a task spec's `options` for this type (a class
        attribute; extra fields forbidden, camelCase aliases for names of
        two words). Checked where a spec enters, on any node that has the
        executor, and again on the node about to run it."""
        ...

    def fingerprint(self) -> dict[str, str] | None:
        """None when this node cannot run the type (say, no container
        runtime); else the capabilities it advertises for it, keys prefixed
        by the type (`{"container.runtime": "podman"}`). Fast; never raises."""
        ...

    def run(self, execution: Execution, cancel: threading.Event) -> ExecutionResult:
        """Runs the attempt to its end, its output going to `execution.output`
        as it arrives. When `cancel` is set, or `spec.timeout_ms` passes, stops
        it (SIGTERM, SIGKILL after `execution.kill_grace_s`) and says so in the
        result. An executor that can recover saves its handle
        (`execution.save_handle`) as soon as the attempt has started."""
        ...

    def recover(
        self, execution: Execution, handle: dict[str, Any], cancel: threading.Event
    ) -> ExecutionResult:
        """After the node process restarted: reattaches to the attempt
        `handle` describes, keeps its output going (past
        `execution.output_offsets`) and returns its result as `run` would.
        Raises LookupError saying why when the attempt is gone or cannot be
        recovered: the attempt is then reported lost."""
        ...


class TailBuffer:
    """Keeps the last `limit` bytes written and whether anything was dropped."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._chunks: deque[bytes] = deque()
        self._size = 0
        self.truncated = False

    def write(self, data: bytes) -> None:
        self._chunks.append(data)
        self._size += len(data)
        while self._size > self._limit and self._chunks:
            overflow = self._size - self._limit
            head = self._chunks[0]
            self.truncated = True
            if len(head) <= overflow:
                self._chunks.popleft()
                self._size -= len(head)
            else:
                self._chunks[0] = head[overflow:]
                self._size -= overflow

    def value(self) -> bytes:
        return b"".join(self._chunks)
