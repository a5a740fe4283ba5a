"""Why a queued task waits, as the API answers it: judged from the nodes
as apply left them, read once for all the answers at one applied index and
read again once another entry is applied."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import cortex.task_operations as task_operations
from cortex.membership.board import ResourceBoard
from cortex.state import entries as e
from cortex.task_operations import TaskOperations
from tests.api_harness import AppliesAtOnce
from tests.workflow_sim import WorkflowLog


@pytest.fixture
def log(tmp_path: Path) -> Iterator[WorkflowLog]:
    log = WorkflowLog(tmp_path / "state.db")
    yield log
    log.close()


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
