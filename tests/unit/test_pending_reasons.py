"""Why a queued task waits, as the API answers it: judged from the nodes
as apply left them, read once for all the answers at one applied index and
read again once another entry is applied."""

from __future__ import annotations

from typing import Any

import pytest

import cortex.task_operations as task_operations
from cortex.membership.board import ResourceBoard
from cortex.state import entries as e
from cortex.task_operations import TaskOperations
from tests.api_harness import AppliesAtOnce
from tests.workflow_sim import WorkflowLog


def test_reasons_follow_the_applied_nodes_and_one_index_reads_them_once(
    log: WorkflowLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[int] = []
    build = task_operations.build_candidates

    def counted(*args: Any) -> Any:
        reads.append(log.machine.applied_index)
        return build(*args)

    monkeypatch.setattr(task_operations, "build_candidates", counted)
    proposer: Any = AppliesAtOnce(log)
    ops = TaskOperations(
        "n1", proposer, log.machine, log.reader, ResourceBoard(), lambda node: True, 1 << 20, 5.0
    )
    waiting = ops.submit({"type": "noop", "constraints": {"nodeLabels": ["zone=b"]}}).task
    other = ops.submit({"type": "noop", "constraints": {"nodeLabels": ["zone=b"]}}).task
    first = ops.pending_reasons(waiting)
    assert first and all("zone=b" in reason for reason in first), first
    assert ops.pending_reasons(other) == first
    assert reads == [log.index]  # both answered from one read

    joined = e.NodeJoin("n4", "n4:1", "n4:2", labels={"zone": "b"}, executors=["noop"])
    assert log.one(joined)["ok"]
    assert ops.pending_reasons(waiting) == []  # read again: n4 takes it
    assert reads == [log.index - 1, log.index]


def test_one_answer_judges_each_kind_of_task_once(
    log: WorkflowLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    judged: list[str] = []
    explain = task_operations.explain

    def counted(task: Any, nodes: Any) -> Any:
        judged.append(task.id)
        return explain(task, nodes)

    monkeypatch.setattr(task_operations, "explain", counted)
    proposer: Any = AppliesAtOnce(log)
    ops = TaskOperations(
        "n1", proposer, log.machine, log.reader, ResourceBoard(), lambda node: True, 1 << 20, 5.0
    )
    zone_b = {"type": "noop", "constraints": {"nodeLabels": ["zone=b"]}}
    zone_c = {"type": "noop", "constraints": {"nodeLabels": ["zone=c"]}}
    tasks = [ops.submit(spec).task for spec in (zone_b, zone_c, zone_b, {"type": "noop"})]
    reasons = ops.pending_reasons_all(tasks)
    assert all("zone=b" in reason for reason in reasons[0]) and reasons[0]
    assert all("zone=c" in reason for reason in reasons[1]) and reasons[1]
    assert reasons[2] == reasons[0]
    assert reasons[3] == []  # any node takes it
    assert judged == [tasks[0].id, tasks[1].id, tasks[3].id]


def _ops(log: WorkflowLog) -> TaskOperations:
    proposer: Any = AppliesAtOnce(log)
    return TaskOperations(
        "n1", proposer, log.machine, log.reader, ResourceBoard(), lambda node: True, 1 << 20, 5.0
    )


def test_a_task_waiting_for_a_slot_says_so_until_one_frees(
    log: WorkflowLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node of two slots holding a third task to wait: that task says it
    waits for a free slot (the running tasks counted only because the node
    holds more than its slots); once one of the two ends, it says nothing.
    A submission's answer leaves it out."""
    joined = e.NodeJoin(
        "n9", "n9:1", "n9:2", executors=["noop"], resources={"max_tasks": 2, "prefetch_tasks": 1}
    )
    assert log.one(joined)["ok"]
    ops = _ops(log)
    counted: list[int] = []
    running = log.reader.running_counts_by_node

    def counting() -> dict[str, int]:
        counted.append(log.machine.applied_index)
        return running()

    monkeypatch.setattr(log.reader, "running_counts_by_node", counting)
    ids = [ops.submit({"type": "noop"}).task.id for _ in range(3)]
    for task_id in ids[:2]:
        assert log.one(e.TaskAssign([{"task_id": task_id, "node": "n9", "attempt": 1}]))["ok"]
    first = ops.get(ids[0])
    assert ops.pending_reasons(first) == []  # about to start: the node has room
    assert counted == []
    assert log.one(e.TaskAssign([{"task_id": ids[2], "node": "n9", "attempt": 1}]))["ok"]
    for task_id in ids[:2]:
        assert log.one(e.TaskStarted(task_id, 1, "n9"), node="n9")["ok"]
    waiting = ops.get(ids[2])
    assert waiting.state == "assigned"
    expected = ["waiting for a free slot on n9 (all 2 are running tasks)"]
    assert ops.pending_reasons(waiting) == expected
    assert ops.pending_reasons(waiting, assigned=False) == []
    assert ops.pending_reasons_all([waiting, ops.get(ids[0])]) == [expected, []]
    assert len(counted) == 2  # once per answer, for all its tasks

    done = e.TaskComplete(ids[0], 1, "n9", {"exit_code": 0, "stdout": "", "stderr": ""})
    assert log.one(done, node="n9")["ok"]
    assert ops.pending_reasons(ops.get(ids[2])) == []


def test_a_task_assigned_to_a_node_that_went_offline_says_it_will_run_elsewhere(
    log: WorkflowLog,
) -> None:
    ops = _ops(log)
    task_id = ops.submit({"type": "noop"}).task.id
    assert log.one(e.TaskAssign([{"task_id": task_id, "node": "n2", "attempt": 1}]))["ok"]
    assert ops.pending_reasons(ops.get(task_id)) == []
    assert log.one(e.NodeStatus("n2", "offline", "no heartbeat"))["ok"]
    assert ops.pending_reasons(ops.get(task_id)) == [
        "assigned to n2, which is offline: it will run elsewhere"
    ]
