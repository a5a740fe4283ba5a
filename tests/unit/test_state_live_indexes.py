"""The indexes of the live part of the task table (migration 17): the queue's
holds queued tasks only, the one of each node's tasks by state its assigned
and running ones, the one by node and submission order tasks that have a
node. What they hold follows the tasks as they move; a database made before
the migration gets them built from its rows, its digest unchanged; and the
queries that read them (the agent's, the failure handler's, the scheduler's
queue, the fairness counts, a node's removal) search them instead of reading
the task table or a node's whole history."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from cortex.state import entries as e
from cortex.state.machine import StateMachine
from tests.state_reads import UNDO_MIGRATION_19, index_entries, statements, task_plans
from tests.workflow_sim import WorkflowLog

# Each index and the rows it should hold.
HELD = {
    "tasks_queue": "state = 'queued'",
    "tasks_by_node": "state IN ('assigned', 'running')",
    "tasks_by_node_submit": "assigned_node IS NOT NULL",
}
DONE = {"exit_code": 0, "stdout": "", "stderr": ""}
# The indexes as they were before migration 17, in place of its own (and
# without 18's); then
# setting `user_version` back to 16 (or earlier) makes a database the
# migration will find as it found one made before it.
BEFORE_LIVE_INDEXES = (
    "DROP INDEX tasks_queue; DROP INDEX tasks_by_node; DROP INDEX tasks_by_node_submit;"
    f" DROP INDEX tasks_by_node_ended; {UNDO_MIGRATION_19}"
    " CREATE INDEX tasks_by_fairness_key"
    " ON tasks (state, fairness_key, priority DESC, created_at, submit_index);"
    " CREATE INDEX tasks_by_node ON tasks (assigned_node, state);"
    " CREATE INDEX tasks_by_node_submit ON tasks (assigned_node, submit_index, id, created_at);"
)


def _holds_exactly_the_live_rows(conn: sqlite3.Connection) -> None:
    for index, condition in HELD.items():
        wanted = conn.execute(f"SELECT COUNT(*) FROM tasks WHERE {condition}").fetchone()[0]
        assert index_entries(conn, index) == wanted, index


def _history(log: WorkflowLog) -> None:
    """Tasks in every live and finished state, on three nodes."""
    for number in range(12):
        assert log.one(e.TaskSubmit(f"t{number:02}", {"type": "noop"}))["ok"]
    for number in range(9):
        node = f"n{number % 3 + 1}"
        placed = log.one(e.TaskAssign([{"task_id": f"t{number:02}", "node": node, "attempt": 1}]))
        assert placed["placed"] == 1, placed
        if number < 6:
            assert log.one(e.TaskStarted(f"t{number:02}", 1, node), node=node)["ok"]
        if number < 3:
            assert log.one(e.TaskComplete(f"t{number:02}", 1, node, DONE), node=node)["ok"]
    assert log.one(e.TaskCancel("t11"))["ok"]


def test_the_indexes_hold_the_live_tasks_as_they_move(tmp_path: Path) -> None:
    log = WorkflowLog(tmp_path / "state.db")
    try:
        conn = log.machine._conn
        _holds_exactly_the_live_rows(conn)
        _history(log)
        counts = {index: index_entries(conn, index) for index in HELD}
        # 12 submitted, 9 placed, 3 finished, 1 cancelled while queued.
        assert counts == {"tasks_queue": 2, "tasks_by_node": 6, "tasks_by_node_submit": 9}
        _holds_exactly_the_live_rows(conn)
        # A task that fails goes back to the queue without a node.
        assert log.one(e.TaskFailed("t03", 1, "n1", "exit code 1"), node="n1")["ok"]
        _holds_exactly_the_live_rows(conn)
        assert index_entries(conn, "tasks_queue") == 3
    finally:
        log.close()


def test_a_database_made_before_gets_them_from_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    log = WorkflowLog(path)
    _history(log)
    digest = log.machine.digest()
    log.close()
    conn = StateMachine(str(path))._conn
    conn.executescript(f"BEGIN; {BEFORE_LIVE_INDEXES} PRAGMA user_version = 16; COMMIT;")
    assert index_entries(conn, "tasks_by_node") == 12
    conn.close()

    machine = StateMachine(str(path))
    try:
        names = {
            row[0]
            for row in machine._conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")
        }
        assert "tasks_by_fairness_key" not in names
        _holds_exactly_the_live_rows(machine._conn)
        assert machine.digest() == digest
    finally:
        machine.close()


def _searched(plans: list[str], index: str) -> None:
    assert plans
    for plan in plans:
        assert re.search(rf"INDEX {index}\b", plan), plan
        # A scan of the task table, or of the index of every node's task by
        # submission order, reads history; a scan of the queue reads the queue.
        assert "SCAN tasks " not in plan.replace("SCAN tasks USING COVERING INDEX tasks_queue", "")


READS: dict[str, tuple[str, Callable[[WorkflowLog], object]]] = {
    "agent": ("tasks_by_node", lambda log: log.reader.attempts_on_node("n1", ("assigned",))),
    "failure handler": (
        "tasks_by_node",
        lambda log: log.reader.tasks_on_node("n2", ("assigned", "running")),
    ),
    "queue's fairness keys": ("tasks_queue", lambda log: log.reader.queued_fairness_keys()),
    "runnable queue": ("tasks_queue", lambda log: log.reader.runnable_queue(10**13, 10)),
    "weights' queue counts": ("tasks_queue", lambda log: log.reader.weight_views()),
}


@pytest.mark.parametrize("reader", sorted(READS))
def test_reads_of_the_live_tasks_search_their_index(tmp_path: Path, reader: str) -> None:
    index, read = READS[reader]
    log = WorkflowLog(tmp_path / "state.db")
    try:
        _history(log)
        read(log)  # the reader's connection is this thread's from now on
        conn = log.reader._conn()
        with statements(conn) as seen:
            read(log)
        plans = task_plans(conn, seen)
        if reader == "weights' queue counts":
            plans = [plan for plan in plans if "'queued'" in plan]
        _searched(plans, index)
    finally:
        log.close()


def test_the_queue_depth_is_counted_from_the_queue_alone(tmp_path: Path) -> None:
    log = WorkflowLog(tmp_path / "state.db")
    try:
        _history(log)
        assert log.reader.queue_view(10**13).depth_by_priority == {5: 2}
        conn = log.reader._conn()
        with statements(conn) as seen:
            log.reader.queue_view(10**13)
        depth = [plan for plan in task_plans(conn, seen) if "GROUP BY priority" in plan]
        assert len(depth) == 1 and "COVERING INDEX tasks_queue" in depth[0], depth
    finally:
        log.close()


def test_a_nodes_removal_searches_its_live_tasks(tmp_path: Path) -> None:
    log = WorkflowLog(tmp_path / "state.db")
    try:
        assert log.one(e.NodeJoin("n2", "127.0.0.1:1", "127.0.0.1:2"))["ok"]
        _history(log)
        conn = log.machine._conn
        with statements(conn) as seen:
            assert log.one(e.NodeLeave("n2"))["ok"]
        plans = [plan for plan in task_plans(conn, seen) if "assigned_node" in plan]
        _searched(plans, "tasks_by_node")
        assert index_entries(conn, "tasks_by_node") == 4  # n2's two went back to the queue
    finally:
        log.close()
