"""The memory promised to each node (`node_memory`, read by placement on
nodes that declare their memory): the minMemoryMb of the node's assigned and
running tasks, kept by apply's triggers as tasks come and go, and built from
the tasks already there by the migration that adds it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cortex.state import entries as e
from cortex.state.machine import StateMachine
from cortex.state.queries import StateReader
from tests.unit.test_state_live_indexes import BEFORE_LIVE_INDEXES
from tests.workflow_sim import WorkflowLog

SUMMED = (
    "SELECT assigned_node, SUM(json_extract(constraints, '$.min_memory_mb')) FROM tasks"
    " WHERE state IN ('assigned', 'running') GROUP BY assigned_node"
    " HAVING SUM(json_extract(constraints, '$.min_memory_mb')) > 0"
)


def needing(mb: int) -> dict[str, Any]:
    return {"type": "noop", "constraints": {"minMemoryMb": mb}}


def place(log: WorkflowLog, task_id: str, node: str, attempt: int = 1) -> None:
    result = log.one(e.TaskAssign([{"task_id": task_id, "node": node, "attempt": attempt}]))
    assert result["placed"] == 1, result


def test_promised_memory_follows_tasks_onto_and_off_their_nodes(tmp_path: Path) -> None:
    log = WorkflowLog(tmp_path / "state.db")
    try:
        reserved = log.reader.reserved_memory_by_node
        for task_id, mb in (("a", 512), ("b", 256), ("c", 0), ("d", 1024), ("e", 128)):
            assert log.one(e.TaskSubmit(task_id, needing(mb)))["ok"]
        assert reserved() == {}
        place(log, "a", "n1")
        place(log, "b", "n1")
        place(log, "c", "n1")
        place(log, "d", "n2")
        assert reserved() == {"n1": 768.0, "n2": 1024.0}

        assert log.one(e.TaskStarted("a", 1, "n1"), node="n1")["ok"]
        assert reserved() == {"n1": 768.0, "n2": 1024.0}
        done = {"exit_code": 0, "stdout": "", "stderr": ""}
        assert log.one(e.TaskComplete("a", 1, "n1", done), node="n1")["ok"]
        assert reserved() == {"n1": 256.0, "n2": 1024.0}
        # A failed attempt goes back to the queue: its memory with it.
        assert log.one(e.TaskFailed("d", 1, "n2", "exit code 1"), node="n2")["ok"]
        assert reserved() == {"n1": 256.0}
        place(log, "d", "n3", attempt=2)
        assert log.one(e.TaskCancel("b"))["ok"]
        assert reserved() == {"n3": 1024.0}
        # A node that leaves hands its tasks back to the queue.
        place(log, "e", "n3")
        assert reserved() == {"n3": 1152.0}
        assert log.one(e.NodeLeave("n3"))["ok"]
        assert reserved() == {}
        assert log.reader.queued_ids(10) and set(log.reader.queued_ids(10)) >= {"d", "e"}
    finally:
        log.close()


def test_the_migration_sums_the_memory_of_tasks_already_active(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    log = WorkflowLog(path)
    for number, (node, mb) in enumerate((("n1", 300), ("n1", 200), ("n2", 700), ("n3", 0))):
        assert log.one(e.TaskSubmit(f"t{number}", needing(mb)))["ok"]
        place(log, f"t{number}", node)
    assert log.one(e.TaskSubmit("queued", needing(4096)))["ok"]
    digest = log.machine.digest()
    log.close()
    # The database as it was before the table existed (and before the
    # partial indexes of migration 17).
    conn = StateMachine(str(path))._conn
    conn.executescript(
        "BEGIN; DROP TABLE node_memory; DROP TRIGGER node_memory_insert;"
        " DROP TRIGGER node_memory_delete; DROP TRIGGER node_memory_leave;"
        f" DROP TRIGGER node_memory_enter; {BEFORE_LIVE_INDEXES}"
        " PRAGMA user_version = 15; COMMIT;"
    )
    conn.close()

    machine = StateMachine(str(path))
    try:
        reader = StateReader(str(path))
        assert reader.reserved_memory_by_node() == {"n1": 500.0, "n2": 700.0}
        summed = {node: float(mb) for node, mb in machine._conn.execute(SUMMED)}
        assert reader.reserved_memory_by_node() == summed
        assert machine.digest() == digest
    finally:
        machine.close()
