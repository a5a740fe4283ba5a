"""Driving a node's steps (`cortex.steps`) in simulated time: each spawned
step waits for a simulated sleep, a future or a signal, and is resumed by the
harness's loop, in spawn order, on the one thread there is."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from cortex.sim.clock import SimClock
from cortex.steps import Sleep, Step, WaitSignal

# Resumptions of one node's steps in one pass, at most: a step that never
# waits for time would otherwise spin for ever.
MAX_RESUMES = 10_000


class StepSpun(Exception):
    """A step kept running without waiting for anything that takes time."""


@dataclass
class _Task:
    name: str
    step: Step[Any]
    wait: Any = None
    resume_at_us: int | None = 0  # None: waiting for a future or a signal only
    started: bool = False
    value: Any = None
    error: BaseException | None = field(default=None)


class StepRunner:
    def __init__(self, clock: SimClock) -> None:
        self._clock = clock
        self._tasks: list[_Task] = []

    def spawn(self, step: Step[Any], name: str = "step") -> None:
        self._tasks.append(_Task(name, step, resume_at_us=self._clock.now_us))

    @property
    def count(self) -> int:
        return len(self._tasks)

    def next_at(self) -> int | None:
        times = [t.resume_at_us for t in self._tasks if t.resume_at_us is not None]
        return min(times) if times else None

    def any_ready(self) -> bool:
        """Whether some step could go on now (without resuming any)."""
        now = self._clock.now_us
        for task in self._tasks:
            wait = task.wait
            if not task.started:
                return True
            if isinstance(wait, Future):
                if wait.done():
                    return True
            elif isinstance(wait, WaitSignal) and wait.signal.is_set():
                return True
            elif task.resume_at_us is not None and task.resume_at_us <= now:
                return True
        return False

    def _ready(self, task: _Task) -> bool:
        now = self._clock.now_us
        wait = task.wait
        if not task.started:
            return True
        if isinstance(wait, Future):
            if not wait.done():
                return False
            try:
                task.value, task.error = wait.result(), None
            except BaseException as err:
                task.value, task.error = None, err
            return True
        if isinstance(wait, WaitSignal):
            if wait.signal.is_set():
                wait.signal.clear()
                task.value = True
                return True
            if task.resume_at_us is not None and task.resume_at_us <= now:
                task.value = False
                return True
            return False
        return task.resume_at_us is not None and task.resume_at_us <= now

    def run_due(self) -> int:
        """Resumes every step that can go on now, until none can; returns how
        many resumptions there were."""
        resumed = 0
        progress = True
        while progress:
            progress = False
            for task in list(self._tasks):
                if not self._ready(task):
                    continue
                progress = True
                resumed += 1
                if resumed > MAX_RESUMES:
                    raise StepSpun(f"step {task.name} never waits for time")
                self._resume(task)
        return resumed

    def _resume(self, task: _Task) -> None:
        value, error = task.value, task.error
        task.value, task.error = None, None
        try:
            if not task.started:
                task.started = True
                wait = task.step.send(None)
            elif error is not None:
                wait = task.step.throw(error)
            else:
                wait = task.step.send(value)
        except StopIteration:
            self._tasks.remove(task)
            return
        task.wait = wait
        now = self._clock.now_us
        if isinstance(wait, Sleep):
            task.resume_at_us = now + max(int(wait.seconds * 1_000_000), 0)
        elif isinstance(wait, WaitSignal):
            task.resume_at_us = now + max(int(wait.seconds * 1_000_000), 0)
        elif isinstance(wait, Future):
            task.resume_at_us = None
        else:
            task.wait = None
            task.resume_at_us = now
            task.error = TypeError(f"step {task.name} yielded {type(wait).__name__}")

    def close(self) -> None:
        """The node's process is gone: every step ends where it waits."""
        for task in self._tasks:
            try:
                task.step.close()
            except Exception:  # a step's cleanup failing changes nothing here
                pass
        self._tasks = []
