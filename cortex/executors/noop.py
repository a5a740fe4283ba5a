"""An executor that does nothing, for benchmarks of the engine itself."""

from __future__ import annotations

import threading
from typing import Any

from cortex.executors.base import Execution, ExecutionResult, ExecutorSettings
from cortex.spec import NoopOptions


class NoopExecutor:
    name = "noop"
    uses_work_dir = False
    options_model = NoopOptions

    def __init__(self, settings: ExecutorSettings | None = None) -> None:
        pass

    def fingerprint(self) -> dict[str, str] | None:
        return {}

    def run(self, execution: Execution, cancel: threading.Event) -> ExecutionResult:
        """Waits `duration_ms` (or until cancelled), then ends with `exit_code`.
        Options that do not validate raise: the agent reports the failure."""
        options = NoopOptions.model_validate(execution.spec.options)
        if options.duration_ms > 0 and cancel.wait(options.duration_ms / 1000):
            return ExecutionResult(exit_code=-1, cancelled=True)
        return ExecutionResult(exit_code=options.exit_code)

    def recover(
        self, execution: Execution, handle: dict[str, Any], cancel: threading.Event
    ) -> ExecutionResult:
        raise LookupError("a noop attempt keeps nothing to come back to")
