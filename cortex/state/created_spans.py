"""Creation windows as ranges of submission order.

A task's or workflow's `created_at` is the time its proposer gave its entry,
and its `submit_index` the Raft index that entry was applied at. The two run
nearly together, but not exactly (each node proposes by its own clock), so a
window of creation times (`task list --since/--until`) could only be found
by reading every row's `created_at`: on a million tasks, 37 to 80 ms a page.

`created_spans` (migration 19) holds, for each span of `SPAN_INDEXES`
consecutive Raft indexes, the earliest and the latest creation time of the
tasks and workflows submitted in it. Apply widens a span once per Raft index
(`record`), reading the times back through the indexes on submission order:
a read and at most one write per Raft index, none per row. A row created in a window lies in a
span whose times reach into the window, so every such row's submit index is
between the first and the last of those spans (`submit_range`); a listing
adds that range to its conditions, which the indexes on submission order
answer, and still checks `created_at` itself. A span therefore only has to
hold its rows' times, never exactly: the spans of purged rows are kept while
later rows remain, wider than what is left, and dropped once every task and
workflow before them is gone (`prune`).

Derived from the submissions alone, so outside the digest, as the task
counters are."""

from __future__ import annotations

import sqlite3

from cortex.state.paging import CreatedWindow

# Raft indexes a span covers: 2**SPAN_BITS.
SPAN_BITS = 7
SPAN_INDEXES = 1 << SPAN_BITS

_TIMES = (
    "SELECT MIN(created_at), MAX(created_at) FROM ("
    "SELECT created_at FROM tasks WHERE submit_index = ?"
    " UNION ALL SELECT created_at FROM workflows WHERE submit_index = ?)"
)
_WIDEN = (
    "INSERT INTO created_spans (span, earliest, latest) VALUES (?, ?, ?)"
    " ON CONFLICT (span) DO UPDATE SET earliest = min(earliest, excluded.earliest),"
    " latest = max(latest, excluded.latest)"
)


def record(cur: sqlite3.Cursor, index: int) -> None:
    """Widens the span of Raft index `index` to the creation times of the
    tasks and workflows submitted at it (nothing when it submitted none)."""
    earliest, latest = cur.execute(_TIMES, (index, index)).fetchone()
    if earliest is not None:
        cur.execute(_WIDEN, (index >> SPAN_BITS, earliest, latest))


def prune(cur: sqlite3.Cursor) -> None:
    """Drops the spans before the oldest task or workflow left (after a purge)."""
    cur.execute(
        "DELETE FROM created_spans WHERE span < COALESCE(MIN("
        "(SELECT MIN(submit_index) FROM tasks), (SELECT MIN(submit_index) FROM workflows)),"
        " (SELECT MIN(submit_index) FROM tasks), (SELECT MIN(submit_index) FROM workflows),"
        f" 1 << 62) >> {SPAN_BITS}"
    )


def submit_range(
    conn: sqlite3.Connection, window: CreatedWindow
) -> tuple[list[str], list[object]] | None:
    """The conditions on `submit_index` (and their parameters) that every
    task or workflow created in `window` meets, or None when none can be."""
    clauses: list[str] = []
    params: list[object] = []
    if window.start_ms is not None:
        first = conn.execute(
            "SELECT MIN(span) FROM created_spans WHERE latest >= ?", (window.start_ms,)
        ).fetchone()[0]
        if first is None:
            return None
        clauses.append("submit_index >= ?")
        params.append(first << SPAN_BITS)
    if window.end_ms is not None:
        last = conn.execute(
            "SELECT MAX(span) FROM created_spans WHERE earliest < ?", (window.end_ms,)
        ).fetchone()[0]
        if last is None:
            return None
        clauses.append("submit_index < ?")
        params.append((last + 1) << SPAN_BITS)
    return clauses, params
