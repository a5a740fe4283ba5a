"""What the replicated log says about one attempt of a task: where it ran and
how it ended. Every assignment starts a new attempt number, so an attempt's
node never changes once assigned."""

from __future__ import annotations

from dataclasses import dataclass

from cortex.state.queries import EventView, TaskView

ACTIVE = frozenset({"assigned", "running"})


@dataclass(frozen=True)
class AttemptInfo:
    task_id: str
    number: int
    # Where the attempt was assigned; None for attempt 0 (the task never ran).
    node: str | None
    # The task's state while the attempt is active, else the state the
    # attempt left the task in (completed, failed, queued for a retry ...).
    state: str
    active: bool
    exit_code: int | None = None
    error: str | None = None


def describe_attempt(task: TaskView, events: list[EventView], number: int) -> AttemptInfo | None:
    """Attempt `number` of `task` (0 means the latest); None when it does not
    exist. Attempt 0 of a task that never ran describes the task itself."""
    number = number or task.attempt
    if number > task.attempt or number < 0:
        return None
    if number == 0:
        return AttemptInfo(task.id, 0, None, task.state, False, None, task.error)
    node: str | None = None
    state, error = "assigned", None
    exit_code: int | None = None
    reported = False
    for event in events:
        if event.attempt != number:
            continue
        if event.event == "assigned":
            node = event.node
        detail = event.detail or {}
        if event.to_state:
            state = event.to_state
        if isinstance(detail.get("reason"), str):
            error = detail["reason"]
        if event.event in ("completed", "attempt_failed"):
            reported = True
        if event.event == "completed" and isinstance(detail.get("exit_code"), int):
            exit_code = detail["exit_code"]
    if number == task.attempt:
        state = task.state
        error = task.error or error
        active = task.state in ACTIVE
        # The row's result is the last one reported, which is this attempt's
        # only if this attempt's node reported (a lost attempt reports none).
        if reported and not active and task.result:
            code = task.result.get("exit_code")
            exit_code = code if isinstance(code, int) else exit_code
    else:
        active = False
    return AttemptInfo(task.id, number, node, state, active, exit_code, error)
