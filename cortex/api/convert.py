"""Translation between protobuf messages and Cortex's own types."""

from __future__ import annotations

import json
from typing import Any

from cortex.errors import InvalidArgument
from cortex.membership.cluster_status import ClusterView, NodeStatusView
from cortex.scheduler.model import GpuInfo, NodeResources
from cortex.state.queries import EventView, TaskPage, TaskView
from cortex.v1 import cortex_pb2 as pb

_CONSTRAINT_FIELDS = {
    "requires_gpu": "requiresGpu",
    "avoid_gaming": "avoidGaming",
    "min_memory_mb": "minMemoryMb",
    "min_disk_gb": "minDiskGb",
    "node_labels": "nodeLabels",
    "target_node": "targetNode",
    "requires_capabilities": "requiresCapabilities",
    "allowed_nodes": "allowedNodes",
    "forbidden_nodes": "forbiddenNodes",
    "max_parallel_per_node": "maxParallelPerNode",
}
_RETRY_FIELDS = {
    "max_retries": "maxRetries",
    "backoff_ms": "backoffMs",
    "backoff_multiplier": "backoffMultiplier",
    "retryable": "retryable",
}


def spec_from_proto(message: pb.TaskSpec) -> dict[str, Any]:
    """A plain-data spec for `parse_task_spec`; only fields the caller set."""
    spec: dict[str, Any] = {"type": message.type or "shell"}
    if message.command and message.shell:
        raise InvalidArgument("spec: give either command (argv) or shell (a string), not both")
    if message.command:
        spec["command"] = list(message.command)
    elif message.shell:
        spec["command"] = message.shell
    elif spec["type"] == "shell":
        raise InvalidArgument("spec.command: command is empty")
    if message.env:
        spec["env"] = dict(message.env)
    if message.cwd:
        spec["cwd"] = message.cwd
    if message.HasField("timeout_ms"):
        spec["timeoutMs"] = message.timeout_ms
    if message.HasField("priority"):
        spec["priority"] = message.priority
    if message.labels:
        spec["labels"] = dict(message.labels)
    if message.HasField("constraints"):
        constraints: dict[str, Any] = {}
        for name, alias in _CONSTRAINT_FIELDS.items():
            value = getattr(message.constraints, name)
            if name == "requires_capabilities" or name.endswith("nodes") or name == "node_labels":
                value = dict(value) if name == "requires_capabilities" else list(value)
            if value:
                constraints[alias] = value
        spec["constraints"] = constraints
    if message.HasField("retry_policy"):
        spec["retryPolicy"] = {
            alias: getattr(message.retry_policy, name)
            for name, alias in _RETRY_FIELDS.items()
            if message.retry_policy.HasField(name)
        }
    if message.options_json:
        try:
            options = json.loads(message.options_json)
        except ValueError as err:
            raise InvalidArgument(f"spec.options_json is not valid JSON: {err}") from None
        if not isinstance(options, dict):
            raise InvalidArgument("spec.options_json must be a JSON object")
        spec["options"] = options
    return spec


def spec_to_proto(spec: dict[str, Any]) -> pb.TaskSpec:
    message = pb.TaskSpec(type=spec.get("type", "shell"))
    command = spec.get("command")
    if isinstance(command, str):
        message.shell = command
    elif command:
        message.command.extend(command)
    message.env.update(spec.get("env") or {})
    message.cwd = spec.get("cwd") or ""
    if spec.get("timeout_ms") is not None:
        message.timeout_ms = spec["timeout_ms"]
    message.priority = spec.get("priority", 5)
    message.labels.update(spec.get("labels") or {})
    constraints = spec.get("constraints") or {}
    for name in _CONSTRAINT_FIELDS:
        value = constraints.get(name)
        if value in (None, [], {}, False, 0):
            continue
        field = getattr(message.constraints, name)
        if isinstance(value, list):
            field.extend(value)
        elif isinstance(value, dict):
            field.update(value)
        else:
            setattr(message.constraints, name, value)
    for name, value in (spec.get("retry_policy") or {}).items():
        if name in _RETRY_FIELDS:
            setattr(message.retry_policy, name, value)
    if spec.get("options"):
        message.options_json = json.dumps(spec["options"], sort_keys=True)
    return message


def event_to_proto(event: EventView) -> pb.TaskEvent:
    return pb.TaskEvent(
        seq=event.seq,
        event=event.event,
        from_state=event.from_state or "",
        to_state=event.to_state or "",
        node=event.node or "",
        attempt=event.attempt or 0,
        detail_json=json.dumps(event.detail, sort_keys=True) if event.detail else "",
        ts_ms=event.ts,
        raft_index=event.raft_index,
    )


def task_to_proto(
    task: TaskView, events: list[EventView] | None = None, reasons: list[str] | None = None
) -> pb.Task:
    message = pb.Task(
        id=task.id,
        state=task.state,
        type=task.type,
        attempt=task.attempt,
        node=task.node or "",
        priority=task.priority,
        spec=spec_to_proto(task.spec),
        idempotency_key=task.idempotency_key or "",
        workflow_id=task.workflow_id or "",
        workflow_key=task.workflow_key or "",
        error=task.error or "",
        created_at_ms=task.created_at,
        updated_at_ms=task.updated_at,
        scheduled_after_ms=task.scheduled_after,
        pending_reasons=reasons or [],
        events=[event_to_proto(ev) for ev in events or []],
    )
    if task.result is not None:
        result = task.result
        message.has_result = True
        message.result.CopyFrom(
            pb.TaskResult(
                exit_code=int(result.get("exit_code") or 0),
                stdout=str(result.get("stdout") or "").encode(),
                stderr=str(result.get("stderr") or "").encode(),
                stdout_truncated=bool(result.get("stdout_truncated")),
                stderr_truncated=bool(result.get("stderr_truncated")),
                error=str(result.get("error") or ""),
                timed_out=bool(result.get("timed_out")),
            )
        )
    return message


def cluster_to_proto(view: ClusterView) -> pb.ClusterStatusResponse:
    return pb.ClusterStatusResponse(
        node_id=view.node_id,
        leader=view.leader or "",
        leader_node_id=view.leader_node_id or "",
        term=view.term,
        last_applied=view.last_applied,
        commit_index=view.commit_index,
        state_digest=view.state_digest,
        has_quorum=view.has_quorum,
        raft_state=view.raft_state,
        nodes=[node_to_proto(n) for n in view.nodes],
        task_counts=view.task_counts,
        log_size=view.log_size,
        applied_index=view.applied_index,
        raft_sync=view.raft_sync,
        journal_syncs=view.journal_syncs,
        journal_synced_entries=view.journal_synced_entries,
    )


def resources_to_proto(res: NodeResources) -> pb.NodeResources:
    message = pb.NodeResources(
        cpu_cores=res.cpu_cores,
        cpu_usage_percent=res.cpu_usage_percent,
        load_1m=res.load_1m,
        memory_total_mb=res.memory_total_mb,
        memory_available_mb=res.memory_available_mb,
        disk_total_gb=res.disk_total_gb,
        disk_available_gb=res.disk_available_gb,
        disk_io_util_percent=res.disk_io_util_percent,
        network_bandwidth_mbps=res.network_bandwidth_mbps,
        network_throughput_mbps=res.network_throughput_mbps,
        gaming_detected=res.gaming_detected,
        declared=sorted(res.declared),
    )
    if res.gpu is not None:
        message.gpu.CopyFrom(
            pb.GpuInfo(
                name=res.gpu.name,
                memory_total_mb=res.gpu.memory_total_mb,
                memory_used_mb=res.gpu.memory_used_mb,
                usage_percent=res.gpu.usage_percent,
            )
        )
    return message


def resources_from_proto(message: pb.NodeResources) -> NodeResources:
    gpu = None
    if message.HasField("gpu"):
        gpu = GpuInfo(
            message.gpu.name,
            message.gpu.memory_total_mb,
            message.gpu.memory_used_mb,
            message.gpu.usage_percent,
        )
    return NodeResources(
        cpu_cores=message.cpu_cores,
        cpu_usage_percent=message.cpu_usage_percent,
        load_1m=message.load_1m,
        memory_total_mb=message.memory_total_mb,
        memory_available_mb=message.memory_available_mb,
        disk_total_gb=message.disk_total_gb,
        disk_available_gb=message.disk_available_gb,
        disk_io_util_percent=message.disk_io_util_percent,
        network_bandwidth_mbps=message.network_bandwidth_mbps,
        network_throughput_mbps=message.network_throughput_mbps,
        gpu=gpu,
        gaming_detected=message.gaming_detected,
        declared=frozenset(message.declared),
    )


def node_to_proto(view: NodeStatusView) -> pb.NodeInfo:
    node = view.node
    message = pb.NodeInfo(
        node_id=node.id,
        raft_address=node.raft_address,
        grpc_address=node.grpc_address,
        peer_address=node.peer_address,
        status=node.status,
        connected=view.connected,
        is_leader=view.is_leader,
        running_tasks=view.active_tasks,
        labels=node.labels,
        executors=node.executors,
        max_tasks=int(node.resources.get("max_tasks", 0) or 0),
        status_reason=node.status_reason,
        drain_deadline_ms=node.drain_deadline or 0,
    )
    if view.report is not None:
        message.has_resources = True
        message.resources.CopyFrom(resources_to_proto(view.report.resources))
        message.report_age_ms = int(view.report_age_s * 1000)
        message.capabilities.update(view.report.capabilities)
    return message


def page_token(next_offset: int | None) -> str:
    """The opaque token for the next page; empty on the last page."""
    return "" if next_offset is None else str(next_offset)


def task_page_to_proto(page: TaskPage) -> pb.ListTasksResponse:
    return pb.ListTasksResponse(
        tasks=[task_to_proto(t) for t in page.tasks],
        next_page_token=page_token(page.next_offset),
        total=page.total,
    )
