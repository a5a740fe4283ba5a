"""Translation of nodes, their resource reports and the cluster's status
into protobuf messages (and of resource reports back, for heartbeats)."""

from __future__ import annotations

from cortex.api.convert import duration, state_counts, timestamp
from cortex.membership.cluster_status import ClusterView, NodeStatusView
from cortex.proto_enums import enum_value
from cortex.scheduler.model import GpuInfo, NodeResources
from cortex.v1 import cortex_pb2 as pb


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


def node_to_proto(view: NodeStatusView) -> pb.Node:
    node = view.node
    message = pb.Node(
        id=node.id,
        raft_address=node.raft_address,
        grpc_address=node.grpc_address,
        peer_address=node.peer_address,
        status=enum_value(pb.NodeStatus, node.status),
        role=enum_value(pb.NodeRole, node.role),
        connected=view.connected,
        leader=view.is_leader,
        running_tasks=view.active_tasks,
        labels=node.labels,
        executors=node.executors,
        max_tasks=node.max_tasks,
        prefetch_tasks=node.prefetch_tasks,
        status_reason=node.status_reason,
        drain_deadline=timestamp(node.drain_deadline),
    )
    if view.report is not None:
        message.resources.CopyFrom(resources_to_proto(view.report.resources))
        message.report_age.CopyFrom(duration(view.report_age_s * 1000))
        message.capabilities.update(view.report.capabilities)
    return message


def cluster_to_proto(view: ClusterView) -> pb.GetClusterStatusResponse:
    """The status without its header (the servicer adds it)."""
    return pb.GetClusterStatusResponse(
        node_id=view.node_id,
        leader_id=view.leader_node_id or "",
        leader_raft_address=view.leader or "",
        term=view.term,
        raft_role=enum_value(pb.RaftRole, view.raft_state),
        node_role=enum_value(pb.NodeRole, view.node_role),
        has_quorum=view.has_quorum,
        applied_index=view.applied_index,
        raft_last_applied=view.last_applied,
        commit_index=view.commit_index,
        state_digest=view.state_digest,
        nodes=[node_to_proto(n) for n in view.nodes],
        task_counts=state_counts(view.task_counts),
        log_size=view.log_size,
        raft_sync=view.raft_sync,
        journal_syncs=view.journal_syncs,
        journal_synced_entries=view.journal_synced_entries,
        election_timeout_min=duration(view.election_timeout_s[0] * 1000),
        election_timeout_max=duration(view.election_timeout_s[1] * 1000),
    )
