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

Each span also counts the tasks and the workflows of its range still
present (migration 20: `record` adds a Raft index's submissions, a trigger
takes away each row deleted). A window's total (`count`) is then the sum of
the counts of the spans wholly inside it, plus the rows of the few spans its
edges cross, read one by one: on a million tasks, counting the newest tenth
read a hundred thousand index entries.

Derived from the submissions alone, so outside the digest, as the task
counters are."""

from __future__ import annotations

import sqlite3

from cortex.state.paging import CreatedWindow

# Raft indexes a span covers: 2**SPAN_BITS.
SPAN_BITS = 7
SPAN_INDEXES = 1 << SPAN_BITS

# Beyond this many spans crossed by a window's edges (clocks skewed enough
# to interleave many spans), the window is counted row by row instead.
MOST_EDGE_SPANS = 64
# Below and above every creation time: an open side of a window.
_EARLIEST = -(1 << 62)
_LATEST = 1 << 62

_TIMES = (
    "SELECT MIN(created_at), MAX(created_at), SUM(task), SUM(1 - task) FROM ("
    "SELECT created_at, 1 AS task FROM tasks WHERE submit_index = ?"
    " UNION ALL SELECT created_at, 0 FROM workflows WHERE submit_index = ?)"
)
_WIDEN = (
    "INSERT INTO created_spans (span, earliest, latest, tasks, workflows) VALUES (?, ?, ?, ?, ?)"
    " ON CONFLICT (span) DO UPDATE SET earliest = min(earliest, excluded.earliest),"
    " latest = max(latest, excluded.latest), tasks = tasks + excluded.tasks,"
    " workflows = workflows + excluded.workflows"
)


def record(cur: sqlite3.Cursor, index: int) -> None:
    """Widens the span of Raft index `index` to the creation times of the
    tasks and workflows submitted at it, and counts them in (nothing when it
    submitted none). Once per Raft index: apply never applies one twice."""
    earliest, latest, tasks, workflows = cur.execute(_TIMES, (index, index)).fetchone()
    if earliest is not None:
        cur.execute(_WIDEN, (index >> SPAN_BITS, earliest, latest, tasks, workflows))


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


def count(conn: sqlite3.Connection, table: str, window: CreatedWindow) -> int | None:
    """How many rows of `table` (tasks or workflows) were created in
    `window`: the counts of the spans wholly inside it (every row of theirs
    is), plus the rows of the spans its edges cross, counted run by run of
    consecutive spans. None when the edges cross more than
    `MOST_EDGE_SPANS` spans: then a count row by row costs about as much."""
    if table not in ("tasks", "workflows"):
        raise ValueError(f"no spans count the rows of {table!r}")
    start = _EARLIEST if window.start_ms is None else window.start_ms
    end = _LATEST if window.end_ms is None else window.end_ms
    inside = conn.execute(
        f"SELECT COALESCE(SUM({table}), 0) FROM created_spans WHERE earliest >= ? AND latest < ?",
        (start, end),
    ).fetchone()[0]
    edges = [
        span
        for (span,) in conn.execute(
            "SELECT span FROM created_spans WHERE latest >= ? AND earliest < ?"
            f" AND NOT (earliest >= ? AND latest < ?) AND {table} > 0 ORDER BY span LIMIT ?",
            (start, end, start, end, MOST_EDGE_SPANS + 1),
        )
    ]
    if len(edges) > MOST_EDGE_SPANS:
        return None
    total = int(inside)
    for first, last in _runs(edges):
        total += conn.execute(
            f"SELECT COUNT(*) FROM {table} WHERE submit_index >= ? AND submit_index < ?"
            " AND created_at >= ? AND created_at < ?",
            (first << SPAN_BITS, (last + 1) << SPAN_BITS, start, end),
        ).fetchone()[0]
    return total


def _runs(spans: list[int]) -> list[tuple[int, int]]:
    """The runs of consecutive numbers in `spans` (ascending), as (first, last)."""
    runs: list[tuple[int, int]] = []
    for span in spans:
        if runs and runs[-1][1] == span - 1:
            runs[-1] = (runs[-1][0], span)
        else:
            runs.append((span, span))
    return runs
