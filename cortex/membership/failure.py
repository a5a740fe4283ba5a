"""Leader-only supervision of nodes: marks a node offline once it has been
silent for the failure timeout and re-queues its attempts; enforces drains.

A new leader has heard from nobody yet, so it waits one full timeout before
judging any node."""

from __future__ import annotations

import logging

from cortex.membership.board import ResourceBoard
from cortex.raft.leader_loop import LeaderContext, LeaderLoop
from cortex.state import entries as e
from cortex.state.queries import NodeView
from cortex.steps import Step, wall_ms

log = logging.getLogger(__name__)


class NodeSupervisor(LeaderLoop):
    def __init__(
        self,
        context: LeaderContext,
        board: ResourceBoard,
        failure_timeout_s: float = 15.0,
        interval_s: float = 0.5,
    ) -> None:
        super().__init__("supervisor", context, interval_s)
        self._board = board
        self._timeout_s = failure_timeout_s
        self._leader_since: float | None = None

    def on_follower(self) -> None:
        self._leader_since = None

    def work(self) -> Step[bool]:
        now = self._clock.monotonic()
        if self._leader_since is None:
            self._leader_since = now
            log.info("leader: judging node liveness after %.1fs", self._timeout_s)
        if now - self._leader_since >= self._timeout_s:
            yield from self.check_liveness(now)
        yield from self.enforce_drains(wall_ms(self._clock))
        return False

    def _silent(self, node: NodeView, now: float) -> bool:
        report = self._board.get(node.id)
        heard_at = report.received_at if report else self._leader_since or now
        return now - heard_at > self._timeout_s

    def check_liveness(self, now: float) -> Step[None]:
        """Marks each silent node offline and re-queues its attempts, one
        proposal per node. An offline node's attempts are re-queued on every
        pass: an assignment decided before the node was marked offline can
        be applied after the attempts were read for that proposal."""
        for node in self._reader.nodes():
            if node.id == self._node_id:
                continue
            ts = wall_ms(self._clock)
            if node.status == "offline":
                # Assigned after the node was judged: no attempt is spent.
                entries = self._retries(node, f"node {node.id} offline", ts, spend_attempt=False)
                if entries:
                    log.warning("re-queueing %d attempts left on offline %s", len(entries), node.id)
                    yield self._proposer.submit_all(entries)
                continue
            if not self._silent(node, now):
                continue
            reason = f"node {node.id} silent for over {self._timeout_s:g}s"
            log.warning("marking %s offline: %s", node.id, reason)
            offline = e.Entry.create(e.NodeStatus(node.id, "offline", reason), self._node_id, ts=ts)
            yield self._proposer.submit_all([offline, *self._retries(node, reason, ts)])

    def _retries(
        self, node: NodeView, reason: str, ts: int, spend_attempt: bool = True
    ) -> list[e.Entry]:
        return [
            e.Entry.create(
                e.TaskRetry(task.id, task.attempt, reason, spend_attempt=spend_attempt),
                self._node_id,
                ts=ts,
            )
            for task in self._reader.tasks_on_node(node.id, ("assigned", "running"))
        ]

    def enforce_drains(self, now_ms: int) -> Step[None]:
        """A draining node's assigned tasks move at once, without spending an
        attempt; its running tasks move when the drain deadline passes."""
        for node in self._reader.nodes():
            if node.status != "draining":
                continue
            overdue = node.drain_deadline is not None and now_ms >= node.drain_deadline
            states = ("assigned", "running") if overdue else ("assigned",)
            ts = wall_ms(self._clock)
            entries = [
                e.Entry.create(
                    e.TaskRetry(
                        task.id, task.attempt, f"node {node.id} draining", spend_attempt=False
                    ),
                    self._node_id,
                    ts=ts,
                )
                for task in self._reader.tasks_on_node(node.id, states)
            ]
            if entries:
                yield self._proposer.submit_all(entries)
