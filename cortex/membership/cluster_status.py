"""What a node reports of its cluster: its Raft state (leader, term,
indexes, journal syncs), the state digest, every node with its
reachability, load and latest resource report, and task counts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from cortex.config import ELECTION_TIMEOUT_MAX_S, ELECTION_TIMEOUT_MIN_S
from cortex.membership.board import NodeReport, ResourceBoard
from cortex.membership.peer_calls import NodeState
from cortex.raft.group import RaftGroup
from cortex.state.machine import StateMachine
from cortex.state.queries import NodeView, StateReader


@dataclass(frozen=True)
class NodeStatusView:
    node: NodeView
    connected: bool
    is_leader: bool
    active_tasks: int
    report: NodeReport | None = None
    report_age_s: float = 0.0


@dataclass(frozen=True)
class ClusterView:
    node_id: str
    leader: str | None
    leader_node_id: str | None
    term: int
    last_applied: int
    applied_index: int
    commit_index: int
    state_digest: str
    # A voter: whether it reaches a majority of the voters; an observer:
    # whether it hears from the leader.
    has_quorum: bool
    # "leader", "follower", "candidate", or "observer".
    raft_state: str
    log_size: int
    raft_sync: bool = True
    journal_syncs: int = 0
    journal_synced_entries: int = 0
    nodes: list[NodeStatusView] = field(default_factory=list)
    task_counts: dict[str, int] = field(default_factory=dict)
    # "voter", or "observer" (replicates without a vote, runs no tasks).
    node_role: str = "voter"
    # The range this node's election timeout is drawn from, in seconds.
    election_timeout_s: tuple[float, float] = (ELECTION_TIMEOUT_MIN_S, ELECTION_TIMEOUT_MAX_S)


class ClusterStatus:
    def __init__(
        self,
        node_id: str,
        group: RaftGroup,
        machine: StateMachine,
        reader: StateReader,
        board: ResourceBoard,
        reachable: Callable[[NodeView], bool],
    ) -> None:
        self.node_id = node_id
        self._group = group
        self._machine = machine
        self._reader = reader
        self._board = board
        self._reachable = reachable

    @property
    def leader_address(self) -> str | None:
        return self._group.leader_address

    def applied_index(self) -> int:
        return self._machine.applied_index

    def status(self) -> ClusterView:
        status = self._group.getStatus()
        journal = self._group.journal_stats()
        digest, applied_index = self._reader.digest_and_index()
        leader = self._group.leader_address
        nodes = self._reader.nodes()
        active = self._reader.active_counts_by_node()
        leader_id = next((n.id for n in nodes if n.raft_address == leader), None)
        return ClusterView(
            node_id=self.node_id,
            leader=leader,
            leader_node_id=leader_id,
            term=int(status["raft_term"]),
            last_applied=int(status["last_applied"]),
            applied_index=applied_index,
            commit_index=int(status["commit_idx"]),
            state_digest=digest,
            has_quorum=bool(status["has_quorum"]),
            raft_state=self._group.raft_role,
            log_size=int(status["log_len"]),
            raft_sync=self._group.journal.sync_enabled,
            journal_syncs=journal.syncs,
            journal_synced_entries=journal.synced_entries,
            nodes=self._node_views(nodes, leader, active),
            task_counts=self._reader.counts_by_state(),
            node_role="observer" if self._group.observer else "voter",
            election_timeout_s=self._group.election_timeout_s,
        )

    def node_state(self) -> NodeState:
        """This node's Raft view and digest (cheaper than `status`: no node
        list, no counts)."""
        status = self._group.getStatus()
        digest, applied_index = self._reader.digest_and_index()
        return NodeState(
            applied_index=applied_index,
            state_digest=digest,
            commit_index=int(status["commit_idx"]),
            term=int(status["raft_term"]),
            raft_state=self._group.raft_role,
        )

    def list_nodes(self, include_removed: bool = False) -> list[NodeStatusView]:
        return self._node_views(
            self._reader.nodes(include_removed),
            self._group.leader_address,
            self._reader.active_counts_by_node(),
        )

    def _node_views(
        self, nodes: list[NodeView], leader: str | None, active: dict[str, int]
    ) -> list[NodeStatusView]:
        reports = self._board.all()
        views = []
        for n in nodes:
            report = reports.get(n.id)
            views.append(
                NodeStatusView(
                    n,
                    self._reachable(n),
                    n.raft_address == leader,
                    active.get(n.id, 0),
                    report,
                    self._board.age_s(report) if report is not None else 0.0,
                )
            )
        return views
