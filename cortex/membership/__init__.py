"""Membership: this node's registration, resource sampling, heartbeats,
failure detection and drains."""

from cortex.membership.board import NodeReport, ResourceBoard
from cortex.membership.failure import NodeSupervisor
from cortex.membership.heartbeat import HeartbeatSender, heartbeat_proof
from cortex.membership.metrics import ResourceSampler
from cortex.membership.registry import NodeRegistration

__all__ = [
    "HeartbeatSender",
    "NodeRegistration",
    "NodeSupervisor",
    "NodeReport",
    "ResourceBoard",
    "ResourceSampler",
    "heartbeat_proof",
]
