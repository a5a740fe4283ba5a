"""The running state digest: equal to a recomputation from every row after
inserts, updates and deletes once flushed, independent of write order,
rewound with a rolled-back savepoint, rebuilt when a migration changes a
table's columns, carried over when only the triggers' style changes, and
kept right for the task table hashed in two parts whatever an update sets;
and the bytes a row is hashed over stay what they are (every node of a
cluster, whatever its Python, must hash a row alike)."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

from cortex.state import digest
from cortex.state.schema import connect


def _db(path: Path) -> sqlite3.Connection:
    conn = connect(str(path))
    conn.execute("CREATE TABLE things (id TEXT PRIMARY KEY, n INTEGER, x REAL, note TEXT)")
    digest.install(conn, ["things"])
    return conn


def _write(
    conn: sqlite3.Connection, sql: str, rows: list[tuple[object, ...]] | None = None
) -> None:
    """One write in its own transaction, its digest change flushed with it."""
    conn.execute("BEGIN")
    if rows is not None:
        conn.executemany(sql, rows)
    else:
        conn.execute(sql)
    digest.flush(conn)
    conn.execute("COMMIT")


def test_the_running_digest_follows_every_write(tmp_path: Path) -> None:
    conn = _db(tmp_path / "a.db")
    empty = digest.stored_digest(conn)
    _write(conn, "INSERT INTO things VALUES ('a', 1, 0.5, NULL), ('b', 2, 1e300, 'é\\x00')")
    assert digest.stored_digest(conn) == digest.full_digest(conn, ["things"]) != empty
    _write(conn, "UPDATE things SET n = n + 1, note = 'changed' WHERE id = 'a'")
    assert digest.stored_digest(conn) == digest.full_digest(conn, ["things"])
    _write(conn, "DELETE FROM things")
    assert digest.stored_digest(conn) == empty


def test_the_same_rows_written_in_another_order_give_the_same_digest(tmp_path: Path) -> None:
    a, b = _db(tmp_path / "a.db"), _db(tmp_path / "b.db")
    rows = [(f"r{i}", i, i / 3, str(i) * i) for i in range(50)]
    _write(a, "INSERT INTO things VALUES (?,?,?,?)", rows)
    _write(b, "INSERT INTO things VALUES (?,?,?,?)", rows[::-1])
    _write(b, "UPDATE things SET n = -1 WHERE id = 'r7'")
    assert digest.stored_digest(a) != digest.stored_digest(b)
    _write(b, "UPDATE things SET n = 7 WHERE id = 'r7'")
    assert digest.stored_digest(a) == digest.stored_digest(b)


def test_values_that_print_alike_hash_apart(tmp_path: Path) -> None:
    conn = _db(tmp_path / "a.db")
    _write(conn, "INSERT INTO things VALUES ('a', 1, NULL, 'x')")
    one = digest.stored_digest(conn)
    _write(conn, "UPDATE things SET n = NULL, note = '1x' WHERE id = 'a'")
    assert digest.stored_digest(conn) != one
    _write(conn, "UPDATE things SET n = NULL, x = 1.0, note = 'x' WHERE id = 'a'")
    assert digest.stored_digest(conn) != one


def test_a_new_column_rebuilds_the_triggers_and_the_sum(tmp_path: Path) -> None:
    conn = _db(tmp_path / "a.db")
    _write(conn, "INSERT INTO things VALUES ('a', 1, 0.5, NULL)")
    before = digest.stored_digest(conn)
    conn.execute("ALTER TABLE things ADD COLUMN extra TEXT NOT NULL DEFAULT 'd'")
    digest.install(conn, ["things"])
    assert digest.stored_digest(conn) == digest.full_digest(conn, ["things"]) != before
    _write(conn, "INSERT INTO things (id, n) VALUES ('b', 2)")
    assert digest.stored_digest(conn) == digest.full_digest(conn, ["things"])


def test_unflushed_writes_leave_the_stored_sum_alone(tmp_path: Path) -> None:
    conn = _db(tmp_path / "a.db")
    empty = digest.stored_digest(conn)
    conn.execute("BEGIN")
    conn.execute("INSERT INTO things VALUES ('a', 1, NULL, 'x')")
    assert digest.stored_digest(conn) == empty
    digest.flush(conn)
    conn.execute("COMMIT")
    assert digest.stored_digest(conn) == digest.full_digest(conn, ["things"]) != empty


def test_a_rolled_back_savepoint_rewinds_the_pending_change(tmp_path: Path) -> None:
    conn = _db(tmp_path / "a.db")
    conn.execute("BEGIN")
    conn.execute("INSERT INTO things VALUES ('a', 1, NULL, 'x')")
    marked = digest.mark(conn)
    conn.execute("SAVEPOINT one")
    conn.execute("INSERT INTO things VALUES ('b', 2, NULL, 'y')")
    conn.execute("UPDATE things SET n = 5 WHERE id = 'a'")
    conn.execute("ROLLBACK TO one")
    conn.execute("RELEASE one")
    digest.rewind(conn, marked)
    digest.flush(conn)
    conn.execute("COMMIT")
    assert digest.stored_digest(conn) == digest.full_digest(conn, ["things"])


def test_a_rolled_back_transaction_is_discarded(tmp_path: Path) -> None:
    conn = _db(tmp_path / "a.db")
    conn.execute("BEGIN")
    conn.execute("INSERT INTO things VALUES ('a', 1, NULL, 'x')")
    conn.execute("ROLLBACK")
    digest.discard(conn)
    _write(conn, "INSERT INTO things VALUES ('b', 2, NULL, 'y')")
    assert digest.stored_digest(conn) == digest.full_digest(conn, ["things"])


def test_triggers_of_the_older_style_are_replaced_and_the_sum_kept(tmp_path: Path) -> None:
    """A database whose triggers rewrote the stored sum row by row: they keep
    working until `install` replaces them, which keeps the sum as it is."""
    conn = _db(tmp_path / "a.db")
    for kind, call in (
        ("insert", "cortex_digest_add(value, 'things', NEW.id, NEW.n, NEW.x, NEW.note)"),
        ("update", "cortex_digest_swap(value, 'things', OLD.id, OLD.n, OLD.x, OLD.note,"
                   " NEW.id, NEW.n, NEW.x, NEW.note)"),
        ("delete", "cortex_digest_sub(value, 'things', OLD.id, OLD.n, OLD.x, OLD.note)"),
    ):  # fmt: skip
        conn.execute(f"DROP TRIGGER digest_things_{kind}")
        conn.execute(
            f"CREATE TRIGGER digest_things_{kind} AFTER {kind.upper()} ON things BEGIN"
            f" UPDATE state_digest SET value = {call} WHERE id = 1; END"
        )
    conn.execute("UPDATE state_digest SET columns = json_remove(columns, '$.triggers')")
    conn.execute("INSERT INTO things VALUES ('a', 1, 0.5, NULL), ('b', 2, NULL, 'x')")
    conn.execute("UPDATE things SET n = 3 WHERE id = 'a'")
    conn.execute("DELETE FROM things WHERE id = 'b'")
    assert digest.stored_digest(conn) == digest.full_digest(conn, ["things"])
    conn.execute("UPDATE state_digest SET value = ? WHERE id = 1", ("0" * 64,))
    digest.install(conn, ["things"])
    assert digest.stored_digest(conn) == "0" * 64  # kept, not recomputed
    sql = "SELECT sql FROM sqlite_master WHERE name = 'digest_things_insert'"
    assert "cortex_digest_row_add" in conn.execute(sql).fetchone()[0]


def test_a_table_hashed_in_two_parts_follows_updates_of_either_part(tmp_path: Path) -> None:
    """The task table hashes its set-once columns (here `spec`, `priority`)
    apart from the rest; an update setting either part, both, or the key
    keeps the running sum equal to a recomputation, and only the changed
    part's trigger runs."""
    conn = connect(str(tmp_path / "a.db"))
    conn.execute(
        "CREATE TABLE tasks (id TEXT PRIMARY KEY, state TEXT, spec TEXT, priority INTEGER,"
        " updated_at INTEGER)"
    )
    digest.install(conn, ["tasks"])
    empty = digest.stored_digest(conn)
    _write(conn, "INSERT INTO tasks VALUES ('a', 'queued', '{\"x\": 1}', 5, 1),"
                 " ('b', 'queued', '{}', 1, 1)")  # fmt: skip
    seen = {empty, digest.stored_digest(conn)}
    for update in (
        "UPDATE tasks SET state = 'running', updated_at = 2 WHERE id = 'a'",
        "UPDATE tasks SET spec = '{\"x\": 2}' WHERE id = 'a'",
        "UPDATE tasks SET priority = 9, state = 'done' WHERE id = 'b'",
        "UPDATE tasks SET id = 'c' WHERE id = 'a'",
    ):
        _write(conn, update)
        assert digest.stored_digest(conn) == digest.full_digest(conn, ["tasks"]), update
        seen.add(digest.stored_digest(conn))
    assert len(seen) == 6  # every write changed the digest
    # The same row with a part's values moved to the other part is another row.
    _write(conn, "UPDATE tasks SET state = '{}', spec = 'done' WHERE id = 'b'")
    assert digest.stored_digest(conn) not in seen
    _write(conn, "DELETE FROM tasks")
    assert digest.stored_digest(conn) == empty
    triggers = {
        row[0]
        for row in conn.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'tasks'"
        )
    }
    assert any("UPDATE OF id, spec, priority" in sql for sql in triggers), triggers
    assert any("UPDATE OF id, state, updated_at" in sql for sql in triggers), triggers


def test_the_bytes_a_row_is_hashed_over_are_pinned() -> None:
    """marshal's version 2 of the row's tuple: a change to it (a Python
    writing it otherwise) would split the digests of a cluster's nodes on
    different Pythons, so it must show here first."""
    row = ("t", 1, 1.0, "1", None, b"1", 2**40, -5, "\u00e9\x00x")
    assert digest.encode_row(row) == (
        b"(\t\x00\x00\x00u\x01\x00\x00\x00ti\x01\x00\x00\x00g\x00\x00\x00\x00\x00\x00\xf0?"
        b"u\x01\x00\x00\x001Ns\x01\x00\x00\x001l\x03\x00\x00\x00\x00\x00\x00\x00\x00\x04"
        b"i\xfb\xff\xff\xffu\x04\x00\x00\x00\xc3\xa9\x00x"
    )


def test_equal_values_encode_alike_whatever_their_identity() -> None:
    """An interned string, a string made at run time and one object used
    twice in a row all give the same bytes: nothing depends on which object
    SQLite or the interpreter happened to hand over."""
    made = "".join(["ta", "sks"])
    assert made is not sys.intern("tasks")
    assert digest.encode_row((sys.intern("tasks"), 1)) == digest.encode_row((made, 1))
    shared = "".join(["x", "y"])
    assert digest.encode_row(("t", shared, shared)) == digest.encode_row(
        ("t", shared, "".join("xy"))
    )


def test_a_database_hashed_with_an_older_encoding_is_recomputed(tmp_path: Path) -> None:
    """A node's first start on a release with a new row encoding: the stored
    sum (made with the old one) is replaced by a recomputation."""
    conn = _db(tmp_path / "a.db")
    _write(conn, "INSERT INTO things VALUES ('a', 1, 0.5, NULL), ('b', 2, NULL, 'x')")
    current = digest.stored_digest(conn)
    conn.execute(
        "UPDATE state_digest SET value = ?, columns = json_set(columns, '$.encoding', 3)",
        ("0" * 64,),
    )
    digest.install(conn, ["things"])
    assert digest.stored_digest(conn) == current == digest.full_digest(conn, ["things"])
