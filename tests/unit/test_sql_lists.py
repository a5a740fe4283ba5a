"""`select_in`: a list longer than one statement's chunk is read whole, with
parameters bound ahead of the list, and a reader that stops early leaves the
cursor it read through open (apply shares one cursor)."""

from __future__ import annotations

import sqlite3

from cortex.state.sql_lists import CHUNK, select_in


def _table() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (k TEXT, v INTEGER)")
    conn.executemany("INSERT INTO t VALUES (?, ?)", [("a", n) for n in range(3 * CHUNK)])
    conn.execute("INSERT INTO t VALUES ('b', 7)")
    return conn


def test_every_chunk_is_read_with_the_parameters_before_the_list() -> None:
    conn = _table()
    wanted = list(range(0, 3 * CHUNK, 2)) + [7]
    rows = list(select_in(conn, "SELECT v FROM t WHERE k = ? AND v IN ({})", wanted, ("a",)))
    assert sorted(v for (v,) in rows) == sorted(wanted)
    assert list(select_in(conn, "SELECT v FROM t WHERE k = ? AND v IN ({})", [7], ("b",))) == [(7,)]
    assert list(select_in(conn, "SELECT v FROM t WHERE v IN ({})", [])) == []


def test_stopping_early_leaves_the_cursor_open() -> None:
    cur = _table().cursor()
    rows = select_in(cur, "SELECT v FROM t WHERE v IN ({})", list(range(2 * CHUNK)))
    assert next(rows) is not None
    rows.close()
    assert cur.execute("SELECT COUNT(*) FROM t").fetchone() == (3 * CHUNK + 1,)
