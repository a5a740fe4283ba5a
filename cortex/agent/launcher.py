"""How the agent runs an attempt: an `ExecutionLauncher` starts the executor
and gives a future of its result, so the agent's steps wait for attempts
without blocking. The real node's `ThreadLauncher` runs each attempt on a
thread of its own, its output going to the node's output log; the simulator
launches attempts with simulated durations and outcomes."""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future
from dataclasses import replace
from typing import Any, Protocol

from pydantic import ValidationError

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


class ThreadLauncher:
    """Each attempt on a daemon thread of its own, its output (when the
    executor writes any) to `output`."""

    def __init__(self, output: OutputHub | None = None) -> None:
        self._output = output

    def launch(
        self,
        executor: Executor,
        execution: Execution,
        cancel: threading.Event,
        handle: dict[str, Any] | None = None,
    ) -> Future[ExecutionResult]:
        result: Future[ExecutionResult] = Future()

        def run() -> None:
            try:
                outcome = run_with_output(self._output, executor, execution, cancel, handle)
            except BaseException as err:
                result.set_exception(err)
                return
            result.set_result(outcome)

        name = f"task-{execution.task_id[:8]}"
        threading.Thread(target=run, name=name, daemon=True).start()
        return result
