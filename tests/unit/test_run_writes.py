"""How a run writes its held rows (`cortex.state.runs.Run.flush`): inserts
go in statements of many rows, which must leave exactly what one statement
a row leaves: the same rows, in the same order (rowids), with each row's
triggers fired in that order."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from typing import Any

import pytest

from cortex.state.runs import ROWS_PER_STATEMENT, Run

INSERT = "INSERT INTO items (name, size) VALUES (?, ?)"


class CountingCursor(sqlite3.Cursor):
    """Counts the statements run: each a step of SQLite's, and a moment the
    GIL is given up."""

    runs = 0

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        CountingCursor.runs += 1
        return super().execute(sql, parameters)

    def executemany(self, sql: str, seq: Iterable[Any], /) -> sqlite3.Cursor:
        rows = list(seq)
        CountingCursor.runs += len(rows)
        return super().executemany(sql, rows)


@pytest.fixture
def conn() -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.executescript(
        """
        CREATE TABLE items (seq INTEGER PRIMARY KEY, name TEXT NOT NULL, size INTEGER);
        CREATE TABLE fired (seq INTEGER PRIMARY KEY, name TEXT NOT NULL, total INTEGER);
        CREATE TRIGGER items_insert AFTER INSERT ON items BEGIN
            INSERT INTO fired (name, total) VALUES (NEW.name, (SELECT SUM(size) FROM items));
        END;
        """
    )
    yield conn
    conn.close()


def _written(conn: sqlite3.Connection) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    items = conn.execute("SELECT seq, name, size FROM items ORDER BY seq").fetchall()
    fired = conn.execute("SELECT seq, name, total FROM fired ORDER BY seq").fetchall()
    conn.execute("DELETE FROM items")
    conn.execute("DELETE FROM fired")
    return items, fired


@pytest.mark.parametrize("count", [1, 2, 3, 7, ROWS_PER_STATEMENT - 1, ROWS_PER_STATEMENT, 150])
def test_held_inserts_write_what_one_statement_a_row_writes(
    conn: sqlite3.Connection, count: int
) -> None:
    rows = [(f"item-{n}", None if n % 5 == 0 else n) for n in range(count)]
    for row in rows:
        conn.execute(INSERT, row)
    expected = _written(conn)
    run = Run(tasks={})
    for row in rows:
        run.hold(INSERT, row)
    CountingCursor.runs = 0
    run.flush(conn.cursor(factory=CountingCursor))
    assert _written(conn) == expected
    # Whole statements of the most rows, then one of each power of two the
    # rest holds: far fewer statements than rows.
    whole, rest = divmod(count, ROWS_PER_STATEMENT)
    assert CountingCursor.runs == whole + bin(rest).count("1")


def test_rows_per_statement_stay_within_sqlites_limit_on_parameters(
    conn: sqlite3.Connection,
) -> None:
    conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 9)  # four rows of two at most
    rows = [(f"item-{n}", n) for n in range(11)]
    run = Run(tasks={})
    for row in rows:
        run.hold(INSERT, row)
    run.flush(conn.cursor())
    items, fired = _written(conn)
    assert [(name, size) for _, name, size in items] == rows
    assert [name for _, name, _ in fired] == [name for name, _ in rows]


UPDATE = "UPDATE items SET size = ?, name = ? WHERE seq = ?"


def test_held_updates_by_distinct_keys_write_what_one_statement_a_row_writes(
    conn: sqlite3.Connection,
) -> None:
    conn.executescript(
        """
        CREATE TRIGGER items_update AFTER UPDATE OF size ON items BEGIN
            INSERT INTO fired (name, total) VALUES (NEW.name, OLD.size);
        END;
        """
    )
    count = 37
    original = [(f"item-{n}", n) for n in range(count)]
    updates = [(n * 10, f"new-{n}", n + 1) for n in reversed(range(0, count, 2))]
    for row in original:
        conn.execute(INSERT, row)
    for row in updates:
        conn.execute(UPDATE, row)
    expected = _written(conn)
    for row in original:
        conn.execute(INSERT, row)
    run = Run(tasks={})
    for row in updates:
        run.hold(UPDATE, row)
    CountingCursor.runs = 0
    run.flush(conn.cursor(factory=CountingCursor))
    items, fired = _written(conn)
    assert items == expected[0]
    # Each row's triggers fired once with its own values; in an order of
    # SQLite's choosing, which the digest and the task counts (sums) ignore.
    assert sorted(row[1:] for row in fired) == sorted(row[1:] for row in expected[1])
    assert CountingCursor.runs == bin(len(updates)).count("1")


def test_a_key_updated_twice_is_updated_in_order(conn: sqlite3.Connection) -> None:
    conn.executemany(INSERT, [("a", 1), ("b", 2)])
    run = Run(tasks={})
    for row in ((10, "a", 1), (20, "b", 2), (30, "a", 1)):
        run.hold(UPDATE, row)
    run.flush(conn.cursor())
    items, _ = _written(conn)
    assert [(name, size) for _, name, size in items] == [("a", 30), ("b", 20)]


def test_other_statements_are_written_a_row_at_a_time(conn: sqlite3.Connection) -> None:
    conn.executemany(INSERT, [("a", 1), ("b", 2), ("c", 3)])
    upsert = "INSERT INTO items (seq, name, size) VALUES (?, ?, ?) ON CONFLICT (seq) DO UPDATE SET size = excluded.size + items.size"
    run = Run(tasks={})
    for row in ((1, "a", 10), (4, "d", 4), (1, "a", 100)):
        run.hold(upsert, row)
    CountingCursor.runs = 0
    run.flush(conn.cursor(factory=CountingCursor))
    items, _ = _written(conn)
    assert [(name, size) for _, name, size in items] == [
        ("a", 111), ("b", 2), ("c", 3), ("d", 4),
    ]  # fmt: skip
    assert CountingCursor.runs == 3
