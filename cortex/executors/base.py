"""The executor interface: run one attempt of a task, honour cancellation and
timeouts, and return its exit code and capped output tails."""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Protocol

from cortex.spec import TaskSpec

DEFAULT_TAIL_BYTES = 64 * 1024


class OutputSink(Protocol):
    def write(self, stream: str, data: bytes) -> None:
        """Takes a chunk of the attempt's `stdout` or `stderr` as it arrives;
        called from one thread per stream."""
        ...


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
    name: str
    # Whether an attempt gets a work directory with output files and a
    # context file; executors that touch nothing skip that cost.
    uses_work_dir: bool

    def run(self, execution: Execution, cancel: threading.Event) -> ExecutionResult:
        """Runs the attempt to its end; returns early (killed) when `cancel` is set."""
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
