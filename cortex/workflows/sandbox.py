"""The JavaScript condition sandbox: conditions run in worker processes
(`sandbox_worker.py`), each evaluation in a fresh V8 context with a time
limit and a memory cap, with no `require`, `process` or host objects.

A worker handles one request at a time. A worker that dies (a V8 fatal
out-of-memory aborts its process) or overruns the outer deadline is killed
and replaced; the evaluation it held counts as failed, never the node."""

from __future__ import annotations

import json
import logging
import os
import select
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from cortex.errors import Unavailable

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_MS = 100
DEFAULT_MAX_MEMORY = 32 * 1024 * 1024
DEFAULT_WORKERS = 2
MAX_CONDITION_CHARS = 4096
# Beyond the condition's own time limit (context setup, input parsing, IPC),
# before the worker is killed: V8 does not interrupt some builtins (a `fill`
# of a huge sparse array runs until V8 aborts the process seconds later).
_OUTER_MARGIN_S = 1.0
# Input parsing gets more time the larger the input (bytes per second).
_INPUT_RATE = 20_000_000
_START_TIMEOUT_S = 20.0
_WORKER_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sandbox_worker.py")


class SandboxUnavailable(Unavailable):
    """The sandbox cannot run at all (its worker process does not start)."""


@dataclass(frozen=True)
class ConditionOutcome:
    """What a condition came to: a boolean `value`, or an `error` kind
    (timeout, memory, error, crash, syntax) with a message."""

    value: bool | None
    error: str | None = None
    message: str = ""

    @property
    def holds(self) -> bool:
        return self.value is True and self.error is None

    def describe(self) -> str:
        """One line for a skip reason or an error message."""
        if self.error is None:
            return f"condition is {'true' if self.value else 'false'}"
        if self.error in ("timeout", "memory"):
            return f"condition {self.message}"
        if self.error == "crash":
            return f"condition was killed with its sandbox process ({self.message})"
        return f"condition raised {self.message}"


class _WorkerLost(Exception):
    pass


class _Worker:
    """One sandbox process and its line protocol."""

    def __init__(self) -> None:
        self._process = subprocess.Popen(
            [sys.executable, _WORKER_SCRIPT],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None,
            close_fds=True,
        )
        self._buffer = b""
        self._next_id = 0
        try:
            hello = self._read_line(time.monotonic() + _START_TIMEOUT_S)
        except _WorkerLost as err:
            self.kill()
            raise SandboxUnavailable(f"the condition sandbox did not start: {err}") from None
        if not hello.get("ready"):
            self.kill()
            raise SandboxUnavailable(
                f"the condition sandbox did not start: {hello.get('message', 'unknown error')}"
            )

    @property
    def pid(self) -> int:
        return self._process.pid

    def call(self, request: dict[str, Any], deadline: float) -> dict[str, Any]:
        self._next_id += 1
        request = {**request, "id": self._next_id}
        assert self._process.stdin is not None
        try:
            self._process.stdin.write(json.dumps(request).encode() + b"\n")
            self._process.stdin.flush()
        except (BrokenPipeError, OSError) as err:
            raise _WorkerLost(f"worker gone: {err}") from None
        while True:
            answer = self._read_line(deadline)
            if answer.get("id") == self._next_id:
                return answer

    def _read_line(self, deadline: float) -> dict[str, Any]:
        assert self._process.stdout is not None
        fd = self._process.stdout.fileno()
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _WorkerLost("it ran past its time limit in code V8 cannot interrupt")
            readable, _, _ = select.select([fd], [], [], remaining)
            if not readable:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                code = self._process.wait(timeout=5)
                raise _WorkerLost(f"the process died with code {code}, usually memory exhaustion")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            answer = json.loads(line)
        except ValueError:
            raise _WorkerLost("worker wrote something that is not JSON") from None
        if not isinstance(answer, dict):
            raise _WorkerLost("worker wrote something that is not an object")
        return answer

    def kill(self) -> None:
        if self._process.poll() is None:
            self._process.kill()
        try:
            self._process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            log.warning("sandbox worker %d did not exit after SIGKILL", self._process.pid)
        for stream in (self._process.stdin, self._process.stdout):
            if stream is not None:
                stream.close()


class ConditionSandbox:
    """Evaluates and syntax-checks conditions on a pool of up to `workers`
    processes, started on first use and kept for the next evaluation."""

    def __init__(
        self,
        workers: int = DEFAULT_WORKERS,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
        max_memory: int = DEFAULT_MAX_MEMORY,
    ) -> None:
        self.timeout_ms = timeout_ms
        self.max_memory = max_memory
        self._capacity = max(1, workers)
        self._idle: list[_Worker] = []
        self._started = 0
        self._closed = False
        self._lock = threading.Condition()
        self._pool = ThreadPoolExecutor(self._capacity, thread_name_prefix="sandbox")
        self.restarts = 0

    def check_syntax(self, condition: str) -> str | None:
        """None when the condition compiles, else the syntax error. Compiles
        only; nothing runs."""
        if len(condition) > MAX_CONDITION_CHARS:
            return f"condition is longer than {MAX_CONDITION_CHARS} characters"
        outcome = self._run({"op": "check", "condition": condition})
        if outcome.error is None:
            return None
        return outcome.message or outcome.describe()

    def check_syntax_many(self, conditions: list[str]) -> list[str | None]:
        """`check_syntax` for several conditions at once, one per worker."""
        if len(conditions) <= 1:
            return [self.check_syntax(c) for c in conditions]
        return list(self._pool.map(self.check_syntax, conditions))

    def evaluate(self, condition: str, data: dict[str, Any]) -> ConditionOutcome:
        """Evaluates `condition` with `data`'s `parent` and `workflow` in scope."""
        if len(condition) > MAX_CONDITION_CHARS:
            return ConditionOutcome(None, "error", "condition is too long")
        try:
            payload = json.dumps(data, separators=(",", ":"))
        except (TypeError, ValueError) as err:
            return ConditionOutcome(None, "error", f"input is not JSON: {err}")
        return self._run({"op": "eval", "condition": condition, "input": payload})

    def evaluate_many(self, items: list[tuple[str, dict[str, Any]]]) -> list[ConditionOutcome]:
        """Evaluates several conditions at once, one per worker."""
        if len(items) <= 1:
            return [self.evaluate(c, d) for c, d in items]
        return list(self._pool.map(lambda item: self.evaluate(*item), items))

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            self._lock.notify_all()
        for worker in idle:
            worker.kill()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _run(self, request: dict[str, Any]) -> ConditionOutcome:
        request = {**request, "timeout_ms": self.timeout_ms, "max_memory": self.max_memory}
        allowance = (
            self.timeout_ms / 1000 + _OUTER_MARGIN_S + len(request.get("input", "")) / _INPUT_RATE
        )
        worker = self._borrow()
        deadline = time.monotonic() + allowance
        try:
            answer = worker.call(request, deadline)
        except _WorkerLost as err:
            log.warning("condition sandbox worker %d lost: %s; replacing it", worker.pid, err)
            self._discard(worker)
            return ConditionOutcome(None, "crash", str(err))
        except BaseException:
            self._discard(worker)
            raise
        self._give_back(worker)
        if answer.get("ok"):
            return ConditionOutcome(bool(answer.get("value")))
        return ConditionOutcome(
            None, str(answer.get("error") or "error"), str(answer.get("message") or "")
        )

    def _borrow(self) -> _Worker:
        with self._lock:
            while True:
                if self._closed:
                    raise SandboxUnavailable("the condition sandbox is shut down")
                if self._idle:
                    return self._idle.pop()
                if self._started < self._capacity:
                    self._started += 1
                    break
                self._lock.wait()
        try:
            return _Worker()
        except BaseException:
            with self._lock:
                self._started -= 1
                self._lock.notify()
            raise

    def _give_back(self, worker: _Worker) -> None:
        with self._lock:
            if self._closed:
                worker.kill()
                return
            self._idle.append(worker)
            self._lock.notify()

    def _discard(self, worker: _Worker) -> None:
        worker.kill()
        with self._lock:
            self._started -= 1
            self.restarts += 1
            self._lock.notify()
