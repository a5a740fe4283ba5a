"""The replicated state machine: applies batches of entries to the node's
SQLite database, deterministically. An entry the state's own rules refuse is
recorded as rejected; anything else that goes wrong while applying is a local
fault, handed to `on_fault` (by default: stop the node) before the applied
index moves."""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar
from urllib.parse import quote

from cortex.failstop import stop_node
from cortex.state import created_spans, digest, runs
from cortex.state import entries as e
from cortex.state.digest import full_digest, stored_digest
from cortex.state.handlers import HANDLERS
from cortex.state.queries import TaskView, read_tasks
from cortex.state.reasons import ReasonCode
from cortex.state.schema import REPLICATED_TABLES, connect, migrate
from cortex.state.transitions import ApplyContext, Rejected, TaskChange
from cortex.state.workflow_transitions import settle_workflows

log = logging.getLogger(__name__)

T = TypeVar("T")
ChangeListener = Callable[[int, list[TaskChange]], None]
FaultHandler = Callable[[int, int, BaseException], NoReturn]


def stop_on_fault(index: int, applied: int, err: BaseException) -> NoReturn:
    stop_node(
        f"applying raft index {index} failed",
        err,
        f"Nothing of it was recorded; the applied index stays at {applied}. Fix the cause"
        " (free disk space, check the disk, memory), then start the node again: it replays"
        " the entry from its journal and catches up.",
    )


class _Refused(Exception):
    """An entry of a batch applied without savepoints was refused."""


class StateMachine:
    """Owns the writer connection. `apply_batch` is called only from the Raft
    thread; reads go through `cortex.state.queries` on their own connections."""

    def __init__(
        self,
        path: str,
        on_fault: FaultHandler = stop_on_fault,
        autocheckpoint_pages: int | None = None,
    ) -> None:
        """`autocheckpoint_pages`: the size of write-ahead log (in pages) past
        which a commit checkpoints it; SQLite's default (1,000) when None.
        A node sets it high and checkpoints from a thread of its own
        (`cortex.state.wal_checkpoints`)."""
        self.path = path
        self._on_fault = on_fault
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self._conn = connect(path)
        if autocheckpoint_pages is not None:
            self._conn.execute(f"PRAGMA wal_autocheckpoint={int(autocheckpoint_pages)}")
        migrate(self._conn)
        self._applied_index = self._read_applied_index()
        # The listeners that hand work off, then those added `last`.
        self._listeners: list[ChangeListener] = []
        self._handing_off = 0
        self._applied = threading.Condition()

    def _read_applied_index(self) -> int:
        row = self._conn.execute(
            "SELECT value FROM raft_meta WHERE key = 'applied_index'"
        ).fetchone()
        return int(row[0]) if row else 0

    @property
    def applied_index(self) -> int:
        return self._applied_index

    def add_listener(
        self, listener: ChangeListener, last: bool = False, first: bool = False
    ) -> None:
        """`listener(index, changes)` runs on the Raft thread after each commit;
        it must only hand work off (set an event, put on a queue). One that
        reads (`tasks_as_applied`) is added `last`: it runs after every
        listener that hands off, so it holds none of their work up. One
        added `first` runs before all others, for a read the others' work
        depends on (`cortex.scheduler.applied_view`): it must be short."""
        if first:
            self._listeners.insert(0, listener)
            self._handing_off += 1
        elif last:
            self._listeners.append(listener)
        else:
            self._listeners.insert(self._handing_off, listener)
            self._handing_off += 1

    def wait_applied(self, index: int, timeout: float) -> bool:
        with self._applied:
            return self._applied.wait_for(lambda: self._applied_index >= index, timeout)

    def apply_batch(self, index: int, data: bytes) -> list[dict[str, Any]] | None:
        """Applies one replicated batch at Raft index `index`. Returns one result
        per entry, or None when the index was already applied (journal replay)."""
        results = self.apply_batches(index, [data])
        return None if results is None else results[0]

    def apply_batches(self, index: int, batches: list[bytes]) -> list[list[dict[str, Any]]] | None:
        """Applies the batches a leader logged together at Raft index `index`
        (`cortex.raft.merging`) in order, in one transaction, as one batch
        of all their entries: each decoded on its own (a batch that cannot
        be decoded is refused alone). Returns each batch's results, or None
        when the index was already applied (journal replay)."""
        if index <= self._applied_index:
            return None
        changes: list[TaskChange] = []
        try:
            results = self._apply_in_transaction(index, batches, changes)
        except BaseException as err:
            log.debug("apply of index %d failed", index, exc_info=True)
            self._on_fault(index, self._applied_index, err)
        self._applied_index = index
        with self._applied:
            self._applied.notify_all()
        for listener in self._listeners:
            try:
                listener(index, changes)
            except Exception:
                log.exception("state change listener failed")
        return results

    def _apply_in_transaction(
        self, index: int, batches: list[bytes], changes: list[TaskChange]
    ) -> list[list[dict[str, Any]]]:
        """Applies the batches' entries first without a savepoint per entry,
        as almost no entry is refused; when one is, the transaction is rolled
        back and the entries applied again each under its own savepoint, so
        the refused entry's partial writes are undone and the others kept.
        Both passes are the same deterministic function of the batches and
        the state."""
        decoded = [e.decode_batch_scanned(data) for data in batches]
        items = [item for batch_items, _ in decoded for item in batch_items]
        plain_json = all(plain for _, plain in decoded)
        cur = self._conn.cursor()
        try:
            try:
                results = self._apply_entries(
                    cur, index, items, changes, guarded=False, plain_json=plain_json
                )
            except _Refused:
                cur.execute("ROLLBACK")
                digest.discard(self._conn)
                changes.clear()
                results = self._apply_entries(
                    cur, index, items, changes, guarded=True, plain_json=plain_json
                )
            created_spans.record(cur, index)
            digest.flush(self._conn)
            cur.execute(
                "INSERT INTO raft_meta (key, value) VALUES ('applied_index', ?)"
                " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (str(index),),
            )
            cur.execute("COMMIT")
        except BaseException:
            digest.discard(self._conn)
            if self._conn.in_transaction:
                try:
                    cur.execute("ROLLBACK")
                except sqlite3.Error:
                    log.debug("rollback failed", exc_info=True)
            raise
        split = []
        start = 0
        for batch_items, _ in decoded:
            split.append(results[start : start + len(batch_items)])
            start += len(batch_items)
        return split

    def _apply_entries(
        self,
        cur: sqlite3.Cursor,
        index: int,
        items: list[e.Entry | e.EntryDecodeError],
        changes: list[TaskChange],
        guarded: bool,
        plain_json: bool,
    ) -> list[dict[str, Any]]:
        """Applies the items in order: guarded, one by one; otherwise in runs
        where they form one (`cortex.state.runs`)."""
        cur.execute("BEGIN IMMEDIATE")
        if guarded:
            return [self._apply_entry(cur, index, item, changes, plain_json) for item in items]
        results = []
        for part in runs.split(cur, items):
            for item, payload in zip(part.items, part.payloads, strict=True):
                results.append(
                    self._apply_entry(
                        cur, index, item, changes, plain_json, False, payload, part.run
                    )
                )
            if part.run is not None:
                part.run.flush(cur)
        return results

    def _apply_entry(
        self,
        cur: sqlite3.Cursor,
        index: int,
        item: e.Entry | e.EntryDecodeError,
        changes: list[TaskChange],
        plain_json: bool,
        guarded: bool = True,
        payload: e.Payload | None = None,
        run: runs.Run | None = None,
    ) -> dict[str, Any]:
        """Applies one entry (its payload decoded already, or not). Unguarded,
        a refusal raises `_Refused` (the caller starts over guarded);
        guarded, the entry runs under a savepoint and a refusal undoes its
        writes and is recorded."""
        if isinstance(item, e.EntryDecodeError):
            entry = e.Entry(type=item.entry_type, id=item.entry_id, ts=0, node="", payload={})
            return self._reject(ApplyContext(cur, index, entry, changes), item.code, item.text)
        ctx = ApplyContext(cur, index, item, [], plain_json, run=run)
        if guarded:
            marked = digest.mark(self._conn)
            cur.execute("SAVEPOINT entry")
        try:
            if payload is None:
                payload = item.decode_payload()
            result = HANDLERS[type(payload)](ctx, payload)
            settle_workflows(ctx)
        except (Rejected, e.EntryDecodeError) as why:
            if not guarded:
                raise _Refused from None
            cur.execute("ROLLBACK TO entry")
            cur.execute("RELEASE entry")
            digest.rewind(self._conn, marked)
            return self._reject(ctx, why.code, why.text)
        # Anything else propagates: the whole batch rolls back and the node stops.
        if guarded:
            cur.execute("RELEASE entry")
        changes.extend(ctx.changes)
        return {"ok": True, **result}

    def tasks_as_applied(self, task_ids: list[str]) -> list[TaskView]:
        """The tasks among `task_ids` as the last applied batch left them,
        read on the writer's connection: for listeners only, which run on the
        applying thread between batches."""
        return read_tasks(self._conn, task_ids)

    def read_as_applied(self, read: Callable[[sqlite3.Connection], T]) -> T:
        """`read` run on the writer's connection, the state as the last
        applied batch left it: for listeners only, which run on the applying
        thread between batches."""
        return read(self._conn)

    @staticmethod
    def _reject(ctx: ApplyContext, code: ReasonCode, text: str) -> dict[str, Any]:
        """Records the refused entry as a `rejected` event (`detail.reason` is
        `"code: text"`, `detail.code` the code) naming its task if it has one."""
        task_id = ctx.entry.payload.get("task_id") if isinstance(ctx.entry.payload, dict) else None
        return ctx.rejected(task_id if isinstance(task_id, str) else None, code, text)

    def digest(self) -> str:
        """The state digest as of the applied index (kept up to date by apply)."""
        return stored_digest(self._conn)

    def restore_from(self, path: str, drop_tables: tuple[str, ...] = ()) -> None:
        """Replaces the whole database with the copy at `path` (a snapshot),
        read only, less `drop_tables` (what the copy holds besides the state)."""
        source = connect_read_only(path)
        try:
            source.backup(self._conn)
        finally:
            source.close()
        for table in drop_tables:
            self._conn.execute(f'DROP TABLE IF EXISTS "{table}"')
        migrate(self._conn)
        self._applied_index = self._read_applied_index()
        with self._applied:
            self._applied.notify_all()
        for listener in self._listeners:
            try:
                listener(self._applied_index, [])
            except Exception:
                log.exception("state change listener failed")

    def close(self) -> None:
        self._conn.close()


def state_digest(conn: sqlite3.Connection) -> str:
    """The state digest recomputed from every replicated row (see `digest`)."""
    return full_digest(conn, list(REPLICATED_TABLES))


def connect_read_only(path: str) -> sqlite3.Connection:
    """A connection that can only read the database file at `path` (a copy
    or a snapshot): it never writes to it."""
    return sqlite3.connect(f"file:{quote(os.path.abspath(path))}?mode=ro", uri=True)


def copy_database(source: str, target: str) -> None:
    """A consistent copy of the database at `source`, read through a connection
    of its own: in WAL mode the writer carries on while it is taken. The copy
    is one file in rollback-journal mode (no -wal beside it), written without
    syncs: making it durable is the caller's business."""
    reader = sqlite3.connect(source)
    try:
        copy = sqlite3.connect(target)
        try:
            copy.execute("PRAGMA synchronous = OFF")
            copy.execute("PRAGMA journal_mode = OFF")
            reader.backup(copy)
            # The copied header says WAL, as the source's does.
            copy.execute("PRAGMA journal_mode = DELETE")
        finally:
            copy.close()
    finally:
        reader.close()


def snapshot_applied_index(path: str) -> int:
    conn = sqlite3.connect(path)
    try:
        row = conn.execute("SELECT value FROM raft_meta WHERE key = 'applied_index'").fetchone()
        return int(row[0]) if row else 0
    except sqlite3.Error:
        return 0
    finally:
        conn.close()
