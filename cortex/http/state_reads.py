"""The reads of the replicated state that only metrics need: queue depth and
age, workflow and dead-letter counts, and the timestamps task histograms are
observed from. One read-only connection, shared under a lock (scrapes are
rare and each takes a few milliseconds), so the HTTP server's short-lived
request threads do not each open their own.

These queries belong beside the others in `cortex.state.queries`; they live
here until that package takes them."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from cortex.state.schema import connect
from cortex.state.workflow_rules import WORKFLOW_STATES

# SQLite accepts at most 32 766 parameters per statement; stay far below.
_IDS_PER_QUERY = 500


@dataclass(frozen=True)
class QueueView:
    """Queued tasks by priority, and when the longest-waiting runnable one
    became runnable (entry time, ms; None when none is runnable)."""

    depth_by_priority: dict[int, int]
    oldest_runnable_since_ms: int | None


@dataclass(frozen=True)
class TaskTimes:
    """What the task histograms need of one task, as its row holds it now."""

    id: str
    type: str
    state: str
    attempt: int
    created_at: int
    started_at: int | None
    completed_at: int | None


class MetricsStateReads:
    def __init__(self, db_path: str) -> None:
        self._path = db_path
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = connect(self._path, readonly=True)
        return self._conn

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def queue(self, now_ms: int) -> QueueView:
        """A queued task waits from the later of its last change (entering the
        queue) and the end of its back-off."""
        with self._lock:
            conn = self._connection()
            conn.execute("BEGIN")
            try:
                depth = conn.execute(
                    "SELECT priority, COUNT(*) FROM tasks WHERE state = 'queued' GROUP BY priority"
                ).fetchall()
                oldest = conn.execute(
                    "SELECT MIN(MAX(updated_at, scheduled_after)) FROM tasks"
                    " WHERE state = 'queued' AND scheduled_after <= ?",
                    (now_ms,),
                ).fetchone()
            finally:
                conn.execute("COMMIT")
        return QueueView({int(row[0]): int(row[1]) for row in depth}, oldest[0])

    def workflow_counts(self) -> dict[str, int]:
        """Workflows in each state, every state named (0 when none)."""
        with self._lock:
            rows = (
                self._connection()
                .execute("SELECT state, COUNT(*) FROM workflows GROUP BY state")
                .fetchall()
            )
        return {**dict.fromkeys(WORKFLOW_STATES, 0), **{row[0]: int(row[1]) for row in rows}}

    def dead_letter_count(self) -> int:
        with self._lock:
            row = (
                self._connection()
                .execute("SELECT COUNT(*) FROM tasks WHERE state = 'dead_letter'")
                .fetchone()
            )
        return int(row[0])

    def task_times(self, task_ids: Iterable[str]) -> list[TaskTimes]:
        """The tasks that still exist among `task_ids` (purged ones are gone)."""
        wanted = list(dict.fromkeys(task_ids))
        found: list[TaskTimes] = []
        with self._lock:
            conn = self._connection()
            for start in range(0, len(wanted), _IDS_PER_QUERY):
                chunk = wanted[start : start + _IDS_PER_QUERY]
                rows = conn.execute(
                    "SELECT id, type, state, attempt, created_at, started_at, completed_at"
                    f" FROM tasks WHERE id IN ({','.join('?' * len(chunk))})",
                    chunk,
                ).fetchall()
                found.extend(TaskTimes(*row) for row in rows)
        return found
