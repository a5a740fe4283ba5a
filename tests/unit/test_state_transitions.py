"""The task lifecycle of SPEC §4 applied to a real StateMachine on a SQLite
file: one audit event per transition, fencing, retries with back-off, dead
letters, cancellation, idempotent submits and snapshots."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cortex.state import handlers
from cortex.state.entries import (
    MAX_NESTING,
    Entry,
    NodeJoin,
    NodeLeave,
    NodeStatus,
    Payload,
    TaskAssign,
    TaskCancel,
    TaskComplete,
    TaskDeadLetter,
    TaskFailed,
    TaskRetry,
    TaskStarted,
    TaskSubmit,
    WorkflowSubmit,
    batch_nesting,
    encode_batch,
)
from cortex.state.machine import StateMachine, copy_database, state_digest
from cortex.state.queries import StateReader
from cortex.state.reasons import ILLEGAL_TRANSITION, Rejected
from cortex.state.transitions import ApplyContext

SHELL = {"command": ["true"]}


class Log:
    """Feeds payloads to a machine at increasing Raft indexes, like pysyncobj."""

    def __init__(self, machine: StateMachine) -> None:
        self.machine = machine
        self.index = 0
        self.batches: list[tuple[int, bytes]] = []

    def apply(self, *payloads: Payload, ts: int = 1_000, node: str = "n1") -> list[dict[str, Any]]:
        self.index += 1
        data = encode_batch([Entry.create(p, node=node, ts=ts) for p in payloads])
        self.batches.append((self.index, data))
        results = self.machine.apply_batch(self.index, data)
        assert results is not None
        return results

    def one(self, payload: Payload, ts: int = 1_000, node: str = "n1") -> dict[str, Any]:
        (result,) = self.apply(payload, ts=ts, node=node)
        return result


@pytest.fixture
def machine(tmp_path: Path) -> Iterator[StateMachine]:
    sm = StateMachine(str(tmp_path / "node" / "state.db"))
    yield sm
    sm.close()


@pytest.fixture
def log(machine: StateMachine) -> Log:
    return Log(machine)


@pytest.fixture
def reader(machine: StateMachine) -> StateReader:
    return StateReader(machine.path)


def join(node_id: str) -> NodeJoin:
    return NodeJoin(node_id, "127.0.0.1:7100", "127.0.0.1:7200", executors=["shell"])


def assign(task_id: str, node: str, attempt: int) -> TaskAssign:
    return TaskAssign([{"task_id": task_id, "node": node, "attempt": attempt}])


def ok_result(code: int = 0) -> dict[str, Any]:
    return {"exit_code": code, "stdout": "hello\n", "stderr": ""}


def transitions(reader: StateReader, task_id: str) -> list[tuple[str, str | None, str | None]]:
    return [
        (ev.event, ev.from_state, ev.to_state)
        for ev in reader.task_events(task_id)
        if ev.event != "rejected"
    ]


def rejections(reader: StateReader, task_id: str) -> list[str]:
    return [
        ev.detail["reason"]
        for ev in reader.task_events(task_id)
        if ev.event == "rejected" and ev.detail
    ]


def code_of(result: dict[str, Any]) -> str:
    """The reason code of a refused entry's result (`"code: text"`)."""
    assert result["ok"] is False, result
    return str(result["reason"]).split(": ", 1)[0]


def run_to_running(log: Log, task_id: str = "t1", node: str = "n1", spec: Any = None) -> None:
    assert log.one(join(node))["ok"]
    assert log.one(TaskSubmit(task_id, spec or SHELL))["ok"]
    assert log.one(assign(task_id, node, 1))["placed"] == 1
    assert log.one(TaskStarted(task_id, 1, node, pid=4242))["ok"]


# ---------------------------------------------------------------- happy path


def test_lifecycle_writes_one_event_per_transition(log: Log, reader: StateReader) -> None:
    assert log.one(join("n1"), ts=500) == {"ok": True, "status": "active"}
    submitted = log.one(TaskSubmit("t1", {"command": ["echo", "hi"], "priority": 7}), ts=1_000)
    assert submitted == {"ok": True, "task_id": "t1", "created": True}
    task = reader.get_task("t1")
    assert task is not None
    assert (task.state, task.attempt, task.node, task.priority) == ("queued", 0, None, 7)
    assert task.created_at == 1_000

    assert log.one(assign("t1", "n1", 1), ts=2_000) == {"ok": True, "placed": 1, "rejected": 0}
    assert log.one(TaskStarted("t1", 1, "n1", pid=99), ts=3_000) == {"ok": True}
    assert log.one(TaskComplete("t1", 1, "n1", ok_result()), ts=4_000) == {"ok": True}

    task = reader.get_task("t1")
    assert task is not None
    assert (task.state, task.attempt, task.node) == ("completed", 1, "n1")
    assert task.result == ok_result()
    assert task.error is None
    events = reader.task_events("t1")
    assert [
        (ev.event, ev.from_state, ev.to_state, ev.node, ev.attempt, ev.ts) for ev in events
    ] == [
        ("submitted", None, "queued", "n1", 0, 1_000),
        ("assigned", "queued", "assigned", "n1", 1, 2_000),
        ("started", "assigned", "running", "n1", 1, 3_000),
        ("completed", "running", "completed", "n1", 1, 4_000),
    ]
    assert events[2].detail == {"pid": 99}
    assert events[3].detail == {"exit_code": 0}
    assert [ev.raft_index for ev in events] == [2, 3, 4, 5]


def _workflow_lookups(machine: StateMachine, log: Log, payload: Payload) -> list[str]:
    statements: list[str] = []
    machine._conn.set_trace_callback(statements.append)
    try:
        assert log.one(payload)["ok"]
    finally:
        machine._conn.set_trace_callback(None)
    return [s for s in statements if "workflow_id IS NOT NULL AND id IN" in s]


def test_an_ending_task_is_looked_up_for_its_workflow_only_when_it_has_one(
    machine: StateMachine, log: Log, reader: StateReader
) -> None:
    run_to_running(log, "alone")
    assert _workflow_lookups(machine, log, TaskComplete("alone", 1, "n1", ok_result())) == []
    member = {"key": "a", "task_id": "member", "spec": SHELL, "depends_on": [],
              "condition": None, "pos": 0}  # fmt: skip
    assert log.one(WorkflowSubmit("w1", "flow", [member]))["ok"]
    assert log.one(assign("member", "n1", 1))["placed"] == 1
    assert len(_workflow_lookups(machine, log, TaskComplete("member", 1, "n1", ok_result()))) == 1
    assert [t.state for t in reader.get_tasks(["alone", "member"])] == ["completed"] * 2
    assert reader.get_workflow("w1").state == "completed"


def test_several_entries_in_one_batch_apply_in_order(log: Log, reader: StateReader) -> None:
    results = log.apply(
        join("n1"), TaskSubmit("t1", SHELL), assign("t1", "n1", 1), TaskStarted("t1", 1, "n1")
    )
    assert [r["ok"] for r in results] == [True, True, True, True]
    task = reader.get_task("t1")
    assert task is not None and task.state == "running"
    assert {ev.raft_index for ev in reader.task_events("t1")} == {1}


def test_an_entry_refused_after_writing_loses_its_writes_and_not_its_neighbours(
    log: Log, reader: StateReader, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch is applied first without savepoints; a refusal starts it over
    with one savepoint per entry, so what the refused entry wrote before it
    was refused is undone and the entries around it stay applied."""

    def half_then_refuse(ctx: ApplyContext, p: TaskCancel) -> dict[str, Any]:
        ctx.cur.execute("UPDATE tasks SET priority = 9 WHERE id = ?", (p.task_id,))
        ctx.event("half_written", p.task_id)
        raise Rejected(ILLEGAL_TRANSITION, "refused after writing")

    monkeypatch.setitem(handlers.HANDLERS, TaskCancel, half_then_refuse)
    results = log.apply(TaskSubmit("t1", SHELL), TaskCancel("t1", "x"), TaskSubmit("t2", SHELL))
    assert [r["ok"] for r in results] == [True, False, True]
    assert results[1]["reason"] == "illegal_transition: refused after writing"
    for task_id in ("t1", "t2"):
        task = reader.get_task(task_id)
        assert task is not None and task.state == "queued" and task.priority == 5
    assert [ev.event for ev in reader.task_events("t1")] == ["submitted", "rejected"]
    assert [ev.event for ev in reader.task_events("t2")] == ["submitted"]
    assert log.machine.digest() == state_digest(log.machine._conn)


def test_digest_tracks_state_and_applied_index_is_persisted(tmp_path: Path) -> None:
    path = str(tmp_path / "state.db")
    sm = StateMachine(path)
    log = Log(sm)
    empty = sm.digest()
    log.one(join("n1"))
    joined = sm.digest()
    assert joined != empty
    log.one(TaskSubmit("t1", SHELL))
    assert sm.digest() not in (empty, joined)
    digest = sm.digest()
    sm.close()

    reopened = StateMachine(path)
    try:
        assert reopened.applied_index == 2
        assert reopened.digest() == digest
        for index, data in log.batches:
            assert reopened.apply_batch(index, data) is None
        assert reopened.digest() == digest
    finally:
        reopened.close()


# ---------------------------------------------------------------- fencing


def test_fencing_rejects_stale_attempt_and_wrong_node(log: Log, reader: StateReader) -> None:
    run_to_running(log)
    log.one(join("n2"))
    before = log.machine.digest()

    stale_attempt = log.one(TaskComplete("t1", 0, "n1", ok_result()))
    later_attempt = log.one(TaskComplete("t1", 2, "n1", ok_result()))
    wrong_node = log.one(TaskComplete("t1", 1, "n2", ok_result()))
    wrong_node_fail = log.one(TaskFailed("t1", 1, "n2", "boom"))
    for result in (stale_attempt, later_attempt, wrong_node, wrong_node_fail):
        assert code_of(result) == "stale_report"

    task = reader.get_task("t1")
    assert task is not None
    assert (task.state, task.attempt, task.node, task.result) == ("running", 1, "n1", None)
    assert len(rejections(reader, "t1")) == 4
    assert log.machine.digest() != before  # the rejections are in the audit log

    assert log.one(TaskComplete("t1", 1, "n1", ok_result()))["ok"] is True
    duplicate = log.one(TaskComplete("t1", 1, "n1", ok_result()))
    assert code_of(duplicate) == "illegal_transition"
    assert [t[0] for t in transitions(reader, "t1")].count("completed") == 1


def test_zombie_attempt_cannot_complete_after_retry(log: Log, reader: StateReader) -> None:
    run_to_running(log)
    log.one(join("n2"))
    # The node is lost: the leader re-queues the attempt, another node runs it.
    assert log.one(TaskRetry("t1", 1, "node n1 offline"), ts=10_000)["state"] == "queued"
    assert log.one(assign("t1", "n2", 2), ts=12_000)["placed"] == 1
    assert log.one(TaskStarted("t1", 2, "n2"))["ok"]

    zombie = log.one(TaskComplete("t1", 1, "n1", ok_result()))
    assert zombie["ok"] is False
    assert log.one(TaskComplete("t1", 2, "n2", ok_result(0)))["ok"] is True
    task = reader.get_task("t1")
    assert task is not None and (task.state, task.attempt, task.node) == ("completed", 2, "n2")
    assert [t[0] for t in transitions(reader, "t1")].count("completed") == 1


def test_started_only_from_assigned_and_with_the_current_attempt(
    log: Log, reader: StateReader
) -> None:
    log.one(join("n1"))
    log.one(TaskSubmit("t1", SHELL))
    not_assigned = log.one(TaskStarted("t1", 1, "n1"))
    assert not_assigned["reason"] == "illegal_transition: task t1 is queued, not assigned"
    log.one(assign("t1", "n1", 1))
    assert log.one(TaskStarted("t1", 2, "n1"))["ok"] is False
    assert log.one(TaskStarted("t1", 1, "n1"))["ok"] is True
    assert log.one(TaskStarted("t1", 1, "n1"))["ok"] is False
    task = reader.get_task("t1")
    assert task is not None and task.state == "running"


def test_assignment_checks_state_attempt_and_node(log: Log, reader: StateReader) -> None:
    log.one(join("n1"))
    log.apply(TaskSubmit("t1", SHELL), TaskSubmit("t2", SHELL), TaskSubmit("t3", SHELL))
    result = log.one(
        TaskAssign(
            [
                {"task_id": "t1", "node": "n1", "attempt": 1},
                {"task_id": "t2", "node": "n1", "attempt": 2},  # wrong attempt
                {"task_id": "t3", "node": "nowhere", "attempt": 1},  # unknown node
                {"task_id": "t9", "node": "n1", "attempt": 1},  # unknown task
            ]
        )
    )
    assert result == {"ok": True, "placed": 1, "rejected": 3}
    states = {t: reader.get_task(t).state for t in ("t1", "t2", "t3")}  # type: ignore[union-attr]
    assert states == {"t1": "assigned", "t2": "queued", "t3": "queued"}
    assert rejections(reader, "t2") == [
        "stale_report: assignment of task t2 for attempt 2, expected 1"
    ]
    assert rejections(reader, "t3") == [
        "unknown_node: assignment of task t3 to unknown node nowhere"
    ]
    assert rejections(reader, "t9") == ["unknown_task: task t9 does not exist"]
    codes = [ev.detail["code"] for ev in reader.task_events("t9") if ev.detail]
    assert codes == ["unknown_task"]
    # Already assigned: a second placement of the same attempt is stale.
    assert log.one(assign("t1", "n1", 1))["rejected"] == 1


# ---------------------------------------------------------------- retries


def test_failures_retry_with_exponential_backoff_then_dead_letter(
    log: Log, reader: StateReader
) -> None:
    policy = {"maxRetries": 3, "backoffMs": 1000, "backoffMultiplier": 2}
    log.one(join("n1"))
    log.one(TaskSubmit("t1", {"command": ["false"], "retryPolicy": policy}), ts=100)
    expected_delays = [1_000, 2_000, 4_000]  # SPEC §6: 1 s, 2 s, 4 s
    for attempt, delay in enumerate(expected_delays, start=1):
        assert log.one(assign("t1", "n1", attempt), ts=attempt * 100_000)["placed"] == 1
        log.one(TaskStarted("t1", attempt, "n1"), ts=attempt * 100_000 + 10)
        failed_at = attempt * 100_000 + 500
        result = log.one(TaskFailed("t1", attempt, "n1", "exit 1", ok_result(1)), ts=failed_at)
        assert result == {"ok": True, "state": "queued"}
        task = reader.get_task("t1")
        assert task is not None
        assert (task.state, task.retries, task.node, task.attempt) == (
            "queued",
            attempt,
            None,
            attempt,
        )
        assert task.scheduled_after == failed_at + delay
        assert task.error == "exit 1"
        retried = [ev for ev in reader.task_events("t1") if ev.event == "retried"][-1]
        assert retried.detail is not None and retried.detail["delay_ms"] == delay

    assert log.one(assign("t1", "n1", 4), ts=900_000)["placed"] == 1
    log.one(TaskStarted("t1", 4, "n1"), ts=900_010)
    last = log.one(TaskFailed("t1", 4, "n1", "exit 1"), ts=900_500)
    assert last == {"ok": True, "state": "dead_letter"}
    task = reader.get_task("t1")
    assert task is not None and (task.state, task.retries, task.attempt) == ("dead_letter", 3, 4)
    names = [t[0] for t in transitions(reader, "t1")]
    assert names.count("attempt_failed") == 4
    assert names.count("retried") == 3
    assert names[-1] == "dead_lettered"
    assert [t.id for t in reader.list_tasks(states=["dead_letter"]).tasks] == ["t1"]

    # Manually retried from the dead-letter queue: queued again, fresh retries.
    assert (
        log.one(TaskRetry("t1", 4, "operator retry", delay_ms=0), ts=950_000)["state"] == "queued"
    )
    task = reader.get_task("t1")
    assert task is not None and (task.state, task.retries) == ("queued", 0)
    assert task.scheduled_after == 950_000
    assert log.one(assign("t1", "n1", 5))["placed"] == 1


def test_non_retryable_failure_is_final(log: Log, reader: StateReader) -> None:
    run_to_running(log, spec={"command": ["false"], "retryPolicy": {"retryable": False}})
    result = log.one(TaskFailed("t1", 1, "n1", "exit 2", ok_result(2)), ts=5_000)
    assert result == {"ok": True, "state": "failed"}
    task = reader.get_task("t1")
    assert task is not None
    assert (task.state, task.error, task.retries) == ("failed", "exit 2", 0)
    assert task.result == ok_result(2)
    assert log.one(assign("t1", "n1", 2))["rejected"] == 1
    assert log.one(TaskRetry("t1", 1, "again"))["ok"] is False


def test_zero_retries_fail_on_first_failure_without_the_dead_letter_queue(
    log: Log, reader: StateReader
) -> None:
    """The dead-letter queue holds tasks that spent a retry budget."""
    run_to_running(log, spec={"command": ["false"], "retryPolicy": {"maxRetries": 0}})
    assert log.one(TaskFailed("t1", 1, "n1", "exit 1"))["state"] == "failed"
    assert transitions(reader, "t1")[-1] == ("failed", "running", "failed")
    assert reader.list_tasks(["dead_letter"]).total == 0


def test_requeue_without_spending_an_attempt(log: Log, reader: StateReader) -> None:
    log.one(join("n1"))
    log.one(TaskSubmit("t1", SHELL))
    log.one(assign("t1", "n1", 1))
    result = log.one(TaskRetry("t1", 1, "node draining", spend_attempt=False))
    assert result == {"ok": True, "state": "queued"}
    task = reader.get_task("t1")
    assert task is not None and (task.state, task.retries, task.node) == ("queued", 0, None)
    assert transitions(reader, "t1")[-1] == ("requeued", "assigned", "queued")
    assert log.one(TaskRetry("t1", 0, "stale attempt"))["ok"] is False


def test_explicit_dead_letter(log: Log, reader: StateReader) -> None:
    run_to_running(log)
    assert log.one(TaskDeadLetter("t1", 1, "poison"))["ok"] is True
    task = reader.get_task("t1")
    assert task is not None and (task.state, task.error) == ("dead_letter", "poison")
    assert log.one(TaskDeadLetter("t1", 1, "again"))["ok"] is False


# ---------------------------------------------------------------- cancellation


@pytest.mark.parametrize("stage", ["queued", "assigned", "running"])
def test_cancel_of_non_terminal_task(log: Log, reader: StateReader, stage: str) -> None:
    log.one(join("n1"))
    log.one(TaskSubmit("t1", SHELL))
    if stage in ("assigned", "running"):
        log.one(assign("t1", "n1", 1))
    if stage == "running":
        log.one(TaskStarted("t1", 1, "n1"))
    assert log.one(TaskCancel("t1", "user asked"), ts=7_000) == {"ok": True}
    task = reader.get_task("t1")
    assert task is not None and (task.state, task.error) == ("cancelled", "user asked")
    assert transitions(reader, "t1")[-1] == ("cancelled", stage, "cancelled")
    # A late report from the cancelled attempt changes nothing.
    assert log.one(TaskComplete("t1", 1, "n1", ok_result()))["ok"] is False
    task = reader.get_task("t1")
    assert task is not None and task.state == "cancelled"


@pytest.mark.parametrize("final", ["completed", "failed", "cancelled", "dead_letter"])
def test_cancel_of_terminal_task_is_rejected(log: Log, reader: StateReader, final: str) -> None:
    run_to_running(log, spec={"command": ["x"], "retryPolicy": {"retryable": final != "failed"}})
    if final == "completed":
        log.one(TaskComplete("t1", 1, "n1", ok_result()))
    elif final == "failed":
        log.one(TaskFailed("t1", 1, "n1", "exit 1"))
    elif final == "cancelled":
        log.one(TaskCancel("t1"))
    else:
        log.one(TaskDeadLetter("t1", 1, "poison"))
    task = reader.get_task("t1")
    assert task is not None and task.state == final
    event_count = len(reader.task_events("t1"))
    result = log.one(TaskCancel("t1"))
    assert result["reason"] == f"illegal_transition: task t1 is already {final}"
    task = reader.get_task("t1")
    assert task is not None and task.state == final
    assert len(reader.task_events("t1")) == event_count + 1
    assert reader.task_events("t1")[-1].event == "rejected"


def test_cancel_of_unknown_task_is_rejected(log: Log) -> None:
    result = log.one(TaskCancel("nope"))
    assert result == {"ok": False, "reason": "unknown_task: task nope does not exist"}


# ---------------------------------------------------------------- submits


def test_idempotency_key_returns_the_first_task(log: Log, reader: StateReader) -> None:
    first = log.one(TaskSubmit("t1", SHELL, idempotency_key="order-42"))
    # The same spec, written differently (defaults spelled out, an alias).
    same = {**SHELL, "priority": 5, "retry_policy": {"maxRetries": 3}}
    second = log.one(TaskSubmit("t2", same, idempotency_key="order-42"))
    assert first == {"ok": True, "task_id": "t1", "created": True}
    assert second["ok"] is True and second["task_id"] == "t1" and second["created"] is False
    other = log.one(TaskSubmit("t2", {"command": ["other"]}, idempotency_key="order-42"))
    assert other == {
        "ok": False,
        "reason": 'idempotency_conflict: idempotency key "order-42" is already used by task t1,'
        " submitted with a different spec",
    }
    # In one batch, too.
    both = log.apply(
        TaskSubmit("t3", SHELL, idempotency_key="k"), TaskSubmit("t4", SHELL, idempotency_key="k")
    )
    assert [r["task_id"] for r in both] == ["t3", "t3"]
    assert sorted(t.id for t in reader.list_tasks().tasks) == ["t1", "t3"]
    assert reader.task_by_idempotency_key("order-42") == "t1"
    assert reader.get_task("t2") is None
    task = reader.get_task("t1")
    assert task is not None and task.spec["command"] == ["true"]


def test_keys_in_use_are_read_together_past_one_statement(log: Log, reader: StateReader) -> None:
    # More keys than one IN (...) binds: the read goes in chunks.
    count = 1200
    log.apply(*(TaskSubmit(f"t{i}", SHELL, idempotency_key=f"key-{i}") for i in range(count)))
    asked = [f"key-{i}" for i in range(0, count, 2)] + ["key-none", "key-1", "key-1"]
    assert reader.tasks_by_idempotency_keys(asked) == {
        **{f"key-{i}": f"t{i}" for i in range(0, count, 2)},
        "key-1": "t1",
    }
    assert reader.tasks_by_idempotency_keys([]) == {}


def test_resubmitting_an_existing_task_id_creates_nothing(log: Log, reader: StateReader) -> None:
    log.one(TaskSubmit("t1", SHELL))
    again = log.one(TaskSubmit("t1", {"command": ["other"]}))
    assert again["ok"] is True and again["created"] is False
    assert reader.list_tasks().total == 1
    assert [t[0] for t in transitions(reader, "t1")] == ["submitted"]


def test_invalid_spec_is_rejected_without_a_task(log: Log, reader: StateReader) -> None:
    result = log.one(TaskSubmit("t1", {"command": "", "priority": 5}))
    assert result == {"ok": False, "reason": "invalid_spec: command is empty"}
    assert reader.get_task("t1") is None
    assert rejections(reader, "t1") == [result["reason"]]


def test_submit_stores_spec_policy_and_labels(log: Log, reader: StateReader) -> None:
    spec = {
        "command": "echo hi",
        "timeoutMs": 5000,
        "labels": {"team": "a"},
        "retryPolicy": {"maxRetries": 1},
    }
    log.one(TaskSubmit("t1", spec, workflow_id="w1", workflow_key="build"), ts=123)
    row = log.machine._conn.execute(
        "SELECT timeout_ms, labels, retry_policy, workflow_id, workflow_key, submit_index"
        " FROM tasks WHERE id = 't1'"
    ).fetchone()
    assert row["timeout_ms"] == 5000
    assert json.loads(row["labels"]) == {"team": "a"}
    assert json.loads(row["retry_policy"])["max_retries"] == 1
    assert (row["workflow_id"], row["workflow_key"], row["submit_index"]) == ("w1", "build", 1)


# ---------------------------------------------------------------- nodes


def test_node_status_and_leave(log: Log, reader: StateReader) -> None:
    log.one(join("n1"))
    assert log.one(NodeStatus("n1", "draining", "maintenance"))["ok"] is True
    assert [(n.id, n.status) for n in reader.nodes()] == [("n1", "draining")]
    # A re-join keeps an operator's drain; only an offline node comes back active.
    assert log.one(join("n1"))["status"] == "draining"
    log.one(NodeStatus("n1", "offline"))
    assert log.one(join("n1"))["status"] == "active"
    assert code_of(log.one(NodeStatus("n1", "sleepy"))) == "invalid_payload"
    assert code_of(log.one(NodeStatus("ghost", "active"))) == "unknown_node"
    assert log.one(NodeLeave("n1", "decommissioned"))["ok"] is True
    assert reader.nodes() == []
    [gone] = reader.nodes(include_removed=True)
    assert (gone.status, gone.status_reason) == ("removed", "decommissioned")
    assert code_of(log.one(NodeLeave("n1"))) == "illegal_transition"
    assert code_of(log.one(NodeLeave("ghost"))) == "unknown_node"
    # Operator commands cannot revive a removed node, nor can a join that does
    # not name the removal (proposed before it, or replayed); a new join can.
    assert code_of(log.one(NodeStatus("n1", "active"))) == "illegal_transition"
    assert code_of(log.one(join("n1"))) == "illegal_transition"
    removal = reader.removal_index("n1")
    assert removal is not None
    assert log.one(dataclasses.replace(join("n1"), rejoin_after=removal))["status"] == "active"
    assert [n.id for n in reader.nodes()] == ["n1"]


def test_assignment_to_a_node_that_left_is_rejected(log: Log) -> None:
    log.one(join("n1"))
    log.one(TaskSubmit("t1", SHELL))
    log.one(NodeLeave("n1"))
    result = log.one(assign("t1", "n1", 1))
    assert result["placed"] == 0 and result["rejected"] == 1


def test_removing_a_node_requeues_its_unfinished_tasks_without_spending_a_retry(
    log: Log, reader: StateReader
) -> None:
    log.one(join("n1"))
    log.one(join("n2"))
    for task_id in ("t1", "t2", "t3", "t4"):
        log.one(TaskSubmit(task_id, SHELL))
    for task_id, node in (("t1", "n1"), ("t2", "n1"), ("t3", "n2"), ("t4", "n1")):
        log.one(assign(task_id, node, 1))
    log.one(TaskStarted("t2", 1, "n1"))
    log.one(TaskStarted("t4", 1, "n1"))
    log.one(TaskComplete("t4", 1, "n1", {"exit_code": 0}))
    assert log.one(NodeLeave("n1"))["requeued"] == 2
    views = {t: reader.get_task(t) for t in ("t1", "t2", "t3", "t4")}
    assert {t: (v.state, v.node, v.retries) for t, v in views.items() if v} == {
        "t1": ("queued", None, 0),
        "t2": ("queued", None, 0),
        "t3": ("assigned", "n2", 0),
        "t4": ("completed", "n1", 0),
    }
    # The old attempt is fenced off: a late report from the removed node is refused.
    assert log.one(TaskComplete("t2", 1, "n1", {"exit_code": 0}))["ok"] is False


# ---------------------------------------------------------------- replay and snapshots


def test_already_applied_index_is_skipped(log: Log) -> None:
    log.one(join("n1"))
    log.one(TaskSubmit("t1", SHELL))
    digest = log.machine.digest()
    for index, data in log.batches:
        assert log.machine.apply_batch(index, data) is None
    # An index at or below the applied one is skipped even with new content.
    other = encode_batch([Entry.create(TaskSubmit("t2", SHELL), node="n1", ts=1)])
    assert log.machine.apply_batch(1, other) is None
    assert log.machine.digest() == digest
    assert log.machine.applied_index == 2


def test_backup_and_restore_reproduce_the_state(tmp_path: Path, log: Log) -> None:
    run_to_running(log)
    log.one(TaskSubmit("t2", SHELL, idempotency_key="k2"))
    log.one(TaskComplete("t1", 1, "n1", ok_result()))
    snapshot = str(tmp_path / "snapshot.db")
    copy_database(log.machine.path, snapshot)

    other = StateMachine(str(tmp_path / "other" / "state.db"))
    try:
        Log(other).one(join("stale-node"))  # whatever it held is replaced
        seen: list[int] = []
        other.add_listener(lambda index, changes: seen.append(index))
        other.restore_from(snapshot)
        assert other.digest() == log.machine.digest()
        assert other.applied_index == log.machine.applied_index == log.index
        assert seen == [log.index]
        reader = StateReader(other.path)
        assert [n.id for n in reader.nodes()] == ["n1"]
        assert reader.task_by_idempotency_key("k2") == "t2"

        # Both continue identically from the snapshot's index.
        for index, data in log.batches:
            assert other.apply_batch(index, data) is None
        follow_up = encode_batch([Entry.create(assign("t2", "n1", 1), node="n1", ts=9)])
        assert log.machine.apply_batch(log.index + 1, follow_up) == other.apply_batch(
            log.index + 1, follow_up
        )
        assert other.digest() == log.machine.digest()
    finally:
        other.close()


def test_listeners_see_changes_and_a_failing_listener_does_not_stop_apply(log: Log) -> None:
    seen: list[tuple[int, list[tuple[str, str]]]] = []

    def broken(index: int, changes: list[Any]) -> None:
        raise RuntimeError("listener bug")

    log.machine.add_listener(broken)
    log.machine.add_listener(lambda i, ch: seen.append((i, [(c.task_id, c.state) for c in ch])))
    log.one(join("n1"))
    log.one(TaskSubmit("t1", SHELL))
    log.one(TaskCancel("t2"))  # rejected: no change
    assert seen == [(1, []), (2, [("t1", "queued")]), (3, [])]
    assert log.machine.wait_applied(3, timeout=0.1)
    assert not log.machine.wait_applied(4, timeout=0.05)


# ---------------------------------------------------------------- malformed input


@pytest.mark.parametrize(
    "data",
    [b"\xff\xfe not json", b'{"type": "TASK_SUBMIT"}', b"42", b'[1, "x", null]'],
    ids=["garbage", "object", "number", "non-object-items"],
)
def test_malformed_batches_are_recorded_as_rejected(machine: StateMachine, data: bytes) -> None:
    results = machine.apply_batch(1, data)
    assert results and all(r["ok"] is False for r in results)
    rows = machine._conn.execute(
        "SELECT event, detail FROM task_events WHERE raft_index = 1"
    ).fetchall()
    assert len(rows) == len(results)
    for row in rows:
        detail = json.loads(row["detail"])
        assert row["event"] == "rejected" and detail["code"] == "invalid_entry", detail
        assert detail["reason"].startswith("invalid_entry: ")
    assert machine.applied_index == 1


def test_a_rejected_entry_does_not_disturb_its_batch(machine: StateMachine) -> None:
    good = Entry.create(join("n1"), node="n1", ts=1)
    bad = Entry(type="TASK_SUBMIT", id="bad", ts=1, node="n1", payload={"task_id": 7, "spec": {}})
    unknown = Entry(type="TASK_TELEPORT", id="tp", ts=1, node="n1", payload={})
    results = machine.apply_batch(1, encode_batch([bad, good, unknown]))
    assert results is not None
    assert [r["ok"] for r in results] == [False, True, False]
    assert results[0]["reason"] == "invalid_payload: TASK_SUBMIT: field task_id has the wrong type"
    assert results[2]["reason"] == 'invalid_entry: unknown entry type "TASK_TELEPORT"'
    assert StateReader(machine.path).nodes()[0].id == "n1"


# ------------------------------------------------- hostile and extreme entries


def test_large_backoff_within_policy_limits_still_retries(log: Log, reader: StateReader) -> None:
    # All within RetryPolicy bounds (maxRetries <= 100, backoffMultiplier <= 100).
    policy = {"maxRetries": 50, "backoffMs": 1000, "backoffMultiplier": 100}
    log.one(join("n1"))
    log.one(TaskSubmit("t1", {"command": ["false"], "retryPolicy": policy}))
    for attempt in range(1, 11):
        assert log.one(assign("t1", "n1", attempt))["placed"] == 1, attempt
        result = log.one(TaskFailed("t1", attempt, "n1", "exit 1"))
        assert result["ok"] is True, (attempt, result)
        task = reader.get_task("t1")
        assert task is not None and task.state == "queued"


@pytest.mark.parametrize(
    "bad",
    [
        Entry(
            type="NODE_LEAVE",
            id=["not", "a", "string"],  # type: ignore[arg-type]
            ts=1,
            node="n1",
            payload={"node_id": "x"},
        ),
        Entry(type="NODE_LEAVE", id="huge-ts", ts=2**64, node="n1", payload={"node_id": "x"}),
    ],
    ids=["list-id", "huge-ts"],
)
def test_bad_envelope_rejects_only_itself(machine: StateMachine, bad: Entry) -> None:
    good = Entry.create(join("n2"), node="n2", ts=5)
    results = machine.apply_batch(1, encode_batch([bad, good]))
    assert results is not None and len(results) == 2
    assert results[0]["ok"] is False and results[1]["ok"] is True
    assert [n.id for n in StateReader(machine.path).nodes()] == ["n2"]
    events = [r["event"] for r in machine._conn.execute("SELECT event FROM task_events")]
    assert "rejected" in events


def test_deeply_nested_batch_is_recorded_as_rejected(machine: StateMachine) -> None:
    results = machine.apply_batch(1, b"[" * 100_000)
    assert results == [
        {"ok": False, "reason": f"invalid_entry: the batch nests deeper than {MAX_NESTING} levels"}
    ]
    rows = machine._conn.execute("SELECT event FROM task_events WHERE raft_index = 1").fetchall()
    assert [r["event"] for r in rows] == ["rejected"]


@pytest.mark.parametrize("digits", [256, 257, 5000])
def test_numbers_too_long_for_some_python_settings_are_refused(
    machine: StateMachine, digits: int
) -> None:
    # Python decodes an integer of at most 640 to 4300 digits, depending on
    # its settings; "9" * digits inside a string is only text.
    number = "9" * digits
    data = (
        '[{"type":"NODE_JOIN","id":"j","ts":1,"node":"n1","payload":{"node_id":"n1",'
        f'"raft_address":"a","grpc_address":"b","resources":{{"x":{number},"y":"{number}"}}}}}}]'
    ).encode()
    (result,) = machine.apply_batch(1, data) or []
    if digits == 256:
        assert result == {"ok": True, "status": "active"}
    else:
        assert result["reason"] == "invalid_entry: the batch has a number of more than 256 digits"


@pytest.mark.parametrize("extra", [0, 1, 200])
def test_nesting_is_limited_the_same_way_whatever_json_could_decode(
    machine: StateMachine, extra: int
) -> None:
    # batch > entry > payload > resources, then the nested value; brackets in
    # strings do not count.
    depth = MAX_NESTING - 3 + extra
    value = "[" * (depth - 1) + '"]]]}}}"' + "]" * (depth - 1)
    data = (
        '[{"type":"NODE_JOIN","id":"j","ts":1,"node":"n1","payload":{"node_id":"n1",'
        f'"raft_address":"a","grpc_address":"b","resources":{{"x":{value}}}}}}}]'
    ).encode()
    assert batch_nesting(data) == MAX_NESTING + extra
    (result,) = machine.apply_batch(1, data) or []
    if extra == 0:
        assert result == {"ok": True, "status": "active"}
    else:
        assert (
            result["reason"] == f"invalid_entry: the batch nests deeper than {MAX_NESTING} levels"
        )
