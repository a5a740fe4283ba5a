"""An executor that does nothing, for benchmarks of the engine itself."""

from __future__ import annotations

import threading

from cortex.executors.base import Execution, ExecutionResult


class NoopExecutor:
    name = "noop"
    uses_work_dir = False

    def run(self, execution: Execution, cancel: threading.Event) -> ExecutionResult:
        duration_ms = float(execution.spec.options.get("duration_ms", 0) or 0)
        exit_code = int(execution.spec.options.get("exit_code", 0) or 0)
        if duration_ms > 0 and cancel.wait(duration_ms / 1000):
            return ExecutionResult(exit_code=-1, cancelled=True)
        return ExecutionResult(exit_code=exit_code)
