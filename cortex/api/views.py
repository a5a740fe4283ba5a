"""JSON-ready views of API replies, shared by the CLI's --json output and
the MCP tools. Their shape outlives the contract's: enums become lower-case
names ("queued", "dead_letter"; `cortex.proto_enums`), times ISO strings,
durations milliseconds."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC
from typing import Any

from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message
from google.protobuf.struct_pb2 import Struct

from cortex.errors import InvalidArgument
from cortex.proto_enums import enum_name, enum_names
from cortex.proto_enums import enum_value as proto_enum_value
from cortex.v1 import cortex_pb2 as pb


def enum_value(enum: Any, name: str, what: str) -> int:
    """The value of a lower-case name: "dead_letter" -> TASK_STATE_DEAD_LETTER;
    an InvalidArgument naming `what` and the choices for any other name."""
    choices = enum_names(enum)
    if name.lower() not in choices:
        raise InvalidArgument(
            f"{what}: unknown value {name!r}; expected one of {', '.join(choices)}"
        )
    return int(proto_enum_value(enum, name.lower()))


def _optional_name(enum: Any, value: int) -> str | None:
    return enum_name(enum, value) or None


def iso_time(message: Message, field: str) -> str | None:
    """A Timestamp field as an ISO string in UTC with milliseconds; None when unset."""
    if not message.HasField(field):
        return None
    moment = getattr(message, field).ToDatetime(tzinfo=UTC)
    return str(moment.isoformat(timespec="milliseconds"))


def time_ms(message: Message, field: str) -> int | None:
    """A Timestamp field in milliseconds since the epoch; None when unset."""
    return int(getattr(message, field).ToMilliseconds()) if message.HasField(field) else None


def _whole_numbers(value: Any) -> Any:
    """A Struct's numbers are doubles: those with no fraction were whole numbers."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _whole_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_whole_numbers(v) for v in value]
    return value


def struct_json(struct: Struct) -> dict[str, Any]:
    return dict(_whole_numbers(MessageToDict(struct)))


def state_counts(counts: Iterable[pb.TaskStateCount]) -> dict[str, int]:
    """Tasks per state name, by name."""
    return dict(sorted((enum_name(pb.TaskState, c.state), int(c.count)) for c in counts))


def event_change(event: pb.Event) -> tuple[str | None, str | None]:
    """The (from, to) names of the state or status an event changed."""
    kind = event.WhichOneof("change")
    if kind == "task_change":
        task = event.task_change
        return (
            _optional_name(pb.TaskState, task.from_state),
            _optional_name(pb.TaskState, task.to_state),
        )
    if kind == "workflow_change":
        workflow = event.workflow_change
        return (
            _optional_name(pb.WorkflowState, workflow.from_state),
            _optional_name(pb.WorkflowState, workflow.to_state),
        )
    if kind == "node_change":
        node = event.node_change
        return (
            _optional_name(pb.NodeStatus, node.from_status),
            _optional_name(pb.NodeStatus, node.to_status),
        )
    return None, None


def event_detail(event: pb.Event) -> dict[str, Any] | None:
    return struct_json(event.detail) if event.HasField("detail") and event.detail.fields else None


def task_json(task: pb.Task, events: Iterable[pb.Event] = ()) -> dict[str, Any]:
    spec = task.spec
    command: Any = spec.shell or list(spec.command)
    data: dict[str, Any] = {
        "id": task.id,
        "state": enum_name(pb.TaskState, task.state),
        "type": task.type,
        "attempt": task.attempt,
        "node": task.node_id or None,
        "priority": task.priority,
        "command": command,
        "idempotency_key": task.idempotency_key or None,
        "concurrency_key": task.concurrency_key or None,
        "fairness_key": task.fairness_key or None,
        "error": task.error or None,
        "created_at": iso_time(task, "create_time"),
        "updated_at": iso_time(task, "update_time"),
        "traceparent": task.traceparent or None,
        "result": None,
    }
    if task.HasField("result"):
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
    history = [_task_event_json(event) for event in events]
    if history:
        data["events"] = history
    return data


def _task_event_json(event: pb.Event) -> dict[str, Any]:
    before, after = event_change(event)
    return {
        "seq": event.seq,
        "event": enum_name(pb.EventType, event.type),
        "from": before,
        "to": after,
        "node": event.node_id or None,
        "attempt": event.attempt,
        "detail": event_detail(event),
        "at": iso_time(event, "time"),
    }


def status_json(status: pb.GetClusterStatusResponse) -> dict[str, Any]:
    return {
        "node_id": status.node_id,
        "leader": status.leader_id or status.leader_raft_address or None,
        "leader_address": status.leader_raft_address or None,
        "term": status.term,
        "raft_state": enum_name(pb.RaftRole, status.raft_role) or "unknown",
        "has_quorum": status.has_quorum,
        "last_applied": status.raft_last_applied,
        "applied_index": status.applied_index,
        "commit_index": status.commit_index,
        "log_size": status.log_size,
        "journal": {
            "sync": status.raft_sync,
            "syncs": status.journal_syncs,
            "synced_entries": status.journal_synced_entries,
        },
        # None from a node that does not report it (an older version).
        "election_timeout_s": [
            span.ToNanoseconds() / 1e9
            for span in (status.election_timeout_min, status.election_timeout_max)
        ]
        if status.HasField("election_timeout_max")
        else None,
        "state_digest": status.state_digest,
        "task_counts": state_counts(status.task_counts),
        "nodes": [
            {
                "node_id": n.id,
                "raft_address": n.raft_address,
                "grpc_address": n.grpc_address,
                "status": enum_name(pb.NodeStatus, n.status),
                "connected": n.connected,
                "leader": n.leader,
                "active_tasks": n.running_tasks,
                "labels": dict(n.labels),
                "executors": list(n.executors),
            }
            for n in status.nodes
        ],
    }


def node_json(node: pb.Node) -> dict[str, Any]:
    data: dict[str, Any] = {
        "node_id": node.id,
        "status": enum_name(pb.NodeStatus, node.status),
        # Added with observers ("voter" or "observer"); no key was changed.
        "role": enum_name(pb.NodeRole, node.role) or "voter",
        "leader": node.leader,
        "connected": node.connected,
        "raft_address": node.raft_address,
        "grpc_address": node.grpc_address,
        "peer_address": node.peer_address,
        "active_tasks": node.running_tasks,
        "max_tasks": node.max_tasks,
        "prefetch_tasks": node.prefetch_tasks,
        "labels": dict(node.labels),
        "capabilities": dict(node.capabilities),
        "executors": list(node.executors),
        "status_reason": node.status_reason or None,
        "drain_deadline_ms": time_ms(node, "drain_deadline"),
        "resources": None,
    }
    if node.HasField("resources"):
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
            "report_age_ms": int(node.report_age.ToMilliseconds()),
        }
    return data


def workflow_json(workflow: pb.Workflow) -> dict[str, Any]:
    return {
        "id": workflow.id,
        "name": workflow.name,
        "state": enum_name(pb.WorkflowState, workflow.state),
        "error": workflow.error or None,
        "context": struct_json(workflow.context),
        "created_at": iso_time(workflow, "create_time"),
        "completed_at": iso_time(workflow, "finish_time"),
        "traceparent": workflow.traceparent or None,
        "task_counts": state_counts(workflow.task_counts),
        "tasks": [
            {
                "key": t.key,
                "task_id": t.task_id,
                "type": t.type,
                "state": enum_name(pb.TaskState, t.state),
                "attempt": t.attempt,
                "node": t.node_id or None,
                "depends_on": list(t.depends_on),
                "condition": t.condition or None,
                "skip_reason": t.skip_reason or None,
                "started_at": iso_time(t, "start_time"),
                "finished_at": iso_time(t, "finish_time"),
                "exit_code": t.exit_code if t.HasField("exit_code") else None,
            }
            for t in workflow.tasks
        ],
    }
