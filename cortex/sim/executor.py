"""Tasks in the simulation run through a simulated executor: each attempt
takes a seeded time and ends with a seeded exit code (a task's labels may ask
for a number of failing attempts first), and a cancel or the loss of
the attempt ends it at once, as a kill does."""

from __future__ import annotations

import hashlib
import json
import threading
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from cortex.executors import Execution, ExecutionResult, Executor
from cortex.sim.clock import SimClock

# Labels the workload gives a task: its first N attempts fail; the context
# update (JSON) it reports when it completes in a workflow.
FAIL_ATTEMPTS_LABEL = "sim.fail-attempts"
CONTEXT_LABEL = "sim.context"


@dataclass
class _Attempt:
    future: Future[ExecutionResult]
    cancel: threading.Event
    ends_at_us: int
    exit_code: int
    context_update: dict[str, Any] | None


class SimLauncher:
    """The agent's `ExecutionLauncher` in simulated time."""

    def __init__(self, clock: SimClock, seed: int) -> None:
        self._clock = clock
        self._seed = seed
        self._attempts: list[_Attempt] = []
        self.launched = 0
        # The most attempts running here at once.
        self.most_at_once = 0

    def _draw(self, execution: Execution) -> tuple[int, int]:
        """(duration in microseconds, exit code) for this attempt, from the
        seed, the task and the attempt: the same whichever node runs it."""
        material = f"{self._seed}|{execution.task_id}|{execution.attempt}".encode()
        value = int.from_bytes(hashlib.sha256(material).digest()[:8], "big")
        labels = execution.spec.labels
        duration = (50 + value % 1500) * 1000
        failures = int(labels.get(FAIL_ATTEMPTS_LABEL, "0"))
        exit_code = 1 if execution.attempt <= failures else 0
        return duration, exit_code

    def launch(
        self,
        executor: Executor,
        execution: Execution,
        cancel: threading.Event,
        handle: dict[str, Any] | None = None,
    ) -> Future[ExecutionResult]:
        duration, exit_code = self._draw(execution)
        future: Future[ExecutionResult] = Future()
        update = execution.spec.labels.get(CONTEXT_LABEL)
        self._attempts.append(
            _Attempt(
                future,
                cancel,
                self._clock.now_us + duration,
                exit_code,
                json.loads(update) if update else None,
            )  # fmt: skip
        )
        self.launched += 1
        self.most_at_once = max(self.most_at_once, len(self._attempts))
        return future

    def next_at(self) -> int | None:
        return min((a.ends_at_us for a in self._attempts), default=None)

    def run_due(self) -> None:
        """Ends the attempts whose time has come or that were cancelled."""
        now = self._clock.now_us
        for attempt in list(self._attempts):
            if attempt.cancel.is_set():
                self._attempts.remove(attempt)
                attempt.future.set_result(ExecutionResult(exit_code=-15, cancelled=True))
            elif attempt.ends_at_us <= now:
                self._attempts.remove(attempt)
                result = ExecutionResult(exit_code=attempt.exit_code, stdout=b"simulated\n")
                if attempt.exit_code == 0:
                    result.context_update = attempt.context_update
                attempt.future.set_result(result)

    def abandon(self) -> None:
        """The node's process is gone, and its attempts with it."""
        self._attempts = []
