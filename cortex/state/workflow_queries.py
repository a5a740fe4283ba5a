"""Read queries over replicated workflow state, mixed into `StateReader`.
Rows come back as typed views."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from typing import Any

from cortex.state import created_spans
from cortex.state.paging import CreatedWindow, PageKey, ids_with_prefix, keyset, page_end, where
from cortex.state.task_states import TERMINAL_STATES


@dataclass(frozen=True)
class WorkflowTaskView:
    key: str
    task_id: str
    type: str
    state: str
    attempt: int
    node: str | None
    depends_on: list[str]
    condition: str | None
    error: str | None
    result: dict[str, Any] | None
    started_at: int | None
    finished_at: int | None

    @property
    def skip_reason(self) -> str | None:
        return self.error if self.state == "skipped" else None


@dataclass(frozen=True)
class WorkflowView:
    id: str
    name: str
    state: str
    context: dict[str, Any]
    created_at: int
    completed_at: int | None
    error: str | None
    idempotency_key: str | None
    submit_index: int
    # All its tasks, and the parts received of a workflow submitted in parts.
    total_tasks: int = 0
    parts: int = 1
    # In definition order; empty in listings.
    tasks: list[WorkflowTaskView] = field(default_factory=list)
    task_counts: dict[str, int] = field(default_factory=dict)
    # Its submission's trace context (W3C traceparent), and its run's (a
    # child of it, which its tasks keep); None for older workflows.
    traceparent: str | None = None
    run_traceparent: str | None = None


@dataclass(frozen=True)
class WorkflowEnding:
    """A workflow's end as its event recorded it: the event's place in the
    audit log, the Raft index that ended it, the state it ended in, when."""

    seq: int
    raft_index: int
    workflow_id: str
    state: str
    ts: int


_ENDING_EVENTS = ("workflow_completed", "workflow_failed", "workflow_cancelled")


@dataclass(frozen=True)
class WorkflowPage:
    workflows: list[WorkflowView]
    # Where the next page starts; None on the last page.
    next_key: PageKey | None
    # Every workflow matching the filters.
    total: int


def _workflow_view(
    row: sqlite3.Row,
    tasks: list[WorkflowTaskView] | None = None,
    counts: dict[str, int] | None = None,
) -> WorkflowView:
    return WorkflowView(
        id=row["id"],
        name=row["name"],
        state=row["state"],
        context=json.loads(row["context"]),
        created_at=row["created_at"],
        completed_at=row["completed_at"],
        error=row["error"],
        idempotency_key=row["idempotency_key"],
        submit_index=row["submit_index"],
        total_tasks=row["total_tasks"],
        parts=row["parts"],
        tasks=tasks or [],
        task_counts=counts or {},
        traceparent=row["traceparent"],
        run_traceparent=row["run_traceparent"],
    )


class WorkflowQueries:
    """Workflow reads; the host class supplies this thread's connection."""

    def _conn(self) -> sqlite3.Connection:
        raise NotImplementedError

    def get_workflow(self, workflow_id: str, with_tasks: bool = True) -> WorkflowView | None:
        """The workflow and, with `with_tasks`, its whole DAG in definition order."""
        conn = self._conn()
        conn.execute("BEGIN")
        try:
            row = conn.execute("SELECT * FROM workflows WHERE id = ?", (workflow_id,)).fetchone()
            if row is None:
                return None
            if not with_tasks:
                return _workflow_view(row, counts=self._task_counts([workflow_id])[workflow_id])
            rows = conn.execute(
                "SELECT * FROM tasks WHERE workflow_id = ? ORDER BY workflow_pos, rowid",
                (workflow_id,),
            ).fetchall()
            depends_on: dict[str, list[str]] = {}
            for key, dependency in conn.execute(
                "SELECT task_key, depends_on_key FROM task_dependencies WHERE workflow_id = ?"
                " ORDER BY rowid",
                (workflow_id,),
            ):
                depends_on.setdefault(key, []).append(dependency)
        finally:
            conn.execute("COMMIT")
        tasks = []
        counts: dict[str, int] = {}
        for task in rows:
            counts[task["state"]] = counts.get(task["state"], 0) + 1
            tasks.append(
                WorkflowTaskView(
                    key=task["workflow_key"],
                    task_id=task["id"],
                    type=task["type"],
                    state=task["state"],
                    attempt=task["attempt"],
                    node=task["assigned_node"],
                    depends_on=depends_on.get(task["workflow_key"], []),
                    condition=task["condition"],
                    error=task["error"],
                    result=json.loads(task["result"]) if task["result"] else None,
                    started_at=task["started_at"],
                    finished_at=task["completed_at"] if task["state"] in TERMINAL_STATES else None,
                )
            )
        return _workflow_view(row, tasks, counts)

    def _task_counts(self, workflow_ids: list[str]) -> dict[str, dict[str, int]]:
        counts: dict[str, dict[str, int]] = {wid: {} for wid in workflow_ids}
        if not workflow_ids:
            return counts
        rows = self._conn().execute(
            "SELECT workflow_id, state, COUNT(*) FROM tasks"
            f" WHERE workflow_id IN ({','.join('?' * len(workflow_ids))})"
            " GROUP BY workflow_id, state",
            workflow_ids,
        )
        for workflow_id, state, count in rows:
            counts[workflow_id][state] = count
        return counts

    def list_workflows(
        self,
        states: list[str] | None = None,
        limit: int = 100,
        after: PageKey | None = None,
        newest_first: bool = True,
        created: CreatedWindow | None = None,
    ) -> WorkflowPage:
        """A page of workflows in submission order (newest first unless
        asked otherwise), continuing after `after`; with task counts, without
        tasks."""
        clauses, params = (created or CreatedWindow()).clauses()
        counters: list[str] = []
        if states:
            counters.append(f"state IN ({','.join('?' * len(states))})")
            clauses += counters
            params.extend(states)
        beyond, page_params, order = keyset(after, newest_first)
        conn = self._conn()
        conn.execute("BEGIN")
        try:
            # By state alone, the total is a sum of counters (`workflow_counts`);
            # a creation window is first the range of submission order its
            # workflows can be in (`created_spans`).
            total = conn.execute(
                f"SELECT COALESCE(SUM(n), 0) FROM workflow_counts {where(counters)}",
                states or [],
            ).fetchone()[0]
            windowed = len(clauses) > len(counters)
            if total and created is not None and windowed:
                submitted = created_spans.submit_range(conn, created)
                if submitted is None:
                    total = 0
                else:
                    clauses += submitted[0]
                    params += submitted[1]
                    # A window alone: counted from the spans.
                    total = None if states else created_spans.count(conn, "workflows", created)
                    if total is None:
                        total = conn.execute(
                            f"SELECT COUNT(*) FROM workflows {where(clauses)}", params
                        ).fetchone()[0]
            rows = (
                conn.execute(
                    f"SELECT * FROM workflows {where([*clauses, beyond])} {order} LIMIT ?",
                    (*params, *page_params, limit + 1),
                ).fetchall()
                if total
                else []
            )
            rows, next_key = page_end(rows, limit)
            counts = self._task_counts([r["id"] for r in rows])
        finally:
            conn.execute("COMMIT")
        views = [_workflow_view(r, counts=counts[r["id"]]) for r in rows]
        return WorkflowPage(views, next_key, total)

    def has_workflow(self, workflow_id: str) -> bool:
        """Whether a workflow has this full id: one row of the primary key,
        where `get_workflow` also counts the workflow's tasks by state."""
        row = self._conn().execute("SELECT 1 FROM workflows WHERE id = ?", (workflow_id,))
        return row.fetchone() is not None

    def workflow_ids_with_prefix(self, prefix: str, limit: int) -> list[str]:
        """Up to `limit` workflow ids starting with `prefix`, in id order."""
        return ids_with_prefix(self._conn(), "workflows", prefix, limit)

    def workflow_by_idempotency_key(self, key: str) -> str | None:
        row = (
            self._conn()
            .execute("SELECT id FROM workflows WHERE idempotency_key = ?", (key,))
            .fetchone()
        )
        return row["id"] if row else None

    def workflow_digest(self, workflow_id: str) -> str | None:
        """The digest of the definition the workflow was submitted with (None
        for one submitted before digests were kept)."""
        row = (
            self._conn()
            .execute(
                "SELECT json_extract(definition, '$.digest') FROM workflows WHERE id = ?",
                (workflow_id,),
            )
            .fetchone()
        )
        return row[0] if row else None

    def workflow_context_text(self, workflow_id: str) -> str | None:
        """The workflow's current context as stored (a JSON object)."""
        row = (
            self._conn()
            .execute("SELECT context FROM workflows WHERE id = ?", (workflow_id,))
            .fetchone()
        )
        return row["context"] if row else None

    def last_event_seq(self, up_to_index: int | None = None) -> int:
        """The audit log's last position (0 when empty), of the events
        applied at Raft indexes up to `up_to_index` when given."""
        if up_to_index is None:
            row = self._conn().execute("SELECT MAX(seq) FROM task_events").fetchone()
        else:
            row = (
                self._conn()
                .execute(
                    "SELECT seq FROM task_events WHERE raft_index <= ? ORDER BY seq DESC LIMIT 1",
                    (up_to_index,),
                )
                .fetchone()
            )
        return int(row[0]) if row and row[0] is not None else 0

    def workflow_endings(
        self, after_seq: int, up_to_index: int
    ) -> tuple[list[WorkflowEnding], int]:
        """Workflows that ended in the events after position `after_seq`
        applied at Raft indexes up to `up_to_index`, in log order; and the
        position of the last of those events (`after_seq` when none)."""
        conn = self._conn()
        conn.execute("BEGIN")
        try:
            rows = conn.execute(
                "SELECT seq, raft_index, event, ts, json_extract(detail, '$.workflow_id')"
                " FROM task_events WHERE seq > ? AND raft_index <= ?"
                f" AND event IN ({','.join('?' * len(_ENDING_EVENTS))}) ORDER BY seq",
                (after_seq, up_to_index, *_ENDING_EVENTS),
            ).fetchall()
            last = conn.execute(
                "SELECT MAX(seq) FROM task_events WHERE seq > ? AND raft_index <= ?",
                (after_seq, up_to_index),
            ).fetchone()[0]
        finally:
            conn.execute("COMMIT")
        endings = [
            WorkflowEnding(row[0], row[1], row[4], row[2].removeprefix("workflow_"), row[3])
            for row in rows
            if isinstance(row[4], str)
        ]
        return endings, int(last) if last is not None else after_seq

    def stalled_workflows(self, submitted_before_ms: int) -> list[tuple[str, str]]:
        """(id, state) of workflows the leader must move on: `submitting` ones
        whose last part came before `submitted_before_ms` (their proposer gave
        up or died), and cancelled ones with tasks still to cancel."""
        rows = self._conn().execute(
            "SELECT id, state FROM workflows WHERE state = 'submitting' AND updated_at < ?"
            " UNION ALL SELECT w.id, w.state FROM workflows w WHERE w.state = 'cancelled'"
            " AND EXISTS (SELECT 1 FROM tasks t WHERE t.workflow_id = w.id"
            "   AND t.state IN ('pending', 'queued', 'assigned', 'running'))"
            " ORDER BY 1",
            (submitted_before_ms,),
        )
        return [(row[0], row[1]) for row in rows]

    def ready_workflow_tasks(self, limit: int = 100_000) -> dict[str, list[str]]:
        """Pending tasks of running workflows whose dependencies are all
        terminal (the ones the leader must decide), by workflow, each
        workflow's in definition order."""
        rows = self._conn().execute(
            "SELECT t.workflow_id, t.id FROM tasks t"
            " JOIN workflows w ON w.id = t.workflow_id AND w.state = 'running'"
            " WHERE t.state = 'pending' AND NOT EXISTS ("
            "   SELECT 1 FROM task_dependencies d"
            "   WHERE d.workflow_id = t.workflow_id AND d.task_key = t.workflow_key"
            "     AND (SELECT p.state FROM tasks p WHERE p.workflow_id = d.workflow_id"
            "          AND p.workflow_key = d.depends_on_key)"
            "       IN ('pending', 'queued', 'assigned', 'running'))"
            " ORDER BY w.submit_index, t.workflow_pos LIMIT ?",
            (limit,),
        )
        ready: dict[str, list[str]] = {}
        for workflow_id, task_id in rows:
            ready.setdefault(workflow_id, []).append(task_id)
        return ready
