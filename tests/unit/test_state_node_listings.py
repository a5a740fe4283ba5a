"""Listing a node's tasks by state (migration 18): the tasks that ended
other than completed (failed, cancelled, dead-lettered) have an index by
node and state of their own, in submission order, and a node's assigned and
running ones (no more than it has slots and takes beyond them) are read
from theirs and sorted, so such a listing searches those instead of walking
the node's whole history. What the new index holds follows the tasks as
they move; a database made before the migration gets it built from its
rows, its digest unchanged; and every listing by node and state, windowed
or not, in either order, page by page, gives exactly the matching tasks
with their total."""

from __future__ import annotations

import itertools
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from cortex.state import entries as e
from cortex.state.machine import StateMachine
from cortex.state.paging import CreatedWindow
from tests.state_reads import (
    UNDO_MIGRATION_19,
    all_pages,
    index_entries,
    set_back,
    statements,
    task_plans,
)
from tests.workflow_sim import NODES, WorkflowLog

ENDED = "state IN ('failed', 'cancelled', 'dead_letter')"
DONE = {"exit_code": 0, "stdout": "", "stderr": ""}
STATES = ("queued", "assigned", "running", "completed", "failed", "cancelled", "dead_letter")
# Where each state of a node's tasks is listed from; completed ones walk the
# node's tasks in submission order (they are nearly all of them).
INDEX_OF = {
    "assigned": "tasks_by_node",
    "running": "tasks_by_node",
    "failed": "tasks_by_node_ended",
    "cancelled": "tasks_by_node_ended",
    "dead_letter": "tasks_by_node_ended",
}
# No index of the ended tasks: a database as migration 18 finds it.
BEFORE = f"DROP INDEX tasks_by_node_ended; {UNDO_MIGRATION_19}"


def _holds_exactly_the_ended_rows(conn: sqlite3.Connection) -> int:
    wanted = conn.execute(f"SELECT COUNT(*) FROM tasks WHERE {ENDED}").fetchone()[0]
    assert index_entries(conn, "tasks_by_node_ended") == wanted
    return int(wanted)


def _placed(log: WorkflowLog, task_id: str, node: str, attempt: int = 1) -> None:
    placed = log.one(e.TaskAssign([{"task_id": task_id, "node": node, "attempt": attempt}]))
    assert placed["placed"] == 1, placed


def _history(log: WorkflowLog, check: bool = False) -> None:
    """Thirty tasks on three nodes, in turn left in each of `STATES`, two
    submitted per entry (so some share a submit index); with `check`, the
    new index is checked after every step."""
    conn = log.machine._conn
    for pair in range(15):
        retries = {"retry_policy": {"max_retries": 1, "backoff_ms": 0}}
        log.apply(
            *(e.TaskSubmit(f"t{2 * pair + k:02d}", {"type": "noop", **retries}) for k in range(2))
        )
    for number in range(30):
        task_id, node = f"t{number:02d}", NODES[number % len(NODES)]
        target = STATES[number % len(STATES)]
        if target == "queued":
            continue
        _placed(log, task_id, node)
        if target == "assigned":
            continue
        assert log.one(e.TaskStarted(task_id, 1, node), node=node)["ok"]
        if target == "completed":
            assert log.one(e.TaskComplete(task_id, 1, node, DONE), node=node)["ok"]
        elif target == "failed":
            failed = e.TaskFailed(task_id, 1, node, "exit code 1", permanent=True)
            assert log.one(failed, node=node)["ok"]
        elif target == "cancelled":
            assert log.one(e.TaskCancel(task_id))["ok"]
        elif target == "dead_letter":
            # A retry, then a second failure spends the budget.
            assert log.one(e.TaskFailed(task_id, 1, node, "exit code 1"), node=node)["ok"]
            assert log.reader.get_task(task_id).state == "queued"  # type: ignore[union-attr]
            _placed(log, task_id, node, attempt=2)
            assert log.one(e.TaskFailed(task_id, 2, node, "exit code 1"), node=node)["ok"]
        if check:
            _holds_exactly_the_ended_rows(conn)


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkflowLog]:
    log = WorkflowLog(Path(tmp_path_factory.mktemp("node-listings")) / "state.db")
    _history(log)
    yield log
    log.close()


def test_the_index_holds_the_tasks_that_ended_so_as_they_move(tmp_path: Path) -> None:
    log = WorkflowLog(tmp_path / "state.db")
    try:
        _history(log, check=True)
        assert _holds_exactly_the_ended_rows(log.machine._conn) == 12
        assert {t.state for t in log.reader.list_tasks(limit=100).tasks} == set(STATES)
        # A dead-lettered task retried by hand leaves it.
        assert log.one(e.TaskRetry("t06", 2, "retried by hand", spend_attempt=False))["ok"]
        assert _holds_exactly_the_ended_rows(log.machine._conn) == 11
    finally:
        log.close()


def test_a_database_made_before_gets_it_from_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    log = WorkflowLog(path)
    _history(log)
    digest = log.machine.digest()
    log.close()
    set_back(path, BEFORE, 17)

    machine = StateMachine(str(path))
    try:
        assert _holds_exactly_the_ended_rows(machine._conn) == 12
        assert machine.digest() == digest
    finally:
        machine.close()


# Tasks t04 to t19 (and on n1 one in each state but completed).
WINDOWS = {"no window": None, "a window": CreatedWindow(1_060, 1_140)}


@pytest.mark.parametrize("window", sorted(WINDOWS))
@pytest.mark.parametrize("newest_first", [False, True])
@pytest.mark.parametrize("node", NODES)
def test_a_nodes_tasks_by_state_page_by_page(
    log: WorkflowLog, node: str, newest_first: bool, window: str
) -> None:
    created = WINDOWS[window]
    everything = log.reader.list_tasks(limit=1000, newest_first=newest_first).tasks
    assert len(everything) == 30
    for count in (1, 2, 3):
        for states in itertools.combinations(STATES, count):
            got, totals = all_pages(
                log.reader,
                2,
                states=list(states),
                node=node,
                newest_first=newest_first,
                created=created,
            )
            expected = [
                t.id
                for t in everything
                if t.state in states
                and t.node == node
                and (created is None or created.start_ms <= t.created_at < created.end_ms)  # type: ignore[operator]
            ]
            assert [t.id for t in got] == expected, states
            assert totals == {len(expected)}, states


@pytest.mark.parametrize("window", sorted(WINDOWS))
@pytest.mark.parametrize("state", sorted(INDEX_OF))
def test_a_nodes_tasks_in_a_state_other_than_completed_are_searched(
    log: WorkflowLog, state: str, window: str
) -> None:
    """The rows and the total are read from the index holding the node's
    tasks in that state; none walks the node's history. Its live tasks are
    sorted (a node has a few), the others read in their index's order."""
    log.reader.list_tasks(limit=1)  # the reader's connection is this thread's from now on
    conn = log.reader._conn()
    with statements(conn) as seen:
        page = log.reader.list_tasks(states=[state], node="n1", limit=2, created=WINDOWS[window])
    assert page.tasks
    plans = task_plans(conn, seen)
    assert len(plans) == (2 if window == "a window" else 1), plans  # the total, the rows
    for plan in plans:
        # (with a window, also its range of submission order where the index has it)
        index = (
            rf"INDEX {INDEX_OF[state]} \(assigned_node=\? AND state=\?( AND submit_index[<>]\?)*\)"
        )
        assert re.search(index, plan), plan
        assert "tasks_by_node_submit" not in plan, plan
        if INDEX_OF[state] == "tasks_by_node_ended":
            assert "TEMP B-TREE" not in plan, plan


def test_a_listing_nothing_can_match_reads_no_task(log: WorkflowLog) -> None:
    """No task of the node is queued (a queued task has none): the counters
    say so, and neither the total nor the rows are read from the tasks."""
    log.reader.list_tasks(limit=1)
    conn = log.reader._conn()
    with statements(conn) as seen:
        page = log.reader.list_tasks(
            states=["queued"], node="n1", limit=2, created=WINDOWS["a window"]
        )
    assert page.tasks == [] and page.total == 0 and page.next_key is None
    assert task_plans(conn, seen) == []
