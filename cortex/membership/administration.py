"""What an operator does to a node: cordon and uncordon it, drain it (with a
deadline), remove it from the cluster (`cortex.membership.removal`)."""

from __future__ import annotations

import time

from cortex.errors import FailedPrecondition, InvalidArgument, UnknownId
from cortex.membership.cluster_status import ClusterStatus, NodeStatusView
from cortex.membership.peer_calls import Removal
from cortex.membership.removal import NodeRemover
from cortex.raft.proposer import Proposer
from cortex.refusals import refusal_error
from cortex.requests import MAX_DRAIN_DEADLINE_MS, check_id
from cortex.state import entries as e
from cortex.state.queries import NodeView, StateReader

DEFAULT_DRAIN_MS = 300_000


class NodeAdministration:
    def __init__(
        self,
        node_id: str,
        proposer: Proposer,
        reader: StateReader,
        cluster: ClusterStatus,
        removals: NodeRemover,
        propose_timeout_s: float,
    ) -> None:
        self.node_id = node_id
        self._proposer = proposer
        self._reader = reader
        self._cluster = cluster
        self._removals = removals
        self._timeout = propose_timeout_s

    def _node(self, node_id: str) -> NodeView:
        check_id(node_id, "node_id")
        for node in self._reader.nodes(include_removed=True):
            if node.id == node_id and node.status == "removed":
                raise FailedPrecondition(f"node {node_id} was removed from the cluster")
            if node.id == node_id:
                return node
        raise UnknownId(f"no node with id {node_id}")

    def set_status(
        self, node_id: str, status: str, reason: str, deadline_ms: int | None = None
    ) -> NodeStatusView:
        node = self._node(node_id)
        if node.status == "offline" and status != "offline":
            raise FailedPrecondition(
                f"node {node_id} is offline; it becomes active when it returns"
            )
        entry = e.Entry.create(e.NodeStatus(node_id, status, reason, deadline_ms), self.node_id)
        result = self._proposer.propose_one(entry, self._timeout)
        if not result.get("ok"):
            raise refusal_error(result, f"node {node_id}")
        return next(v for v in self._cluster.list_nodes() if v.node.id == node_id)

    def cordon(self, node_id: str) -> NodeStatusView:
        return self.set_status(node_id, "cordoned", "cordoned by request")

    def uncordon(self, node_id: str) -> NodeStatusView:
        return self.set_status(node_id, "active", "uncordoned by request")

    def drain(self, node_id: str, deadline_ms: int = 0) -> NodeStatusView:
        if not 0 <= deadline_ms <= MAX_DRAIN_DEADLINE_MS:
            raise InvalidArgument(
                f"deadline must be from 0 to {MAX_DRAIN_DEADLINE_MS // 1000} s, not {deadline_ms} ms"
            )
        until = int(time.time() * 1000) + (deadline_ms or DEFAULT_DRAIN_MS)
        return self.set_status(node_id, "draining", "drained by request", until)

    def remove(self, node_id: str, reason: str = "") -> Removal:
        return self._removals.remove(node_id, reason)
