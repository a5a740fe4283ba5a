"""Runs: task entries of one batch applied together.

Where several entries in a row of a batch submit, assign, start or complete
distinct standalone tasks (no workflow, no concurrency key), they form a
run. The task rows a run names are read in one query before it, and the
rows its handlers write are held and written when it ends, one
`executemany` per statement. The handlers are the ones every entry goes
through; only where they read and when they write differ. That is exact
because no entry of a run reads what another entry of it writes:

- each task is named once in a run, so no held write hides from a later
  read, and a submission in a run is of a task and an idempotency key that
  do not exist yet (both checked when the run is formed);
- the other reads left (a node's status) are of tables no entry of a run
  writes, and a standalone task without a key needs no workflow or limit
  read;
- held rows are written in the order they were made, so the event rows'
  sequence numbers and the task rows' ids are those of entry-by-entry
  application; the digest and the task counts are sums, whatever the order.

Held inserts go in statements of many rows each (`INSERT ... VALUES (...),
(...), ...`): SQLite inserts them one after the other and fires each row's
triggers as it goes, as for one statement a row. Held updates of rows by
their key go the same way (`UPDATE ... FROM (VALUES ...)`) when no key comes
twice: each row is updated once, with its own values, its triggers fired,
and the digest and the task counts are sums, so the order SQLite takes them
in does not matter. Either way Python gives up the GIL once per statement
instead of once per row. Each time it does, a busy thread of the node can
take it, and the Raft thread waits to win it back: with another thread
running Python half the time, apply cost a quarter more CPU
(`scripts/bench_handoff.py` shows what one such wait costs).

Runs are formed on the optimistic pass only: an entry refused sends the
whole batch back through the guarded pass, entry by entry. A run's reads
happen after every entry before it is applied (`split` is lazy)."""

from __future__ import annotations

import functools
import re
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from cortex.state import entries as e
from cortex.state.sql_lists import select_in

# Entries a run may hold.
MAX_RUN_ENTRIES = 1000
_TYPE_NAMES = frozenset(
    kind.TYPE for kind in (e.TaskSubmit, e.TaskAssign, e.TaskStarted, e.TaskComplete)
)
# A candidate entry: its payload and the tasks it names.
_Candidate = tuple[e.Payload, list[str]]
# Rows a statement of many rows writes at most (fewer when they would bind
# more parameters than SQLite allows); a power of two.
ROWS_PER_STATEMENT = 64
# An insert of one row whose values are all parameters: `INSERT ... VALUES (?, ?)`.
_ONE_ROW_INSERT = re.compile(r"(?s)(INSERT INTO .+ VALUES\s*)(\(\?(?:\s*,\s*\?)*\))\s*")
# An update of one row by its key, every value a parameter:
# `UPDATE t SET a = ?, b = ? WHERE id = ?`.
_ONE_ROW_UPDATE = re.compile(
    r"UPDATE (?P<table>\w+) SET (?P<columns>\w+ = \?(?:, \w+ = \?)*) WHERE (?P<key>\w+) = \?"
)
# SQLite's first release with UPDATE ... FROM.
_UPDATE_FROM = (3, 33, 0)
_INSERT, _UPDATE = "insert", "update"


@dataclass
class Run:
    """What a run's entries read, read once before it, and the writes they
    make, held until it ends."""

    # Rows of the tasks the run names, by id; a submitted task has none.
    tasks: dict[str, sqlite3.Row]
    node_statuses: dict[str, str | None] = field(default_factory=dict)
    _held: dict[str, list[tuple[Any, ...]]] = field(default_factory=dict)

    def hold(self, sql: str, params: tuple[Any, ...]) -> None:
        self._held.setdefault(sql, []).append(params)

    def flush(self, cur: sqlite3.Cursor) -> None:
        """Writes the held rows, statement by statement, each in the order made."""
        for sql, rows in self._held.items():
            _write(cur, sql, rows)
        self._held.clear()


def _write(cur: sqlite3.Cursor, sql: str, rows: list[tuple[Any, ...]]) -> None:
    """Rows of one statement, in order: an insert's, or an update's by
    distinct keys, in statements of as many rows as `_rows_per_statement`
    allows, and of halves of that for what is left (at most a few sizes of
    statement, each prepared once); any other statement's one row at a time."""
    shape = _shape(sql)
    if shape == _UPDATE and len({row[-1] for row in rows}) < len(rows):
        shape = None  # a key updated twice: in order, one statement a row
    most = _rows_per_statement(cur.connection, len(rows[0])) if shape and len(rows) > 1 else 1
    if most == 1:
        cur.executemany(sql, rows)
        return
    start = 0
    while start < len(rows):
        size = most
        while size > len(rows) - start:
            size //= 2
        chunk = rows[start : start + size]
        start += size
        if size == 1:
            cur.execute(sql, chunk[0])
        else:
            cur.execute(_many_rows(sql, size), [value for row in chunk for value in row])


@functools.cache
def _shape(sql: str) -> str | None:
    """`_INSERT` for an insert of one row of parameters, `_UPDATE` for an
    update of one row by its key (where this SQLite can update many rows
    from a list of values), None for any other statement."""
    if _ONE_ROW_INSERT.fullmatch(sql):
        return _INSERT
    if _ONE_ROW_UPDATE.fullmatch(sql) and sqlite3.sqlite_version_info >= _UPDATE_FROM:
        return _UPDATE
    return None


def _rows_per_statement(conn: sqlite3.Connection, columns: int) -> int:
    """How many rows of `columns` values one statement writes at most."""
    limit = conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
    fits = max(1, min(ROWS_PER_STATEMENT, limit // max(1, columns)))
    return 1 << (fits.bit_length() - 1)  # a power of two: see `_write`


@functools.cache
def _many_rows(sql: str, rows: int) -> str:
    """`sql`, an insert of one row of parameters or an update of one row
    by its key, made to write `rows`."""
    inserted = _ONE_ROW_INSERT.fullmatch(sql)
    if inserted is not None:
        return inserted.group(1) + ", ".join([inserted.group(2)] * rows)
    updated = _ONE_ROW_UPDATE.fullmatch(sql)
    assert updated is not None
    table, key = updated.group("table"), updated.group("key")
    columns = [part.split(" = ")[0] for part in updated.group("columns").split(", ")]
    values = "(" + ", ".join(["?"] * (len(columns) + 1)) + ")"
    return (
        f"UPDATE {table} SET "
        + ", ".join(f"{column} = v.column{n}" for n, column in enumerate(columns, start=1))
        + f" FROM (VALUES {', '.join([values] * rows)}) AS v"
        + f" WHERE {table}.{key} = v.column{len(columns) + 1}"
    )


@dataclass
class Part:
    """Consecutive items of a batch, with their payloads when decoded, and
    the run they form (None: applied entry by entry)."""

    items: list[e.Entry | e.EntryDecodeError]
    payloads: list[e.Payload | None]
    run: Run | None = None


def split(cur: sqlite3.Cursor, items: list[e.Entry | e.EntryDecodeError]) -> Iterator[Part]:
    """The batch's items in order, as runs and the parts between them. Lazy:
    each run's rows are read when it is asked for, after the parts before
    it were applied."""
    start = 0
    while start < len(items):
        end, candidates = _candidates(items, start)
        payloads: list[e.Payload | None] = [payload for payload, _ in candidates]
        if end - start < 2 and not _many_placements(payloads):
            yield Part(items[start : start + 1], payloads[:1] or [None])
            start += 1
            continue
        run, cut = _form(cur, candidates)
        if cut:
            yield Part(items[start : start + cut], payloads[:cut], run)
        # The rest was read for this run but would need reading again after
        # the entry that broke it: it goes entry by entry, so each item is
        # read for at most one run.
        if cut < len(payloads):
            yield Part(items[start + cut : end], payloads[cut:])
        start = end


def _candidates(
    items: list[e.Entry | e.EntryDecodeError], start: int
) -> tuple[int, list[_Candidate]]:
    """How far from `start` entries could form a run, judged from the
    entries alone (their types, payloads and the tasks and keys they name),
    and their decoded payloads with the tasks they name."""
    candidates: list[_Candidate] = []
    named: set[str] = set()
    keys: set[str] = set()
    end = start
    while end < len(items) and len(candidates) < MAX_RUN_ENTRIES:
        item = items[end]
        if isinstance(item, e.EntryDecodeError) or item.type not in _TYPE_NAMES:
            break
        try:
            payload = item.decode_payload()
        except e.EntryDecodeError:
            break
        ids = _named_tasks(payload)
        key = payload.idempotency_key if isinstance(payload, e.TaskSubmit) else None
        if (
            ids is None
            or len(set(ids)) != len(ids)
            or not named.isdisjoint(ids)
            or (key is not None and key in keys)
        ):
            break
        named.update(ids)
        if key is not None:
            keys.add(key)
        candidates.append((payload, ids))
        end += 1
    return end, candidates


def _named_tasks(payload: e.Payload) -> list[str] | None:
    """The tasks an entry names, or None when it cannot be in a run."""
    if isinstance(payload, e.TaskSubmit):
        return None if payload.workflow_id is not None else [payload.task_id]
    if isinstance(payload, e.TaskAssign):
        return [item.task_id for item in payload.items()]
    if isinstance(payload, (e.TaskStarted, e.TaskComplete)):
        return [payload.task_id]
    return None


def _many_placements(payloads: list[e.Payload | None]) -> bool:
    """A lone assignment round is worth a run when it places several tasks."""
    return (
        len(payloads) == 1
        and isinstance(payloads[0], e.TaskAssign)
        and len(payloads[0].assignments) > 1
    )


def _form(cur: sqlite3.Cursor, candidates: list[_Candidate]) -> tuple[Run, int]:
    """Reads the rows the candidates name; returns the run and how many of
    them it holds: up to the first whose tasks are not all standalone tasks
    without a key (or, for a submission, whose task or key exists)."""
    ids = [task_id for _, named in candidates for task_id in named]
    run = Run(
        tasks={
            row["id"]: row for row in select_in(cur, "SELECT * FROM tasks WHERE id IN ({})", ids)
        }
    )
    keys = [
        p.idempotency_key
        for p, _ in candidates
        if isinstance(p, e.TaskSubmit) and p.idempotency_key
    ]
    used = {
        key
        for (key,) in select_in(
            cur, "SELECT idempotency_key FROM submissions WHERE idempotency_key IN ({})", keys
        )
    }
    for number, (payload, named) in enumerate(candidates):
        if not _fits(run, used, payload, named):
            return run, number
    return run, len(candidates)


def _fits(run: Run, used: set[str], payload: e.Payload, named: list[str]) -> bool:
    if isinstance(payload, e.TaskSubmit):
        return payload.task_id not in run.tasks and payload.idempotency_key not in used
    for task_id in named:
        row = run.tasks.get(task_id)
        if row is None or row["workflow_id"] is not None or row["concurrency_key"] is not None:
            return False
    return True
