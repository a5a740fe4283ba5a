"""Taking a node out of the cluster for good (`cortex node remove`).

The order matters. NODE_LEAVE goes first, while the node is still a Raft
member, so a live node learns of its removal from its own log: its agent
kills the attempts that were re-queued and the process stops itself. Only
then does the node leave the Raft group; after that no entry reaches it."""

from __future__ import annotations

import logging
import threading
import time

from cortex.errors import CortexError, FailedPrecondition, Unavailable, UnknownId
from cortex.membership.peer_calls import PeerCalls, Removal
from cortex.raft.group import RaftGroup
from cortex.raft.proposer import Proposer
from cortex.refusals import refusal_error
from cortex.requests import check_id
from cortex.state import entries as e
from cortex.state.queries import NodeView, StateReader

log = logging.getLogger(__name__)

DEFAULT_REASON = "removed by request"
# How long a live node gets to apply its own removal before it is cut off.
CATCH_UP_S = 5.0


class NodeRemover:
    def __init__(
        self,
        node_id: str,
        group: RaftGroup,
        proposer: Proposer,
        reader: StateReader,
        timeout_s: float,
        peers: PeerCalls,
    ) -> None:
        self._node_id = node_id
        self._group = group
        self._proposer = proposer
        self._reader = reader
        self._timeout_s = timeout_s
        self._peers = peers
        # Set while this node waits for another to carry out its own removal.
        self._passing_on = threading.Event()

    def remove(self, node_id: str, reason: str = "") -> Removal:
        """Idempotent: a repeated call finishes what an interrupted one began."""
        check_id(node_id, "node_id")
        node = self._find(node_id)
        if node is None:
            raise UnknownId(f"no node with id {node_id}")
        self._proposer.check_writable()
        if node.raft_address == self._group.leader_address:
            raise FailedPrecondition(
                f"node {node_id} is the Raft leader and cannot remove itself; stop it so "
                "another node leads, then remove it"
            )
        if node_id == self._node_id:
            # This node could not see its own removal commit: it is cut off first.
            self._passing_on.set()
            try:
                return self._ask_another_node(node_id, reason)
            finally:
                self._passing_on.clear()
        requeued = 0
        if node.status != "removed":
            entry = e.Entry.create(e.NodeLeave(node_id, reason or DEFAULT_REASON), self._node_id)
            result = self._proposer.propose_one(entry, self._timeout_s)
            if not result.get("ok"):
                raise refusal_error(result, f"node {node_id}")
            requeued = int(result.get("requeued", 0))
            log.info("node %s removed (%d tasks re-queued)", node_id, requeued)
            self._let_it_learn(node, self._reader.applied_index())
        if node.raft_address in self._group.members:
            self._group.remove_member(node.raft_address, self._timeout_s)
            log.info("node %s (%s) left the Raft group", node_id, node.raft_address)
        return Removal(node_id, node.raft_address, requeued, self._group.members)

    def wait_answered(self, timeout_s: float) -> None:
        """Lets a removal this node passed on answer its caller before the node
        stops (it learns of its removal before the call returns)."""
        deadline = time.monotonic() + timeout_s
        while self._passing_on.is_set() and time.monotonic() < deadline:
            time.sleep(0.05)

    def _find(self, node_id: str) -> NodeView | None:
        return self._reader.node(node_id, include_removed=True)

    def _let_it_learn(self, node: NodeView, index: int) -> None:
        """Waits, briefly, until a reachable node has applied `index`. A node
        that is down learns nothing, which is fine: it cannot come back."""
        deadline = time.monotonic() + CATCH_UP_S
        while node.peer_address and time.monotonic() < deadline:
            try:
                if self._peers.applied_index(node.peer_address, 1.0) >= index:
                    return
            except CortexError:
                return
            time.sleep(0.05)
        log.warning("node %s did not confirm its removal within %gs", node.id, CATCH_UP_S)

    def _ask_another_node(self, node_id: str, reason: str) -> Removal:
        leader = next(
            (n for n in self._reader.nodes() if n.raft_address == self._group.leader_address),
            None,
        )
        if leader is None or not leader.peer_address:
            raise Unavailable("no leader known to pass the removal to; retry")
        return self._peers.remove_node(
            leader.peer_address, node_id, reason, self._timeout_s + CATCH_UP_S
        )
