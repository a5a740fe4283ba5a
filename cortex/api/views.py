"""JSON-ready views of API replies, shared by the CLI's --json output and
the MCP tools."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from cortex.v1 import cortex_pb2 as pb


def iso_time(ms: int) -> str | None:
    if not ms:
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


def task_json(task: pb.Task) -> dict[str, Any]:
    spec = task.spec
    command: Any = spec.shell or list(spec.command)
    data: dict[str, Any] = {
        "id": task.id,
        "state": task.state,
        "type": task.type,
        "attempt": task.attempt,
        "node": task.node or None,
        "priority": task.priority,
        "command": command,
        "idempotency_key": task.idempotency_key or None,
        "error": task.error or None,
        "created_at": iso_time(task.created_at_ms),
        "updated_at": iso_time(task.updated_at_ms),
        "result": None,
    }
    if task.has_result:
        data["result"] = {
            "exit_code": task.result.exit_code,
            "stdout": task.result.stdout.decode("utf-8", errors="replace"),
            "stderr": task.result.stderr.decode("utf-8", errors="replace"),
            "stdout_truncated": task.result.stdout_truncated,
            "stderr_truncated": task.result.stderr_truncated,
            "timed_out": task.result.timed_out,
            "error": task.result.error or None,
        }
    if task.pending_reasons:
        data["pending_reasons"] = list(task.pending_reasons)
    if task.events:
        data["events"] = [
            {
                "seq": ev.seq,
                "event": ev.event,
                "from": ev.from_state or None,
                "to": ev.to_state or None,
                "node": ev.node or None,
                "attempt": ev.attempt,
                "detail": json.loads(ev.detail_json) if ev.detail_json else None,
                "at": iso_time(ev.ts_ms),
            }
            for ev in task.events
        ]
    return data


def status_json(status: pb.ClusterStatusResponse) -> dict[str, Any]:
    return {
        "node_id": status.node_id,
        "leader": status.leader_node_id or status.leader or None,
        "leader_address": status.leader or None,
        "term": status.term,
        "raft_state": status.raft_state,
        "has_quorum": status.has_quorum,
        "last_applied": status.last_applied,
        "applied_index": status.applied_index,
        "commit_index": status.commit_index,
        "log_size": status.log_size,
        "journal": {
            "sync": status.raft_sync,
            "syncs": status.journal_syncs,
            "synced_entries": status.journal_synced_entries,
        },
        "state_digest": status.state_digest,
        "task_counts": dict(status.task_counts),
        "nodes": [
            {
                "node_id": n.node_id,
                "raft_address": n.raft_address,
                "grpc_address": n.grpc_address,
                "status": n.status,
                "connected": n.connected,
                "leader": n.is_leader,
                "active_tasks": n.running_tasks,
                "labels": dict(n.labels),
                "executors": list(n.executors),
            }
            for n in status.nodes
        ],
    }


def node_json(node: pb.NodeInfo) -> dict[str, Any]:
    data: dict[str, Any] = {
        "node_id": node.node_id,
        "status": node.status,
        "leader": node.is_leader,
        "connected": node.connected,
        "raft_address": node.raft_address,
        "grpc_address": node.grpc_address,
        "peer_address": node.peer_address,
        "active_tasks": node.running_tasks,
        "max_tasks": node.max_tasks,
        "labels": dict(node.labels),
        "capabilities": dict(node.capabilities),
        "executors": list(node.executors),
        "status_reason": node.status_reason or None,
        "drain_deadline_ms": node.drain_deadline_ms or None,
        "resources": None,
    }
    if node.has_resources:
        r = node.resources
        data["resources"] = {
            "cpu_cores": r.cpu_cores,
            "cpu_usage_percent": round(r.cpu_usage_percent, 1),
            "load_1m": round(r.load_1m, 2),
            "memory_total_mb": round(r.memory_total_mb),
            "memory_available_mb": round(r.memory_available_mb),
            "disk_total_gb": round(r.disk_total_gb, 1),
            "disk_available_gb": round(r.disk_available_gb, 1),
            "disk_io_util_percent": round(r.disk_io_util_percent, 1),
            "network_bandwidth_mbps": r.network_bandwidth_mbps,
            "network_throughput_mbps": round(r.network_throughput_mbps, 3),
            "gpu": (
                {
                    "name": r.gpu.name,
                    "memory_total_mb": r.gpu.memory_total_mb,
                    "usage_percent": r.gpu.usage_percent,
                }
                if r.HasField("gpu")
                else None
            ),
            "gaming_detected": r.gaming_detected,
            "declared": list(r.declared),
            "report_age_ms": node.report_age_ms,
        }
    return data


def workflow_json(workflow: pb.Workflow) -> dict[str, Any]:
    return {
        "id": workflow.id,
        "name": workflow.name,
        "state": workflow.state,
        "error": workflow.error or None,
        "context": json.loads(workflow.context_json) if workflow.context_json else {},
        "created_at": iso_time(workflow.created_at_ms),
        "completed_at": iso_time(workflow.completed_at_ms),
        "task_counts": dict(sorted(workflow.task_counts.items())),
        "tasks": [
            {
                "key": t.key,
                "task_id": t.task_id,
                "type": t.type,
                "state": t.state,
                "attempt": t.attempt,
                "node": t.node or None,
                "depends_on": list(t.depends_on),
                "condition": t.condition or None,
                "skip_reason": t.skip_reason or None,
                "started_at": iso_time(t.started_at_ms),
                "finished_at": iso_time(t.finished_at_ms),
                "exit_code": t.exit_code if t.has_result else None,
            }
            for t in workflow.tasks
        ],
    }
