"""Translation between the peer protocol's messages
(cortex.internal.v1.PeerService) and membership's own types."""

from __future__ import annotations

from cortex.api.node_convert import resources_from_proto, resources_to_proto
from cortex.internal.v1 import peer_pb2 as peer_pb
from cortex.membership.peer_calls import Heartbeat, Removal
from cortex.v1 import cortex_pb2 as pb


def heartbeat_to_proto(heartbeat: Heartbeat) -> peer_pb.HeartbeatRequest:
    return peer_pb.HeartbeatRequest(
        node_id=heartbeat.node_id,
        resources=resources_to_proto(heartbeat.resources),
        capabilities=heartbeat.capabilities,
        running_tasks=heartbeat.running_tasks,
        sent_at_ms=heartbeat.sent_at_ms,
        proof=heartbeat.proof,
        boot_id=heartbeat.boot_id,
        seq=heartbeat.seq,
    )


def heartbeat_from_proto(message: peer_pb.HeartbeatRequest) -> Heartbeat:
    return Heartbeat(
        node_id=message.node_id,
        boot_id=message.boot_id,
        seq=message.seq,
        sent_at_ms=message.sent_at_ms,
        resources=resources_from_proto(message.resources),
        capabilities=dict(message.capabilities),
        running_tasks=message.running_tasks,
        proof=message.proof,
    )


def removal_to_proto(removal: Removal) -> pb.RemoveNodeResponse:
    """The removal without commit index and header (the servicer adds them)."""
    return pb.RemoveNodeResponse(
        node_id=removal.node_id,
        raft_address=removal.raft_address,
        requeued_tasks=removal.requeued_tasks,
        members=removal.members,
    )


def removal_from_proto(message: pb.RemoveNodeResponse) -> Removal:
    return Removal(
        message.node_id, message.raft_address, message.requeued_tasks, list(message.members)
    )
