"""How the agent runs an attempt: an `ExecutionLauncher` starts the executor
and gives a future of its result, so the agent's steps wait for attempts
without blocking. The real node's `ThreadLauncher` runs each attempt on a
thread of its own, its output going to the node's output log; the simulator
launches attempts with simulated durations and outcomes."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import replace
from typing import Any, Protocol

from pydantic import ValidationError

from cortex.cpu_policy import for_tasks
from cortex.executors import Execution, ExecutionResult, Executor
from cortex.output import OutputHub
from cortex.spec import describe_validation_error

log = logging.getLogger(__name__)


class ExecutionLauncher(Protocol):
    def launch(
        self,
        executor: Executor,
        execution: Execution,
        cancel: threading.Event,
        handle: dict[str, Any] | None = None,
    ) -> Future[ExecutionResult]:
        """Starts the attempt (with `handle`: recovers the one it describes,
        started before this node process did); the future holds its result,
        or the LookupError of an attempt that cannot be recovered. Setting
        `cancel` asks the executor to kill it (its result then says so)."""
        ...


def describe_exception(err: BaseException) -> str:
    """One readable line: pydantic's errors field by field, others with their type."""
    if isinstance(err, ValidationError):
        return describe_validation_error(err)
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def run_executor(
    executor: Executor,
    execution: Execution,
    cancel: threading.Event,
    handle: dict[str, Any] | None = None,
) -> ExecutionResult:
    """Runs (or with `handle`, recovers) the attempt. An executor that raises
    fails its attempt, with a reason naming it; a LookupError from `recover`
    (nothing to recover) is raised."""
    try:
        if handle is not None:
            return executor.recover(execution, handle, cancel)
        return executor.run(execution, cancel)
    except Exception as err:
        if handle is not None and isinstance(err, LookupError):
            raise
        log.exception("task %s attempt %d: the %s executor raised",
                      execution.task_id, execution.attempt, executor.name)  # fmt: skip
        return ExecutionResult(
            exit_code=-1, error=f"the {executor.name} executor failed: {describe_exception(err)}"
        )


def run_with_output(
    output: OutputHub | None,
    executor: Executor,
    execution: Execution,
    cancel: threading.Event,
    handle: dict[str, Any] | None = None,
) -> ExecutionResult:
    """Runs (or recovers) the attempt with its output going to this node's
    output log, closed with the outcome when the executor returns. A
    recovered attempt's log carries on where it was, and the executor is
    told how much of each stream it holds."""
    if output is None or not executor.uses_work_dir:
        return run_executor(executor, execution, cancel, handle)
    try:
        sink = output.open(execution.task_id, execution.attempt, resume=handle is not None)
    except (OSError, ValueError) as err:
        log.error("task %s attempt %d: cannot open its output log: %s",
                  execution.task_id, execution.attempt, err)  # fmt: skip
        return run_executor(executor, execution, cancel, handle)
    offsets = sink.resumed_offsets if handle is not None else {}
    result: ExecutionResult | None = None
    error = "the attempt could not run"
    try:
        result = run_executor(
            executor, replace(execution, output=sink, output_offsets=offsets), cancel, handle
        )
        return result
    except LookupError as err:
        error = f"the attempt could not be recovered: {err}"
        raise
    finally:
        if result is None:
            sink.close(error=error)
        else:
            sink.close(result.exit_code, result.error)


class Workers:
    """Daemon threads that each run one job at a time, as many as there are
    jobs at once: a job goes to an idle thread, or to a new one when none is
    idle, and a thread idle for `idle_s` ends. Attempts can run for hours,
    so none ever waits for a thread; short ones reuse threads rather than
    starting one each."""

    def __init__(self, name: str, idle_s: float = 30.0) -> None:
        self._name = name
        self._idle_s = idle_s
        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        # Threads waiting for a job, less the jobs queued for them.
        self._idle = 0

    def run(self, job: Callable[[], None]) -> None:
        with self._lock:
            if self._idle > 0:
                self._idle -= 1
                self._jobs.put(job)
                return
        threading.Thread(target=self._work, args=(job,), name=self._name, daemon=True).start()

    def _work(self, job: Callable[[], None]) -> None:
        while True:
            job()
            with self._lock:
                self._idle += 1
            try:
                job = self._jobs.get(timeout=self._idle_s)
            except queue.Empty:
                # A job is queued under the lock together with the count
                # going down, so either one is here now or this thread is
                # still counted idle and may go.
                with self._lock:
                    try:
                        job = self._jobs.get_nowait()
                    except queue.Empty:
                        self._idle -= 1
                        return


class ThreadLauncher:
    """Each attempt on a daemon thread of its own while it runs (threads are
    reused from one attempt to the next), under the CPU scheduling policy
    the node was started with (`cortex.cpu_policy`), its output (when the
    executor writes any) to `output`."""

    def __init__(self, output: OutputHub | None = None) -> None:
        self._output = output
        self._workers = Workers("attempt")

    def launch(
        self,
        executor: Executor,
        execution: Execution,
        cancel: threading.Event,
        handle: dict[str, Any] | None = None,
    ) -> Future[ExecutionResult]:
        result: Future[ExecutionResult] = Future()

        def run() -> None:
            for_tasks()
            try:
                outcome = run_with_output(self._output, executor, execution, cancel, handle)
            except BaseException as err:
                result.set_exception(err)
                return
            result.set_result(outcome)

        self._workers.run(run)
        return result
