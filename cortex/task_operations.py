"""The operations every interface offers (gRPC, MCP, CLI): validate, propose,
read. Interfaces translate; the rules live here."""

from __future__ import annotations

import hmac
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from cortex.errors import (
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    Unauthenticated,
    Unavailable,
)
from cortex.membership.board import NodeReport, ResourceBoard
from cortex.membership.heartbeat import HeartbeatReceiver
from cortex.membership.joining import JoinChallenges, JoinClaim, join_proof
from cortex.membership.peer_calls import PeerCalls, Removal
from cortex.membership.removal import NodeRemover
from cortex.raft.group import RaftGroup
from cortex.raft.proposer import Proposer
from cortex.refusals import refusal_error
from cortex.requests import check_id, check_idempotency_key, check_states, parse_page
from cortex.scheduler import explain
from cortex.scheduler.loop import build_candidates, pending
from cortex.spec import parse_task_spec
from cortex.state import TERMINAL_STATES
from cortex.state import entries as e
from cortex.state.machine import StateMachine
from cortex.state.queries import EventView, NodeView, StateReader, TaskPage, TaskView
from cortex.workflows.operations import WorkflowOperations
from cortex.workflows.sandbox import ConditionSandbox

TASK_STATES = (
    "pending", "queued", "assigned", "running", "completed",
    "failed", "cancelled", "skipped", "dead_letter",
)  # fmt: skip
DEFAULT_DRAIN_MS = 300_000


@dataclass(frozen=True)
class SubmitOutcome:
    task_id: str
    created: bool
    raft_index: int


@dataclass(frozen=True)
class NodeStatusView:
    node: NodeView
    connected: bool
    is_leader: bool
    active_tasks: int
    report: NodeReport | None = None


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
    has_quorum: bool
    raft_state: str
    log_size: int
    raft_sync: bool = True
    journal_syncs: int = 0
    journal_synced_entries: int = 0
    nodes: list[NodeStatusView] = field(default_factory=list)
    task_counts: dict[str, int] = field(default_factory=dict)


HEARTBEATS_MISSED = 3
MIN_SILENCE_S = 2.0


class TaskService:
    def __init__(
        self,
        node_id: str,
        group: RaftGroup,
        proposer: Proposer,
        machine: StateMachine,
        reader: StateReader,
        board: ResourceBoard,
        secret: str,
        max_spec_bytes: int,
        propose_timeout_s: float,
        peers: PeerCalls,
        heartbeat_interval_s: float = 2.0,
        heartbeat_window_s: float = 7.0,
        sandbox: ConditionSandbox | None = None,
    ) -> None:
        self.board = board
        self.node_id = node_id
        self._group = group
        self._proposer = proposer
        self._machine = machine
        self._reader = reader
        self._secret = secret
        self._max_spec_bytes = max_spec_bytes
        self._timeout = propose_timeout_s
        # Heartbeats missed in a row before a follower calls a node unreachable.
        self._silent_after_s = max(HEARTBEATS_MISSED * heartbeat_interval_s, MIN_SILENCE_S)
        self.heartbeats = HeartbeatReceiver(secret, board, heartbeat_window_s)
        self.join_challenges = JoinChallenges()
        self.removals = NodeRemover(node_id, group, proposer, reader, propose_timeout_s, peers)
        self.workflows = WorkflowOperations(
            node_id, proposer, machine, reader, propose_timeout_s, max_spec_bytes, sandbox=sandbox
        )

    # -- tasks -------------------------------------------------------------

    def submit_task(
        self, spec: dict[str, Any], idempotency_key: str | None = None
    ) -> SubmitOutcome:
        check_idempotency_key(idempotency_key)
        parsed = parse_task_spec(spec, self._max_spec_bytes)
        if idempotency_key:
            known = self._reader.task_by_idempotency_key(idempotency_key)
            if known is not None:
                return SubmitOutcome(known, False, self._machine.applied_index)
        entry = e.Entry.create(
            e.TaskSubmit(
                str(uuid.uuid4()), parsed.model_dump(mode="json"), idempotency_key or None
            ),
            self.node_id,
        )
        result = self._proposer.propose_one(entry, self._timeout)
        if not result.get("ok"):
            raise refusal_error(result, "task rejected")
        return SubmitOutcome(
            result["task_id"], bool(result["created"]), self._machine.applied_index
        )

    def get_task(self, task_id: str) -> TaskView:
        check_id(task_id, "task_id")
        task = self._reader.get_task(task_id)
        if task is None:
            raise NotFound(f"no task with id {task_id}")
        return task

    def task_events(self, task_id: str) -> list[EventView]:
        return self._reader.task_events(task_id)

    def pending_reasons(self, task: TaskView) -> list[str]:
        """Why a queued task is not placed, judged from this node's view."""
        if task.state != "queued":
            return []
        if task.scheduled_after > int(time.time() * 1000):
            return [f"backing off until {task.scheduled_after} (ms since epoch)"]
        return explain(pending(task), build_candidates(self._reader, self.board, self.reachable))

    def wait_for_task(self, task_id: str, timeout_s: float) -> TaskView:
        """Returns the task once terminal, or as it is when the timeout ends."""
        deadline = time.monotonic() + timeout_s
        task = self.get_task(task_id)
        while task.state not in TERMINAL_STATES:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            self._machine.wait_applied(self._machine.applied_index + 1, min(remaining, 0.5))
            task = self.get_task(task_id)
        return task

    def list_tasks(
        self,
        states: list[str] | None = None,
        task_type: str | None = None,
        workflow_id: str | None = None,
        node: str | None = None,
        page_size: int = 100,
        page_token: str = "",
    ) -> TaskPage:
        check_states(states, TASK_STATES, "task")
        limit, offset = parse_page(page_size, page_token)
        return self._reader.list_tasks(states, task_type, workflow_id, node, limit, offset)

    def cancel_task(self, task_id: str, reason: str = "") -> TaskView:
        task = self.get_task(task_id)
        if task.state in TERMINAL_STATES:
            raise FailedPrecondition(f"task {task_id} is already {task.state}")
        entry = e.Entry.create(
            e.TaskCancel(task_id, reason or "cancelled by request"), self.node_id
        )
        result = self._proposer.propose_one(entry, self._timeout)
        current = self.get_task(task_id)
        if not result.get("ok") and current.state != "cancelled":
            raise refusal_error(result, f"task {task_id} could not be cancelled")
        return current

    def list_dead_letter(self, page_size: int = 100, page_token: str = "") -> TaskPage:
        return self.list_tasks(["dead_letter"], page_size=page_size, page_token=page_token)

    def retry_dead_letter(self, task_id: str) -> TaskView:
        task = self.get_task(task_id)
        if task.state != "dead_letter":
            raise FailedPrecondition(f"task {task_id} is {task.state}, not dead_letter")
        entry = e.Entry.create(
            e.TaskRetry(task_id, task.attempt, "retried from the dead-letter queue"), self.node_id
        )
        result = self._proposer.propose_one(entry, self._timeout)
        if not result.get("ok"):
            raise refusal_error(result, f"task {task_id} could not be retried")
        return self.get_task(task_id)

    # -- nodes -------------------------------------------------------------

    def _node(self, node_id: str) -> NodeView:
        check_id(node_id, "node_id")
        for node in self._reader.nodes(include_removed=True):
            if node.id == node_id and node.status == "removed":
                raise FailedPrecondition(f"node {node_id} was removed from the cluster")
            if node.id == node_id:
                return node
        raise NotFound(f"no node with id {node_id}")

    def set_node_status(
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
        return next(v for v in self.list_nodes() if v.node.id == node_id)

    def remove_node(self, node_id: str, reason: str = "") -> Removal:
        return self.removals.remove(node_id, reason)

    def drain_node(self, node_id: str, deadline_ms: int = 0) -> NodeStatusView:
        if deadline_ms < 0:
            raise InvalidArgument("deadline_ms must not be negative")
        until = int(time.time() * 1000) + (deadline_ms or DEFAULT_DRAIN_MS)
        return self.set_node_status(node_id, "draining", "drained by request", until)

    # -- cluster -----------------------------------------------------------

    def reachable(self, node: NodeView) -> bool:
        """The leader judges a node by its Raft connection to it. Followers need
        not hold Raft connections to each other, so they judge by whether the
        node's heartbeats still arrive."""
        from pysyncobj.node import TCPNode

        if node.id == self.node_id:
            return True
        if self._group.is_leader:
            return bool(self._group.isNodeConnected(TCPNode(node.raft_address)))
        report = self.board.get(node.id)
        return report is not None and report.age_s <= self._silent_after_s

    @property
    def leader_address(self) -> str | None:
        return self._group.leader_address

    def cluster_status(self) -> ClusterView:
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
            raft_state={0: "follower", 1: "candidate", 2: "leader"}.get(status["state"], "unknown"),
            log_size=int(status["log_len"]),
            raft_sync=self._group.journal.sync_enabled,
            journal_syncs=journal.syncs,
            journal_synced_entries=journal.synced_entries,
            nodes=self._node_views(nodes, leader, active),
            task_counts=self._reader.counts_by_state(),
        )

    def _node_views(
        self, nodes: list[NodeView], leader: str | None, active: dict[str, int]
    ) -> list[NodeStatusView]:
        reports = self.board.all()
        return [
            NodeStatusView(
                n,
                self.reachable(n),
                n.raft_address == leader,
                active.get(n.id, 0),
                reports.get(n.id),
            )
            for n in nodes
        ]

    def list_nodes(self, include_removed: bool = False) -> list[NodeStatusView]:
        return self._node_views(
            self._reader.nodes(include_removed),
            self._group.leader_address,
            self._reader.active_counts_by_node(),
        )

    def applied_index(self) -> int:
        return self._machine.applied_index

    def join_challenge(self) -> tuple[str, float]:
        """A nonce for one join attempt through this node, and how long it lasts."""
        return self.join_challenges.issue(), self.join_challenges.ttl_s

    def admit_node(self, claim: JoinClaim, nonce: str, proof: str) -> list[str]:
        """Adds a node to the Raft group once it proves it holds the secret,
        over a nonce this node issued (each nonce answers one attempt)."""
        if not nonce or not self.join_challenges.redeem(nonce):
            raise Unauthenticated(
                "join refused: its challenge was not issued by this node, is used up or has "
                "expired (a replayed join?); ask JoinChallenge for a new one"
            )
        expected = join_proof(self._secret, nonce, claim)
        if not proof or not hmac.compare_digest(expected, proof):
            raise Unauthenticated("join refused: the node does not hold this cluster's secret")
        raft_address = claim.raft_address
        members = self._group.members
        if raft_address in members:
            return members
        self._proposer.check_writable()
        outcome: dict[str, Any] = {}

        def done(result: Any, error: int) -> None:
            outcome["error"] = error

        self._group.addNodeToCluster(raft_address, callback=done)
        # A one-node cluster cannot commit the change until the new node runs,
        # so wait only briefly for an outright refusal.
        deadline = time.monotonic() + 1.0
        while "error" not in outcome and time.monotonic() < deadline:
            time.sleep(0.02)
        if outcome.get("error") not in (None, 0):
            raise Unavailable(
                f"the leader refused to add {raft_address} (code {outcome['error']}); retry"
            )
        return sorted({*members, raft_address})
