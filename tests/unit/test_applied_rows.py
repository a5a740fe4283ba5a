"""A submission's task comes back as the applying thread read it, right
after the batch that changed it: the request's thread reads only a task no
batch changed (an earlier submission its idempotency key names)."""

from __future__ import annotations

from typing import Any

import pytest

from cortex.membership.board import ResourceBoard
from cortex.state import entries as e
from cortex.state.applied_rows import AppliedRows
from cortex.state.queries import TaskView
from cortex.state.spec_rules import check_task_spec
from cortex.task_operations import TaskOperations
from tests.api_harness import AppliesAtOnce
from tests.workflow_sim import WorkflowLog

NOOP = check_task_spec({"type": "noop"})


def _operations(log: WorkflowLog) -> TaskOperations:
    proposer: Any = AppliesAtOnce(log)
    return TaskOperations(
        "n1", proposer, log.machine, log.reader, ResourceBoard(), lambda node: True, 1 << 20, 5.0
    )


def _counting_reads(log: WorkflowLog, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The task ids the request's side reads one by one or together."""
    read: list[str] = []
    get_task, get_tasks = log.reader.get_task, log.reader.get_tasks

    def one(task_id: str) -> TaskView | None:
        read.append(task_id)
        return get_task(task_id)

    def many(task_ids: Any) -> list[TaskView]:
        wanted = list(task_ids)
        read.extend(wanted)
        return get_tasks(wanted)

    monkeypatch.setattr(log.reader, "get_task", one)
    monkeypatch.setattr(log.reader, "get_tasks", many)
    return read


def test_a_submission_answers_with_its_task_as_applied_without_reading_it(
    log: WorkflowLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    ops = _operations(log)
    read = _counting_reads(log, monkeypatch)
    outcome = ops.submit({"type": "noop", "labels": {"team": "a"}})
    assert read == []
    assert outcome.created and outcome.raft_index == log.index
    assert outcome.task == log.reader.get_task(outcome.task_id)  # the same view a read gives
    assert outcome.task.state == "queued" and outcome.task.spec["labels"] == {"team": "a"}


def test_a_known_key_reads_the_task_it_names(
    log: WorkflowLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    ops = _operations(log)
    first = ops.submit({"type": "noop"}, idempotency_key="once")
    read = _counting_reads(log, monkeypatch)
    # Past the pre-check (as when two submitters race with one key): apply
    # answers with the first task, which no batch changed since.
    monkeypatch.setattr(ops, "_known_submission", lambda key, spec: None)
    again = ops.submit({"type": "noop"}, idempotency_key="once")
    assert not again.created and again.task_id == first.task_id
    assert read == [first.task_id]
    assert again.task == first.task


def test_a_bulk_submission_reads_only_the_tasks_apply_did_not_change(
    log: WorkflowLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    ops = _operations(log)
    known = ops.submit({"type": "noop"}, idempotency_key="known")
    read = _counting_reads(log, monkeypatch)
    monkeypatch.setattr(log.reader, "tasks_by_idempotency_keys", lambda keys: {})
    outcomes = ops.submit_many([({"type": "noop"}, "known"), ({"type": "noop"}, "new")])
    assert read == [known.task_id]
    fresh = outcomes[1]
    assert not isinstance(fresh, Exception) and fresh.created
    assert fresh.task == log.reader.get_task(fresh.task_id)


def test_a_row_is_read_once_as_the_first_batch_changing_it_left_it(
    log: WorkflowLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows_seen = AppliedRows(log.machine)
    reads: list[list[str]] = []
    tasks_as_applied = log.machine.tasks_as_applied

    def counted(task_ids: list[str]) -> list[TaskView]:
        reads.append(list(task_ids))
        return tasks_as_applied(task_ids)

    monkeypatch.setattr(rows_seen, "_read", counted)
    awaited, other = e.new_id(), e.new_id()
    with rows_seen.awaiting([awaited]) as rows:
        # Submitted and placed in one batch: read once, as both left it.
        log.apply(
            e.TaskSubmit(awaited, NOOP, None),
            e.TaskSubmit(other, NOOP, None),
            e.TaskAssign([{"task_id": awaited, "node": "n2", "attempt": 1}]),
        )
        assert reads == [[awaited]]  # the other task is nobody's to read
        log.one(e.TaskStarted(awaited, 1, "n2"))
        assert reads == [[awaited]]
    assert rows[awaited].state == "assigned" and rows[awaited].node == "n2"
    assert rows[awaited].submit_index == log.index - 1
    assert other not in rows


def test_a_reading_listener_runs_after_those_that_hand_off(log: WorkflowLog) -> None:
    order: list[str] = []
    log.machine.add_listener(lambda index, changes: order.append("reads"), last=True)
    log.machine.add_listener(lambda index, changes: order.append("hands off"))
    log.one(e.TaskSubmit(e.new_id(), NOOP, None))
    assert order == ["hands off", "reads"]
