"""The leader-only scheduling loop: every interval, or when woken by a submit
or a completion, places runnable queued tasks and proposes the round's
TASK_ASSIGN entries (one, unless it places more than a batch holds). With
nothing queued, tasks are placed as their submission is taken into the log
instead (`cortex.scheduler.at_proposal`); both count the placements not yet
applied (`cortex.scheduler.reservations`)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from cortex.membership.board import ResourceBoard
from cortex.raft.leader_loop import LeaderContext, LeaderLoop
from cortex.raft.proposer import MAX_BATCH_TASKS
from cortex.scheduler.applied_view import AppliedView
from cortex.scheduler.at_proposal import PlacementAtProposal, assign_entry
from cortex.scheduler.fairness import DEFAULT_FAIRNESS_KEY, LastServed
from cortex.scheduler.limits import LimitGate
from cortex.scheduler.model import (
    Candidate,
    PendingTask,
    RoundResult,
    declares_memory,
    task_limit,
)
from cortex.scheduler.placement import schedule_round
from cortex.scheduler.queue_watch import QueueWatch
from cortex.scheduler.reservations import Reservations
from cortex.spec import Constraints
from cortex.state.queries import NodeView, StateReader, TaskView
from cortex.state.task_states import TERMINAL_STATES
from cortex.state.transitions import TaskChange, last_changes
from cortex.steps import Step, wall_ms

log = logging.getLogger(__name__)

MAX_TASKS_PER_ROUND = 10_000
# The most queued tasks a round records as passed over (more: none are).
PASSED_OVER_MAX = 256


def build_candidates(
    reader: StateReader,
    board: ResourceBoard,
    reachable: Callable[[NodeView], bool],
    view: AppliedView | None = None,
) -> list[Candidate]:
    """The nodes as this node currently sees them: replicated status and
    labels, the latest resource report, and active tasks; the replicated
    part from `view` when it has it."""
    seen = view.seen() if view is not None else None
    if seen is not None:
        nodes, active = seen.nodes, seen.active
    else:
        nodes, active = reader.nodes(), reader.active_counts_by_node()
    reports = board.all()
    # Memory promised to tasks counts only against memory a node declares
    # (`declares_memory`); summing it reads every active task.
    declared = any(declares_memory(report.resources) for report in reports.values())
    reserved = reader.reserved_memory_by_node() if declared else {}
    out = []
    for node in nodes:
        report = reports.get(node.id)
        resources = report.resources if report else None
        promised = reserved.get(node.id, 0.0)
        out.append(
            Candidate(
                id=node.id,
                status=node.status,
                reachable=reachable(node),
                executors=frozenset(node.executors),
                active_tasks=active.get(node.id, 0),
                max_tasks=node.max_tasks,
                prefetch_tasks=node.prefetch_tasks,
                labels=node.labels,
                capabilities=report.capabilities if report else {},
                resources=resources,
                reserved_memory_mb=promised if declares_memory(resources) else 0.0,
                role=node.role,
            )
        )
    return out


def free_slots(nodes: list[Candidate]) -> int | None:
    """Tasks the nodes could still take by their task limits (whatever their
    status: an over-count only makes a round read more), None when a node
    has no limit."""
    free = 0
    for node in nodes:
        limit = task_limit(node)
        if not limit:
            return None
        free += max(limit - node.active_tasks, 0)
    return free


def pending(task: TaskView) -> PendingTask:
    return PendingTask(
        id=task.id,
        type=task.type,
        attempt=task.attempt,
        priority=task.priority,
        created_at=task.created_at,
        constraints=Constraints.model_validate(task.spec.get("constraints") or {}),
        fairness_key=task.fairness_key or DEFAULT_FAIRNESS_KEY,
        concurrency_key=task.concurrency_key,
    )


def limit_gate(reader: StateReader, now_ms: int, count_running: bool = True) -> LimitGate:
    """The limits per concurrency key as the replicated state holds them
    now; without `count_running`, only their rates and buckets are right."""
    state = reader.limit_state(count_running)
    return LimitGate(state.limits, state.running, state.buckets, now_ms)


class SchedulerLoop(LeaderLoop):
    def __init__(
        self,
        context: LeaderContext,
        board: ResourceBoard,
        reachable: Callable[[NodeView], bool],
        interval_s: float = 1.0,
        view: AppliedView | None = None,
    ) -> None:
        super().__init__("scheduler", context, interval_s)
        self._board = board
        self._reachable = reachable
        self._view = view
        self._served = LastServed()
        self.reservations = Reservations(self._clock.monotonic)
        self.queue = QueueWatch()
        # The Raft group's `placer`.
        self.at_proposal = PlacementAtProposal(
            self._node_id, self._reader, self._nodes, self.reservations, self._clock, self.queue
        )

    def _nodes(self) -> list[Candidate]:
        return build_candidates(self._reader, self._board, self._reachable, self._view)

    def applied(self, task_ids: Iterable[str]) -> None:
        """Apply changed these tasks: placements of theirs are counted there now."""
        self.reservations.release(task_ids)

    def on_change(self, changes: list[TaskChange]) -> None:
        """State listener (Raft thread): the changed tasks' placements are
        counted by the state now (`applied`). A round is due when an entry
        left a task queued, or ended one while tasks may be queued (a slot
        came free); also when the whole state was replaced (a snapshot). A
        task submitted and placed by the same entry leaves nothing queued,
        and a task ending when the last round found the queue empty, with
        nothing queued since, frees a slot nobody waits for: neither wakes a
        round."""
        self.applied(c.task_id for c in changes)
        if not changes:
            self.queue.forget()
            self.wake()
            return
        if _left_queued(changes):
            self.queue.left_queued()
            self.wake()
        elif not self.queue.known_empty and any(c.state in TERMINAL_STATES for c in changes):
            self.wake()

    def on_follower(self) -> None:
        self.reservations.clear()
        self.queue.forget()

    def wait_s(self) -> float:
        """The interval, or less when a backing-off task becomes runnable
        sooner, or a key waiting for its rate gets its next token."""
        now_ms = wall_ms(self._clock)
        due = self._reader.next_scheduled_after(now_ms)
        token = limit_gate(self._reader, now_ms, count_running=False).next_token_ms()
        due = min((t for t in (due, token) if t is not None), default=None)
        if due is None:
            return self._interval_s
        return max(0.005, min(self._interval_s, (due - now_ms) / 1000))

    def work(self) -> Step[bool]:
        return self.run_round()

    def run_round(self) -> Step[bool]:
        """Runs one round: places what it can and waits for the round's
        TASK_ASSIGN entries to be applied. Returns True when the round was
        full, so more tasks may be waiting."""
        seen = self.queue.changes
        if not self._reader.has_queued():
            self.queue.found_empty(seen)
            return False
        with self.reservations.lock:
            decided = self._decide()
            if decided is None:
                return False
            result, tasks, full = decided
            self.reservations.hold(result.placements, tasks)
        # In entries of at most a batch's tasks each, which the proposer
        # sends in as many batches: one entry placing thousands would hold
        # every node's Raft thread, and the leader's heartbeats, as long.
        placements = result.placements
        entries = [
            assign_entry(placements[start : start + MAX_BATCH_TASKS], self._node_id, self._clock)
            for start in range(0, len(placements), MAX_BATCH_TASKS)
        ]
        try:
            yield self._proposer.submit_all(entries)
        finally:
            self.reservations.release(p.task_id for p in result.placements)
        return full

    def _decide(self) -> tuple[RoundResult, list[PendingTask], bool] | None:
        """The round's placements, the tasks it read, and whether the window
        was full; None when nothing is placed."""
        held = self.reservations.held()
        candidates = held.counted_in(self._nodes())
        free = free_slots(candidates)
        if free == 0:
            return None
        # A few times the free slots, so tasks no free node takes do not hide
        # the ones behind them; past those, the whole window.
        limit = MAX_TASKS_PER_ROUND if free is None else min(free * 4 + 64, MAX_TASKS_PER_ROUND)
        now_ms = wall_ms(self._clock)
        gate = limit_gate(self._reader, now_ms)
        waiting = frozenset(key for key in gate.limits if gate.held(key) is not None)
        # Read first: a task queued after this read is not passed over. (A
        # longer queue than this read is more than `_pass_over` records.)
        queued = self._reader.queued_ids(PASSED_OVER_MAX + (free or 0) + 1)
        tasks = self._pending(self._reader.runnable_queue(now_ms, limit, waiting))
        if not tasks:
            self._pass_over(queued, frozenset())
            return None
        result = self._place(tasks, candidates, gate)
        if len(tasks) >= limit < MAX_TASKS_PER_ROUND and len(result.placements) < (free or 0):
            limit = MAX_TASKS_PER_ROUND
            tasks = self._pending(self._reader.runnable_queue(now_ms, limit, waiting))
            result = self._place(tasks, candidates, limit_gate(self._reader, now_ms))
        full = len(tasks) >= limit
        self._pass_over(queued, None if full else frozenset(p.task_id for p in result.placements))
        if not result.placements:
            return None
        return result, tasks, full

    def _pass_over(self, queued: list[str], placed: frozenset[str] | None) -> None:
        """Records the queued tasks this round left queued although it read
        the whole runnable queue (`placed` None: it did not), at most
        `PASSED_OVER_MAX` of them (`Reservations.pass_over`)."""
        left = frozenset(queued) - placed if placed is not None else frozenset()
        self.reservations.pass_over(left if len(left) <= PASSED_OVER_MAX else frozenset())

    def _place(
        self, tasks: list[PendingTask], candidates: list[Candidate], gate: LimitGate
    ) -> RoundResult:
        several_keys = len({task.fairness_key for task in tasks}) > 1
        active = self._reader.active_by_fairness_key() if several_keys else {}
        weights = self._reader.weights() if several_keys else {}
        if several_keys:
            self._served.forget_all_but({task.fairness_key for task in tasks})
        return schedule_round(tasks, candidates, gate, active, weights, self._served)

    @staticmethod
    def _pending(rows: list[Any]) -> list[PendingTask]:
        constraints: dict[str, Constraints] = {}
        tasks = []
        for row in rows:
            # Tasks of one shape share one parsed Constraints (and so one
            # placement group).
            parsed = constraints.get(row["constraints"])
            if parsed is None:
                parsed = Constraints.model_validate_json(row["constraints"])
                constraints[row["constraints"]] = parsed
            tasks.append(
                PendingTask(
                    row["id"],
                    row["type"],
                    row["attempt"],
                    row["priority"],
                    row["created_at"],
                    parsed,
                    row["fairness_key"],
                    row["concurrency_key"],
                )
            )
        return tasks


def _left_queued(changes: list[TaskChange]) -> bool:
    """Whether some task's last change in `changes` left it queued."""
    if not any(c.state == "queued" for c in changes):
        return False
    return any(c.state == "queued" for c in last_changes(changes))
