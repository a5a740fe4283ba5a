"""The agent driven by hand: its reconcile loop and every attempt are steps
it hands to `spawn` (here: kept for the test to run), executors start through
a launcher (here: one whose results the test gives), reports are proposals
the test applies or fails, and retries wait as steps on the agent's clock.
Nothing starts a thread."""

from __future__ import annotations

import sqlite3
import threading
from concurrent.futures import Future
from pathlib import Path

import pytest

from cortex.agent import runner
from cortex.errors import Unavailable
from cortex.executors import BUILTIN_EXECUTORS, Execution, ExecutionResult, Executor
from cortex.state import entries as e
from cortex.state.queries import TaskView
from cortex.state.transitions import TaskChange
from cortex.steps import Sleep, wall_ms
from tests.steps_by_hand import AgentByHand, Stepper
from tests.workflow_sim import WorkflowLog


class HeldLauncher:
    def __init__(self) -> None:
        self.launched: list[tuple[Execution, threading.Event, Future[ExecutionResult]]] = []

    def launch(
        self, executor: Executor, execution: Execution, cancel: threading.Event
    ) -> Future[ExecutionResult]:
        future: Future[ExecutionResult] = Future()
        self.launched.append((execution, cancel, future))
        return future


class ByHand(AgentByHand):
    def __init__(
        self, log: WorkflowLog, data_dir: Path, max_running: int = 0, read_at_apply: bool = True
    ) -> None:
        super().__init__(
            log, data_dir, BUILTIN_EXECUTORS, HeldLauncher(), max_running, read_at_apply
        )
        self.launcher: HeldLauncher


def assign(log: WorkflowLog, task_id: str, node: str = "n1", attempt: int = 1) -> None:
    placed = log.one(e.TaskAssign([{"task_id": task_id, "node": node, "attempt": attempt}]))
    assert placed["placed"] == 1, placed


def state(log: WorkflowLog, task_id: str) -> tuple[str, int]:
    task = log.reader.get_task(task_id)
    assert task is not None
    return task.state, task.attempt


def test_an_attempt_is_a_step_and_its_report_retries_on_the_agents_clock(
    log: WorkflowLog, tmp_path: Path
) -> None:
    before = set(threading.enumerate())
    hand = ByHand(log, tmp_path / "data")
    assert log.one(e.TaskSubmit("t-1", {"type": "noop"}))["ok"]
    assign(log, "t-1")
    assert hand.main.waiting.signal.is_set()  # the assignment woke the agent

    began = wall_ms(hand.clock)
    (attempt,) = hand.reconcile()
    # Launched, its start held back a moment: still running after it, the
    # attempt reports its start (TASK_STARTED, not waited for) at the time
    # it began.
    execution, _, result = hand.launcher.launched[0]
    assert (execution.task_id, execution.attempt) == ("t-1", 1)
    assert attempt.waiting is result
    assert hand.proposer.submitted == [] and state(log, "t-1") == ("assigned", 1)
    hand.report_held_starts()
    (started,) = hand.proposer.submitted
    assert started.decode_payload() == e.TaskStarted("t-1", 1, "n1")
    assert started.ts == began < wall_ms(hand.clock)
    assert state(log, "t-1") == ("running", 1) and hand.agent.running_count == 1

    result.set_result(ExecutionResult(exit_code=0, stdout=b"done"))
    attempt.settle()
    delays = []
    for _ in range(2):  # no leader yet: the report waits and tries again
        (complete,) = hand.proposer.payloads()
        assert isinstance(complete, e.TaskComplete)
        assert (complete.task_id, complete.attempt, complete.node) == ("t-1", 1, "n1")
        assert complete.result["exit_code"] == 0 and complete.started_at is None
        hand.proposer.fail_next(Unavailable("no Raft leader is known"))
        attempt.settle()
        assert isinstance(attempt.waiting, Sleep)
        delays.append(attempt.waiting.seconds)
        hand.clock.advance(attempt.waiting.seconds)
        attempt.resume()
    assert delays == [0.1, 0.2]
    assert hand.proposer.held[0][0][0].ts == wall_ms(hand.clock)
    hand.proposer.apply_next()
    attempt.settle()
    assert attempt.done
    assert state(log, "t-1") == ("completed", 1) and hand.agent.running_count == 0
    assert set(threading.enumerate()) - before == set()


def test_an_attempt_taken_away_is_cancelled_and_not_reported(
    log: WorkflowLog, tmp_path: Path
) -> None:
    hand = ByHand(log, tmp_path / "data")
    assert log.one(e.TaskSubmit("t-2", {"type": "noop"}))["ok"]
    assign(log, "t-2")
    (attempt,) = hand.reconcile()
    _, cancel, result = hand.launcher.launched[0]
    assert log.one(e.TaskCancel("t-2"))["ok"]
    assert cancel.is_set()
    result.set_result(ExecutionResult(exit_code=-1, cancelled=True))
    attempt.settle()
    assert attempt.done and hand.proposer.held == []
    assert hand.agent.running_count == 0


def test_an_attempt_running_before_a_restart_is_reported_lost_by_a_step(
    log: WorkflowLog, tmp_path: Path
) -> None:
    assert log.one(e.TaskSubmit("t-3", {"type": "noop"}))["ok"]
    assign(log, "t-3")
    assert log.one(e.TaskStarted("t-3", 1, "n1"))["ok"]
    hand = ByHand(log, tmp_path / "data")
    (lost,) = hand.reconcile()
    (failed,) = hand.proposer.payloads()
    assert failed == e.TaskFailed("t-3", 1, "n1", "node restarted during the attempt")
    assert hand.launcher.launched == []
    hand.proposer.apply_next()
    lost.settle()
    assert lost.done and state(log, "t-3")[0] == "queued"  # the retry policy applies
    assert hand.reconcile() == []  # reported once


def test_an_attempt_found_running_after_the_first_pass_is_reported_lost_too(
    log: WorkflowLog, tmp_path: Path
) -> None:
    """A node catching up after a restart (its database lost) can apply an
    earlier process's start only after its agent's first pass: the attempt is
    still lost, and reported once while the report is on its way."""
    hand = ByHand(log, tmp_path / "data")
    assert hand.reconcile() == []  # the first pass: nothing of this node's yet
    assert log.one(e.TaskSubmit("t-6", {"type": "noop"}))["ok"]
    assert log.one(e.TaskAssign([{"task_id": "t-6", "node": "n1", "attempt": 1}]))["placed"] == 1
    assert log.one(e.TaskStarted("t-6", 1, "n1"))["ok"]
    (lost,) = hand.reconcile()
    (failed,) = hand.proposer.payloads()
    assert failed == e.TaskFailed("t-6", 1, "n1", "node restarted during the attempt")
    assert hand.reconcile() == [] and hand.launcher.launched == []
    hand.proposer.apply_next()
    lost.settle()
    assert lost.done and state(log, "t-6")[0] == "queued"


def test_an_attempt_this_process_started_is_not_taken_for_lost(
    log: WorkflowLog, tmp_path: Path
) -> None:
    """Finished, its report on its way, the attempt is still `running` in the
    log: passes in between leave it alone, and none reports it lost."""
    hand = ByHand(log, tmp_path / "data")
    assert log.one(e.TaskSubmit("t-7", {"type": "noop"}))["ok"]
    assign(log, "t-7")
    (attempt,) = hand.reconcile()
    hand.report_held_starts()
    assert state(log, "t-7") == ("running", 1)  # TASK_STARTED applied
    hand.launcher.launched[0][2].set_result(ExecutionResult(exit_code=0))
    attempt.settle()
    assert state(log, "t-7") == ("running", 1)
    assert hand.reconcile() == []
    (complete,) = hand.proposer.payloads()
    assert isinstance(complete, e.TaskComplete)
    hand.proposer.apply_next()
    attempt.settle()
    assert attempt.done and state(log, "t-7") == ("completed", 1)
    assert hand.reconcile() == [] and hand.proposer.held == []


def test_a_pass_reading_before_the_attempt_ended_does_not_start_it_again(
    log: WorkflowLog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pass reads the node's tasks while the attempt is still `assigned`
    (its TASK_STARTED not applied yet); by the time it looks at the attempt,
    the attempt has run, reported and left. It must not run a second time
    (whose TASK_STARTED the log would reject, and whose process the next
    pass would kill)."""
    hand = ByHand(log, tmp_path / "data")
    assert log.one(e.TaskSubmit("t-8", {"type": "noop"}))["ok"]
    assign(log, "t-8")
    stale = log.reader.attempts_on_node("n1", ("assigned", "running"))
    (attempt,) = hand.reconcile()
    hand.launcher.launched[0][2].set_result(ExecutionResult(exit_code=0))
    attempt.settle()
    hand.proposer.apply_next()
    attempt.settle()
    assert attempt.done and state(log, "t-8") == ("completed", 1)
    assert hand.agent.running_count == 0
    monkeypatch.setattr(log.reader, "attempts_on_node", lambda *_: stale)
    assert hand.reconcile() == []
    assert len(hand.launcher.launched) == 1
    assert hand.proposer.submitted == []  # its start went with its outcome


def _no_full_pass(*_: object) -> None:
    raise AssertionError("a full pass read every attempt of the node")


def test_a_pass_woken_by_assignments_reads_only_those_attempts(
    log: WorkflowLog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Assignments applied wake the loop with their attempts: it starts
    those, read as they are now, without reading every attempt of the
    node; one the log has moved on from meanwhile is not started."""
    hand = ByHand(log, tmp_path / "data")
    for task_id in ("t-20", "t-21", "t-22"):
        assert log.one(e.TaskSubmit(task_id, {"type": "noop"}))["ok"]
    assign(log, "t-20")
    assign(log, "t-21")
    assign(log, "t-22", node="n2")  # not this node's: not among the woken
    assert log.one(e.TaskCancel("t-21"))["ok"]
    monkeypatch.setattr(log.reader, "attempts_on_node", _no_full_pass)
    (attempt,) = hand.reconcile()
    assert [x.task_id for x, _, _ in hand.launcher.launched] == ["t-20"]
    # Woken again with nothing new: a full pass, which starts nothing more.
    monkeypatch.undo()
    hand.agent._wake.set()
    assert hand.reconcile() == []
    assert attempt.waiting is hand.launcher.launched[0][2]


def launched_ids(hand: ByHand) -> list[str]:
    return [execution.task_id for execution, _, _ in hand.launcher.launched]


def test_attempts_beyond_the_slots_wait_and_start_as_attempts_end_here(
    log: WorkflowLog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With two slots, five attempts assigned here start two at a time, by
    priority then in the order found; an attempt ending frees its slot at
    once, before its outcome is in the log, and the loop starts the best
    waiting attempt without reading every attempt of the node; one cancelled
    while it waited never starts."""
    hand = ByHand(log, tmp_path / "data", max_running=2)
    for task_id, priority in (("t-30", 5), ("t-31", 5), ("t-32", 1), ("t-33", 9), ("t-34", 5)):
        assert log.one(e.TaskSubmit(task_id, {"type": "noop", "priority": priority}))["ok"]
        assign(log, task_id)
    monkeypatch.setattr(log.reader, "attempts_on_node", _no_full_pass)
    first, second = hand.reconcile()
    assert launched_ids(hand) == ["t-33", "t-30"]
    assert hand.agent.waiting_count == 3
    assert log.one(e.TaskCancel("t-31"))["ok"]

    hand.launcher.launched[0][2].set_result(ExecutionResult(exit_code=0))
    first.settle()
    assert hand.proposer.held  # its outcome is not in the log yet
    assert hand.main.waiting.signal.is_set()  # its end woke the loop
    (third,) = hand.reconcile()
    assert launched_ids(hand) == ["t-33", "t-30", "t-34"]
    assert hand.agent.waiting_count == 1

    hand.launcher.launched[1][2].set_result(ExecutionResult(exit_code=0))
    second.settle()
    (fourth,) = hand.reconcile()
    assert launched_ids(hand) == ["t-33", "t-30", "t-34", "t-32"]
    assert hand.agent.waiting_count == 0 and state(log, "t-31") == ("cancelled", 1)
    assert third.waiting is not None and fourth.waiting is not None


def _one_slot_taken(
    log: WorkflowLog, tmp_path: Path, running: str, then: str, read_at_apply: bool = True
) -> tuple[ByHand, Stepper]:
    """An agent with one slot, taken by `running`'s attempt; then `then` is
    assigned here too."""
    hand = ByHand(log, tmp_path / "data", max_running=1, read_at_apply=read_at_apply)
    for task_id in (running, then):
        assert log.one(e.TaskSubmit(task_id, {"type": "noop"}))["ok"]
    assign(log, running)
    (first,) = hand.reconcile()
    assign(log, then)
    return hand, first


def _only_it_ran(hand: ByHand, first: Stepper, running: str) -> None:
    """The attempt in the slot ends, and nothing else starts in its place."""
    hand.launcher.launched[0][2].set_result(ExecutionResult(exit_code=0))
    first.settle()
    assert hand.reconcile() == [] and launched_ids(hand) == [running]


def test_an_attempt_the_log_takes_away_while_it_is_read_does_not_wait(
    log: WorkflowLog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loop reads an attempt as assigned here (as it does those of a
    round too big to read at apply); before it is among the waiting ones,
    the log cancels it (the listener found nothing to take away). It must
    not wait, nor start when a slot frees."""
    hand, first = _one_slot_taken(log, tmp_path, "t-40", "t-41", read_at_apply=False)
    read = log.reader.get_tasks

    def read_then_cancel(task_ids: list[str]) -> object:
        stale = read(task_ids)
        assert log.one(e.TaskCancel("t-41"))["ok"]
        return stale

    monkeypatch.setattr(log.reader, "get_tasks", read_then_cancel)
    assert hand.reconcile() == []
    monkeypatch.undo()
    assert hand.agent.waiting_count == 0
    _only_it_ran(hand, first, "t-40")


def _no_read(*_: object) -> None:
    raise AssertionError("the loop read a task the listener had read at apply")


def test_a_pass_woken_by_assignments_starts_them_from_the_rows_read_at_apply(
    log: WorkflowLog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The listener reads the attempts a batch assigns here as the batch
    left them: the pass they wake starts them without reading a task. A
    round assigning more than the listener reads is read by the pass."""
    hand = ByHand(log, tmp_path / "data")
    for task_id in ("t-50", "t-51", "t-52", "t-53"):
        assert log.one(e.TaskSubmit(task_id, {"type": "noop"}))["ok"]
    assign(log, "t-50")
    monkeypatch.setattr(log.reader, "get_tasks", _no_read)
    (first,) = hand.reconcile()
    assert launched_ids(hand) == ["t-50"]
    assert hand.agent._waiting._read_ahead == {}
    monkeypatch.undo()

    monkeypatch.setattr(runner, "MOST_READ_AT_APPLY", 1)
    read = log.reader.get_tasks
    reads: list[list[str]] = []

    def counted(task_ids: list[str]) -> object:
        reads.append(list(task_ids))
        return read(task_ids)

    monkeypatch.setattr(log.reader, "get_tasks", counted)
    placed = log.one(
        e.TaskAssign([{"task_id": t, "node": "n1", "attempt": 1} for t in ("t-51", "t-52")])
    )
    assert placed["placed"] == 2
    assert len(hand.reconcile()) == 2
    assert reads == [["t-51", "t-52"]] and launched_ids(hand) == ["t-50", "t-51", "t-52"]
    assert first.waiting is hand.launcher.launched[0][2]


def test_a_row_read_at_apply_is_dropped_when_the_log_moves_its_task_before_the_pass(
    log: WorkflowLog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The log cancels an attempt after the listener read it as assigned
    here and before the pass takes its row, the pass running right after
    the cancel's listener looked at the waiting attempts: the row is gone
    by then, the pass reads the task as cancelled, and it never waits nor
    starts."""
    hand, first = _one_slot_taken(log, tmp_path, "t-60", "t-61")
    assert set(hand.agent._waiting._read_ahead) == {"t-61"}
    drop_moved = hand.agent._waiting.drop_moved
    passes: list[list[Stepper]] = []

    def then_a_pass(changes: list[TaskChange]) -> None:
        drop_moved(changes)
        passes.append(hand.reconcile())

    monkeypatch.setattr(hand.agent._waiting, "drop_moved", then_a_pass)
    assert log.one(e.TaskCancel("t-61"))["ok"]
    monkeypatch.undo()
    assert passes == [[]] and hand.agent.waiting_count == 0
    _only_it_ran(hand, first, "t-60")


def test_an_attempt_the_log_takes_away_after_its_row_is_taken_does_not_wait(
    log: WorkflowLog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pass takes the row the listener read; before the attempt is
    among the waiting ones, the log cancels it. It must not wait."""
    hand, first = _one_slot_taken(log, tmp_path, "t-70", "t-71")
    add = hand.agent._waiting.add

    def cancel_then_add(task: TaskView) -> None:
        assert log.one(e.TaskCancel(task.id))["ok"]
        add(task)

    monkeypatch.setattr(log.reader, "get_tasks", _no_read)
    monkeypatch.setattr(hand.agent._waiting, "add", cancel_then_add)
    assert hand.reconcile() == []
    monkeypatch.undo()
    assert hand.agent.waiting_count == 0 and state(log, "t-71") == ("cancelled", 1)
    _only_it_ran(hand, first, "t-70")


def test_a_failed_read_at_apply_leaves_the_attempts_to_the_pass(
    log: WorkflowLog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The listener's read fails: the batch's attempts still wake the loop,
    whose pass reads them itself and starts them."""
    hand = ByHand(log, tmp_path / "data")

    def broken(_: list[str]) -> list[TaskView]:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(hand.agent, "_read_applied", broken)
    monkeypatch.setattr(log.reader, "attempts_on_node", _no_full_pass)
    assert log.one(e.TaskSubmit("t-80", {"type": "noop"}))["ok"]
    assign(log, "t-80")
    (attempt,) = hand.reconcile()
    assert launched_ids(hand) == ["t-80"] and hand.agent._waiting._read_ahead == {}
    assert attempt.waiting is hand.launcher.launched[0][2]


def test_a_draining_node_starts_no_waiting_attempt(log: WorkflowLog, tmp_path: Path) -> None:
    """While the log has the node draining, a freed slot starts nothing (the
    leader moves waiting attempts elsewhere); once it is active again, the
    waiting attempt starts."""
    assert log.one(e.NodeJoin("n1", "n1:1", "n1:2", executors=["noop"]))["ok"]
    hand = ByHand(log, tmp_path / "data", max_running=1)
    for task_id in ("t-50", "t-51"):
        assert log.one(e.TaskSubmit(task_id, {"type": "noop"}))["ok"]
        assign(log, task_id)
    (first,) = hand.reconcile()
    assert launched_ids(hand) == ["t-50"] and hand.agent.waiting_count == 1
    assert log.one(e.NodeStatus("n1", "draining", "maintenance", 10**13))["ok"]
    assert hand.reconcile() == []  # the status entry brings a full pass
    hand.launcher.launched[0][2].set_result(ExecutionResult(exit_code=0))
    first.settle()
    assert hand.reconcile() == [] and launched_ids(hand) == ["t-50"]
    assert log.one(e.NodeStatus("n1", "active", "maintenance done"))["ok"]
    (second,) = hand.reconcile()
    assert launched_ids(hand) == ["t-50", "t-51"] and second.waiting is not None


def test_a_full_pass_keeps_to_the_slots_too(log: WorkflowLog, tmp_path: Path) -> None:
    """A pass that reads every attempt of the node (after a snapshot, or on
    the interval) starts no more than the free slots either."""
    hand = ByHand(log, tmp_path / "data", max_running=1)
    for task_id in ("t-35", "t-36"):
        assert log.one(e.TaskSubmit(task_id, {"type": "noop"}))["ok"]
        assign(log, task_id)
    hand.agent.on_change(log.machine.applied_index, [])  # as after a snapshot
    (only,) = hand.reconcile()
    assert launched_ids(hand) == ["t-35"] and hand.agent.waiting_count == 1
    hand.main.resume(False)  # the interval passed: still one slot, still busy
    assert launched_ids(hand) == ["t-35"] and hand.spawned == []
    assert only.waiting is not None


def test_a_pass_after_a_loaded_state_or_on_the_interval_reads_every_attempt(
    log: WorkflowLog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A state loaded whole (a snapshot) tells the listener nothing change by
    change: the next pass reads every attempt of the node, as does the pass
    at the end of each interval; a pass woken by assignments does not."""
    hand = ByHand(log, tmp_path / "data")
    full_passes: list[str] = []
    read_all = log.reader.attempts_on_node

    def counted(*args: object) -> object:
        full_passes.append("full")
        return read_all(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(log.reader, "attempts_on_node", counted)
    assert log.one(e.TaskSubmit("t-23", {"type": "noop"}))["ok"]
    assign(log, "t-23")
    hand.agent.on_change(log.machine.applied_index, [])  # as after a snapshot
    (first,) = hand.reconcile()
    assert full_passes == ["full"]
    assert log.one(e.TaskSubmit("t-24", {"type": "noop"}))["ok"]
    assign(log, "t-24")
    (second,) = hand.reconcile()
    assert full_passes == ["full"]
    hand.main.resume(False)  # the interval passed, nobody woke the loop
    assert full_passes == ["full", "full"]
    assert [x.task_id for x, _, _ in hand.launcher.launched] == ["t-23", "t-24"]
    assert first.waiting is not None and second.waiting is not None


def test_an_executor_launch_that_fails_fails_the_attempt(log: WorkflowLog, tmp_path: Path) -> None:
    hand = ByHand(log, tmp_path / "data")
    assert log.one(e.TaskSubmit("t-4", {"type": "noop", "retryPolicy": {"maxRetries": 0}}))["ok"]
    assign(log, "t-4")
    (attempt,) = hand.reconcile()
    hand.launcher.launched[0][2].set_exception(OSError("no threads left"))
    attempt.settle()
    (failed,) = hand.proposer.payloads()
    assert isinstance(failed, e.TaskFailed)
    assert failed.reason == "the attempt could not run on n1: OSError: no threads left"
    hand.proposer.apply_next()
    attempt.settle()
    assert attempt.done and state(log, "t-4")[0] == "failed"


def test_an_attempt_that_ends_within_the_hold_reports_its_start_with_its_outcome(
    log: WorkflowLog, tmp_path: Path
) -> None:
    """One entry instead of two: the outcome carries the start, apply records
    both (the start at the time the attempt began), and the start reporter's
    round that follows reports nothing."""
    hand = ByHand(log, tmp_path / "data")
    assert log.one(e.TaskSubmit("t-9", {"type": "noop"}))["ok"]
    assign(log, "t-9")
    began = wall_ms(hand.clock)
    (attempt,) = hand.reconcile()
    hand.clock.advance(0.002)
    hand.launcher.launched[0][2].set_result(ExecutionResult(exit_code=0))
    attempt.settle()
    (complete,) = hand.proposer.payloads()
    assert isinstance(complete, e.TaskComplete) and complete.started_at == began
    hand.report_held_starts()
    assert hand.proposer.submitted == []
    hand.proposer.apply_next()
    attempt.settle()
    assert attempt.done and state(log, "t-9") == ("completed", 1)
    task = log.reader.get_task("t-9")
    assert task is not None and task.started_at == began
    events = [(ev.event, ev.ts) for ev in log.reader.task_events("t-9")]
    assert ("started", began) in events and events[-1][0] == "completed"


def test_a_failed_attempt_within_the_hold_reports_its_start_with_the_failure(
    log: WorkflowLog, tmp_path: Path
) -> None:
    hand = ByHand(log, tmp_path / "data")
    assert log.one(e.TaskSubmit("t-10", {"type": "noop", "retryPolicy": {"maxRetries": 0}}))["ok"]
    assign(log, "t-10")
    began = wall_ms(hand.clock)
    (attempt,) = hand.reconcile()
    hand.launcher.launched[0][2].set_result(ExecutionResult(exit_code=3))
    attempt.settle()
    (failed,) = hand.proposer.payloads()
    assert isinstance(failed, e.TaskFailed) and failed.started_at == began
    hand.proposer.apply_next()
    attempt.settle()
    task = log.reader.get_task("t-10")
    assert task is not None and (task.state, task.started_at) == ("failed", began)


def test_an_attempt_looks_for_a_saved_handle_only_where_its_executor_keeps_one(
    log: WorkflowLog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    looked: list[str] = []
    load_handle = runner.load_handle

    def counted(path: str) -> dict[str, object] | None:
        looked.append(path)
        return load_handle(path)

    monkeypatch.setattr(runner, "load_handle", counted)
    hand = ByHand(log, tmp_path / "data")
    assert log.one(e.TaskSubmit("t-noop", {"type": "noop"}))["ok"]
    assert log.one(e.TaskSubmit("t-shell", {"type": "shell", "command": ["true"]}))["ok"]
    assign(log, "t-noop")
    assign(log, "t-shell")
    hand.reconcile()
    launched = {execution.task_id: execution for execution, _, _ in hand.launcher.launched}
    assert set(launched) == {"t-noop", "t-shell"}
    # A noop attempt has no work dir, so nowhere to keep a handle, and none
    # is looked for; a shell attempt's would be in its work dir.
    assert launched["t-noop"].handle_file == ""
    assert launched["t-shell"].handle_file.startswith(launched["t-shell"].work_dir)
    assert looked == [launched["t-shell"].handle_file]
