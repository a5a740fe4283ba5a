"""Whether this node can reach another, as placement and `cortex node list`
judge it. The leader judges a voter by its Raft connection to it. Followers
need not hold Raft connections to each other, and an observer's connection
to the leader is a read-only one it dialled (no Raft address names it), so
those are judged by whether the node's heartbeats still arrive."""

from __future__ import annotations

from pysyncobj.node import TCPNode

from cortex.membership.board import ResourceBoard
from cortex.raft.group import RaftGroup
from cortex.state.queries import NodeView

# Heartbeats missed in a row before a follower calls a node unreachable.
HEARTBEATS_MISSED = 3
MIN_SILENCE_S = 2.0


class Reachability:
    def __init__(
        self,
        node_id: str,
        group: RaftGroup,
        board: ResourceBoard,
        heartbeat_interval_s: float = 2.0,
    ) -> None:
        self._node_id = node_id
        self._group = group
        self._board = board
        self._silent_after_s = max(HEARTBEATS_MISSED * heartbeat_interval_s, MIN_SILENCE_S)

    def reachable(self, node: NodeView) -> bool:
        if node.id == self._node_id:
            return True
        if self._group.is_leader and node.role == "voter":
            return bool(self._group.isNodeConnected(TCPNode(node.raft_address)))
        report = self._board.get(node.id)
        return report is not None and self._board.age_s(report) <= self._silent_after_s
