"""Membership: this node's registration, resource sampling, heartbeats,
failure detection, drains and removal, and the calls it makes on other
nodes (`PeerCalls`)."""

from cortex.membership.board import NodeReport, ResourceBoard
from cortex.membership.failure import NodeSupervisor
from cortex.membership.heartbeat import HeartbeatSender, heartbeat_proof
from cortex.membership.metrics import ResourceSampler
from cortex.membership.peer_calls import Heartbeat, PeerCalls, Removal
from cortex.membership.registry import NodeRegistration

__all__ = [
    "Heartbeat",
    "HeartbeatSender",
    "NodeRegistration",
    "NodeSupervisor",
    "NodeReport",
    "PeerCalls",
    "Removal",
    "ResourceBoard",
    "ResourceSampler",
    "heartbeat_proof",
]
