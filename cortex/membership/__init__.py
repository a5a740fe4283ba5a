"""Membership: this node's registration, resource sampling and heartbeats
(failure detection and drain come later)."""

from cortex.membership.board import NodeReport, ResourceBoard
from cortex.membership.heartbeat import HeartbeatSender, heartbeat_proof
from cortex.membership.metrics import ResourceSampler
from cortex.membership.registry import NodeRegistration

__all__ = [
    "HeartbeatSender",
    "NodeRegistration",
    "NodeReport",
    "ResourceBoard",
    "ResourceSampler",
    "heartbeat_proof",
]
