"""The leader-only workflow engine: when workflow tasks finish, when a
condition's outcome arrives (or every interval), finds pending tasks whose
dependencies are all terminal, decides them and proposes one
`WORKFLOW_ADVANCE` per workflow.

Conditions are evaluated in the sandbox off the engine's thread, each
workflow on its own fairly served queue: a round decides what it can with
the outcomes it has and asks for the rest, so one workflow's slow
conditions hold up neither the engine nor other workflows.

Only outcomes in flight are kept between rounds (matched by the exact
input they were computed from): the decisions still to make are derived
from the replicated state each time, so a new leader picks up exactly where
the old one stopped. A decision the old leader proposed that commits after
the new leader's is rejected in apply (its task is no longer pending)."""

from __future__ import annotations

import logging

from cortex.raft.leader_loop import LeaderContext, LeaderLoop
from cortex.state import entries as e
from cortex.state.task_states import TERMINAL_STATES
from cortex.state.transitions import TaskChange
from cortex.state.workflow_queries import WorkflowView
from cortex.steps import Step, wall_ms
from cortex.tracing import NO_TRACING, Tracer
from cortex.workflows.condition_input import DEFAULT_MAX_BYTES
from cortex.workflows.decisions import TaskNode, decide
from cortex.workflows.evaluations import PendingEvaluations
from cortex.workflows.sandbox import ConditionSandbox

log = logging.getLogger(__name__)

# Conditions a workflow has asked for at once at most: a workflow with many
# conditions commits its decisions in parts.
CONDITIONS_PER_ROUND = 64
# A workflow submitted in parts whose next part has not come for this long
# was given up by its proposer: the leader cancels it (freeing its key).
ABANDONED_SUBMISSION_S = 120.0


def task_nodes(workflow: WorkflowView) -> dict[str, TaskNode]:
    return {
        t.key: TaskNode(
            t.key, t.task_id, t.state, tuple(t.depends_on), t.condition, t.result, t.attempt
        )
        for t in workflow.tasks
    }


class WorkflowEngine(LeaderLoop):
    def __init__(
        self,
        context: LeaderContext,
        sandbox: ConditionSandbox,
        interval_s: float = 1.0,
        input_max_bytes: int = DEFAULT_MAX_BYTES,
        tracer: Tracer = NO_TRACING,
    ) -> None:
        super().__init__("workflows", context, interval_s)
        self._evaluations = PendingEvaluations(sandbox, self.wake, tracer)
        self._input_max_bytes = input_max_bytes
        # Ready tasks of each workflow when it was last looked at and could
        # decide nothing more; a full round looks at every workflow.
        self._examined: dict[str, tuple[str, ...]] = {}
        self._last_full_round = float("-inf")

    def on_change(self, index: int, changes: list[TaskChange]) -> None:
        """State listener (Raft thread): wake when a workflow task became
        pending or terminal, or the whole state was replaced (snapshot). A
        standalone task's end is nothing to the engine."""
        if not changes or any(
            c.state == "pending" or (c.state in TERMINAL_STATES and c.in_workflow is not False)
            for c in changes
        ):
            self.wake()

    def on_follower(self) -> None:
        self._evaluations.clear()
        self._examined = {}

    def work(self) -> Step[bool]:
        moved = yield from self.move_on_stalled()
        advanced = yield from self.advance()
        return advanced + moved > 0

    def move_on_stalled(self) -> Step[int]:
        """Cancels submissions abandoned half-way and carries on cancelling
        workflows whose cancel did not reach all their tasks (a cancel entry
        cancels a bounded number). Returns how many entries committed."""
        now_ms = wall_ms(self._clock)
        stalled = self._reader.stalled_workflows(now_ms - int(ABANDONED_SUBMISSION_S * 1000))
        if not stalled or not self._is_leader():
            return 0
        entries = []
        for workflow_id, state in stalled:
            reason = (
                f"its submission did not complete within {ABANDONED_SUBMISSION_S:g}s"
                if state == "submitting"
                else "cancelled by request"
            )
            if state == "submitting":
                log.warning("workflow %s: %s; cancelling it", workflow_id, reason)
            entries.append(
                e.Entry.create(e.WorkflowCancel(workflow_id, reason), self._node_id, ts=now_ms)
            )
        results = yield self._proposer.submit_all(entries)
        return sum(1 for result in results if result.get("ok"))

    def advance(self) -> Step[int]:
        """One round: decides what can be decided now and proposes it; asks
        for the conditions it lacks; returns how many decisions committed.

        A workflow that only waits for its conditions is looked at again when
        one of their outcomes arrives, when its ready tasks change, or at the
        next full round (every interval), not on every round."""
        started = self._clock.monotonic()
        ready = self._reader.ready_workflow_tasks()
        basis = self._reader.applied_index()
        full = started - self._last_full_round >= self._interval_s
        if full:
            self._last_full_round = started
        arrived = self._evaluations.take_arrivals()
        entries = []
        examined: dict[str, tuple[str, ...]] = {}
        waiting: set[str] = set()
        try:
            for workflow_id, task_ids in ready.items():
                signature = tuple(sorted(task_ids))
                if not full and workflow_id not in arrived:
                    if self._examined.get(workflow_id) == signature:
                        examined[workflow_id] = signature
                        waiting.add(workflow_id)
                        continue
                workflow = self._reader.get_workflow(workflow_id)
                if workflow is None or workflow.state != "running":
                    continue
                entry = self._entry(workflow, basis)
                if entry is None:
                    examined[workflow_id] = signature
                else:
                    entries.append(entry)
        finally:
            self._examined = examined
            self._evaluations.sweep(keep=waiting)
        log.debug("workflow round: %d ready, %d looked at, %d to propose, %d evaluations pending,"
                  " %.1f ms", len(ready), len(ready) - len(waiting), len(entries),
                  len(self._evaluations), (self._clock.monotonic() - started) * 1000)  # fmt: skip
        if not entries or not self._is_leader():
            return 0
        results = yield self._proposer.submit_all(entries)
        decided = 0
        for result in results:
            if result.get("ok"):
                decided += sum(int(result.get(n, 0)) for n in ("released", "skipped", "failed"))
            else:
                log.warning("workflow advance rejected: %s", result.get("reason"))
        return decided

    def _entry(self, workflow: WorkflowView, basis: int) -> e.Entry | None:
        decisions = decide(
            task_nodes(workflow),
            workflow.context,
            self._evaluations.evaluator(workflow.id, workflow.run_traceparent),
            CONDITIONS_PER_ROUND,
            self._input_max_bytes,
        )
        if not decisions:
            return None
        counts = {v: sum(1 for d in decisions if d.verdict == v) for v in ("run", "skip", "fail")}
        log.info("workflow %s: releasing %d tasks, skipping %d, failing %d", workflow.id,
                 counts["run"], counts["skip"], counts["fail"])  # fmt: skip
        for d in decisions:
            level = {"run": logging.DEBUG, "skip": logging.INFO, "fail": logging.WARNING}[d.verdict]
            log.log(level, "workflow %s task %s (%s): %s, %s",
                    workflow.id, d.key, d.task_id, d.verdict, d.reason)  # fmt: skip
        payload = e.WorkflowAdvance(workflow.id, [d.to_entry() for d in decisions], basis)
        return e.Entry.create(payload, self._node_id, ts=wall_ms(self._clock))
