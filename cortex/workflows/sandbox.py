"""The JavaScript condition sandbox: conditions run in worker processes
(`sandbox_process.py`, `sandbox_worker.py`), each evaluation in a fresh V8
isolate with a time limit and a memory cap, with no `require`, `process` or
host objects, and with nothing of the node's environment.

A condition is an expression, or statements whose last value counts; it
must come to a boolean. Anything else (a string, a number, a Promise,
undefined, ...) is an error that says what it returned.

Work is queued per flow (a workflow, or a submission's syntax checks) and
served fairly (`fair_queue.py`) by up to `max_workers` worker processes,
started on demand; `workers` of them stay once started. A worker that dies
(a V8 fatal out-of-memory aborts its process) or overruns the outer deadline
is killed and replaced; the evaluation it held fails, never the node."""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass
from functools import partial
from typing import Any

from cortex.workflows.fair_queue import FairQueue
from cortex.workflows.lru_cache import LruCache
from cortex.workflows.sandbox_process import (
    MIB,
    SandboxProcess,
    SandboxUnavailable,
    WorkerLost,
)

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_MS = 100
DEFAULT_MAX_MEMORY = 32 * MIB
DEFAULT_WORKERS = 2
DEFAULT_MAX_WORKERS = 4
MAX_CONDITION_CHARS = 4096
# The serialized input a worker is sent at most; the engine caps what it
# builds well below this (`condition_input_max_bytes`).
MAX_INPUT_BYTES = 8 * MIB
# Syntax-check results remembered by source (a hash each).
SYNTAX_CACHE_ENTRIES = 16_384
# One syntax-check request compiles at most this many conditions / characters,
# so a large submission is many small units of work in the fair queue.
_CHECK_BATCH = 256
_CHECK_BATCH_CHARS = 256 * 1024
# Beyond a request's own time limit (IPC, input parsing, isolate setup),
# before the worker is killed: V8 does not interrupt some builtins.
_OUTER_MARGIN_S = 1.0
_INPUT_RATE = 20_000_000  # bytes per second allowed for input parsing
_CHECK_ALLOWANCE_S = 12.0
# Workers beyond `workers` stop after this long without work.
DEFAULT_IDLE_EXIT_S = 30.0
_RETURN_HINT = " (a condition is an expression or statements whose last value decides; no return)"


@dataclass(frozen=True)
class ConditionOutcome:
    """What a condition came to: a boolean `value`, or an `error` kind
    (threw, timeout, memory, type, crash, input) with `message`, the rest of
    the sentence that starts "condition ..."."""

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
        return f"condition {self.message}"


@dataclass
class _Job:
    request: dict[str, Any]
    allowance_s: float
    future: Future[dict[str, Any]]


class ConditionSandbox:
    """Evaluates and syntax-checks conditions on a pool of worker processes:
    up to `max_workers`, started on demand; `workers` of them stay once
    started, the others stop after `idle_exit_s` without work."""

    def __init__(
        self,
        workers: int = DEFAULT_WORKERS,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
        max_memory: int = DEFAULT_MAX_MEMORY,
        max_workers: int = DEFAULT_MAX_WORKERS,
        idle_exit_s: float = DEFAULT_IDLE_EXIT_S,
    ) -> None:
        self.timeout_ms = timeout_ms
        self.idle_exit_s = idle_exit_s
        self.max_memory = max_memory
        self.max_workers = max(1, max_workers)
        self.min_workers = max(1, min(workers, self.max_workers))
        self.restarts = 0
        # Conditions sent to V8 for a syntax check (cache misses).
        self.compiled = 0
        self._syntax: LruCache[str, str] = LruCache(SYNTAX_CACHE_ENTRIES)
        self._queue: FairQueue[_Job] = FairQueue()
        self._lock = threading.Condition()
        self._threads = 0
        self._idle = 0
        self._closed = False
        self._processes: set[SandboxProcess] = set()

    @property
    def processes(self) -> list[int]:
        """Process ids of the running workers."""
        with self._lock:
            return sorted(p.pid for p in self._processes)

    @property
    def queued(self) -> int:
        """Requests waiting for a worker."""
        with self._lock:
            return len(self._queue)

    # -- evaluation ---------------------------------------------------------------

    def submit(
        self, condition: str, data: dict[str, Any], flow: str = ""
    ) -> Future[ConditionOutcome]:
        """Queues `condition` with `data`'s `parent` and `workflow` in scope on
        `flow`'s queue; the future holds its outcome (or SandboxUnavailable)."""
        result: Future[ConditionOutcome] = Future()
        if len(condition) > MAX_CONDITION_CHARS:
            result.set_result(ConditionOutcome(None, "input", "is too long"))
            return result
        try:
            payload = json.dumps(data, separators=(",", ":"))
        except (TypeError, ValueError) as err:
            result.set_result(
                ConditionOutcome(None, "input", f"has an input that is not JSON: {err}")
            )
            return result
        if len(payload) > MAX_INPUT_BYTES:
            result.set_result(ConditionOutcome(
                None, "input", f"has an input of {len(payload)} bytes, over {MAX_INPUT_BYTES}"))  # fmt: skip
            return result
        request = {"op": "eval", "condition": condition, "input": payload,
                   "timeout_ms": self.timeout_ms}  # fmt: skip
        allowance = self.timeout_ms / 1000 + _OUTER_MARGIN_S + len(payload) / _INPUT_RATE
        job = self._enqueue(flow, request, allowance, _source_key(condition))
        _chain(job.future, result, self._outcome)
        result.add_done_callback(partial(self._cancel, flow, job))
        return result

    def evaluate(self, condition: str, data: dict[str, Any], flow: str = "") -> ConditionOutcome:
        """`submit` and wait."""
        return self.submit(condition, data, flow).result()

    def evaluate_many(
        self, items: list[tuple[str, dict[str, Any]]], flow: str = ""
    ) -> list[ConditionOutcome]:
        """Evaluates several conditions at once, on as many workers as are free."""
        futures = [self.submit(condition, data, flow) for condition, data in items]
        return [future.result() for future in futures]

    def _outcome(self, answer: dict[str, Any]) -> ConditionOutcome:
        if answer.get("ok"):
            return ConditionOutcome(bool(answer.get("value")))
        kind = str(answer.get("error") or "threw")
        message = str(answer.get("message") or "")
        limit = f"{self.max_memory // MIB} MiB"
        sentences = {
            "threw": f"threw {message}",
            "timeout": f"timed out after {self.timeout_ms} ms",
            "memory": f"exceeded its {limit} memory limit",
            "type": f"returned {message}, not a boolean",
            "crash": message,
            "input": message,
        }
        return ConditionOutcome(None, kind, sentences.get(kind, f"failed: {message}"))

    # -- syntax checks ------------------------------------------------------------

    def check_syntax(self, condition: str) -> str | None:
        """None when the condition compiles, else the syntax error. Compiles
        only, with exactly the text an evaluation runs; nothing runs."""
        return self.check_syntax_many([condition])[0]

    def check_syntax_many(self, conditions: list[str]) -> list[str | None]:
        """`check_syntax` for several conditions: results remembered by source,
        the rest compiled in batches that share an isolate."""
        errors: dict[str, str] = {}
        unknown: list[str] = []
        for condition in dict.fromkeys(conditions):
            if len(condition) > MAX_CONDITION_CHARS:
                errors[condition] = f"condition is longer than {MAX_CONDITION_CHARS} characters"
                continue
            known = self._syntax.get(_source_key(condition))
            if known is None:
                unknown.append(condition)
            else:
                errors[condition] = known
        flow = f"check:{uuid.uuid4()}"
        pending = [(batch, self._enqueue(flow, {"op": "check", "conditions": batch},
                                         _CHECK_ALLOWANCE_S, None))
                   for batch in _batches(unknown)]  # fmt: skip
        for batch, job in pending:
            answer = job.future.result()
            if not answer.get("ok"):
                why = answer.get("message") or answer.get("error")
                raise SandboxUnavailable(f"the sandbox failed to check conditions ({why})")
            with self._lock:
                self.compiled += len(batch)
            for condition, error in zip(batch, answer["errors"], strict=True):
                message = "" if error is None else str(error)
                if "Illegal return statement" in message:
                    message += _RETURN_HINT
                self._syntax.put(_source_key(condition), message)
                errors[condition] = message
        return [errors[condition] or None for condition in conditions]

    # -- the pool -----------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            self._closed = True
            abandoned = self._queue.drain()
            processes = list(self._processes)
            self._lock.notify_all()
        for job in abandoned:
            if job.future.set_running_or_notify_cancel():
                job.future.set_exception(SandboxUnavailable("the condition sandbox is shut down"))
        for process in processes:
            process.kill()

    def _enqueue(
        self, flow: str, request: dict[str, Any], allowance_s: float, cost_key: str | None
    ) -> _Job:
        job = _Job(request, allowance_s, Future())
        with self._lock:
            if self._closed:
                raise SandboxUnavailable("the condition sandbox is shut down")
            self._queue.push(flow, job, cost_key)
            if len(self._queue) > self._idle and self._threads < self.max_workers:
                self._threads += 1
                threading.Thread(target=self._dispatch, name="sandbox", daemon=True).start()
            self._lock.notify()
        return job

    def _cancel(self, flow: str, job: _Job, result: Future[ConditionOutcome]) -> None:
        """Takes a cancelled evaluation's request out of its queue."""
        if not result.cancelled():
            return
        with self._lock:
            if self._queue.remove(flow, job):
                job.future.cancel()

    def _dispatch(self) -> None:
        """One worker thread: takes the next job fairly, runs it on its own
        process (started on first use, replaced when it dies)."""
        process: SandboxProcess | None = None
        try:
            while True:
                with self._lock:
                    taken = self._next_job()
                if taken is None:
                    return
                flow, job, cost_key = taken
                if not job.future.set_running_or_notify_cancel():
                    continue
                try:
                    process = self._run(process, flow, job, cost_key)
                except Exception as err:  # not the condition's doing: fail it, carry on
                    log.exception("condition sandbox failed a request")
                    if process is not None:
                        self._retire(process)
                        process = None
                    if not job.future.done():
                        job.future.set_exception(SandboxUnavailable(f"the sandbox failed: {err}"))
        finally:
            if process is not None:
                self._retire(process)

    def _run(
        self, process: SandboxProcess | None, flow: str, job: _Job, cost_key: str | None
    ) -> SandboxProcess | None:
        """Runs `job` on `process` (started if None); returns the process to
        use next (None when this one is gone)."""
        try:
            if process is None:
                process = self._start_process()
        except SandboxUnavailable as err:
            job.future.set_exception(err)
            return None
        started = time.monotonic()
        answer = self._call(process, job)
        with self._lock:
            self._queue.record(flow, cost_key, time.monotonic() - started)
        if answer.pop("lost", False) or process.retired:
            self._retire(process)
            process = None
        job.future.set_result(answer)
        return process

    def _next_job(self) -> tuple[str, _Job, str | None] | None:
        """Called with the lock held; None when this thread should exit."""
        self._idle += 1
        try:
            while not self._closed:
                taken = self._queue.pop()
                if taken is not None:
                    return taken
                if self._threads <= self.min_workers:
                    self._lock.wait()
                elif not self._lock.wait(self.idle_exit_s) and self._threads > self.min_workers:
                    break  # idle, and still more threads than need to stay
            self._threads -= 1
            return None
        finally:
            self._idle -= 1

    def _start_process(self) -> SandboxProcess:
        process = SandboxProcess(self.max_memory)
        with self._lock:
            if self._closed:
                process.kill()
                raise SandboxUnavailable("the condition sandbox is shut down")
            self._processes.add(process)
        return process

    def _call(self, process: SandboxProcess, job: _Job) -> dict[str, Any]:
        deadline = time.monotonic() + job.allowance_s
        try:
            return process.call(job.request, deadline)
        except WorkerLost as err:
            log.warning("condition sandbox worker %d lost: %s; replacing it", process.pid, err)
            with self._lock:
                self.restarts += 1
            if err.out_of_memory:
                return {"ok": False, "error": "memory", "lost": True}
            message = f"{err}; the process was replaced"
            return {"ok": False, "error": "crash", "message": message, "lost": True}

    def _retire(self, process: SandboxProcess) -> None:
        process.kill()
        with self._lock:
            self._processes.discard(process)


def _source_key(condition: str) -> str:
    return hashlib.sha256(condition.encode()).hexdigest()


def _batches(conditions: list[str]) -> list[list[str]]:
    batches: list[list[str]] = []
    size = 0
    for condition in conditions:
        if (
            not batches
            or len(batches[-1]) >= _CHECK_BATCH
            or size + len(condition) > _CHECK_BATCH_CHARS
        ):
            batches.append([])
            size = 0
        batches[-1].append(condition)
        size += len(condition)
    return batches


def _chain(
    source: Future[dict[str, Any]],
    target: Future[ConditionOutcome],
    convert: Callable[[dict[str, Any]], ConditionOutcome],
) -> None:
    """Completes `target` with `convert(source's result)` once `source` is
    done, unless `target` was cancelled meanwhile."""

    def done(finished: Future[dict[str, Any]]) -> None:
        try:
            if finished.cancelled():
                target.cancel()
            elif (error := finished.exception()) is not None:
                target.set_exception(error)
            else:
                target.set_result(convert(finished.result()))
        except InvalidStateError:
            pass  # cancelled by its caller

    source.add_done_callback(done)
