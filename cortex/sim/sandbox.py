"""Workflow conditions in the simulation: real V8 (mini-racer), with the
sandbox's own wrapper, checks and outcome wording, evaluated on the calling
thread instead of worker processes (the simulation has one thread)."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from cortex.workflows.sandbox import ConditionSandbox, _Job
from cortex.workflows.sandbox_worker import _check, _evaluate, _Isolates


class InlineSandbox(ConditionSandbox):
    def __init__(self) -> None:
        super().__init__(workers=1, max_workers=1)
        self._isolates = _Isolates(self.max_memory)

    def _enqueue(
        self, flow: str, request: dict[str, Any], allowance_s: float, cost_key: str | None
    ) -> _Job:
        job = _Job(request, allowance_s, Future())
        if request["op"] == "eval":
            job.future.set_result(_evaluate(self._isolates, request))
        else:
            job.future.set_result(_check(self._isolates, request))
        return job

    def close(self) -> None:
        pass
