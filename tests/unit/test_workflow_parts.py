"""Workflows submitted in parts (WORKFLOW_SUBMIT with `total_tasks`, then
WORKFLOW_TASKS), on a real StateMachine: nothing runs before the last part,
parts apply once, in order, only backwards dependencies; the proposer's
plan; abandoned submissions; cancels in bounded batches."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cortex.state import entries as e
from cortex.state.machine import StateMachine, state_digest
from cortex.state.queries import StateReader
from cortex.state.workflow_transitions import CANCEL_BATCH
from cortex.workflows.definition import parse_definition
from cortex.workflows.operations import PART_MAX_TASKS, submit_payloads


class Log:
    def __init__(self, machine: StateMachine) -> None:
        self.machine = machine
        self.index = 0

    def one(self, payload: e.Payload, ts: int = 1_000) -> dict[str, Any]:
        self.index += 1
        results = self.machine.apply_batch(
            self.index, e.encode_batch([e.Entry.create(payload, "n1", ts=ts)])
        )
        assert results is not None
        return results[0]


@pytest.fixture
def log(tmp_path: Path) -> Iterator[Log]:
    machine = StateMachine(str(tmp_path / "state.db"))
    yield Log(machine)
    machine.close()


def _task(key: str, pos: int, depends_on: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"key": key, "task_id": f"id-{key}", "spec": {"type": "noop"},
            "depends_on": list(depends_on), "condition": None, "pos": pos}  # fmt: skip


def _runnable(log: Log) -> set[str]:
    return {row["id"] for row in StateReader(log.machine.path).runnable_queue(10**15, 1000)}


def test_nothing_runs_before_the_last_part(log: Log) -> None:
    head = e.WorkflowSubmit("w", "big", [_task("a", 0), _task("b", 1, ("a",))], total_tasks=4)
    assert log.one(head)["state"] == "submitting"
    assert _runnable(log) == set()
    assert log.one(e.WorkflowTasks("w", 1, [_task("c", 2, ("b",))]))["state"] == "submitting"
    done = log.one(e.WorkflowTasks("w", 2, [_task("d", 3)]))
    assert done == {"ok": True, "workflow_id": "w", "created": True, "part": 2,
                    "state": "running"}  # fmt: skip
    assert _runnable(log) == {"id-a", "id-d"}
    view = StateReader(log.machine.path).get_workflow("w")
    assert view is not None and [t.key for t in view.tasks] == ["a", "b", "c", "d"]
    assert [t.depends_on for t in view.tasks] == [[], ["a"], ["b"], []]


def test_a_part_applies_once_and_only_in_order(log: Log) -> None:
    log.one(e.WorkflowSubmit("w", "big", [_task("a", 0)], total_tasks=3))
    early = log.one(e.WorkflowTasks("w", 2, [_task("c", 2)]))
    assert early["ok"] is False and early["reason"].startswith("invalid_payload")
    assert log.one(e.WorkflowTasks("w", 1, [_task("b", 1)]))["created"] is True
    digest = log.machine.digest()
    again = log.one(e.WorkflowTasks("w", 1, [_task("b", 1)]))
    assert again == {"ok": True, "workflow_id": "w", "created": False, "part": 1,
                     "state": "submitting"}  # fmt: skip
    assert log.machine.digest() == digest


@pytest.mark.parametrize(
    ("part", "reason"),
    [
        ([_task("b", 1, ("z",))], "invalid_workflow: workflow task b depends on unknown task z"),
        ([_task("a", 1)], 'invalid_workflow: workflow task key "a" is already in the workflow'),
        ([_task("b", 1, ("c",)), _task("c", 2, ("b",))], "invalid_workflow: dependency cycle"),
        ([_task("b", 1), _task("c", 2), _task("d", 3)], "invalid_workflow: part 1 brings"),
    ],
)
def test_a_bad_part_is_rejected_and_changes_nothing(log: Log, part, reason) -> None:
    log.one(e.WorkflowSubmit("w", "big", [_task("a", 0)], total_tasks=3))
    digest = state_digest(log.machine._conn)
    result = log.one(e.WorkflowTasks("w", 1, part))
    assert result["ok"] is False and result["reason"].startswith(reason), result
    tasks = log.machine._conn.execute("SELECT COUNT(*) FROM tasks").fetchone()[0]
    assert tasks == 1
    assert state_digest(log.machine._conn) != digest  # only the rejection was recorded


def test_a_cancelled_submission_frees_its_key_and_refuses_later_parts(log: Log) -> None:
    log.one(e.WorkflowSubmit("w", "big", [_task("a", 0)], idempotency_key="k", total_tasks=2))
    log.one(e.WorkflowCancel("w", "its submission did not complete"))
    late = log.one(e.WorkflowTasks("w", 1, [_task("b", 1)]))
    assert late["ok"] is False and late["reason"].startswith("illegal_transition")
    fresh = log.one(e.WorkflowSubmit("w2", "big", [_task("x", 0)], idempotency_key="k"))
    assert fresh["created"] is True and fresh["workflow_id"] == "w2"


def test_the_leader_sees_stalled_submissions(log: Log) -> None:
    log.one(e.WorkflowSubmit("old", "big", [_task("a", 0)], total_tasks=2), ts=1_000)
    log.one(e.WorkflowSubmit("new", "big", [_task("b", 0)], total_tasks=2), ts=9_000)
    reader = StateReader(log.machine.path)
    assert reader.stalled_workflows(5_000) == [("old", "submitting")]


def test_a_large_cancel_goes_in_bounded_batches(log: Log) -> None:
    count = CANCEL_BATCH * 2 + 50
    log.one(e.WorkflowSubmit("w", "wide", [_task(f"t{i}", i) for i in range(count)]))
    first = log.one(e.WorkflowCancel("w", "enough"))
    assert first == {"ok": True, "cancelled_tasks": CANCEL_BATCH, "remaining": count - CANCEL_BATCH}
    assert _runnable(log) == set()  # the rest wait, though still queued
    reader = StateReader(log.machine.path)
    assert reader.stalled_workflows(0) == [("w", "cancelled")]
    second = log.one(e.WorkflowCancel("w", "enough"))
    assert second["remaining"] == 50
    assert log.one(e.WorkflowCancel("w", "enough")) == {"ok": True, "cancelled_tasks": 50,
                                                        "remaining": 0}  # fmt: skip
    assert log.one(e.WorkflowCancel("w", "enough"))["ok"] is False
    assert reader.stalled_workflows(0) == []
    errors = {row[0] for row in log.machine._conn.execute("SELECT error FROM tasks")}
    assert errors == {"enough"}


def _definition(count: int) -> str:
    lines = ["name: fan", "tasks:"]
    for i in range(count):
        lines.append(f"  t{i}:")
        lines.append("    type: noop")
        if i % 7:
            lines.append(f"    dependsOn: [t{i - 1}]")
    lines.append("  last:")
    lines.append("    type: noop")
    lines.append(f"    dependsOn: [{', '.join(f't{i}' for i in range(0, count, 10))}]")
    return "\n".join(lines)


def test_the_proposer_plans_parts_with_only_backward_dependencies(log: Log) -> None:
    definition = parse_definition(_definition(450), "")
    workflow_id = str(uuid.uuid4())
    payloads = submit_payloads(definition, workflow_id, "key")
    assert len(payloads) == 5 and isinstance(payloads[0], e.WorkflowSubmit)
    assert payloads[0].total_tasks == 451
    seen: set[str] = set()
    for payload in payloads:
        assert isinstance(payload, e.WorkflowSubmit | e.WorkflowTasks)
        assert len(payload.tasks) <= PART_MAX_TASKS
        for task in payload.tasks:
            assert set(task["depends_on"]) <= seen | {t["key"] for t in payload.tasks}
        seen |= {t["key"] for t in payload.tasks}
    # The same definition and workflow id always give the same parts.
    assert submit_payloads(definition, workflow_id, "key") == payloads
    for payload in payloads:
        assert log.one(payload)["ok"]
    view = StateReader(log.machine.path).get_workflow(workflow_id)
    assert view is not None and view.state == "running"
    assert [t.key for t in view.tasks] == [t.key for t in definition.tasks]
