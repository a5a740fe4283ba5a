"""Keyset paging for the listings: a page continues after the last item of
the previous one, by its (submit_index, id), so rows inserted meanwhile never
repeat or shift an item (as an offset would)."""

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
    direction, beyond = ("DESC", "<") if newest_first else ("ASC", ">")
    order = f"ORDER BY submit_index {direction}, id {direction}"
    if not after:
        return "", [], order
    return f"(submit_index, id) {beyond} (?, ?)", [after.submit_index, after.id], order


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
