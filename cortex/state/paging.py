"""Keyset paging for the listings: a page continues after the last item of
the previous one, by its (submit_index, id), so rows inserted meanwhile never
repeat or shift an item (as an offset would). Indexes on (submit_index, id,
created_at) let a page walk in order from where the last one ended, checking
a creation window without reading the rows it skips."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass


@dataclass(frozen=True)
class PageKey:
    """Where a page ended: its last item's submit index and id."""

    submit_index: int
    id: str


def keyset(after: PageKey | None, newest_first: bool) -> tuple[str, list[object], str]:
    """The condition that continues after `after` (empty for the first page),
    its parameters, and the ORDER BY of the listing."""
    beyond = "<" if newest_first else ">"
    order = order_by(newest_first)
    if not after:
        return "", [], order
    return f"(submit_index, id) {beyond} (?, ?)", [after.submit_index, after.id], order


def order_by(newest_first: bool, sorted_: bool = False) -> str:
    """The ORDER BY of a listing; `sorted_` spells it so that no index can
    give it, for rows better read from an index in another order and sorted
    (SQLite would otherwise walk one in this order to avoid the sort)."""
    direction = "DESC" if newest_first else "ASC"
    plus = "+" if sorted_ else ""
    return f"ORDER BY {plus}submit_index {direction}, {plus}id {direction}"


@dataclass(frozen=True)
class CreatedWindow:
    """Items created (by `created_at`, ms since the epoch) at or after
    `start_ms` and before `end_ms`; None leaves that side open."""

    start_ms: int | None = None
    end_ms: int | None = None

    def clauses(self) -> tuple[list[str], list[object]]:
        """The conditions on `created_at` and their parameters."""
        clauses: list[str] = []
        params: list[object] = []
        if self.start_ms is not None:
            clauses.append("created_at >= ?")
            params.append(self.start_ms)
        if self.end_ms is not None:
            clauses.append("created_at < ?")
            params.append(self.end_ms)
        return clauses, params


def where(clauses: list[str]) -> str:
    """A WHERE clause of the conditions that are not empty (or nothing)."""
    present = [clause for clause in clauses if clause]
    return f"WHERE {' AND '.join(present)}" if present else ""


def page_end(rows: list[sqlite3.Row], limit: int) -> tuple[list[sqlite3.Row], PageKey | None]:
    """A page of at most `limit` rows out of `limit + 1` read, and the key of
    its last row when more follow."""
    if len(rows) <= limit:
        return rows, None
    rows = rows[:limit]
    last = rows[-1]
    return rows, PageKey(last["submit_index"], last["id"])


# Above every character an id can hold: `prefix + _ID_CEILING` bounds the ids
# starting with `prefix` from above.
_ID_CEILING = "\U0010ffff"


def ids_with_prefix(conn: sqlite3.Connection, table: str, prefix: str, limit: int) -> list[str]:
    """Up to `limit` ids of `table` (tasks or workflows) starting with
    `prefix`, in id order: a range over the primary key's index, not a scan."""
    rows = conn.execute(
        f"SELECT id FROM {table} WHERE id >= ? AND id < ? ORDER BY id LIMIT ?",
        (prefix, prefix + _ID_CEILING, limit),
    )
    return [row[0] for row in rows]
