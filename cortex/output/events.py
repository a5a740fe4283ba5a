"""WatchEvents: task, workflow and node events from the audit log
(`task_events`) as they are applied, filtered by task, workflow and event
name. The watch pages through the table from its cursor and sleeps on the
state ticker between applied batches; nothing runs on the Raft thread."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass

from cortex.errors import InvalidArgument, NotFound
from cortex.output.relay import StreamContext
from cortex.output.ticker import StateTicker
from cortex.state.schema import ReadConnections
from cortex.v1 import cortex_pb2 as pb

# Initial metadata of a watch: the newest event seq when it began, and the
# seq of the last event the watch sends that was already there (0: none), so
# a client that wants only the backlog knows when it has it.
HEAD_HEADER = "cortex-head-seq"
BACKLOG_END_HEADER = "cortex-backlog-end"
PAGE_SIZE = 500
POLL_S = 1.0
MAX_EVENT_NAMES = 64


@dataclass(frozen=True)
class EventFilter:
    task_id: str | None = None
    workflow_id: str | None = None
    events: tuple[str, ...] = ()


class EventFeed:
    """Read-only queries over `task_events`, each thread on its own connection.
    An event's workflow is its task's, or `workflow_id` in its detail."""

    _SELECT = (
        "SELECT e.seq, e.raft_index, e.entry_type, e.task_id, e.event, e.from_state,"
        " e.to_state, e.node, e.attempt, e.detail, e.ts,"
        " COALESCE(t.workflow_id, json_extract(e.detail, '$.workflow_id')) AS workflow_id"
        " FROM task_events e LEFT JOIN tasks t ON t.id = e.task_id"
    )

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
    ) -> tuple[list[pb.Event], int]:
        """Matching events after `seq`, oldest first, and the cursor to
        continue from: past the last one returned, or past every event that
        existed at the time of the read (so non-matching rows are not scanned
        again)."""
        clauses, params = _where(seq, where)
        conn = self._conn()
        conn.execute("BEGIN")
        try:
            rows = conn.execute(
                f"{self._SELECT} WHERE {' AND '.join(clauses)} ORDER BY e.seq LIMIT ?",
                (*params, limit),
            ).fetchall()
            head = self.head()
        finally:
            conn.execute("COMMIT")
        events = [_to_proto(row) for row in rows]
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


def _to_proto(row: sqlite3.Row) -> pb.Event:
    detail = row["detail"]
    return pb.Event(
        seq=row["seq"],
        event=row["event"],
        task_id=row["task_id"] or "",
        workflow_id=row["workflow_id"] or "",
        from_state=row["from_state"] or "",
        to_state=row["to_state"] or "",
        node=row["node"] or "",
        attempt=row["attempt"] or 0,
        detail_json=detail if detail else "",
        ts_ms=row["ts"],
        raft_index=row["raft_index"],
        entry_type=row["entry_type"] or "",
    )


class EventWatcher:
    def __init__(self, feed: EventFeed, ticker: StateTicker) -> None:
        self._feed = feed
        self._ticker = ticker

    def _filter(self, request: pb.WatchEventsRequest) -> EventFilter:
        if request.after_seq < 0:
            raise InvalidArgument(f"after_seq must not be negative, not {request.after_seq}")
        names = tuple(dict.fromkeys(name.strip() for name in request.events))
        if "" in names:
            raise InvalidArgument("an event name is empty")
        if len(names) > MAX_EVENT_NAMES:
            raise InvalidArgument(f"at most {MAX_EVENT_NAMES} event names, not {len(names)}")
        for value, what in ((request.task_id, "task_id"), (request.workflow_id, "workflow_id")):
            if len(value) > 128:
                raise InvalidArgument(f"{what} is longer than 128 characters")
        if request.task_id and not self._feed.task_exists(request.task_id):
            raise NotFound(f"no task with id {request.task_id}")
        if request.workflow_id and not self._feed.workflow_exists(request.workflow_id):
            raise NotFound(f"no workflow with id {request.workflow_id}")
        return EventFilter(request.task_id or None, request.workflow_id or None, names)

    def watch(self, request: pb.WatchEventsRequest, context: StreamContext) -> Iterator[pb.Event]:
        """Events after `after_seq` (all with `from_start`, else only new
        ones); with `follow`, then live ones until the client goes away."""
        where = self._filter(request)
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
