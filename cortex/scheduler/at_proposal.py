"""Placement with the submission: when nothing is queued, the leader places
the standalone tasks of a batch as it takes the batch into its log, and
appends their TASK_ASSIGN to the same batch. One Raft entry then both
submits and assigns them: on an idle cluster a task starts one commit
sooner, and costs every node one entry fewer.

The batch may be this node's own or one a follower forwarded
(`RaftGroup.placer`). Its entries are untouched and keep their places, so
each proposer still finds its entries' results where it expects them; the
assignment is one more entry at the end. Apply checks it like any other: a
submission refused, or a task no longer queued, makes the placement
refused, and the task waits for a scheduling round.

Only when the replicated state holds no queued task waiting for the
scheduler: a task waiting in the queue is placed by the scheduler first, in
queue order. A queued task a round already placed, its assignment on its
way through the log (held in `Reservations`), waits for nobody: under a
steady stream of submissions one task queued used to turn placement off for
every submission after it, each round's tasks queuing the next ones behind
them (12 of 6,000 tasks were placed with their submission at 32 concurrent
clients), so each task cost one more entry and a round's wait. Nor does one
the last round passed over: no node could take it, or it could not run yet
(backing off before a retry, waiting for its key's limit). A single task
asking for a label no node has used to turn placement off for good: one
client's submit-to-running p50 went from 5 to 12 ms. Only tasks
without a concurrency key (their limits and rates are the scheduler's to
apply), and only small batches (a bulk submission queues anyway)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from cortex.scheduler.fairness import DEFAULT_FAIRNESS_KEY
from cortex.scheduler.model import Candidate, PendingTask, Placement
from cortex.scheduler.placement import schedule_round
from cortex.scheduler.queue_watch import QueueWatch
from cortex.scheduler.reservations import Reservations
from cortex.spec import Constraints
from cortex.state import entries as e
from cortex.state.canonical import dump
from cortex.state.queries import StateReader
from cortex.steps import Clock, wall_ms

log = logging.getLogger(__name__)

MAX_PLACED_BATCH_BYTES = 64 * 1024
# How long a placement waits for the reservations' lock before leaving its
# batch to the scheduler. The leader places its own batches on its
# proposer's thread and followers' batches on the Raft thread, so two
# placements meet often under load: when the second gave up at once, 490
# of 3,000 tasks from 32 clients queued that way and 1,396 more queued
# behind them, each placed by a round in an entry of its own; waiting, 2,645
# were placed with their submission, and the submit-to-running p50 went
# from 63-75 ms to 30-47 (`scripts/bench_core.py --tasks 3000`, three runs
# each; throughput within the runs' spread). The lock is held for 0.45 ms
# (p50) and 8.7 ms (p99) by a placement there, 1.5 ms (p50) and 6.7 ms (most)
# by a round; the Raft thread's wait stays far under an election timeout.
LOCK_WAIT_S = 0.01
_SUBMIT_MARK = f'"type":"{e.TaskSubmit.TYPE}"'.encode()


class PlacementAtProposal:
    def __init__(
        self,
        node_id: str,
        reader: StateReader,
        candidates: Callable[[], list[Candidate]],
        reservations: Reservations,
        clock: Clock,
        queue: QueueWatch,
    ) -> None:
        self._node_id = node_id
        self._reader = reader
        self._candidates = candidates
        self._reservations = reservations
        self._clock = clock
        self._queue = queue

    def place(self, data: bytes) -> bytes | None:
        """The batch with a TASK_ASSIGN of its standalone submissions
        appended, or None to take it as it is. Called on the leader only."""
        if len(data) > MAX_PLACED_BATCH_BYTES or _SUBMIT_MARK not in data:
            return None
        try:
            tasks = _submitted_tasks(e.decode_batch(data))
            if not tasks:
                return None
            assign = self._placed(tasks)
        except Exception:
            # Never a reason to refuse the batch: the scheduler places them.
            log.exception("placing tasks with their submission failed")
            return None
        if assign is None:
            return None
        return data[:-1] + b"," + e.encode_batch([assign])[1:]

    def _placed(self, tasks: list[PendingTask]) -> e.Entry | None:
        # Another batch's placement or a scheduling round may be deciding
        # now: wait for it, a little. A batch not placed here queues, and
        # every batch after it then queues behind it until rounds place
        # them (see `LOCK_WAIT_S`).
        if not self._reservations.lock.acquire(timeout=LOCK_WAIT_S):
            return None
        try:
            held = self._reservations.held()
            if self._queue_waits(held.task_ids, held.passed_over):
                return None
            nodes = held.counted_in(self._candidates())
            result = schedule_round(tasks, nodes)
            if not result.placements:
                return None
            self._reservations.hold(result.placements, tasks)
        finally:
            self._reservations.lock.release()
        return assign_entry(result.placements, self._node_id, self._clock)

    def _queue_waits(self, placed: frozenset[str], passed_over: frozenset[str]) -> bool:
        """Whether a queued task waits for the scheduler: one whose placement
        is not among the held ones, `placed`, and that the last round did
        not pass over (`Reservations.pass_over`). The caller holds the
        reservations' lock, so no other decision adds to them meanwhile; one
        released since was applied (or refused, and waits for a round). A
        queue known to be empty (`QueueWatch`) is not read."""
        if self._queue.known_empty:
            return False
        seen = self._queue.changes
        queued = self._reader.queued_ids(len(placed) + len(passed_over) + 1)
        if not queued:
            self._queue.found_empty(seen)
            return False
        return any(t not in placed and t not in passed_over for t in queued)


def assign_entry(placements: Sequence[Placement], node_id: str, clock: Clock) -> e.Entry:
    """The TASK_ASSIGN entry of placements decided on this node now."""
    return e.Entry.create(
        e.TaskAssign(
            [{"task_id": p.task_id, "node": p.node, "attempt": p.attempt} for p in placements]
        ),
        node_id,
        ts=wall_ms(clock),
    )


def _submitted_tasks(entries: list[Any]) -> list[PendingTask]:
    """The tasks of a batch's submissions that may be placed with it. Tasks
    of one shape share one parsed Constraints, and so one placement group
    (`cortex.scheduler.placement`): the nodes are scored once for them all,
    not once per task."""
    tasks = []
    parsed: dict[str, Constraints] = {}
    for entry in entries:
        if not isinstance(entry, e.Entry) or entry.type != e.TaskSubmit.TYPE:
            continue
        try:
            task = _pending(entry, parsed)
        except (e.EntryDecodeError, KeyError, TypeError, ValueError):
            continue  # apply refuses the submission, or it is not for here
        if task is not None:
            tasks.append(task)
    return tasks


def _pending(entry: e.Entry, parsed: dict[str, Constraints]) -> PendingTask | None:
    submit = entry.decode_payload()
    if not isinstance(submit, e.TaskSubmit) or submit.workflow_id is not None:
        return None
    spec = submit.spec
    if spec.get("concurrency_key"):
        return None
    given = spec.get("constraints") or {}
    shape = dump(given)
    constraints = parsed.get(shape)
    if constraints is None:
        constraints = parsed[shape] = Constraints.model_validate(given)
    return PendingTask(
        submit.task_id,
        str(spec["type"]),
        0,
        int(spec["priority"]),
        entry.ts,
        constraints,
        spec.get("fairness_key") or DEFAULT_FAIRNESS_KEY,
        None,
    )
