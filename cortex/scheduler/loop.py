"""The leader-only scheduling loop: every interval, or when woken by a submit
or a completion, places runnable queued tasks and proposes one TASK_ASSIGN
entry for the round."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from cortex.errors import CortexError
from cortex.raft.proposer import Proposer
from cortex.scheduler.placement import Candidate, PendingTask, RoundResult, schedule_round
from cortex.state import entries as e
from cortex.state.queries import NodeView, StateReader, TaskView

log = logging.getLogger(__name__)

MAX_TASKS_PER_ROUND = 2000


def candidates(
    nodes: list[NodeView], active: dict[str, int], reachable: Callable[[NodeView], bool]
) -> list[Candidate]:
    return [
        Candidate(
            id=node.id,
            status=node.status,
            reachable=reachable(node),
            executors=frozenset(node.executors),
            active_tasks=active.get(node.id, 0),
            max_tasks=int(node.resources.get("max_tasks", 0) or 0),
            labels=node.labels,
        )
        for node in nodes
    ]


def pending(task: TaskView) -> PendingTask:
    return PendingTask(id=task.id, type=task.type, attempt=task.attempt, priority=task.priority)


class SchedulerLoop:
    def __init__(
        self,
        node_id: str,
        is_leader: Callable[[], bool],
        proposer: Proposer,
        reader: StateReader,
        reachable: Callable[[NodeView], bool],
        interval_s: float = 1.0,
    ) -> None:
        self._node_id = node_id
        self._is_leader = is_leader
        self._proposer = proposer
        self._reader = reader
        self._reachable = reachable
        self._interval_s = interval_s
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="scheduler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def wake(self) -> None:
        self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self._interval_s)
            self._wake.clear()
            if self._stop.is_set() or not self._is_leader():
                continue
            try:
                while self.run_round() and not self._stop.is_set():
                    pass
            except CortexError as err:
                log.warning("scheduling round not committed: %s", err)
            except Exception:
                log.exception("scheduling round failed")

    def run_round(self) -> bool:
        """Runs one round; returns True when it placed a full round, so more
        may be waiting."""
        tasks = self._reader.queued_tasks(int(time.time() * 1000), MAX_TASKS_PER_ROUND)
        if not tasks:
            return False
        result: RoundResult = schedule_round(
            [pending(t) for t in tasks],
            candidates(self._reader.nodes(), self._reader.active_counts_by_node(), self._reachable),
        )
        if not result.placements:
            return False
        entry = e.Entry.create(
            e.TaskAssign(
                [
                    {"task_id": p.task_id, "node": p.node, "attempt": p.attempt}
                    for p in result.placements
                ]
            ),
            self._node_id,
        )
        self._proposer.propose_one(entry, timeout=10.0)
        return len(tasks) == MAX_TASKS_PER_ROUND
