"""Retention through the replicated log: `TASKS_PURGE` applied to a real
StateMachine on SQLite files. Which rows go and which stay, the limit and
the order, rejected payloads, determinism on two databases, replay, and the
leader's cheap "is anything due" check."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cortex.state import entries as e
from cortex.state.machine import StateMachine
from cortex.state.purge import MAX_PURGE_LIMIT, PURGED, PurgeUnit, choose_units
from cortex.state.schema import MIGRATIONS, connect, migrate
from tests.workflow_sim import WorkflowLog

OLD, CUTOFF, NEW = 2_000, 5_000, 10_000
PIPELINE = """
name: pipeline
tasks:
  build: {spec: {command: "true"}}
  test: {spec: {command: "true"}, dependsOn: [build]}
"""


@pytest.fixture
def log(tmp_path: Path) -> Iterator[WorkflowLog]:
    wl = WorkflowLog(tmp_path / "a" / "state.db")
    yield wl
    wl.close()


def at(log: WorkflowLog, ts: int) -> None:
    """The next entries carry clock `ts` (and on, 10 ms apart)."""
    log.ts = ts - 10


def submit(log: WorkflowLog, task_id: str, spec: dict[str, Any] | None = None, **kw: Any) -> None:
    assert log.one(e.TaskSubmit(task_id, spec or {"command": ["true"]}, **kw))["created"]


def purge(log: WorkflowLog, before_ms: int, limit: int = 100, ts: int = 50_000) -> dict[str, Any]:
    at(log, ts)
    return log.one(e.TasksPurge(before_ms, limit))


def task_ids(log: WorkflowLog) -> set[str]:
    return {row[0] for row in _rows(log, "SELECT id FROM tasks")}


def _rows(log: WorkflowLog, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(log.machine.path)
    try:
        return [tuple(row) for row in conn.execute(sql, params)]
    finally:
        conn.close()


def standalone_mix(log: WorkflowLog) -> None:
    """Old tasks in every state, and one finished recently."""
    at(log, OLD)
    submit(log, "done", idempotency_key="key-done")
    log.complete("done")
    submit(log, "failed", {"command": ["false"], "retryPolicy": {"retryable": False}})
    log.complete("failed", exit_code=1)
    submit(log, "cancelled")
    assert log.one(e.TaskCancel("cancelled"))["ok"]
    submit(log, "dead")
    assert log.one(e.TaskDeadLetter("dead", 0, "gave up"))["ok"]
    submit(log, "queued")
    submit(log, "running")
    log.start("running")
    # A stale report on a finished task: a rejection row that names it.
    assert not log.one(e.TaskComplete("done", 1, "n2", {"exit_code": 0}))["ok"]
    at(log, NEW)
    submit(log, "fresh")
    log.complete("fresh")


# ---------------------------------------------------------------- what goes, what stays


def test_old_terminal_tasks_go_with_their_events_and_the_rest_stays(log):
    standalone_mix(log)
    result = purge(log, CUTOFF)
    assert result["ok"] and (result["tasks"], result["workflows"]) == (3, 0)
    assert task_ids(log) == {"dead", "queued", "running", "fresh"}
    for gone in ("done", "failed", "cancelled"):
        assert log.events(gone) == []
    assert [ev["event"] for ev in log.events("running")] == ["submitted", "assigned", "started"]
    assert log.reader.get_task("dead").state == "dead_letter"
    # Node-level events before the cutoff went; the purge left its record.
    loose = _rows(log, "SELECT event, ts, detail FROM task_events WHERE task_id IS NULL")
    assert [(name, ts) for name, ts, _ in loose] == [(PURGED, 50_000)]
    assert result["events"] == 3  # the three node_joined rows


def test_a_purged_task_frees_its_idempotency_key(log):
    standalone_mix(log)
    assert log.reader.task_by_idempotency_key("key-done") == "done"
    purge(log, CUTOFF)
    assert log.reader.task_by_idempotency_key("key-done") is None
    assert log.one(e.TaskSubmit("again", {"command": ["true"]}, "key-done"))["created"]


def test_the_cutoff_is_exclusive(log):
    at(log, OLD)
    submit(log, "t1")
    log.complete("t1")
    completed_at = _rows(log, "SELECT completed_at FROM tasks WHERE id = 't1'")[0][0]
    assert purge(log, completed_at)["tasks"] == 0
    assert purge(log, completed_at + 1)["tasks"] == 1


def test_workflow_tasks_go_only_with_their_whole_finished_workflow(log):
    at(log, OLD)
    finished, finished_ids = log.submit(PIPELINE)
    log.complete(finished_ids["build"])
    log.settle(finished, None)
    log.complete(finished_ids["test"])
    running, running_ids = log.submit(PIPELINE)
    log.complete(running_ids["build"])  # old and completed, but its workflow runs on
    dead, dead_ids = log.submit(PIPELINE)
    assert log.one(e.TaskDeadLetter(dead_ids["build"], 0, "gave up"))["ok"]
    log.settle(dead, None)  # test is skipped: the workflow failed, holding a dead letter
    at(log, NEW)
    recent, recent_ids = log.submit(PIPELINE)
    assert log.one(e.WorkflowCancel(recent))["ok"]
    states = {w: log.reader.get_workflow(w).state for w in (finished, running, dead, recent)}
    assert states == {finished: "completed", running: "running", dead: "failed",
                      recent: "cancelled"}  # fmt: skip

    result = purge(log, CUTOFF)

    assert (result["tasks"], result["workflows"]) == (2, 1)
    assert log.reader.get_workflow(finished) is None
    assert not set(finished_ids.values()) & task_ids(log)
    assert _rows(log, "SELECT * FROM task_dependencies WHERE workflow_id = ?", finished) == []
    for task_id in finished_ids.values():
        assert log.events(task_id) == []
    for kept, ids in ((running, running_ids), (dead, dead_ids), (recent, recent_ids)):
        assert log.reader.get_workflow(kept) is not None
        assert set(ids.values()) <= task_ids(log)
        assert _rows(log, "SELECT COUNT(*) FROM task_dependencies WHERE workflow_id = ?", kept)
    assert log.state(running_ids["build"]) == "completed"


# ---------------------------------------------------------------- limit and order


def test_the_limit_takes_the_oldest_first_by_completion_then_id(log):
    for task_id, ts in (("c", 3_000), ("a", 3_000), ("b", 2_000), ("d", 4_000), ("e", 1_000)):
        at(log, ts)
        submit(log, task_id)
        log.complete(task_id)
    completed = dict(_rows(log, "SELECT id, completed_at FROM tasks"))
    assert sorted(completed, key=lambda t: (completed[t], t)) == ["e", "b", "a", "c", "d"]

    assert purge(log, CUTOFF, limit=2)["tasks"] == 2
    assert task_ids(log) == {"a", "c", "d"}
    assert purge(log, CUTOFF, limit=2)["tasks"] == 2
    assert task_ids(log) == {"d"}
    assert purge(log, CUTOFF, limit=2)["tasks"] == 1
    assert purge(log, CUTOFF, limit=2)["tasks"] == 0


def test_a_workflow_counts_its_tasks_against_the_limit_and_is_never_split(log):
    at(log, OLD)
    workflow, ids = log.submit(PIPELINE)
    log.complete(ids["build"])
    log.settle(workflow, None)
    log.complete(ids["test"])
    at(log, 3_000)
    submit(log, "later")
    log.complete("later")

    # The oldest unit always goes, even when larger than the limit.
    assert purge(log, CUTOFF, limit=1) == {"ok": True, "before_ms": CUTOFF, "tasks": 2,
                                           "workflows": 1, "events": 1}  # fmt: skip
    assert task_ids(log) == {"later"}
    assert purge(log, CUTOFF, limit=1)["tasks"] == 1


def test_choose_units_stops_at_the_first_unit_that_does_not_fit():
    tasks = [PurgeUnit(10, "task", "t1", 1), PurgeUnit(30, "task", "t2", 1)]
    workflows = [PurgeUnit(20, "workflow", "w1", 5), PurgeUnit(5, "workflow", "w0", 2)]
    assert [u.id for u in choose_units(tasks, workflows, 3)] == ["w0", "t1"]
    assert [u.id for u in choose_units(tasks, workflows, 8)] == ["w0", "t1", "w1"]
    assert [u.id for u in choose_units(tasks, workflows, 1)] == ["w0"]
    assert [u.id for u in choose_units(tasks, [], 1)] == ["t1"]
    assert choose_units([], [], 5) == []


def test_node_events_are_limited_too(log):
    at(log, OLD)
    for _ in range(4):
        log.one(e.NodeStatus("n1", "cordoned"))
    before = len(_rows(log, "SELECT 1 FROM task_events WHERE task_id IS NULL"))
    assert before == 7
    assert purge(log, CUTOFF, limit=5)["events"] == 5
    assert purge(log, CUTOFF, limit=5)["events"] == 2  # the first purge's record is recent


# ---------------------------------------------------------------- bad payloads


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        ({"before_ms": -1, "limit": 10}, "invalid_payload: purge cutoff -1 is negative"),
        ({"before_ms": CUTOFF, "limit": 0}, "invalid_payload: purge limit 0 is not between 1 and"),
        ({"before_ms": CUTOFF, "limit": MAX_PURGE_LIMIT + 1}, "invalid_payload: purge limit"),
        ({"before_ms": 60_000, "limit": 10}, "invalid_payload: purge cutoff 60000 is after"),
        (
            {"before_ms": "5000", "limit": 10},
            "invalid_payload: TASKS_PURGE: field before_ms has the wrong type",
        ),
        ({"before_ms": CUTOFF}, "invalid_payload: TASKS_PURGE: missing field limit"),
    ],
)
def test_invalid_purges_are_rejected_and_remove_nothing(log, payload, reason):
    standalone_mix(log)
    before = task_ids(log)
    entry = e.Entry(type="TASKS_PURGE", id="p1", ts=50_000, node="n1", payload=payload)
    log.index += 1
    (result,) = log.machine.apply_batch(log.index, e.encode_batch([entry]))
    assert result["ok"] is False and result["reason"].startswith(reason), result
    assert task_ids(log) == before
    assert [
        row[0] for row in _rows(log, "SELECT event FROM task_events WHERE entry_id = 'p1'")
    ] == ["rejected"]


# ---------------------------------------------------------------- determinism and replay


def test_two_databases_fed_the_same_purges_agree(log, tmp_path):
    standalone_mix(log)
    workflow, ids = log.submit(PIPELINE)
    log.complete(ids["build"])
    log.settle(workflow, None)
    log.complete(ids["test"])
    purge(log, CUTOFF, limit=2)
    purge(log, 20_000, limit=3, ts=60_000)
    purge(log, 20_000, limit=100, ts=60_010)
    other = log.replay_into(tmp_path / "b" / "state.db")
    try:
        assert other.digest() == log.machine.digest()
        assert other.applied_index == log.machine.applied_index
    finally:
        other.close()


def test_replaying_applied_purges_changes_nothing(log, tmp_path):
    standalone_mix(log)
    purge(log, CUTOFF)
    digest = log.machine.digest()
    for index, data in log.batches:
        assert log.machine.apply_batch(index, data) is None
    assert log.machine.digest() == digest
    # After a restart pysyncobj replays its journal from the start.
    log.machine.close()
    log.machine = StateMachine(log.machine.path)
    for index, data in log.batches:
        assert log.machine.apply_batch(index, data) is None
    assert log.machine.digest() == digest
    # The same purge proposed again (a new entry) finds nothing more to do.
    again = purge(log, CUTOFF)
    assert (again["tasks"], again["workflows"], again["events"]) == (0, 0, 0)


def test_event_seq_never_goes_back(log):
    standalone_mix(log)
    head = _rows(log, "SELECT MAX(seq) FROM task_events")[0][0]
    purge(log, 40_000)  # every task but the dead letter and the active ones
    assert _rows(log, "SELECT MAX(seq) FROM task_events")[0][0] == head + 1
    at(log, 60_000)
    log.one(e.NodeStatus("n2", "cordoned"))
    assert _rows(log, "SELECT MAX(seq) FROM task_events")[0][0] == head + 2


def test_purged_tasks_are_reported_to_listeners(log):
    standalone_mix(log)
    seen: list[tuple[str, str]] = []
    log.machine.add_listener(
        lambda index, changes: seen.extend((c.task_id, c.state) for c in changes)
    )
    purge(log, CUTOFF)
    assert sorted(seen) == [("cancelled", PURGED), ("done", PURGED), ("failed", PURGED)]


# ---------------------------------------------------------------- the leader's check


def test_purge_due_sees_old_rows_but_not_earlier_purge_records(log):
    assert log.reader.purge_due(CUTOFF)  # the node_joined events
    purge(log, CUTOFF)
    assert not log.reader.purge_due(60_000)  # only the purge's own record is old
    at(log, OLD)
    submit(log, "t1")
    assert not log.reader.purge_due(CUTOFF)  # queued is not terminal
    log.complete("t1")
    assert log.reader.purge_due(CUTOFF) and not log.reader.purge_due(OLD)
    result = purge(log, 60_000, ts=70_000)
    assert (result["tasks"], result["events"]) == (1, 1)  # the earlier record goes along
    assert not log.reader.purge_due(60_000)


# ---------------------------------------------------------------- schema


def test_migration_4_adds_the_indexes_to_an_existing_database(tmp_path):
    path = str(tmp_path / "old.db")
    conn = connect(path)
    for number, script in enumerate(MIGRATIONS[:3], start=1):
        conn.executescript(f"BEGIN;\n{script}\nPRAGMA user_version = {number};\nCOMMIT;")
    conn.close()
    machine = StateMachine(path)
    machine.close()
    conn = connect(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
        indexes = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        assert {"tasks_purgeable", "workflows_finished", "task_events_loose"} <= indexes
        assert migrate(conn) == len(MIGRATIONS)
    finally:
        conn.close()


def test_tasks_finished_before_migration_14_are_still_purged(tmp_path):
    """Migration 14 rebuilds the retention indexes with their states spelled
    as comparisons: tasks that finished before it are found through them,
    the ones still running are not."""
    path = tmp_path / "old.db"
    conn = connect(str(path))
    for number, script in enumerate(MIGRATIONS[:13], start=1):
        conn.executescript(f"BEGIN;\n{script}\nPRAGMA user_version = {number};\nCOMMIT;")
    for task_id, state, completed_at in (
        ("old-done", "completed", OLD),
        ("old-run", "running", None),
    ):
        conn.execute(
            "INSERT INTO tasks (id, type, state, priority, spec, constraints, retry_policy,"
            " labels, created_at, updated_at, submit_index, completed_at)"
            " VALUES (?, 'noop', ?, 0, '{}', '{}', '{}', '{}', ?, ?, 1, ?)",
            (task_id, state, OLD, OLD, completed_at),
        )
    conn.close()
    wl = WorkflowLog(path)
    try:
        assert wl.reader.purge_due(CUTOFF)
        assert purge(wl, CUTOFF)["tasks"] == 1
        assert task_ids(wl) == {"old-run"}
    finally:
        wl.close()
