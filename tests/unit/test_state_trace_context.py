"""Trace contexts in the replicated state: a task keeps its submission's
traceparent and a workflow its own and its run's (which its tasks of every
part keep); entries written before they carried one still apply; a
malformed one is refused; the digest covers the columns, and snapshots and
the migration from a database without them keep every node's digest equal."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cortex.state import entries as e
from cortex.state.digest import flush, full_digest, stored_digest
from cortex.state.machine import StateMachine, copy_database, state_digest
from cortex.state.queries import StateReader
from cortex.state.schema import MIGRATIONS, REPLICATED_TABLES, connect, migrate
from cortex.state.traceparent import TraceParent

SUBMITTED = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
RUN = "00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-01"


class Log:
    def __init__(self, path: Path) -> None:
        self.machine = StateMachine(str(path))
        self.reader = StateReader(str(path))
        self.index = 0

    def raw(self, entry_type: str, payload: dict[str, Any]) -> dict[str, Any]:
        """An entry as bytes written by any version would carry it."""
        self.index += 1
        entry = {"type": entry_type, "id": f"entry-{self.index}", "ts": 1_000 + self.index,
                 "node": "n1", "payload": payload}  # fmt: skip
        results = self.machine.apply_batch(self.index, json.dumps([entry]).encode())
        assert results is not None
        return results[0]

    def one(self, payload: e.Payload) -> dict[str, Any]:
        self.index += 1
        data = e.encode_batch([e.Entry.create(payload, "n1", ts=1_000 + self.index)])
        results = self.machine.apply_batch(self.index, data)
        assert results is not None
        return results[0]


@pytest.fixture
def log(tmp_path: Path) -> Iterator[Log]:
    opened = Log(tmp_path / "state.db")
    yield opened
    opened.machine.close()


def _item(key: str, pos: int, depends_on: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"key": key, "task_id": f"id-{key}", "spec": {"type": "noop"},
            "depends_on": list(depends_on), "condition": None, "pos": pos}  # fmt: skip


def test_a_task_keeps_the_traceparent_it_was_submitted_with(log: Log) -> None:
    assert log.one(e.TaskSubmit("t1", {"type": "noop"}, traceparent=SUBMITTED))["ok"]
    task = log.reader.get_task("t1")
    assert task is not None and task.traceparent == SUBMITTED


def test_a_submission_written_before_tasks_kept_one_still_applies(log: Log) -> None:
    assert log.raw("TASK_SUBMIT", {"task_id": "old", "spec": {"type": "noop"}})["ok"]
    task = log.reader.get_task("old")
    assert task is not None and task.state == "queued" and task.traceparent is None


@pytest.mark.parametrize(
    "traceparent",
    [
        "not-a-traceparent",
        SUBMITTED.upper(),
        f"cc-{SUBMITTED[3:]}",  # a client may send another version; entries hold 00 only
        f"00-{'0' * 32}-00f067aa0ba902b7-01",
        5,
    ],
)
def test_a_malformed_traceparent_refuses_the_entry(log: Log, traceparent: Any) -> None:
    result = log.raw(
        "TASK_SUBMIT", {"task_id": "t1", "spec": {"type": "noop"}, "traceparent": traceparent}
    )
    assert result["ok"] is False and result["reason"].startswith("invalid_payload"), result
    assert log.reader.get_task("t1") is None


def test_a_workflow_keeps_its_contexts_and_its_tasks_of_every_part_its_runs(log: Log) -> None:
    head = e.WorkflowSubmit("wf", "flow", [_item("a", 0)], total_tasks=2,
                            traceparent=SUBMITTED, run_traceparent=RUN)  # fmt: skip
    assert log.one(head)["ok"]
    assert log.one(e.WorkflowTasks("wf", 1, [_item("b", 1, ("a",))]))["ok"]
    workflow = log.reader.get_workflow("wf")
    assert workflow is not None and workflow.state == "running"
    assert (workflow.traceparent, workflow.run_traceparent) == (SUBMITTED, RUN)
    for task_id in ("id-a", "id-b"):
        task = log.reader.get_task(task_id)
        assert task is not None and task.traceparent == RUN


def test_a_workflow_written_before_workflows_kept_contexts_still_applies(log: Log) -> None:
    result = log.raw("WORKFLOW_SUBMIT", {"workflow_id": "wf", "name": "flow",
                                         "tasks": [_item("a", 0)]})  # fmt: skip
    assert result["ok"], result
    workflow = log.reader.get_workflow("wf")
    assert workflow is not None
    assert (workflow.traceparent, workflow.run_traceparent) == (None, None)
    task = log.reader.get_task("id-a")
    assert task is not None and task.traceparent is None


def test_a_malformed_run_traceparent_refuses_the_workflow(log: Log) -> None:
    result = log.raw("WORKFLOW_SUBMIT", {"workflow_id": "wf", "name": "flow",
                                         "tasks": [_item("a", 0)], "run_traceparent": "x"})  # fmt: skip
    assert result["ok"] is False and "run_traceparent" in result["reason"], result
    assert log.reader.get_workflow("wf") is None


def test_the_digest_covers_the_trace_contexts(tmp_path: Path) -> None:
    digests = []
    for name, traceparent in (("a", SUBMITTED), ("b", str(TraceParent.new())), ("c", SUBMITTED)):
        other = Log(tmp_path / f"{name}.db")
        other.raw("TASK_SUBMIT", {"task_id": "t1", "spec": {"type": "noop"},
                                  "traceparent": traceparent})  # fmt: skip
        digests.append(other.machine.digest())
        conn = connect(other.machine.path)
        assert stored_digest(conn) == state_digest(conn)
        conn.close()
        other.machine.close()
    assert digests[0] == digests[2] != digests[1]


def test_a_snapshot_carries_the_trace_contexts(log: Log, tmp_path: Path) -> None:
    log.one(e.TaskSubmit("t1", {"type": "noop"}, traceparent=SUBMITTED))
    log.one(e.WorkflowSubmit("wf", "flow", [_item("a", 0)], traceparent=SUBMITTED,
                             run_traceparent=RUN))  # fmt: skip
    copy_database(log.machine.path, str(tmp_path / "snapshot.db"))
    restored = StateMachine(str(tmp_path / "restored.db"))
    try:
        restored.restore_from(str(tmp_path / "snapshot.db"))
        assert restored.digest() == log.machine.digest()
        task = StateReader(restored.path).get_task("t1")
        assert task is not None and task.traceparent == SUBMITTED
    finally:
        restored.close()


def _version_9_database(path: Path) -> None:
    """A database as nodes kept it before trace contexts, with a task."""
    conn = connect(str(path))
    for number, script in enumerate(MIGRATIONS[:9], start=1):
        conn.executescript(f"BEGIN;\n{script}\nPRAGMA user_version = {number};\nCOMMIT;")
    conn.execute(
        "INSERT INTO tasks (id, type, state, priority, spec, constraints, retry_policy, labels,"
        " created_at, updated_at, submit_index) VALUES"
        " ('t1', 'noop', 'queued', 0, '{}', '{}', '{}', '{}', 1, 1, 1)"
    )
    conn.close()


def test_the_migration_adds_the_columns_and_rebuilds_the_digest(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _version_9_database(path)
    conn = connect(str(path))
    assert migrate(conn) == len(MIGRATIONS) >= 10
    tables = list(REPLICATED_TABLES)
    assert conn.execute("SELECT traceparent FROM tasks").fetchone()[0] is None
    assert stored_digest(conn) == full_digest(conn, tables)
    before = stored_digest(conn)
    conn.execute("UPDATE tasks SET traceparent = ?", (SUBMITTED,))
    flush(conn)
    assert stored_digest(conn) == full_digest(conn, tables) != before
    conn.close()


def test_a_snapshot_from_before_the_migration_restores_migrated(tmp_path: Path) -> None:
    _version_9_database(tmp_path / "old.db")
    restored = StateMachine(str(tmp_path / "restored.db"))
    try:
        restored.restore_from(str(tmp_path / "old.db"))
        conn = sqlite3.connect(restored.path)
        columns = {row[1] for row in conn.execute("PRAGMA table_info(workflows)")}
        conn.close()
        assert {"traceparent", "run_traceparent"} <= columns
        task = StateReader(restored.path).get_task("t1")
        assert task is not None and task.traceparent is None
    finally:
        restored.close()
