"""How membership reaches other nodes: the calls it makes on another node's
peer listener, and what they carry. `cortex.api.peer_client.PeerClient`
makes them over gRPC; anything else that delivers them (a simulated network)
can stand in for it."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Protocol

from cortex.scheduler.model import NodeResources


@dataclass(frozen=True)
class Heartbeat:
    """One node's resource report to another, signed with the cluster secret
    (`cortex.membership.heartbeat`). `boot_id` is chosen when the sender's
    process starts and `seq` grows with every report of that boot."""

    node_id: str
    boot_id: str
    seq: int
    sent_at_ms: int  # the sender's clock
    resources: NodeResources
    capabilities: dict[str, str] = field(default_factory=dict)
    running_tasks: int = 0
    proof: str = ""


@dataclass(frozen=True)
class NodeState:
    """One node's Raft view and its state digest at its applied index."""

    applied_index: int
    state_digest: str
    commit_index: int
    term: int
    raft_state: str


@dataclass(frozen=True)
class Removal:
    """What removing a node did: the tasks it re-queued, the Raft members left."""

    node_id: str
    raft_address: str
    requeued_tasks: int
    members: list[str]


class PeerCalls(Protocol):
    def heartbeat(self, address: str, heartbeat: Heartbeat, timeout_s: float) -> Future[None]:
        """Sends a report without waiting: the future is done when the node
        took it, and fails with TlsError, Unauthenticated or
        FailedPrecondition when the settings or the receiving node refuse it,
        another CortexError when it cannot be delivered."""
        ...

    def applied_index(self, address: str, timeout_s: float) -> int:
        """The node's applied Raft index. Raises CortexError."""
        ...

    def remove_node(self, address: str, node_id: str, reason: str, timeout_s: float) -> Removal:
        """Passes a removal on to the node at `address` (the leader). Raises
        CortexError."""
        ...
