"""The scheduler's loop driven by hand on a real state machine, a clock the
test moves and proposals the test applies: one TASK_ASSIGN future per round,
stamped with the loop's clock, and backed-off tasks placed when that clock
(not the real one) says they are due."""

from __future__ import annotations

import pytest

from cortex.membership.board import ResourceBoard
from cortex.raft.leader_loop import LeaderContext
from cortex.raft.proposer import MAX_BATCH_TASKS
from cortex.scheduler.loop import SchedulerLoop
from cortex.state import entries as e
from cortex.steps import WaitSignal, wall_ms
from tests.steps_by_hand import FakeClock, HeldProposer, Stepper
from tests.workflow_sim import NODES, WorkflowLog

BACKOFF_MS = 5_000


def backing_off(log: WorkflowLog, task_id: str) -> int:
    """A task whose first attempt failed: queued again, due after its backoff."""
    spec = {"type": "noop", "retryPolicy": {"maxRetries": 2, "backoffMs": BACKOFF_MS}}
    assert log.one(e.TaskSubmit(task_id, spec))["ok"]
    assert log.one(e.TaskAssign([{"task_id": task_id, "node": "n2", "attempt": 1}]))["placed"]
    assert log.one(e.TaskFailed(task_id, 1, "n2", "exit code 1"), node="n2")["state"] == "queued"
    task = log.reader.get_task(task_id)
    assert task is not None and task.scheduled_after > 0
    return task.scheduled_after


def assigned(proposer: HeldProposer, number: int = 0) -> list[str]:
    (payload,) = proposer.payloads(number)
    assert isinstance(payload, e.TaskAssign)
    return [item["task_id"] for item in payload.assignments]


def first_round(log: WorkflowLog, clock: FakeClock) -> tuple[HeldProposer, Stepper]:
    """A loop on `log` woken once, as by a submit: its proposals, held."""
    proposer = HeldProposer(log)
    loop = SchedulerLoop(
        LeaderContext("n1", lambda: True, proposer, log.reader, clock),
        ResourceBoard(clock),
        reachable=lambda node: True,
    )
    stepper = Stepper(loop.main())
    stepper.resume(True)
    return proposer, stepper


def test_one_assign_future_per_round_on_the_loops_clock(log: WorkflowLog) -> None:
    due_ms = backing_off(log, "t-later")
    assert log.one(e.TaskSubmit("t-now", {"type": "noop"}))["ok"]
    # 300 ms before the backed-off task is due, by the loop's clock; the
    # real clock (years later) would call it due long ago.
    clock = FakeClock(wall_s=(due_ms - 300) / 1000)
    proposer = HeldProposer(log)
    loop = SchedulerLoop(
        LeaderContext("n1", lambda: True, proposer, log.reader, clock),
        ResourceBoard(clock),
        reachable=lambda node: True,
        interval_s=1.0,
    )
    stepper = Stepper(loop.main())
    assert isinstance(stepper.waiting, WaitSignal)
    assert stepper.waiting.seconds == pytest.approx(0.3)

    stepper.resume(True)  # woken by the submit
    # The round waits for its proposal without blocking: one entry, one future.
    assert len(proposer.held) == 1 and stepper.waiting is proposer.held[0][1]
    assert assigned(proposer) == ["t-now"]
    assert proposer.held[0][0][0].ts == wall_ms(clock)
    assert proposer.apply_next()[0]["placed"] == 1
    stepper.settle()
    assert isinstance(stepper.waiting, WaitSignal) and proposer.held == []

    clock.advance(0.3)
    stepper.resume(False)  # the interval passed
    assert assigned(proposer) == ["t-later"]
    proposer.apply_next()
    stepper.settle()
    task = log.reader.get_task("t-later")
    assert task is not None and (task.state, task.attempt) == ("assigned", 2)


def test_a_round_that_finds_nothing_proposes_nothing(log: WorkflowLog) -> None:
    due_ms = backing_off(log, "t-later")
    proposer, stepper = first_round(log, FakeClock(wall_s=(due_ms - 1) / 1000))
    assert proposer.held == [] and isinstance(stepper.waiting, WaitSignal)


def test_tasks_no_free_node_takes_do_not_hide_the_ones_behind_them(log: WorkflowLog) -> None:
    # Every node takes two tasks, so a round reads a small window of the
    # queue first: far fewer rows than the unplaceable tasks at its head.
    for node in NODES:
        joined = log.one(
            e.NodeJoin(
                node, f"{node}:1", f"{node}:2", executors=["noop"], resources={"max_tasks": 2}
            )
        )
        assert joined["ok"], joined
    held_back = 2 * len(NODES) * 4 + 64 + 10
    for number in range(held_back):
        spec = {"type": "noop", "priority": 9, "constraints": {"nodeLabels": ["gpu=yes"]}}
        assert log.one(e.TaskSubmit(f"t-gpu-{number:03d}", spec))["ok"]
    assert log.one(e.TaskSubmit("t-plain", {"type": "noop", "priority": 0}))["ok"]
    proposer, _ = first_round(log, FakeClock(wall_s=10_000.0))
    assert assigned(proposer) == ["t-plain"]


def listening_loop(log: WorkflowLog) -> SchedulerLoop:
    """A leader's loop listening to `log`'s applies, as a node's is."""
    clock = FakeClock(wall_s=1.0)
    loop = SchedulerLoop(
        LeaderContext("n1", lambda: True, HeldProposer(log), log.reader, clock),
        ResourceBoard(clock),
        reachable=lambda node: True,
    )
    log.machine.add_listener(lambda index, changes: loop.on_change(changes))
    return loop


def woken(loop: SchedulerLoop) -> bool:
    """Whether a round was woken since the last look (and forgets it)."""
    was = loop._wake.is_set()
    loop._wake.clear()
    return was


def test_a_task_left_queued_wakes_a_round_and_one_placed_with_its_submission_does_not(
    log: WorkflowLog,
) -> None:
    loop = listening_loop(log)
    placed = log.apply(
        e.TaskSubmit("t-1", {"type": "noop"}),
        e.TaskAssign([{"task_id": "t-1", "node": "n2", "attempt": 1}]),
    )
    assert placed[1]["placed"] == 1
    assert not woken(loop)
    assert log.one(e.TaskSubmit("t-2", {"type": "noop"}))["ok"]
    assert woken(loop)


def test_an_ended_task_wakes_a_round_only_while_tasks_may_be_queued(log: WorkflowLog) -> None:
    """Once a round finds the queue empty, a task ending frees a slot nobody
    waits for; a task queued since (or a round not run yet) makes it wake."""
    loop = listening_loop(log)
    for task_id in ("t-1", "t-2", "t-3"):
        log.apply(
            e.TaskSubmit(task_id, {"type": "noop"}),
            e.TaskAssign([{"task_id": task_id, "node": "n2", "attempt": 1}]),
        )
    # No round has looked yet: the queue is not known to be empty.
    assert log.one(e.TaskComplete("t-1", 1, "n2", {"exit_code": 0}), node="n2")["ok"]
    assert woken(loop)

    assert Stepper(loop.run_round()).result is False  # finds nothing queued
    assert log.one(e.TaskComplete("t-2", 1, "n2", {"exit_code": 0}), node="n2")["ok"]
    assert not woken(loop)

    assert log.one(e.TaskSubmit("t-4", {"type": "noop"}))["ok"]
    assert woken(loop)
    assert log.one(e.TaskComplete("t-3", 1, "n2", {"exit_code": 0}), node="n2")["ok"]
    assert woken(loop)


def test_a_replaced_state_wakes_a_round_and_forgets_the_empty_queue(log: WorkflowLog) -> None:
    loop = listening_loop(log)
    log.apply(
        e.TaskSubmit("t-1", {"type": "noop"}),
        e.TaskAssign([{"task_id": "t-1", "node": "n2", "attempt": 1}]),
    )
    Stepper(loop.run_round())
    loop.on_change([])  # as after a snapshot was restored
    assert woken(loop)
    assert log.one(e.TaskComplete("t-1", 1, "n2", {"exit_code": 0}), node="n2")["ok"]
    assert woken(loop)


def test_a_round_placing_more_than_a_batch_proposes_them_in_entries_of_a_batch(
    log: WorkflowLog,
) -> None:
    """One TASK_ASSIGN entry is applied in one go on every node's Raft
    thread: a round placing more tasks than a batch holds proposes them, in
    order, in entries of at most `MAX_BATCH_TASKS`, all behind its one future."""
    for node in NODES:
        joined = log.one(
            e.NodeJoin(
                node, f"{node}:1", f"{node}:2", executors=["noop"], resources={"max_tasks": 200}
            )
        )
        assert joined["ok"], joined
    count = 2 * MAX_BATCH_TASKS + 44
    for number in range(count):
        assert log.one(e.TaskSubmit(f"t-{number:03d}", {"type": "noop"}))["ok"]
    proposer, stepper = first_round(log, FakeClock(wall_s=10_000.0))
    assert len(proposer.held) == 1 and stepper.waiting is proposer.held[0][1]
    payloads = proposer.payloads()
    assert [len(p.assignments) for p in payloads if isinstance(p, e.TaskAssign)] == [
        MAX_BATCH_TASKS,
        MAX_BATCH_TASKS,
        44,
    ]
    placed = [
        item["task_id"] for p in payloads if isinstance(p, e.TaskAssign) for item in p.assignments
    ]
    assert sorted(placed) == [f"t-{number:03d}" for number in range(count)]
    assert sum(result["placed"] for result in proposer.apply_next()) == count
    stepper.settle()
    tasks = [log.reader.get_task(f"t-{number:03d}") for number in range(count)]
    assert {task.state if task else None for task in tasks} == {"assigned"}
