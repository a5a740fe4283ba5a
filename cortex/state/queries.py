"""Read queries over the local replicated database, each thread on its own
read-only connection. Rows come back as typed views, never raw tuples."""

from __future__ import annotations

import functools
import json
import operator
import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from typing import Any

from cortex.state import created_spans
from cortex.state.digest import stored_digest
from cortex.state.limit_queries import NOT_HELD, LimitQueries
from cortex.state.node_transitions import removal_index
from cortex.state.paging import (
    CreatedWindow,
    PageKey,
    ids_with_prefix,
    keyset,
    order_by,
    page_end,
    where,
)
from cortex.state.purge import PURGED, loose_events, old_tasks, old_workflows
from cortex.state.schedule_queries import ScheduleQueries
from cortex.state.schema import ACTIVE_ON_NODE, STATES_BY_NODE, ReadConnections
from cortex.state.sql_lists import select_in
from cortex.state.task_match import TaskMatch
from cortex.state.task_states import ACTIVE_STATES
from cortex.state.workflow_queries import WorkflowQueries
from cortex.state.workflow_rules import WORKFLOW_STATES


@dataclass(frozen=True)
class QueueView:
    """Queued tasks by priority, and when the longest-waiting runnable one
    became runnable (entry time, ms; None when none is runnable)."""

    depth_by_priority: dict[int, int]
    oldest_runnable_since_ms: int | None


@dataclass(frozen=True)
class AttemptView:
    """Which attempt of a task a node holds, and its state: what the agent
    needs to tell whether it has anything to do, without the whole row."""

    task_id: str
    attempt: int
    state: str


@dataclass(frozen=True)
class TaskView:
    id: str
    state: str
    type: str
    priority: int
    spec: dict[str, Any]
    attempt: int
    retries: int
    node: str | None
    result: dict[str, Any] | None
    error: str | None
    idempotency_key: str | None
    workflow_id: str | None
    workflow_key: str | None
    created_at: int
    updated_at: int
    scheduled_after: int
    submit_index: int
    # When the current attempt's process started, and when the task last
    # became terminal (kept when a dead-lettered task is retried).
    started_at: int | None = None
    completed_at: int | None = None
    # Its trace context (W3C traceparent): its submission's, or its
    # workflow's run's; None for tasks submitted before tasks had one.
    traceparent: str | None = None
    # The keys its limits and its share of placements count against.
    concurrency_key: str | None = None
    fairness_key: str = "default"

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> TaskView:
        # By position: a name looked up in a Row is compared with every
        # column name before it, and listing pages read many rows.
        values = list(_task_columns(tuple(row.keys()))(row))
        values[_SPEC] = json.loads(values[_SPEC])
        values[_RESULT] = json.loads(values[_RESULT]) if values[_RESULT] else None
        return cls(*values)


# The tasks columns TaskView's fields are read from, in the fields' order:
# each field's own name but `node`.
_TASK_COLUMNS = tuple(
    {"node": "assigned_node"}.get(field.name, field.name) for field in fields(TaskView)
)
_SPEC, _RESULT = _TASK_COLUMNS.index("spec"), _TASK_COLUMNS.index("result")


@functools.cache
def _task_columns(names: tuple[str, ...]) -> Callable[[sqlite3.Row], tuple[Any, ...]]:
    """What reads TaskView's columns, in its fields' order, from a row of
    columns `names` (the row of a `SELECT *` of tasks)."""
    return operator.itemgetter(*(names.index(column) for column in _TASK_COLUMNS))


def read_tasks(conn: sqlite3.Connection, task_ids: Iterable[str]) -> list[TaskView]:
    """The tasks that exist among `task_ids`, read on `conn`, in no
    particular order."""
    rows = select_in(conn, "SELECT * FROM tasks WHERE id IN ({})", list(dict.fromkeys(task_ids)))
    return [TaskView.from_row(row) for row in rows]


# Events with the workflow each concerns: its task's, or the one its detail
# names (a workflow's own events).
EVENT_SELECT = (
    "SELECT e.seq, e.raft_index, e.entry_type, e.task_id, e.event, e.from_state,"
    " e.to_state, e.node, e.attempt, e.detail, e.ts,"
    " COALESCE(t.workflow_id, json_extract(e.detail, '$.workflow_id')) AS workflow_id"
    " FROM task_events e LEFT JOIN tasks t ON t.id = e.task_id"
)


@dataclass(frozen=True)
class EventView:
    seq: int
    raft_index: int
    task_id: str | None
    event: str
    from_state: str | None
    to_state: str | None
    node: str | None
    attempt: int | None
    detail: dict[str, Any] | None
    ts: int
    workflow_id: str | None = None
    entry_type: str | None = None

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> EventView:
        """From a row of EVENT_SELECT."""
        return cls(
            seq=row["seq"],
            raft_index=row["raft_index"],
            task_id=row["task_id"],
            event=row["event"],
            from_state=row["from_state"],
            to_state=row["to_state"],
            node=row["node"],
            attempt=row["attempt"],
            detail=json.loads(row["detail"]) if row["detail"] else None,
            ts=row["ts"],
            workflow_id=row["workflow_id"],
            entry_type=row["entry_type"],
        )


@dataclass(frozen=True)
class NodeView:
    id: str
    raft_address: str
    grpc_address: str
    status: str
    labels: dict[str, str]
    executors: list[str]
    resources: dict[str, Any]
    status_reason: str = ""
    drain_deadline: int | None = None
    peer_address: str = ""
    # "voter", or "observer" (replicates without a vote, runs no tasks).
    role: str = "voter"

    @property
    def max_tasks(self) -> int:
        """Tasks it runs at once at most, as it registered (0: no limit)."""
        return int(self.resources.get("max_tasks", 0) or 0)

    @property
    def prefetch_tasks(self) -> int:
        """Tasks it takes beyond those to wait for a slot, as it registered."""
        return int(self.resources.get("prefetch_tasks", 0) or 0)


# The nodes' rows; a removed node's only when the parameter is 1.
_NODE_ROWS = "SELECT * FROM nodes WHERE ? OR status != 'removed' ORDER BY id"


class NodeViews:
    """The nodes as views, read on a given connection. Node rows seldom
    change, and every placement reads them: views made of the same rows
    are made once (their JSON columns parsed once)."""

    def __init__(self) -> None:
        # The node rows last read and the views made of them.
        self._known: tuple[tuple[tuple[Any, ...], ...], list[NodeView]] = ((), [])

    def read(self, conn: sqlite3.Connection, include_removed: bool = False) -> list[NodeView]:
        rows = conn.execute(_NODE_ROWS, (1 if include_removed else 0,)).fetchall()
        key = tuple(tuple(row) for row in rows)
        known_key, known_views = self._known
        if key == known_key:
            return list(known_views)
        views = [
            NodeView(
                id=r["id"],
                raft_address=r["raft_address"],
                grpc_address=r["grpc_address"],
                status=r["status"],
                labels=json.loads(r["labels"]),
                executors=json.loads(r["executors"]),
                resources=json.loads(r["resources"]),
                status_reason=r["status_reason"],
                drain_deadline=r["drain_deadline"],
                peer_address=r["peer_address"],
                role=r["role"],
            )
            for r in rows
        ]
        self._known = (key, views)
        return list(views)


def counts_by_node(conn: sqlite3.Connection, states: Iterable[str]) -> dict[str, int]:
    """Tasks in `states` on each node that has any, from the counts apply
    keeps (`task_counts`): a few rows per node and task type."""
    states = tuple(states)
    rows = conn.execute(
        "SELECT node, SUM(n) FROM task_counts"
        f" WHERE state IN ({','.join('?' * len(states))})"
        " AND node != '' GROUP BY node HAVING SUM(n) > 0",
        states,
    )
    return {row[0]: row[1] for row in rows}


def _on_node(states: tuple[str, ...]) -> str:
    """The WHERE of a node's tasks in `states`, some of those the index
    `tasks_by_node` holds, its condition spelled out so SQLite searches it
    (any other state would read the node's whole history)."""
    if not states or not set(states) <= {"assigned", "running"}:
        raise ValueError(f"a node's tasks are looked up by assigned and running only, not {states}")
    return f"assigned_node = ? AND {ACTIVE_ON_NODE} AND state IN ({','.join('?' * len(states))})"


@dataclass(frozen=True)
class TaskPage:
    tasks: list[TaskView]
    # Where the next page starts; None on the last page.
    next_key: PageKey | None
    # Every task matching the filters.
    total: int


class StateReader(WorkflowQueries, LimitQueries, ScheduleQueries):
    def __init__(self, path: str) -> None:
        self._reads = ReadConnections(path)
        self._node_views = NodeViews()

    def _conn(self) -> sqlite3.Connection:
        return self._reads.get()

    def close(self) -> None:
        self._reads.close()

    def get_task(self, task_id: str) -> TaskView | None:
        row = self._conn().execute("SELECT * FROM tasks WHERE id = ?", (task_id,)).fetchone()
        return TaskView.from_row(row) if row else None

    def task_by_idempotency_key(self, key: str) -> str | None:
        row = (
            self._conn()
            .execute("SELECT task_id FROM submissions WHERE idempotency_key = ?", (key,))
            .fetchone()
        )
        return row["task_id"] if row else None

    def tasks_by_idempotency_keys(self, keys: Iterable[str]) -> dict[str, str]:
        """The task each of `keys` names, for the keys in use, read together."""
        wanted = list(dict.fromkeys(keys))
        query = "SELECT idempotency_key, task_id FROM submissions WHERE idempotency_key IN ({})"
        return {row[0]: row[1] for row in select_in(self._conn(), query, wanted)}

    def list_tasks(
        self,
        states: list[str] | None = None,
        task_type: str | None = None,
        workflow_id: str | None = None,
        node: str | None = None,
        limit: int = 100,
        after: PageKey | None = None,
        newest_first: bool = False,
        created: CreatedWindow | None = None,
        match: TaskMatch | None = None,
    ) -> TaskPage:
        """A page of the tasks matching the filters, in submission order
        (newest first when asked), continuing after `after`."""
        clauses, params = (created or CreatedWindow()).clauses()
        if match is not None:
            matching, matching_params = match.clauses()
            clauses += matching
            params += matching_params
        # State, type and node alone: the total is a sum of counters, and with
        # other filters it is at most that sum.
        countable = not clauses and not workflow_id
        counters: list[str] = []
        counter_params: list[object] = []
        for column, counter, value in (
            ("type", "type", task_type),
            ("workflow_id", None, workflow_id),
            ("assigned_node", "node", node),
        ):
            if value:
                clauses.append(f"{column} = ?")
                params.append(value)
                if counter:
                    counters.append(f"{counter} = ?")
                    counter_params.append(value)
        beyond, page_params, order = keyset(after, newest_first)
        wanted = sorted(set(states or []))
        if wanted:
            counters.append(f"state IN ({','.join('?' * len(wanted))})")
            counter_params += wanted

        # Where in submission order the tasks of the creation window can be
        # (`created_spans`), once read.
        spans: list[str] = []
        span_params: list[object] = []

        def of_state(state: str) -> list[str]:
            """One state's condition; with a node, also the condition of the
            index holding the node's tasks in that state, where one does
            (any other would be walked through the node's whole history).
            The window's range of submission order follows; for a node's
            assigned or running tasks, spelled so that it steers no index
            (a range of the node's history would be walked)."""
            live = node and state in ACTIVE_STATES
            ranged = [f"+{span}" for span in spans] if live else spans
            return ["state = ?", STATES_BY_NODE.get(state, "") if node else "", *ranged]

        def state_params(state: str) -> list[object]:
            return [state, *span_params]

        # Whether a node's completed tasks in a window may be counted as the
        # node's tasks there less those in its other states (see below).
        by_complement = [False]

        def state_count(state: str) -> tuple[str, list[object]]:
            """One state's count. A node's completed tasks in a creation
            window are nearly all of its tasks there, and the index of a
            node's history has no state: each would be read for it. With no
            other filter, they are counted as the node's tasks in the window
            (from that index alone) less those in the node's other states
            (each from the index holding it)."""
            if state == "completed" and by_complement[0]:
                others = sorted(STATES_BY_NODE)
                return (
                    f"((SELECT COUNT(*) FROM tasks {where([*clauses, *spans])})"
                    + "".join(
                        f" - (SELECT COUNT(*) FROM tasks {where([*clauses, *of_state(other)])})"
                        for other in others
                    )
                    + ")",
                    [*params, *span_params]
                    + [v for other in others for v in (*params, *state_params(other))],
                )
            return (
                f"(SELECT COUNT(*) FROM tasks {where([*clauses, *of_state(state)])})",
                [*params, *state_params(state)],
            )

        def order_of(state: str) -> str:
            """The order of one state's rows: a node's assigned or running
            ones (a few, whose index does not hold their order) sorted, as
            SQLite would otherwise walk the node's history in that order."""
            return (
                order_by(newest_first, sorted_=True) if node and state in ACTIVE_STATES else order
            )

        conn = self._conn()
        conn.execute("BEGIN")
        try:
            total = conn.execute(
                f"SELECT COALESCE(SUM(n), 0) FROM task_counts {where(counters)}", counter_params
            ).fetchone()[0]
            if total and created is not None:
                submitted = created_spans.submit_range(conn, created)
                if submitted is None:
                    total = 0
                else:
                    spans += submitted[0]
                    span_params += submitted[1]
                    by_complement[0] = bool(
                        node
                        and "completed" in wanted
                        and not (task_type or workflow_id or match)
                        and not self._tasks_in_other_states(conn, node)
                    )
            # A window alone is counted from the spans (`created_spans.count`).
            window_only = not (wanted or task_type or workflow_id or node or match)
            in_spans = None
            if created is not None and spans and window_only:
                in_spans = created_spans.count(conn, "tasks", created)
            if in_spans is not None:
                total = in_spans
            elif total and not countable:
                if wanted:
                    # Per state, so that each reads the index holding it.
                    counted = [state_count(state) for state in wanted]
                    count = "SELECT " + " + ".join(sql for sql, _ in counted)
                    count_params = [v for _, state_values in counted for v in state_values]
                else:
                    count = f"SELECT COUNT(*) FROM tasks {where([*clauses, *spans])}"
                    count_params = [*params, *span_params]
                total = conn.execute(count, count_params).fetchone()[0]
            if not total:
                rows = []
            elif len(wanted) > 1:
                # Each state's page read in its index's order, then merged:
                # `state IN (...)` would sort every matching row.
                branches = [
                    f"SELECT * FROM (SELECT * FROM tasks"
                    f" {where([*clauses, *of_state(state), beyond])} {order_of(state)} LIMIT ?)"
                    for state in wanted
                ]
                rows = conn.execute(
                    f"SELECT * FROM ({' UNION ALL '.join(branches)}) {order} LIMIT ?",
                    (
                        *[
                            v
                            for state in wanted
                            for v in (*params, *state_params(state), *page_params, limit + 1)
                        ],
                        limit + 1,
                    ),
                ).fetchall()
            else:
                one_state = of_state(wanted[0]) if wanted else spans
                one_params = state_params(wanted[0]) if wanted else span_params
                one_order = order_of(wanted[0]) if wanted else order
                rows = conn.execute(
                    f"SELECT * FROM tasks {where([*clauses, *one_state, beyond])} {one_order}"
                    " LIMIT ?",
                    (*params, *one_params, *page_params, limit + 1),
                ).fetchall()
        finally:
            conn.execute("COMMIT")
        rows, next_key = page_end(rows, limit)
        return TaskPage([TaskView.from_row(r) for r in rows], next_key, total)

    @staticmethod
    def _tasks_in_other_states(conn: sqlite3.Connection, node: str) -> int:
        """How many tasks `node` holds in states a node's task is never in
        (none: a task leaves its node when it goes back to the queue)."""
        named = ["completed", *sorted(STATES_BY_NODE)]
        return int(
            conn.execute(
                "SELECT COALESCE(SUM(n), 0) FROM task_counts WHERE node = ?"
                f" AND state NOT IN ({','.join('?' * len(named))})",
                (node, *named),
            ).fetchone()[0]
        )

    def task_ids_with_prefix(self, prefix: str, limit: int) -> list[str]:
        """Up to `limit` task ids starting with `prefix`, in id order (a range
        over the primary key, not a scan)."""
        return ids_with_prefix(self._conn(), "tasks", prefix, limit)

    def task_events(self, task_id: str) -> list[EventView]:
        rows = (
            self._conn()
            .execute(f"{EVENT_SELECT} WHERE e.task_id = ? ORDER BY e.seq", (task_id,))
            .fetchall()
        )
        return [EventView.from_row(r) for r in rows]

    def recent_events(self, limit: int) -> list[EventView]:
        """The newest `limit` events, newest first."""
        return [
            EventView.from_row(r)
            for r in self._conn()
            .execute(f"{EVENT_SELECT} ORDER BY e.seq DESC LIMIT ?", (limit,))
            .fetchall()
        ]

    def entry_index(self, entry_id: str, task_id: str | None = None) -> int | None:
        """The Raft index an entry was applied at, read from the events it
        wrote (the newest first: an entry just applied is found at once)."""
        where, params = "entry_id = ?", [entry_id]
        if task_id is not None:
            where, params = "task_id = ? AND entry_id = ?", [task_id, entry_id]
        row = (
            self._conn()
            .execute(
                f"SELECT raft_index FROM task_events WHERE {where} ORDER BY seq DESC LIMIT 1",
                params,
            )
            .fetchone()
        )
        return int(row[0]) if row else None

    def next_scheduled_after(self, now_ms: int) -> int | None:
        """When the earliest backing-off queued task becomes runnable. Read
        from the index of backing-off tasks (migration 15: its condition is
        repeated verbatim), not from every queued task."""
        row = (
            self._conn()
            .execute(
                "SELECT MIN(scheduled_after) FROM tasks INDEXED BY tasks_backing_off"
                " WHERE state = 'queued' AND scheduled_after > 0"
                f" AND scheduled_after > ? AND {NOT_HELD}",
                (now_ms,),
            )
            .fetchone()
        )
        return row[0] if row and row[0] is not None else None

    def tasks_on_node(self, node: str, states: tuple[str, ...]) -> list[TaskView]:
        rows = (
            self._conn()
            .execute(f"SELECT * FROM tasks WHERE {_on_node(states)}", (node, *states))
            .fetchall()
        )
        return [TaskView.from_row(r) for r in rows]

    def attempts_on_node(self, node: str, states: tuple[str, ...]) -> list[AttemptView]:
        rows = self._conn().execute(
            f"SELECT id, attempt, state FROM tasks WHERE {_on_node(states)}",
            (node, *states),
        )
        return [AttemptView(*row) for row in rows]

    def get_tasks(self, task_ids: Iterable[str]) -> list[TaskView]:
        """The tasks that exist among `task_ids`, in no particular order."""
        return read_tasks(self._conn(), task_ids)

    def has_queued(self) -> bool:
        """Whether any task is queued (one index seek)."""
        query = "SELECT EXISTS (SELECT 1 FROM tasks WHERE state = 'queued')"
        return bool(self._conn().execute(query).fetchone()[0])

    def queued_ids(self, limit: int) -> list[str]:
        """Up to `limit` queued tasks' ids, in no particular order."""
        query = "SELECT id FROM tasks WHERE state = 'queued' LIMIT ?"
        return [row[0] for row in self._conn().execute(query, (limit,))]

    def active_counts_by_node(self) -> dict[str, int]:
        """Tasks assigned to or running on each node that has any, from the
        counts apply keeps (`task_counts`): a few rows per node and task
        type, where counting the tasks read every active one, on every
        placement."""
        return counts_by_node(self._conn(), ACTIVE_STATES)

    def running_counts_by_node(self) -> dict[str, int]:
        """Tasks running on each node that runs any, as `active_counts_by_node`."""
        return counts_by_node(self._conn(), ("running",))

    def reserved_memory_by_node(self) -> dict[str, float]:
        """Memory promised through minMemoryMb to each node's active tasks,
        from the sums apply keeps (`node_memory`)."""
        rows = self._conn().execute("SELECT node, mb FROM node_memory WHERE mb > 0").fetchall()
        return {row[0]: float(row[1]) for row in rows}

    def queue_view(self, now_ms: int) -> QueueView:
        """Queued tasks by priority, and since when the longest-waiting
        runnable one has waited: from the later of its last change (entering
        the queue) and the end of its back-off."""
        conn = self._conn()
        conn.execute("BEGIN")
        try:
            depth = conn.execute(
                "SELECT priority, COUNT(*) FROM tasks INDEXED BY tasks_queue"
                " WHERE state = 'queued' GROUP BY priority"
            ).fetchall()
            oldest = conn.execute(
                "SELECT MIN(MAX(updated_at, scheduled_after)) FROM tasks"
                " WHERE state = 'queued' AND scheduled_after <= ?",
                (now_ms,),
            ).fetchone()
        finally:
            conn.execute("COMMIT")
        return QueueView({int(row[0]): int(row[1]) for row in depth}, oldest[0])

    def workflow_counts(self) -> dict[str, int]:
        """Workflows in each state, every state named (0 when none): from
        the counters (`workflow_counts`), not a count of every workflow."""
        rows = self._conn().execute("SELECT state, n FROM workflow_counts WHERE n > 0")
        return {**dict.fromkeys(WORKFLOW_STATES, 0), **{row[0]: int(row[1]) for row in rows}}

    def dead_letter_count(self) -> int:
        row = self._conn().execute(
            "SELECT COALESCE(SUM(n), 0) FROM task_counts WHERE state = 'dead_letter'"
        )
        return int(row.fetchone()[0])

    def counts_by_state(self) -> dict[str, int]:
        rows = (
            self._conn()
            .execute("SELECT state, SUM(n) FROM task_counts GROUP BY state HAVING SUM(n) > 0")
            .fetchall()
        )
        return {row[0]: row[1] for row in rows}

    def purge_due(self, before_ms: int) -> bool:
        """Whether a `TASKS_PURGE` with this cutoff would remove something.
        Earlier purges' own records do not count: they go along with the
        next real work, so an idle cluster is not purged forever."""
        conn = self._conn()
        return bool(
            old_tasks(conn, before_ms, 1)
            or old_workflows(conn, before_ms, 1)
            or loose_events(conn, before_ms, 1, skip_events=(PURGED,))
        )

    def node(self, node_id: str, include_removed: bool = False) -> NodeView | None:
        """One member, as `nodes` has it."""
        return next((n for n in self.nodes(include_removed) if n.id == node_id), None)

    def nodes(self, include_removed: bool = False) -> list[NodeView]:
        """Cluster members; a removed node's row is kept but left out unless asked for."""
        return self._node_views.read(self._conn(), include_removed)

    def removal_index(self, node_id: str) -> int | None:
        """The Raft index of the node's latest removal, while its event is kept."""
        return removal_index(self._conn(), node_id)

    def applied_index(self) -> int:
        row = (
            self._conn()
            .execute("SELECT value FROM raft_meta WHERE key = 'applied_index'")
            .fetchone()
        )
        return int(row[0]) if row else 0

    def digest_and_index(self) -> tuple[str, int]:
        """Digest and applied index read in one transaction, so they agree."""
        conn = self._conn()
        conn.execute("BEGIN")
        try:
            return stored_digest(conn), self.applied_index()
        finally:
            conn.execute("COMMIT")
