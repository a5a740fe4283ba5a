"""Driving a node's steps (`cortex.steps`) by hand in unit tests: a clock the
test moves, a stepper that resumes a generator with outcomes the test
chooses, and a proposer whose proposals wait until the test applies them to
a real StateMachine (a `WorkflowLog`) or fails them, and an agent built
from them. Nothing here sleeps or reads the real time, so a step that still
did would show."""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from cortex.agent import Agent, ExecutionLauncher
from cortex.executors import Executor
from cortex.state import entries as e
from cortex.steps import Sleep, Step, WaitSignal
from tests.workflow_sim import WorkflowLog


class FakeClock:
    """Both readings move only when the test says."""

    def __init__(self, wall_s: float = 1_800_000_000.0, monotonic_s: float = 5_000.0) -> None:
        self.wall_s = wall_s
        self.monotonic_s = monotonic_s

    def time(self) -> float:
        return self.wall_s

    def monotonic(self) -> float:
        return self.monotonic_s

    def advance(self, seconds: float) -> None:
        self.wall_s += seconds
        self.monotonic_s += seconds


class Stepper:
    """Runs a step to its first wait; `resume`/`throw`/`settle` go on to the
    next. `waiting` is what it waits for now; `done` and `result` say how it
    ended."""

    def __init__(self, step: Step[Any]) -> None:
        self._step = step
        self.done = False
        self.result: Any = None
        self.waiting: Any = None
        self._go(lambda: next(self._step))

    def _go(self, advance: Any) -> Any:
        assert not self.done, "the step has ended"
        try:
            self.waiting = advance()
        except StopIteration as end:
            self.done, self.result, self.waiting = True, end.value, None
        return self.waiting

    def resume(self, value: Any = None) -> Any:
        return self._go(lambda: self._step.send(value))

    def throw(self, error: BaseException) -> Any:
        return self._go(lambda: self._step.throw(error))

    def settle(self) -> Any:
        """Resumes with the outcome of the (done) future it waits for."""
        future = self.waiting
        assert isinstance(future, Future) and future.done(), f"not a settled future: {future}"
        error = future.exception()
        return self.resume(future.result()) if error is None else self.throw(error)


class HeldProposer:
    """`submit_all` proposals wait in `held` until the test applies or fails
    them; `submit` (nobody waits for it) applies at once. Entries are applied
    as they were created, their timestamps included."""

    def __init__(self, log: WorkflowLog) -> None:
        self.log = log
        self.held: list[tuple[list[e.Entry], Future[list[dict[str, Any]]]]] = []
        self.submitted: list[e.Entry] = []

    def _apply(self, entries: list[e.Entry]) -> list[dict[str, Any]]:
        self.log.index += 1
        results = self.log.machine.apply_batch(self.log.index, e.encode_batch(entries))
        assert results is not None
        return results

    def submit(self, entry: e.Entry) -> Future[dict[str, Any]]:
        self.submitted.append(entry)
        future: Future[dict[str, Any]] = Future()
        future.set_result(self._apply([entry])[0])
        return future

    def submit_all(self, entries: list[e.Entry]) -> Future[list[dict[str, Any]]]:
        future: Future[list[dict[str, Any]]] = Future()
        self.held.append((list(entries), future))
        return future

    def payloads(self, number: int = 0) -> list[e.Payload]:
        return [entry.decode_payload() for entry in self.held[number][0]]

    def apply_next(self) -> list[dict[str, Any]]:
        entries, future = self.held.pop(0)
        results = self._apply(entries)
        future.set_result(results)
        return results

    def fail_next(self, error: BaseException) -> None:
        _, future = self.held.pop(0)
        future.set_exception(error)


class AgentByHand:
    """Node n1's agent driven by hand: its reconcile loop and every attempt
    are steps handed to `spawn` (kept here for the test to run), its
    proposals go through a `HeldProposer`, its attempts start through the
    test's `launcher`."""

    def __init__(
        self,
        log: WorkflowLog,
        data_dir: Path,
        executors: Mapping[str, Executor],
        launcher: ExecutionLauncher,
        max_running: int = 0,
        read_at_apply: bool = True,
    ) -> None:
        self.log = log
        self.clock = FakeClock()
        self.proposer = HeldProposer(log)
        self.launcher = launcher
        self.spawned: list[Step[Any]] = []
        self.agent = Agent(
            "n1",
            self.proposer,
            log.reader,
            dict(executors),
            str(data_dir),
            is_ready=lambda: True,
            clock=self.clock,
            spawn=self.spawned.append,
            launcher=launcher,
            max_running=max_running,
            read_applied=log.machine.tasks_as_applied if read_at_apply else None,
        )
        log.machine.add_listener(self.agent.on_change)
        self.agent.start()
        self.main = Stepper(self.spawned.pop(0))
        assert self.main.waiting == WaitSignal(self.agent._wake, 0.5)
        # The step that reports the start of attempts still running a moment
        # after they began (the others report it with their outcome).
        self.starts = Stepper(self.spawned.pop(0))
        assert self.starts.waiting == WaitSignal(self.agent._held_starts, 0.5)

    def report_held_starts(self) -> None:
        """One round of the start reporter: the attempts begun so far that
        are still running, once the hold has passed on the agent's clock,
        report their start (through `submit`, applied at once)."""
        self.starts.resume(True)
        if isinstance(self.starts.waiting, Sleep):  # some attempt holds its start
            self.clock.advance(self.starts.waiting.seconds)
            self.starts.resume()
        assert self.starts.waiting == WaitSignal(self.agent._held_starts, 0.5)

    def reconcile(self) -> list[Stepper]:
        """One pass of the loop; the steps it spawned, started."""
        self.main.resume(True)
        spawned, self.spawned[:] = list(self.spawned), []
        return [Stepper(step) for step in spawned]
