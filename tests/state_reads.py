"""What the state database's reads do, for the tests of its indexes and
listings: how many entries an index holds, the SQL a connection ran and its
query plans, and every page of a task listing."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from cortex.state.machine import StateMachine
from cortex.state.paging import PageKey
from cortex.state.queries import StateReader, TaskView

# Takes away what migration 20 made: a database as migration 19 left it.
UNDO_MIGRATION_20 = (
    "DROP TRIGGER created_spans_task_delete; DROP TRIGGER created_spans_workflow_delete;"
    " ALTER TABLE created_spans DROP COLUMN tasks; ALTER TABLE created_spans DROP COLUMN workflows;"
)
# Takes away what migrations 19 and 20 made: a database as migration 18 left it.
UNDO_MIGRATION_19 = UNDO_MIGRATION_20 + (
    " DROP TABLE created_spans; DROP TABLE workflow_counts; DROP TRIGGER workflow_counts_insert;"
    " DROP TRIGGER workflow_counts_delete; DROP TRIGGER workflow_counts_update;"
)


def set_back(path: Path, undo: str, version: int) -> None:
    """Makes the database at `path` one an older release left: `undo` takes
    away what the later migrations made, and its version says `version`
    (the next StateMachine opening it migrates it again)."""
    conn = StateMachine(str(path))._conn
    try:
        conn.executescript(f"BEGIN; {undo} PRAGMA user_version = {version}; COMMIT;")
    finally:
        conn.close()


def index_entries(conn: sqlite3.Connection, index: str) -> int:
    """How many entries the index's leaf pages hold (SQLite's dbstat)."""
    try:
        row = conn.execute(
            "SELECT COALESCE(SUM(ncell), 0) FROM dbstat WHERE name = ? AND pagetype = 'leaf'",
            (index,),
        ).fetchone()
    except sqlite3.OperationalError as err:  # a SQLite built without dbstat
        pytest.skip(f"no dbstat: {err}")
    return int(row[0])


@contextmanager
def statements(conn: sqlite3.Connection) -> Iterator[list[str]]:
    """The SQL run on `conn` meanwhile."""
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    try:
        yield seen
    finally:
        conn.set_trace_callback(None)


def task_plans(conn: sqlite3.Connection, sql: list[str]) -> list[str]:
    """The query plans of the statements that read the task table, each
    followed by its statement."""
    plans = []
    for statement in sql:
        if "FROM tasks" not in statement or not statement.lstrip().upper().startswith("SELECT"):
            continue
        plan = " / ".join(row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {statement}"))
        plans.append(f"{plan}  <-  {statement}")
    return plans


def all_pages(reader: StateReader, size: int, **filters: object) -> tuple[list[TaskView], set[int]]:
    """Every task of a listing, read `size` to a page, and the totals the
    pages gave."""
    seen: list[TaskView] = []
    totals = set()
    after: PageKey | None = None
    while True:
        page = reader.list_tasks(limit=size, after=after, **filters)  # type: ignore[arg-type]
        seen += page.tasks
        totals.add(page.total)
        if page.next_key is None:
            return seen, totals
        after = page.next_key
