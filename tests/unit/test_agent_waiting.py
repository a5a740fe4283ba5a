"""The attempts waiting for a node's slots, on their own: best first, one
per task, dropped when the log moves them, never added back by a read the
log overtook."""

from __future__ import annotations

from cortex.agent.waiting import WaitingAttempts
from cortex.state.queries import TaskView
from cortex.state.transitions import TaskChange


def view(task_id: str, priority: int = 5, attempt: int = 1) -> TaskView:
    return TaskView(
        id=task_id, state="assigned", type="noop", priority=priority, spec={"type": "noop"},
        attempt=attempt, retries=0, node="n1", result=None, error=None, idempotency_key=None,
        workflow_id=None, workflow_key=None, created_at=0, updated_at=0, scheduled_after=0,
        submit_index=0,
    )  # fmt: skip


def ids(tasks: list[TaskView]) -> list[str]:
    return [task.id for task in tasks]


def test_the_best_wait_first_by_priority_then_as_found() -> None:
    waiting = WaitingAttempts("n1")
    for task_id, priority in (("a", 5), ("b", 1), ("c", 9), ("d", 5)):
        waiting.add(view(task_id, priority))
    waiting.add(view("a", 5))  # found again: keeps its place
    assert len(waiting) == 4 and waiting
    assert ids(waiting.take(2)) == ["c", "a"]
    assert ids(waiting.take(None)) == ["d", "b"]
    assert not waiting and waiting.take(3) == []


def test_a_new_attempt_of_a_waiting_task_replaces_the_old_one() -> None:
    waiting = WaitingAttempts("n1")
    waiting.add(view("a", attempt=1))
    waiting.add(view("b"))
    waiting.add(view("a", attempt=2))
    assert [(t.id, t.attempt) for t in waiting.take(None)] == [("b", 1), ("a", 2)]


def test_an_attempt_the_log_moves_waits_no_more() -> None:
    waiting = WaitingAttempts("n1")
    for task_id in ("a", "b", "c", "d"):
        waiting.add(view(task_id))
    waiting.drop_moved([
        TaskChange("a", "cancelled", "n1", 1),  # ended
        TaskChange("b", "assigned", "n2", 2),  # placed elsewhere
        TaskChange("c", "assigned", "n1", 2),  # a later attempt, here
        TaskChange("d", "assigned", "n1", 1),  # its own assignment: still waits
    ])  # fmt: skip
    assert ids(waiting.take(None)) == ["d"]


def test_a_full_read_keeps_only_what_it_found() -> None:
    waiting = WaitingAttempts("n1")
    for task_id in ("a", "b"):
        waiting.add(view(task_id))
    waiting.keep_only({("b", 1), ("z", 1)})
    assert ids(waiting.take(None)) == ["b"]


def test_a_read_the_log_overtakes_adds_nothing() -> None:
    """The log moves a task while the agent reads it as assigned here: the
    view read is stale and must not wait; a task assigned here during its
    read still may, and the guard ends with the read."""
    waiting = WaitingAttempts("n1")
    with waiting.reading(["a", "b"]):
        waiting.drop_moved([TaskChange("a", "cancelled", "n1", 1),
                            TaskChange("b", "assigned", "n1", 1)])  # fmt: skip
        waiting.add(view("a"))
        waiting.add(view("b"))
    assert ids(waiting.take(None)) == ["b"]
    waiting.add(view("a", attempt=2))  # read after the read ended: a fresh view
    assert ids(waiting.take(None)) == ["a"]
