"""The state digest: a hash over every row of the replicated tables, kept up to
date as apply writes them, so reading it costs nothing however large the
state grows.

It is an additive multiset hash (AdHash): the sum, modulo 2^256, of a SHA-256
per row over a canonical encoding (an ASCII JSON array) of the table name and
the row's values in column order. Two databases holding the same rows have the
same digest, whatever the order they were written in. SQLite triggers on each
replicated table add a row's hash on insert, subtract it on delete and swap the
old row's for the new one's on update, through SQL functions registered on every connection; `full_digest`
recomputes the sum from scratch, which tests compare with the running one.
The triggers follow the tables' columns: after a migration changes them they
are recreated and the sum recomputed."""

from __future__ import annotations

import hashlib
import json
import sqlite3

_MOD = 1 << 256
_ADD = "cortex_digest_add"
_SUB = "cortex_digest_sub"
_SWAP = "cortex_digest_swap"
# Part of the triggers' signature: a new row encoding rebuilds them and the sum.
_ENCODING = 2
_TABLE = "state_digest"


def _blob(value: object) -> dict[str, str]:
    if isinstance(value, bytes):
        return {"b": value.hex()}
    raise TypeError(f"unexpected column value of type {type(value).__name__}")


# JSON in C: a row is encoded as an array of the table name and its values.
# ASCII-only output and Python's shortest float repr keep it the same on every
# platform and Python version; an int, a float and a string that print alike
# stay apart (1, 1.0, "1"), and a BLOB becomes an object no other value can.
_ROW_ENCODER = json.JSONEncoder(ensure_ascii=True, separators=(",", ":"), default=_blob)


def _encode(table: str, values: tuple[object, ...]) -> bytes:
    return _ROW_ENCODER.encode([table, *values]).encode("ascii")


def row_hash(table: str, values: tuple[object, ...]) -> int:
    return int.from_bytes(hashlib.sha256(_encode(table, values)).digest(), "big")


def _add(current: str, table: str, *values: object) -> str:
    return format((int(current, 16) + row_hash(table, values)) % _MOD, "064x")


def _sub(current: str, table: str, *values: object) -> str:
    return format((int(current, 16) - row_hash(table, values)) % _MOD, "064x")


def _swap(current: str, table: str, *values: object) -> str:
    """An updated row: its old values (the first half) out, its new ones in."""
    half = len(values) // 2
    delta = row_hash(table, values[half:]) - row_hash(table, values[:half])
    return format((int(current, 16) + delta) % _MOD, "064x")


def register_functions(conn: sqlite3.Connection) -> None:
    """The functions the triggers call; every connection that writes needs them."""
    conn.create_function(_ADD, -1, _add, deterministic=True)
    conn.create_function(_SUB, -1, _sub, deterministic=True)
    conn.create_function(_SWAP, -1, _swap, deterministic=True)


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]


def full_digest(conn: sqlite3.Connection, tables: list[str]) -> str:
    """The digest recomputed from every row."""
    total = 0
    for table in tables:
        for row in conn.execute(f"SELECT * FROM {table}"):
            total += row_hash(table, tuple(row))
    return format(total % _MOD, "064x")


def stored_digest(conn: sqlite3.Connection) -> str:
    row = conn.execute(f"SELECT value FROM {_TABLE} WHERE id = 1").fetchone()
    return str(row[0])


def install(conn: sqlite3.Connection, tables: list[str]) -> None:
    """Creates or recreates the triggers when the tables' columns are not the
    ones they were made for, and then recomputes the sum."""
    signature = json.dumps(
        {"encoding": _ENCODING, **{table: _columns(conn, table) for table in tables}},
        sort_keys=True,
    )
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {_TABLE} (id INTEGER PRIMARY KEY CHECK (id = 1),"
        " value TEXT NOT NULL, columns TEXT NOT NULL)"
    )
    row = conn.execute(f"SELECT columns FROM {_TABLE} WHERE id = 1").fetchone()
    if row is not None and row[0] == signature:
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        for table in tables:
            new = ", ".join(f"NEW.{c}" for c in _columns(conn, table))
            old = ", ".join(f"OLD.{c}" for c in _columns(conn, table))
            update = f"UPDATE {_TABLE} SET value = "
            for kind, expression in (
                ("INSERT", f"{_ADD}(value, '{table}', {new})"),
                ("DELETE", f"{_SUB}(value, '{table}', {old})"),
                ("UPDATE", f"{_SWAP}(value, '{table}', {old}, {new})"),
            ):
                name = f"digest_{table}_{kind.lower()}"
                conn.execute(f"DROP TRIGGER IF EXISTS {name}")
                conn.execute(
                    f"CREATE TRIGGER {name} AFTER {kind} ON {table} BEGIN"
                    f" {update}{expression} WHERE id = 1; END"
                )
        conn.execute(
            f"INSERT INTO {_TABLE} (id, value, columns) VALUES (1, ?, ?) ON CONFLICT(id)"
            " DO UPDATE SET value = excluded.value, columns = excluded.columns",
            (full_digest(conn, tables), signature),
        )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
