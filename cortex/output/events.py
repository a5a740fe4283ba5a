"""WatchEvents: task, workflow and node events from the audit log
(`task_events`) as they are applied, filtered by task, workflow and event
name. The watch pages through the table from its cursor and sleeps on the
state ticker between applied batches; nothing runs on the Raft thread."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field

from cortex.errors import InvalidArgument, NotFound
from cortex.output.relay import StreamContext
from cortex.output.ticker import StateTicker
from cortex.state.queries import EVENT_SELECT, EventView
from cortex.state.schema import ReadConnections

# Initial metadata of a watch: the newest event seq when it began, and the
# seq of the last event the watch sends that was already there (0: none), so
# a client that wants only the backlog knows when it has it.
HEAD_HEADER = "cortex-head-seq"
BACKLOG_END_HEADER = "cortex-backlog-end"
PAGE_SIZE = 500
POLL_S = 1.0
MAX_ID_CHARS = 128


@dataclass(frozen=True)
class EventFilter:
    task_id: str | None = None
    workflow_id: str | None = None
    # Event names (`submitted`, `node_status` ...); empty: all.
    events: tuple[str, ...] = ()


@dataclass(frozen=True)
class EventWatch:
    """What a watch asks for: matching events after `after_seq` (from the
    oldest kept with `from_start`, else from now), then, with `follow`, live
    ones."""

    where: EventFilter = field(default_factory=EventFilter)
    after_seq: int = 0
    from_start: bool = False
    follow: bool = False


class EventFeed:
    """Read-only queries over `task_events`, each thread on its own connection.
    An event's workflow is its task's, or `workflow_id` in its detail."""

    def __init__(self, db_path: str) -> None:
        self._reads = ReadConnections(db_path)

    def _conn(self) -> sqlite3.Connection:
        return self._reads.get()

    def head(self) -> int:
        row = self._conn().execute("SELECT MAX(seq) FROM task_events").fetchone()
        return int(row[0] or 0)

    def task_exists(self, task_id: str) -> bool:
        return bool(self._conn().execute("SELECT 1 FROM tasks WHERE id = ?", (task_id,)).fetchone())

    def workflow_exists(self, workflow_id: str) -> bool:
        conn = self._conn()
        return bool(
            conn.execute("SELECT 1 FROM workflows WHERE id = ?", (workflow_id,)).fetchone()
            or conn.execute("SELECT 1 FROM tasks WHERE workflow_id = ?", (workflow_id,)).fetchone()
        )

    def backlog_end(self, seq: int, head: int, where: EventFilter) -> int:
        """The newest matching event in (seq, head], or 0."""
        clauses, params = _where(seq, where)
        row = (
            self._conn()
            .execute(
                f"SELECT MAX(e.seq) FROM task_events e LEFT JOIN tasks t ON t.id = e.task_id"
                f" WHERE {' AND '.join(clauses)} AND e.seq <= ?",
                (*params, head),
            )
            .fetchone()
        )
        return int(row[0] or 0)

    def after(
        self, seq: int, where: EventFilter, limit: int = PAGE_SIZE
    ) -> tuple[list[EventView], int]:
        """Matching events after `seq`, oldest first, and the cursor to
        continue from: past the last one returned, or past every event that
        existed at the time of the read (so non-matching rows are not scanned
        again)."""
        clauses, params = _where(seq, where)
        conn = self._conn()
        conn.execute("BEGIN")
        try:
            rows = conn.execute(
                f"{EVENT_SELECT} WHERE {' AND '.join(clauses)} ORDER BY e.seq LIMIT ?",
                (*params, limit),
            ).fetchall()
            head = self.head()
        finally:
            conn.execute("COMMIT")
        events = [EventView.from_row(row) for row in rows]
        cursor = events[-1].seq if len(events) == limit else max(head, seq)
        return events, cursor


def _where(seq: int, where: EventFilter) -> tuple[list[str], list[object]]:
    clauses: list[str] = ["e.seq > ?"]
    params: list[object] = [seq]
    if where.task_id:
        clauses.append("e.task_id = ?")
        params.append(where.task_id)
    if where.workflow_id:
        clauses.append(
            "(t.workflow_id = ? OR (e.task_id IS NULL"
            " AND json_extract(e.detail, '$.workflow_id') = ?))"
        )
        params += [where.workflow_id, where.workflow_id]
    if where.events:
        clauses.append(f"e.event IN ({','.join('?' * len(where.events))})")
        params.extend(where.events)
    return clauses, params


class EventWatcher:
    def __init__(self, feed: EventFeed, ticker: StateTicker) -> None:
        self._feed = feed
        self._ticker = ticker

    def _check(self, request: EventWatch) -> EventFilter:
        where = request.where
        if request.after_seq < 0:
            raise InvalidArgument(f"after_seq must not be negative, not {request.after_seq}")
        if "" in (name.strip() for name in where.events):
            raise InvalidArgument("an event name is empty")
        for value, what in ((where.task_id, "task_id"), (where.workflow_id, "workflow_id")):
            if value and len(value) > MAX_ID_CHARS:
                raise InvalidArgument(f"{what} is longer than {MAX_ID_CHARS} characters")
        if where.task_id and not self._feed.task_exists(where.task_id):
            raise NotFound(f"no task with id {where.task_id}")
        if where.workflow_id and not self._feed.workflow_exists(where.workflow_id):
            raise NotFound(f"no workflow with id {where.workflow_id}")
        return EventFilter(where.task_id or None, where.workflow_id or None,
                           tuple(dict.fromkeys(where.events)))  # fmt: skip

    def watch(self, request: EventWatch, context: StreamContext) -> Iterator[EventView]:
        """Events after `after_seq` (all with `from_start`, else only new
        ones); with `follow`, then live ones until the client goes away."""
        where = self._check(request)
        head = self._feed.head()
        cursor = 0 if request.from_start else request.after_seq or head
        send = getattr(context, "send_initial_metadata", None)
        if send is not None:
            backlog_end = self._feed.backlog_end(cursor, head, where)
            send(((HEAD_HEADER, str(head)), (BACKLOG_END_HEADER, str(backlog_end))))
        while context.is_active() and not self._ticker.closed:
            seen = self._ticker.generation
            events, cursor = self._feed.after(cursor, where)
            if not request.follow:
                yield from (event for event in events if event.seq <= head)
                if cursor >= head:
                    return
                continue
            yield from events
            if len(events) < PAGE_SIZE:
                self._ticker.wait(seen, POLL_S)
