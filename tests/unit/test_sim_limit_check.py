"""The simulation's check of concurrency limits (`cortex.sim.checks.
limits_and_slots`) on hand-written audit logs: a task placed while its key
is at its limit fails it; tasks placed before their key's limit was set run
on, starting included, and only a placement past the limit fails it."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator

import pytest

from cortex.sim.checks import limits_and_slots
from cortex.sim.invariants import LIMITS_AND_SLOTS_HOLD


@pytest.fixture
def conn() -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(":memory:")
    conn.execute(
        "CREATE TABLE tasks (id TEXT, concurrency_key TEXT, spec TEXT, idempotency_key TEXT)"
    )
    conn.execute(
        "CREATE TABLE task_events (seq INTEGER PRIMARY KEY, event TEXT, task_id TEXT,"
        " to_state TEXT, detail TEXT)"
    )
    for task_id in ("a", "b", "c", "d"):
        conn.execute("INSERT INTO tasks VALUES (?, 'k', '{}', NULL)", (task_id,))
    yield conn
    conn.close()


def events(conn: sqlite3.Connection, *rows: tuple[str, str | None, str | None]) -> None:
    for event, task_id, to_state in rows:
        detail = json.dumps({"key": "k", "max_running": 2}) if event == "limit_set" else None
        conn.execute(
            "INSERT INTO task_events (event, task_id, to_state, detail) VALUES (?, ?, ?, ?)",
            (event, task_id, to_state, detail),
        )


def test_a_task_placed_while_its_key_is_at_its_limit_fails_the_check(
    conn: sqlite3.Connection,
) -> None:
    events(
        conn,
        ("limit_set", None, None),
        ("assigned", "a", "assigned"),
        ("assigned", "b", "assigned"),
        ("started", "a", "running"),
        ("assigned", "c", "assigned"),
    )
    assert [invariant for invariant, _ in limits_and_slots(conn)] == [LIMITS_AND_SLOTS_HOLD]


def test_tasks_placed_before_the_limit_run_on_and_start(conn: sqlite3.Connection) -> None:
    """Three placed in the entry before the limit's (a new leader's first
    round, seed 170): their starts add nothing; once one ends, the next
    placement makes three again and fails the check."""
    events(
        conn,
        ("assigned", "a", "assigned"),
        ("assigned", "b", "assigned"),
        ("assigned", "c", "assigned"),
        ("limit_set", None, None),
        ("started", "c", "running"),
        ("started", "a", "running"),
        ("completed", "a", "completed"),
    )
    assert list(limits_and_slots(conn)) == []
    events(conn, ("assigned", "d", "assigned"))
    assert [invariant for invariant, _ in limits_and_slots(conn)] == [LIMITS_AND_SLOTS_HOLD]
