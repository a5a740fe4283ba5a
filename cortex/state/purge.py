"""Retention in the replicated log: the deterministic effect of
`TASKS_PURGE`, and the selections it and the leader's purge check share.

A purge removes, oldest first (by completion time, then id):
- standalone tasks in a purgeable terminal state, with their events and
  their idempotency key (a key can be reused once its task is purged);
- finished workflows, whole: the workflow row, its tasks, their events and
  its dependency rows. A workflow holding a dead letter (or a retried one
  still running) is kept;
- events that belong to no task (node, workflow and rejection records).

Dead letters are never purged: they wait for an operator's retry."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

from cortex.state import created_spans
from cortex.state import entries as e
from cortex.state.reasons import INVALID_PAYLOAD, Rejected
from cortex.state.transitions import ApplyContext, EntryHandler, TaskChange

# Purgeable: terminal task states but dead_letter, terminal workflow states.
# The SQL spells the sets out literally: the partial indexes (migrations 4, 14)
# match only identical text. The queries name their index (INDEXED BY, an error if it stops
# matching) because without statistics SQLite prefers the wider indexes and
# sorts every finished task to find the oldest few.
MAX_PURGE_LIMIT = 10_000
# The event a purge records, and the state a purged task reports to
# in-process listeners (`TaskChange`).
PURGED = "purged"

_STANDALONE = (
    "workflow_id IS NULL AND (state = 'cancelled' OR state = 'completed'"
    " OR state = 'failed' OR state = 'skipped')"
)
_FINISHED = "(state = 'cancelled' OR state = 'completed' OR state = 'failed')"
_LOOSE = "(task_id IS NULL OR event = 'rejected')"
# Rejections that name a task are loose only once the task is gone.
_NO_TASK = (
    "(task_id IS NULL OR NOT EXISTS (SELECT 1 FROM tasks t WHERE t.id = task_events.task_id))"
)
# A finished workflow still holding a dead letter, or a dead letter retried
# after it failed that has not finished yet, is kept.
_NOTHING_WAITING = (
    "NOT EXISTS (SELECT 1 FROM tasks t WHERE t.workflow_id = w.id"
    " AND t.state IN ('dead_letter', 'pending', 'queued', 'assigned', 'running'))"
)


_Reader = sqlite3.Connection | sqlite3.Cursor


@dataclass(frozen=True, order=True)
class PurgeUnit:
    """One thing a purge removes whole: a standalone task (`size` 1) or a
    finished workflow (`size`: its task count). Sorts in purge order."""

    completed_at: int
    kind: str  # "task" or "workflow"
    id: str
    size: int


def old_tasks(conn: _Reader, before_ms: int, limit: int) -> list[PurgeUnit]:
    rows = conn.execute(
        "SELECT completed_at, id FROM tasks INDEXED BY tasks_purgeable"
        f" WHERE {_STANDALONE} AND completed_at < ? ORDER BY completed_at, id LIMIT ?",
        (before_ms, limit),
    ).fetchall()
    return [PurgeUnit(row[0], "task", row[1], 1) for row in rows]


def old_workflows(conn: _Reader, before_ms: int, limit: int) -> list[PurgeUnit]:
    rows = conn.execute(
        "SELECT w.completed_at, w.id, (SELECT COUNT(*) FROM tasks t WHERE t.workflow_id = w.id)"
        " FROM workflows w INDEXED BY workflows_finished"
        f" WHERE {_FINISHED} AND completed_at < ? AND {_NOTHING_WAITING}"
        " ORDER BY completed_at, id LIMIT ?",
        (before_ms, limit),
    ).fetchall()
    return [PurgeUnit(row[0], "workflow", row[1], row[2]) for row in rows]


def loose_events(
    conn: _Reader,
    before_ms: int,
    limit: int,
    skip_events: tuple[str, ...] = (),
) -> list[int]:
    """Seqs of events older than `before_ms` that belong to no task."""
    skip = f" AND event NOT IN ({','.join('?' * len(skip_events))})" if skip_events else ""
    rows = conn.execute(
        "SELECT seq FROM task_events INDEXED BY task_events_loose"
        f" WHERE {_LOOSE} AND ts < ? AND {_NO_TASK}{skip} ORDER BY ts, seq LIMIT ?",
        (before_ms, *skip_events, limit),
    ).fetchall()
    return [row[0] for row in rows]


def choose_units(tasks: list[PurgeUnit], workflows: list[PurgeUnit], limit: int) -> list[PurgeUnit]:
    """The oldest units whose tasks fit in `limit`, in purge order. The
    oldest unit always goes, so a workflow larger than `limit` still can."""
    chosen: list[PurgeUnit] = []
    budget = limit
    for unit in sorted(tasks + workflows):
        if chosen and unit.size > budget:
            break
        chosen.append(unit)
        budget -= unit.size
        if budget <= 0:
            break
    return chosen


def tasks_purge(ctx: ApplyContext, p: e.TasksPurge) -> dict[str, Any]:
    if p.before_ms < 0:
        raise Rejected(INVALID_PAYLOAD, f"purge cutoff {p.before_ms} is negative")
    if not 1 <= p.limit <= MAX_PURGE_LIMIT:
        raise Rejected(
            INVALID_PAYLOAD, f"purge limit {p.limit} is not between 1 and {MAX_PURGE_LIMIT}"
        )
    if p.before_ms > ctx.entry.ts:
        raise Rejected(
            INVALID_PAYLOAD,
            f"purge cutoff {p.before_ms} is after the entry's own time {ctx.entry.ts}",
        )
    cur = ctx.cur
    units = choose_units(
        old_tasks(cur, p.before_ms, p.limit), old_workflows(cur, p.before_ms, p.limit), p.limit
    )
    events = loose_events(cur, p.before_ms, p.limit)
    workflows = [u.id for u in units if u.kind == "workflow"]
    summary = {
        "before_ms": p.before_ms,
        "tasks": sum(u.size for u in units),
        "workflows": len(workflows),
        "events": len(events),
    }
    # Written before the deletes, so the newest event is never removed and
    # seq (SQLite's max + 1) never goes back for event watchers.
    ctx.event(PURGED, detail=summary)
    for unit in units:
        if unit.kind == "task":
            _purge_tasks(ctx, "id = ?", unit.id)
        else:
            _purge_tasks(ctx, "workflow_id = ?", unit.id)
            cur.execute("DELETE FROM task_dependencies WHERE workflow_id = ?", (unit.id,))
            cur.execute("DELETE FROM workflows WHERE id = ?", (unit.id,))
    cur.executemany("DELETE FROM task_events WHERE seq = ?", [(seq,) for seq in events])
    if units:
        created_spans.prune(cur)
    return summary


def _purge_tasks(ctx: ApplyContext, where: str, value: str) -> None:
    tasks = ctx.cur.execute(
        f"SELECT id, attempt, assigned_node, idempotency_key FROM tasks WHERE {where} ORDER BY id",
        (value,),
    ).fetchall()
    for task in tasks:
        ctx.cur.execute("DELETE FROM task_events WHERE task_id = ?", (task["id"],))
        if task["idempotency_key"] is not None:
            ctx.cur.execute(
                "DELETE FROM submissions WHERE idempotency_key = ? AND task_id = ?",
                (task["idempotency_key"], task["id"]),
            )
        ctx.changes.append(TaskChange(task["id"], PURGED, task["assigned_node"], task["attempt"]))
    ctx.cur.execute(f"DELETE FROM tasks WHERE {where}", (value,))


PURGE_HANDLERS: dict[type[e.Payload], EntryHandler] = {
    e.TasksPurge: tasks_purge,
}
