"""The deterministic effect of node entries: a node joining (or coming back),
its status changing (drain, cordon, offline) and its removal."""

from __future__ import annotations

import sqlite3
from typing import Any

from cortex.state import entries as e
from cortex.state.canonical import dump as _dump
from cortex.state.reasons import ILLEGAL_TRANSITION, INVALID_PAYLOAD, UNKNOWN_NODE, Rejected, quoted
from cortex.state.schema import ACTIVE_ON_NODE
from cortex.state.transitions import ApplyContext, EntryHandler, requeue

NODE_STATUSES = frozenset({"active", "draining", "cordoned", "offline"})
VOTER = "voter"
OBSERVER = "observer"
NODE_ROLES = frozenset({VOTER, OBSERVER})


def node_join(ctx: ApplyContext, p: e.NodeJoin) -> dict[str, Any]:
    if p.role not in NODE_ROLES:
        raise Rejected(
            INVALID_PAYLOAD,
            f"node role {quoted(p.role)} is not one of {', '.join(sorted(NODE_ROLES))}",
        )
    # An observer has no Raft address: it listens on no Raft port.
    if not p.node_id or not p.grpc_address or (p.role == VOTER and not p.raft_address):
        raise Rejected(
            INVALID_PAYLOAD,
            "node join needs node_id and grpc_address, and a voter its raft_address",
        )
    row = ctx.cur.execute("SELECT status FROM nodes WHERE id = ?", (p.node_id,)).fetchone()
    if row is not None and row["status"] == "removed":
        _check_rejoin(ctx, p)
    # A node coming back from offline, or joining again after its removal, is
    # active; drain and cordon are operator decisions and survive a restart.
    returning = row is None or row["status"] in ("offline", "removed")
    status = "active" if returning else row["status"]
    ctx.cur.execute(
        "INSERT INTO nodes (id, raft_address, grpc_address, peer_address, status, labels,"
        " executors, resources, joined_at, updated_at, role) VALUES (?,?,?,?,?,?,?,?,?,?,?)"
        " ON CONFLICT(id) DO UPDATE"
        " SET raft_address=excluded.raft_address, grpc_address=excluded.grpc_address,"
        " peer_address=excluded.peer_address,"
        " status=excluded.status, labels=excluded.labels, executors=excluded.executors,"
        " resources=excluded.resources, updated_at=excluded.updated_at, role=excluded.role",
        (
            p.node_id,
            p.raft_address,
            p.grpc_address,
            p.peer_address,
            status,
            _dump(p.labels),
            _dump(sorted(p.executors)),
            _dump(p.resources),
            ctx.entry.ts,
            ctx.entry.ts,
            p.role,
        ),
    )
    detail = {"raft": p.raft_address, "grpc": p.grpc_address}
    if p.role != VOTER:
        # Only then: the events of voters' joins stay as they were.
        detail["role"] = p.role
    ctx.event("node_joined", node=p.node_id, detail=detail)
    return {"status": status}


def removal_index(db: sqlite3.Connection | sqlite3.Cursor, node_id: str) -> int | None:
    """The Raft index of the node's latest removal, while its event is kept."""
    row = db.execute(
        "SELECT MAX(raft_index) FROM task_events WHERE event = 'node_left' AND node = ?",
        (node_id,),
    ).fetchone()
    return None if row is None or row[0] is None else int(row[0])


def _check_rejoin(ctx: ApplyContext, p: e.NodeJoin) -> None:
    """A removed node joins again only with a join that names its removal:
    one proposed before the node knew of it (committed after it) is refused,
    and so is a replayed old join."""
    removed_at = removal_index(ctx.cur, p.node_id)
    # Once retention purged the removal's event, any join naming a removal will do.
    if p.rejoin_after < (1 if removed_at is None else removed_at):
        raise Rejected(
            ILLEGAL_TRANSITION,
            f"node {p.node_id} was removed; only a join made after its removal (from an empty"
            " data dir) brings it back",
        )


def node_status(ctx: ApplyContext, p: e.NodeStatus) -> dict[str, Any]:
    if p.status not in NODE_STATUSES:
        raise Rejected(
            INVALID_PAYLOAD,
            f"node status {quoted(p.status)} is not one of {', '.join(sorted(NODE_STATUSES))}",
        )
    row = ctx.cur.execute("SELECT status FROM nodes WHERE id = ?", (p.node_id,)).fetchone()
    if row is None:
        raise Rejected(UNKNOWN_NODE, f"node {p.node_id} never joined")
    if row["status"] == "removed":
        raise Rejected(ILLEGAL_TRANSITION, f"node {p.node_id} was removed; it must join again")
    deadline = p.deadline_ms if p.status == "draining" else None
    ctx.cur.execute(
        "UPDATE nodes SET status = ?, status_reason = ?, drain_deadline = ?, updated_at = ?"
        " WHERE id = ?",
        (p.status, p.reason, deadline, ctx.entry.ts, p.node_id),
    )
    detail: dict[str, Any] = {"reason": p.reason}
    if deadline is not None:
        detail["deadline_ms"] = deadline
    ctx.event("node_status", node=p.node_id, from_state=row["status"], to_state=p.status,
              detail=detail)  # fmt: skip
    return {"previous": row["status"]}


def node_leave(ctx: ApplyContext, p: e.NodeLeave) -> dict[str, Any]:
    """Takes a node out for good: its row stays as `removed` (so a late
    registration from the old process cannot bring it back as active) and its
    unfinished tasks go back to the queue."""
    row = ctx.cur.execute("SELECT status FROM nodes WHERE id = ?", (p.node_id,)).fetchone()
    if row is None:
        raise Rejected(UNKNOWN_NODE, f"node {p.node_id} never joined")
    if row["status"] == "removed":
        raise Rejected(ILLEGAL_TRANSITION, f"node {p.node_id} is already removed")
    reason = f"node {p.node_id} removed from the cluster"
    tasks = ctx.cur.execute(
        f"SELECT * FROM tasks WHERE assigned_node = ? AND {ACTIVE_ON_NODE} ORDER BY id",
        (p.node_id,),
    ).fetchall()
    for task in tasks:
        requeue(ctx, task, reason)
    ctx.cur.execute(
        "UPDATE nodes SET status = 'removed', status_reason = ?, drain_deadline = NULL,"
        " updated_at = ? WHERE id = ?",
        (p.reason or "removed by request", ctx.entry.ts, p.node_id),
    )
    ctx.event("node_left", node=p.node_id, from_state=row["status"], to_state="removed",
              detail={"reason": p.reason, "requeued": len(tasks)})  # fmt: skip
    return {"previous": row["status"], "requeued": len(tasks)}


NODE_HANDLERS: dict[type[e.Payload], EntryHandler] = {
    e.NodeJoin: node_join,
    e.NodeStatus: node_status,
    e.NodeLeave: node_leave,
}
