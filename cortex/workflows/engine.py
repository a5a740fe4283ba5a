"""The leader-only workflow engine: when workflow tasks finish (or every
interval), finds pending tasks whose dependencies are all terminal, decides
them (evaluating conditions in the sandbox, off the Raft thread) and
proposes one `WORKFLOW_ADVANCE` per workflow.

Nothing is kept between rounds: the decisions still to make are derived
from the replicated state each time, so a new leader picks up exactly where
the old one stopped. A decision the old leader proposed that commits after
the new leader's is rejected in apply (its task is no longer pending)."""

from __future__ import annotations

import logging

from cortex.raft.leader_loop import LeaderContext, LeaderLoop
from cortex.state import entries as e
from cortex.state.transitions import TERMINAL_STATES, TaskChange
from cortex.state.workflow_queries import WorkflowView
from cortex.workflows.decisions import Evaluator, TaskNode, decide
from cortex.workflows.sandbox import ConditionSandbox

log = logging.getLogger(__name__)

# Conditions evaluated per workflow per round: a workflow with many slow
# conditions commits its decisions in parts and does not hold up the others.
CONDITIONS_PER_ROUND = 64


def task_nodes(workflow: WorkflowView) -> dict[str, TaskNode]:
    return {
        t.key: TaskNode(t.key, t.task_id, t.state, tuple(t.depends_on), t.condition, t.result)
        for t in workflow.tasks
    }


class WorkflowEngine(LeaderLoop):
    def __init__(
        self,
        context: LeaderContext,
        sandbox: ConditionSandbox,
        interval_s: float = 1.0,
        propose_timeout_s: float = 10.0,
    ) -> None:
        super().__init__("workflows", context, interval_s)
        self._sandbox = sandbox
        self._timeout_s = propose_timeout_s

    def on_change(self, index: int, changes: list[TaskChange]) -> None:
        """State listener (Raft thread): wake when a task became pending or
        terminal, or the whole state was replaced (snapshot)."""
        if not changes or any(c.state == "pending" or c.state in TERMINAL_STATES for c in changes):
            self._wake.set()

    def work(self) -> bool:
        return self.advance() > 0

    def advance(self) -> int:
        """One round: decides what can be decided now and proposes it; returns
        how many decisions were committed."""
        ready = self._reader.ready_workflow_tasks()
        if not ready:
            return 0
        basis = self._reader.applied_index()
        workflows = [w for w in map(self._reader.get_workflow, ready) if w and w.state == "running"]
        # Decisions without conditions first: they must not wait for a slow condition.
        entries = self._entries(workflows, None, basis)
        if not entries:
            entries = self._entries(workflows, self._sandbox.evaluate_many, basis)
        if not entries or not self._is_leader():
            return 0
        results = self._proposer.propose(entries, self._timeout_s)
        decided = 0
        for result in results:
            if result.get("ok"):
                decided += int(result.get("released", 0)) + int(result.get("skipped", 0))
            else:
                log.warning("workflow advance rejected: %s", result.get("reason"))
        return decided

    def _entries(
        self, workflows: list[WorkflowView], evaluate: Evaluator | None, basis: int
    ) -> list[e.Entry]:
        entries = []
        for workflow in workflows:
            decisions = decide(
                task_nodes(workflow), workflow.context, evaluate, CONDITIONS_PER_ROUND
            )
            if not decisions:
                continue
            released = sum(1 for d in decisions if d.run)
            log.info("workflow %s: releasing %d tasks, skipping %d", workflow.id, released,
                     len(decisions) - released)  # fmt: skip
            for d in decisions:
                log.log(logging.DEBUG if d.run else logging.INFO, "workflow %s task %s (%s): %s, %s",
                        workflow.id, d.key, d.task_id, "run" if d.run else "skip", d.reason)  # fmt: skip
            payload = e.WorkflowAdvance(workflow.id, [d.to_entry() for d in decisions], basis)
            entries.append(e.Entry.create(payload, self._node_id))
        return entries
