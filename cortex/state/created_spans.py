"""Creation windows as ranges of submission order.

A task's `created_at` is the time its proposer gave its entry, and its
`submit_index` the Raft index that entry was applied at. The two run nearly
together, but not exactly (each node proposes by its own clock), so a window
of creation times (`task list --since/--until`) could only be found by
reading every task's `created_at`: on a million tasks, 37 to 80 ms a page.

`task_created_spans` (migration 19) holds, for each span of `SPAN_INDEXES`
consecutive Raft indexes, the earliest and the latest creation time of the
tasks submitted in it. Apply widens a span once per Raft index that submitted
tasks (`record`), reading their times back through `tasks_by_submit`: one
statement per entry, none per task. A task created in a window lies in a span
whose times reach into the window, so every such task's submit index is
between the first and the last of those spans (`submit_range`); a listing
adds that range to its conditions, which the indexes on submission order
answer, and still checks `created_at` itself. A span therefore only has to
hold its tasks' times, never exactly: the spans of purged tasks are kept
while later tasks remain, wider than what is left, and dropped once every
task before them is gone (`prune`).

Derived from the tasks' submissions alone, so outside the digest, as the
task counters are."""

from __future__ import annotations

import sqlite3

from cortex.state.paging import CreatedWindow

# Raft indexes a span covers: 2**SPAN_BITS.
SPAN_BITS = 7
SPAN_INDEXES = 1 << SPAN_BITS

_RECORD = (
    "INSERT INTO task_created_spans (span, earliest, latest)"
    " SELECT ?, MIN(created_at), MAX(created_at) FROM tasks WHERE submit_index = ?"
    " GROUP BY submit_index"
    " ON CONFLICT (span) DO UPDATE SET earliest = min(earliest, excluded.earliest),"
    " latest = max(latest, excluded.latest)"
)


def record(cur: sqlite3.Cursor, index: int) -> None:
    """Widens the span of Raft index `index` to the creation times of the
    tasks submitted at it (nothing when it submitted none)."""
    cur.execute(_RECORD, (index >> SPAN_BITS, index))


def prune(cur: sqlite3.Cursor) -> None:
    """Drops the spans before the oldest task left (after a purge)."""
    cur.execute(
        "DELETE FROM task_created_spans WHERE span <"
        f" (SELECT COALESCE(MIN(submit_index) >> {SPAN_BITS}, 1 << 62) FROM tasks)"
    )


def submit_range(
    conn: sqlite3.Connection, window: CreatedWindow
) -> tuple[list[str], list[object]] | None:
    """The conditions on `submit_index` (and their parameters) that every
    task created in `window` meets, or None when no task can be in it."""
    clauses: list[str] = []
    params: list[object] = []
    if window.start_ms is not None:
        first = conn.execute(
            "SELECT MIN(span) FROM task_created_spans WHERE latest >= ?", (window.start_ms,)
        ).fetchone()[0]
        if first is None:
            return None
        clauses.append("submit_index >= ?")
        params.append(first << SPAN_BITS)
    if window.end_ms is not None:
        last = conn.execute(
            "SELECT MAX(span) FROM task_created_spans WHERE earliest < ?", (window.end_ms,)
        ).fetchone()[0]
        if last is None:
            return None
        clauses.append("submit_index < ?")
        params.append((last + 1) << SPAN_BITS)
    return clauses, params
