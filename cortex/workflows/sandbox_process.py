"""One condition sandbox process (`sandbox_worker.py`) and its line protocol.

The process starts with an empty environment and Python's isolated mode, so
nothing of the node's environment (the cluster secret, API and MCP tokens,
anything else) reaches it or the conditions it runs; the directory holding
py_mini_racer is passed on its command line instead. Its stderr goes to a
temporary file that is read only to say why it died."""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

from cortex.errors import Unavailable

log = logging.getLogger(__name__)

_WORKER_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sandbox_worker.py")
_START_TIMEOUT_S = 20.0
_STDERR_TAIL = 64 * 1024
# What V8 and Python print when memory runs out (V8 aborts the process).
_OUT_OF_MEMORY_SIGNS = ("out of memory", "MemoryError", "Cannot allocate memory")
MIB = 1024 * 1024


class SandboxUnavailable(Unavailable):
    """The sandbox cannot run at all (its worker process does not start)."""


class WorkerLost(Exception):
    """The process died or was killed while it held a request."""

    def __init__(self, message: str, out_of_memory: bool = False) -> None:
        super().__init__(message)
        self.out_of_memory = out_of_memory


def process_allowance(max_memory: int) -> int:
    """How far a worker may grow past what V8 needs to start: twice the heap
    cap (V8 enforces its heap limit after growing past it) plus 32 MiB for
    the worker's own buffers; measured by scripts/bench_sandbox.py."""
    return 2 * max_memory + 32 * MIB


def _mini_racer_path() -> str:
    spec = importlib.util.find_spec("py_mini_racer")
    if spec is None or not spec.submodule_search_locations:
        raise SandboxUnavailable(
            "the condition sandbox needs py_mini_racer, which is not installed"
        )
    return os.path.dirname(next(iter(spec.submodule_search_locations)))


class SandboxProcess:
    """A started worker; `call` sends one request and waits for its answer."""

    def __init__(self, max_memory: int) -> None:
        command = [
            sys.executable, "-I", _WORKER_SCRIPT,
            "--path", _mini_racer_path(),
            "--max-memory", str(max_memory),
            "--process-allowance", str(process_allowance(max_memory)),
        ]  # fmt: skip
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed in kill()
        try:
            self._process = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                env={},
                close_fds=True,
            )
        except OSError as err:
            self._stderr.close()
            raise SandboxUnavailable(f"the condition sandbox did not start: {err}") from None
        self._buffer = b""
        self._next_id = 0
        self.retired = False
        try:
            hello = self._read_line(time.monotonic() + _START_TIMEOUT_S)
        except WorkerLost as err:
            self.kill()
            raise SandboxUnavailable(f"the condition sandbox did not start: {err}") from None
        if not hello.get("ready"):
            self.kill()
            raise SandboxUnavailable(
                f"the condition sandbox did not start: {hello.get('message', 'unknown error')}"
            )
        self.memory_limit = int(hello.get("limit") or 0)

    @property
    def pid(self) -> int:
        return self._process.pid

    def call(self, request: dict[str, Any], deadline: float) -> dict[str, Any]:
        """The answer to `request`; raises WorkerLost when the process dies or
        `deadline` passes (then the caller kills it). An answer marked
        `retire` is the process's last: it exits after writing it."""
        self._next_id += 1
        request = {**request, "id": self._next_id}
        assert self._process.stdin is not None
        try:
            self._process.stdin.write(json.dumps(request).encode() + b"\n")
            self._process.stdin.flush()
        except (BrokenPipeError, OSError) as err:
            raise WorkerLost(f"found its sandbox process gone ({err})") from None
        while True:
            answer = self._read_line(deadline)
            if answer.get("id") == self._next_id:
                self.retired = bool(answer.get("retire"))
                return answer

    def _read_line(self, deadline: float) -> dict[str, Any]:
        assert self._process.stdout is not None
        fd = self._process.stdout.fileno()
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WorkerLost("ran past its time limit in code V8 cannot interrupt")
            readable, _, _ = select.select([fd], [], [], remaining)
            if not readable:
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise self._death()
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            answer = json.loads(line)
        except ValueError:
            raise WorkerLost("got an answer that is not JSON from its sandbox process") from None
        if not isinstance(answer, dict):
            raise WorkerLost("got an answer that is not an object from its sandbox process")
        return answer

    def _death(self) -> WorkerLost:
        try:
            code = self._process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        tail = self._stderr_tail()
        if any(sign in tail for sign in _OUT_OF_MEMORY_SIGNS):
            return WorkerLost("ran its sandbox process out of memory", out_of_memory=True)
        if code is not None and code < 0:
            try:
                how = signal.Signals(-code).name
            except ValueError:
                how = f"signal {-code}"
        else:
            how = f"exit code {code}"
        return WorkerLost(f"crashed its sandbox process ({how})")

    def _stderr_tail(self) -> str:
        try:
            size = self._stderr.seek(0, os.SEEK_END)
            self._stderr.seek(max(0, size - _STDERR_TAIL))
            return self._stderr.read().decode(errors="replace")
        except (OSError, ValueError):
            return ""

    def kill(self) -> None:
        if self._process.poll() is None:
            self._process.kill()
        try:
            self._process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            log.warning("sandbox worker %d did not exit after SIGKILL", self._process.pid)
        for stream in (self._process.stdin, self._process.stdout, self._stderr):
            if stream is None:
                continue
            try:
                stream.close()
            except (OSError, ValueError):
                pass  # killed twice at once (the pool closing), or its pipe broke
