"""Queries over a list of values longer than one statement should bind:
the list goes in chunks of `CHUNK`, each its own `IN (...)`."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any

# SQLite's default limit on bound parameters is 999 on old builds.
CHUNK = 500


def select_in(
    conn: sqlite3.Connection | sqlite3.Cursor,
    sql: str,
    values: Sequence[Any],
    before: tuple[Any, ...] = (),
) -> Iterator[Any]:
    """The rows `sql` selects for each chunk of `values`, lazily. `sql` holds
    `{}` where the chunk's placeholders go (`... IN ({})`); `before` binds
    the parameters ahead of them."""
    for start in range(0, len(values), CHUNK):
        chunk = values[start : start + CHUNK]
        # Not `yield from`: closing a generator left early would close the
        # cursor it delegates to, and apply's cursor is shared.
        for row in conn.execute(sql.format(",".join("?" * len(chunk))), (*before, *chunk)):  # noqa: UP028
            yield row
