"""The workflow engine's condition evaluations in flight: asked for by one
round, evaluated in the sandbox on the workflow's own queue while rounds go
on, and picked up by the first round that asks again for the same input.

Keyed by (workflow, task, basis): an outcome is used only for the input it
was computed from. What no round asks for any more (the task was decided,
the workflow ended, the input changed) is dropped, and still-queued
evaluations of it are cancelled."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from functools import partial
from typing import Any

from cortex.tracing import NO_TRACING, Tracer
from cortex.tracing.spans import (
    CONDITION_OUTCOME,
    EVALUATE_CONDITION,
    TASK_ID,
    WORKFLOW_ID,
    WORKFLOW_TASK_KEY,
)
from cortex.workflows.decisions import ConditionRequest, Evaluator
from cortex.workflows.sandbox import ConditionOutcome, ConditionSandbox

log = logging.getLogger(__name__)

_Key = tuple[str, str, tuple[Any, ...]]


class PendingEvaluations:
    """With tracing on, each evaluation is a span in its workflow's run."""

    def __init__(
        self,
        sandbox: ConditionSandbox,
        on_outcome: Callable[[], None],
        tracer: Tracer = NO_TRACING,
    ) -> None:
        self._sandbox = sandbox
        self._on_outcome = on_outcome
        self._tracer = tracer
        self._lock = threading.Lock()
        self._running: dict[_Key, Future[ConditionOutcome]] = {}
        self._outcomes: dict[_Key, ConditionOutcome] = {}
        # Keys asked for, or outcomes arrived, since the last sweep.
        self._wanted: set[_Key] = set()
        # Workflows with outcomes arrived since the engine last asked.
        self._arrivals: set[str] = set()

    def evaluator(self, workflow_id: str, traceparent: str | None = None) -> Evaluator:
        """For `decide`: known outcomes, None (and an evaluation queued on
        the workflow's queue, if none is yet) for the rest. `traceparent`:
        the workflow's run's context, the parent of evaluation spans."""
        return partial(self._lookup, workflow_id, traceparent)

    def _lookup(
        self, workflow_id: str, traceparent: str | None, requests: list[ConditionRequest]
    ) -> list[ConditionOutcome | None]:
        answers: list[ConditionOutcome | None] = []
        for request in requests:
            key = (workflow_id, request.task_id, request.basis)
            with self._lock:
                self._wanted.add(key)
                outcome = self._outcomes.get(key)
                if outcome is not None or key in self._running:
                    answers.append(outcome)
                    continue
            future = self._sandbox.submit(request.condition, request.input(), workflow_id)
            with self._lock:
                self._running[key] = future
            if self._tracer.enabled:
                future.add_done_callback(
                    partial(self._record, request, workflow_id, traceparent, time.time_ns())
                )
            future.add_done_callback(partial(self._finished, key))
            answers.append(None)
        return answers

    def _finished(self, key: _Key, future: Future[ConditionOutcome]) -> None:
        with self._lock:
            if self._running.get(key) is not future:
                return  # swept meanwhile
            del self._running[key]
            if future.cancelled():
                return
            error = future.exception()
            if error is None:
                self._outcomes[key] = future.result()
                self._wanted.add(key)
                self._arrivals.add(key[0])
        if error is not None:
            # Asked for again by a later round.
            log.warning(
                "workflow %s: condition of task %s not evaluated: %s", key[0], key[1], error
            )
            return
        self._on_outcome()

    def _record(
        self,
        request: ConditionRequest,
        workflow_id: str,
        traceparent: str | None,
        start_ns: int,
        future: Future[ConditionOutcome],
    ) -> None:
        """The evaluation's span, from when it was asked for to its outcome."""
        if future.cancelled():
            return
        error = future.exception()
        outcome = future.result() if error is None else None
        if outcome is None:
            described, failure = "not evaluated", f"not evaluated: {error}"
        elif outcome.error:
            described, failure = outcome.error, outcome.describe()
        else:
            described, failure = str(bool(outcome.value)).lower(), None
        self._tracer.record(
            EVALUATE_CONDITION,
            traceparent,
            start_ns,
            time.time_ns(),
            {
                WORKFLOW_ID: workflow_id,
                TASK_ID: request.task_id,
                WORKFLOW_TASK_KEY: request.key,
                CONDITION_OUTCOME: described,
            },
            error=failure,
        )

    def take_arrivals(self) -> set[str]:
        """Workflows with outcomes arrived since the last call."""
        with self._lock:
            arrivals, self._arrivals = self._arrivals, set()
        return arrivals

    def sweep(self, keep: set[str] | None = None) -> None:
        """After a round: forgets what no round asked for since the last
        sweep, except for the workflows in `keep` (not looked at this round)."""
        keep = keep or set()
        with self._lock:
            wanted = self._wanted
            stale = [
                (k, f) for k, f in self._running.items() if k not in wanted and k[0] not in keep
            ]
            for key, _ in stale:
                del self._running[key]
            self._outcomes = {
                k: o for k, o in self._outcomes.items() if k in wanted or k[0] in keep
            }
            self._wanted = set()
        for _, future in stale:
            future.cancel()

    def clear(self) -> None:
        """Forgets everything (this node stopped leading)."""
        with self._lock:
            self._wanted = set()
            self._arrivals = set()
        self.sweep()

    def __len__(self) -> int:
        with self._lock:
            return len(self._running) + len(self._outcomes)
