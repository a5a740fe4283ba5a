"""The state digest: a hash over every row of the replicated tables, kept up to
date as apply writes them, so reading it costs nothing however large the
state grows.

It is an additive multiset hash (AdHash): the sum, modulo 2^256, of a SHA-256
per row over a canonical encoding of the table name and the row's values in
column order: marshal's version 2 of the tuple, typed and length-prefixed (an
int, a float and a string that print alike stay apart: 1, 1.0, "1"), without
the references later versions make of an object used twice, so equal values
give equal bytes whatever their identity; written in C, it encodes a task's
set-once part in about 1 us where a JSON array took about 4
(`tests/unit/test_state_digest.py` pins its bytes). Two databases holding the
same rows have the same digest, whatever the order they were written in.

A table may hash its rows in two parts, each under its own label: the task
table's columns that are written once, at submission (its spec, policies,
labels, workflow position...), apart from those its transitions change
(state, attempt, times, result). Both parts carry the row's primary key. An
update then swaps only the parts whose columns it sets (`UPDATE OF`), so a
task moving through its states does not hash its spec twice per move.

SQLite triggers on each replicated table call SQL functions registered on the
connection: they add a row's hash on insert, subtract it on delete and swap
the old row's for the new one's on update. The change is gathered in the
connection's `Pending` delta, in memory, and `flush` adds it to the stored sum
in the same transaction (apply flushes once per batch; a savepoint rolled back
rewinds the delta to its `mark`, a transaction rolled back `discard`s it).
Writing the sum once per batch instead of once per row is most of what the
digest used to cost. `full_digest` recomputes the sum from scratch, which
tests compare with the running one. The triggers follow the tables' columns:
after a migration changes them they are recreated and the sum recomputed."""

from __future__ import annotations

import hashlib
import json
import logging
import marshal
import sqlite3
import time
from typing import Any

log = logging.getLogger(__name__)

_MOD = 1 << 256
# The functions the triggers call: each adds to the connection's pending delta.
_ADD = "cortex_digest_row_add"
_SUB = "cortex_digest_row_sub"
_SWAP = "cortex_digest_row_swap"
# All three, for whoever replaces them (`scripts/bench_apply.py --anatomy`).
ROW_FUNCTIONS = (_ADD, _SUB, _SWAP)
# What triggers made before the pending delta call: they rewrite the stored sum
# row by row. Kept registered so such triggers still work while an older
# database's migrations run, before `install` replaces them.
_LEGACY_ADD = "cortex_digest_add"
_LEGACY_SUB = "cortex_digest_sub"
_LEGACY_SWAP = "cortex_digest_swap"
# The row encoding: part of the triggers' signature, so a new encoding
# rebuilds the triggers and recomputes the sum (3: tasks in two parts; 4:
# marshal instead of a JSON array).
_ENCODING = 4
# marshal's format without references (version 3 added them): the same
# values always make the same bytes.
_MARSHAL_VERSION = 2
# How the triggers carry a row's hash (3: to the pending delta). A new style
# rebuilds the triggers but keeps the sum, which does not depend on it.
_TRIGGERS = 3
_TABLE = "state_digest"
# Columns written when a row is inserted and seldom after, hashed apart from
# the rest (see above); any column may still be updated.
_SET_ONCE: dict[str, frozenset[str]] = {
    "tasks": frozenset({
        "workflow_id", "workflow_key", "type", "priority", "spec", "constraints",
        "retry_policy", "timeout_ms", "labels", "idempotency_key", "created_at",
        "submit_index", "workflow_pos", "condition", "traceparent", "concurrency_key",
        "fairness_key",
    }),
}  # fmt: skip
_SET_ONCE_LABEL = ":set-once"


# A column's value as SQLite hands it over.
SqlValue = int | float | str | bytes | None


def encode_row(row: tuple[SqlValue, ...]) -> bytes:
    """The bytes hashed for `row`: its label (the table's name, or a part's)
    followed by its values, as SQLite gives them (int, float, str, bytes or
    None)."""
    return marshal.dumps(row, _MARSHAL_VERSION)


def _row_hash(row: tuple[SqlValue, ...]) -> int:
    return int.from_bytes(hashlib.sha256(encode_row(row)).digest(), "big")


def row_hash(table: str, values: tuple[SqlValue, ...]) -> int:
    return _row_hash((table, *values))


class Pending:
    """The digest change a connection's writes made since its last `flush`.
    The triggers call it with the row's label first, then its values."""

    __slots__ = ("delta",)

    def __init__(self) -> None:
        self.delta = 0

    def add(self, *row: SqlValue) -> None:
        self.delta += _row_hash(row)

    def sub(self, *row: SqlValue) -> None:
        self.delta -= _row_hash(row)

    def swap(self, table: str, *values: SqlValue) -> None:
        """An updated row: its old values (the first half) out, its new ones in."""
        half = len(values) // 2
        self.delta += _row_hash((table, *values[half:])) - _row_hash((table, *values[:half]))


class DigestConnection(sqlite3.Connection):
    """A connection that carries its pending digest delta."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.digest_pending = Pending()


def _pending(conn: sqlite3.Connection) -> Pending:
    pending = getattr(conn, "digest_pending", None)
    if not isinstance(pending, Pending):
        raise TypeError("the digest needs a DigestConnection (cortex.state.schema.connect)")
    return pending


def _shifted(current: str, delta: int) -> str:
    return format((int(current, 16) + delta) % _MOD, "064x")


def _legacy_add(current: str, table: str, *values: SqlValue) -> str:
    return _shifted(current, row_hash(table, values))


def _legacy_sub(current: str, table: str, *values: SqlValue) -> str:
    return _shifted(current, -row_hash(table, values))


def _legacy_swap(current: str, table: str, *values: SqlValue) -> str:
    half = len(values) // 2
    return _shifted(current, row_hash(table, values[half:]) - row_hash(table, values[:half]))


def register_functions(conn: sqlite3.Connection) -> None:
    """The functions the triggers call; every connection that writes needs them
    (and must be a `DigestConnection`)."""
    pending = _pending(conn)
    # Not declared deterministic: each call has an effect, so SQLite must
    # never fold two calls with the same arguments into one.
    conn.create_function(_ADD, -1, pending.add)
    conn.create_function(_SUB, -1, pending.sub)
    conn.create_function(_SWAP, -1, pending.swap)
    conn.create_function(_LEGACY_ADD, -1, _legacy_add, deterministic=True)
    conn.create_function(_LEGACY_SUB, -1, _legacy_sub, deterministic=True)
    conn.create_function(_LEGACY_SWAP, -1, _legacy_swap, deterministic=True)


def mark(conn: sqlite3.Connection) -> int:
    """The pending delta, to `rewind` to when a savepoint is rolled back."""
    return _pending(conn).delta


def rewind(conn: sqlite3.Connection, marked: int) -> None:
    _pending(conn).delta = marked


def discard(conn: sqlite3.Connection) -> None:
    """The transaction was rolled back: its rows' hashes go with it."""
    _pending(conn).delta = 0


def flush(conn: sqlite3.Connection) -> None:
    """Adds the pending delta to the stored sum; call it inside the transaction
    that made the writes, before it commits."""
    pending = _pending(conn)
    if pending.delta:
        current = stored_digest(conn)
        conn.execute(
            f"UPDATE {_TABLE} SET value = ? WHERE id = 1", (_shifted(current, pending.delta),)
        )
        pending.delta = 0


def _parts(conn: sqlite3.Connection, table: str) -> list[tuple[str, list[str]]]:
    """The labels a table's rows are hashed under, each with its columns in
    table order: the table's name with every column, or, for a table with
    set-once columns, its name with the rest and `table:set-once` with those,
    both parts led by the primary key."""
    info = list(conn.execute(f"PRAGMA table_info({table})"))
    columns = [row[1] for row in info]
    set_once = _SET_ONCE.get(table, frozenset()) & set(columns)
    if not set_once:
        return [(table, columns)]
    key = [row[1] for row in sorted(info, key=lambda row: row[5]) if row[5] > 0]
    changing = [c for c in columns if c not in set_once]
    once = key + [c for c in columns if c in set_once]
    return [(table, changing), (table + _SET_ONCE_LABEL, once)]


def full_digest(conn: sqlite3.Connection, tables: list[str]) -> str:
    """The digest recomputed from every row."""
    total = 0
    for table in tables:
        for label, columns in _parts(conn, table):
            for row in conn.execute(f"SELECT '{label}', {', '.join(columns)} FROM {table}"):
                total += _row_hash(tuple(row))
    return format(total % _MOD, "064x")


def stored_digest(conn: sqlite3.Connection) -> str:
    row = conn.execute(f"SELECT value FROM {_TABLE} WHERE id = 1").fetchone()
    return str(row[0])


def _create_triggers(
    conn: sqlite3.Connection, table: str, parts: list[tuple[str, list[str]]]
) -> None:
    """The table's digest triggers, replacing any earlier ones: an insert
    adds every part, a delete subtracts them, and an update swaps each part
    whose columns it sets (every update, for a table hashed whole)."""
    for (name,) in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = ?"
        " AND name LIKE 'digest\\_%' ESCAPE '\\'",
        (table,),
    ).fetchall():
        conn.execute(f"DROP TRIGGER {name}")

    def values(prefix: str, columns: list[str]) -> str:
        return ", ".join(f"{prefix}.{c}" for c in columns)

    for kind, function, prefix in (("INSERT", _ADD, "NEW"), ("DELETE", _SUB, "OLD")):
        body = " ".join(
            f"SELECT {function}('{label}', {values(prefix, columns)});" for label, columns in parts
        )
        conn.execute(
            f"CREATE TRIGGER digest_{table}_{kind.lower()} AFTER {kind} ON {table} BEGIN {body} END"
        )
    for number, (label, columns) in enumerate(parts):
        name = f"digest_{table}_update" + (f"_{number}" if number else "")
        of = f" OF {', '.join(columns)}" if len(parts) > 1 else ""
        swap = f"{_SWAP}('{label}', {values('OLD', columns)}, {values('NEW', columns)})"
        conn.execute(f"CREATE TRIGGER {name} AFTER UPDATE{of} ON {table} BEGIN SELECT {swap}; END")


def install(conn: sqlite3.Connection, tables: list[str], recompute: bool = False) -> None:
    """Creates or recreates the triggers when they are not the ones made for the
    tables' columns and this module's style, and recomputes the sum when the
    columns or the row encoding changed (or `recompute`: a migration wrote
    rows). Whatever the connection's writes left pending is dropped: the sum
    is either still right (the older triggers kept it) or recomputed."""
    discard(conn)
    # As JSON holds it, to compare with the stored one (lists, not tuples).
    layout = json.loads(
        json.dumps({"encoding": _ENCODING, **{table: _parts(conn, table) for table in tables}})
    )
    signature = json.dumps({**layout, "triggers": _TRIGGERS}, sort_keys=True)
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {_TABLE} (id INTEGER PRIMARY KEY CHECK (id = 1),"
        " value TEXT NOT NULL, columns TEXT NOT NULL)"
    )
    row = conn.execute(f"SELECT value, columns FROM {_TABLE} WHERE id = 1").fetchone()
    if row is not None and row[1] == signature and not recompute:
        return
    stored_layout = json.loads(row[1]) if row is not None else {}
    stored_layout.pop("triggers", None)
    keep_sum = row is not None and stored_layout == layout and not recompute
    conn.execute("BEGIN IMMEDIATE")
    try:
        for table in tables:
            _create_triggers(conn, table, _parts(conn, table))
        if keep_sum:
            value = str(row[0])
        else:
            # Once per change of the tables' columns or the encoding: a large
            # state takes a while (every row is read), so say so.
            if row is not None:
                log.info("recomputing the state digest for a new row layout (reads every row)")
            began = time.monotonic()
            value = full_digest(conn, tables)
            if row is not None:
                log.info("state digest recomputed in %.1f s", time.monotonic() - began)
        conn.execute(
            f"INSERT INTO {_TABLE} (id, value, columns) VALUES (1, ?, ?) ON CONFLICT(id)"
            " DO UPDATE SET value = excluded.value, columns = excluded.columns",
            (value, signature),
        )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    finally:
        discard(conn)
