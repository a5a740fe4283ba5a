"""The running state digest: equal to a recomputation from every row after
inserts, updates and deletes, independent of write order, and rebuilt when
a migration changes a table's columns."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from cortex.state import digest
from cortex.state.schema import connect


def _db(path: Path) -> sqlite3.Connection:
    conn = connect(str(path))
    conn.execute("CREATE TABLE things (id TEXT PRIMARY KEY, n INTEGER, x REAL, note TEXT)")
    digest.install(conn, ["things"])
    return conn


def test_the_running_digest_follows_every_write(tmp_path: Path) -> None:
    conn = _db(tmp_path / "a.db")
    empty = digest.stored_digest(conn)
    conn.execute("INSERT INTO things VALUES ('a', 1, 0.5, NULL), ('b', 2, 1e300, 'é\\x00')")
    assert digest.stored_digest(conn) == digest.full_digest(conn, ["things"]) != empty
    conn.execute("UPDATE things SET n = n + 1, note = 'changed' WHERE id = 'a'")
    assert digest.stored_digest(conn) == digest.full_digest(conn, ["things"])
    conn.execute("DELETE FROM things")
    assert digest.stored_digest(conn) == empty


def test_the_same_rows_written_in_another_order_give_the_same_digest(tmp_path: Path) -> None:
    a, b = _db(tmp_path / "a.db"), _db(tmp_path / "b.db")
    rows = [(f"r{i}", i, i / 3, str(i) * i) for i in range(50)]
    a.executemany("INSERT INTO things VALUES (?,?,?,?)", rows)
    b.executemany("INSERT INTO things VALUES (?,?,?,?)", reversed(rows))
    b.execute("UPDATE things SET n = -1 WHERE id = 'r7'")
    assert digest.stored_digest(a) != digest.stored_digest(b)
    b.execute("UPDATE things SET n = 7 WHERE id = 'r7'")
    assert digest.stored_digest(a) == digest.stored_digest(b)


def test_values_that_print_alike_hash_apart(tmp_path: Path) -> None:
    conn = _db(tmp_path / "a.db")
    conn.execute("INSERT INTO things VALUES ('a', 1, NULL, 'x')")
    one = digest.stored_digest(conn)
    conn.execute("UPDATE things SET n = NULL, note = '1x' WHERE id = 'a'")
    assert digest.stored_digest(conn) != one
    conn.execute("UPDATE things SET n = NULL, x = 1.0, note = 'x' WHERE id = 'a'")
    assert digest.stored_digest(conn) != one


def test_a_new_column_rebuilds_the_triggers_and_the_sum(tmp_path: Path) -> None:
    conn = _db(tmp_path / "a.db")
    conn.execute("INSERT INTO things VALUES ('a', 1, 0.5, NULL)")
    before = digest.stored_digest(conn)
    conn.execute("ALTER TABLE things ADD COLUMN extra TEXT NOT NULL DEFAULT 'd'")
    digest.install(conn, ["things"])
    assert digest.stored_digest(conn) == digest.full_digest(conn, ["things"]) != before
    conn.execute("INSERT INTO things (id, n) VALUES ('b', 2)")
    assert digest.stored_digest(conn) == digest.full_digest(conn, ["things"])
