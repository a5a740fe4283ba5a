"""Placements the leader has proposed but not yet applied. The replicated
state counts a node's tasks only once their assignment is applied; until
then each placement is held here, and every placement decision (a
scheduling round, a placement made with a submission) sees the nodes with
these counted in, so two decisions made while an entry commits cannot
both take a node's last slot."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from cortex.scheduler.model import Candidate, PendingTask, Placement, declares_memory

# A placement whose entry is not applied within this long never will be
# (the term ended, the entry was refused): it is let go.
EXPIRES_AFTER_S = 15.0


@dataclass(frozen=True)
class _Held:
    node: str
    memory_mb: float
    expires_at: float


@dataclass(frozen=True)
class Held:
    """What the held placements add to each node, at one moment, and the
    tasks they place."""

    tasks: dict[str, int]
    memory_mb: dict[str, float]
    task_ids: frozenset[str] = frozenset()
    # Queued tasks the last scheduling round passed over (`pass_over`).
    passed_over: frozenset[str] = frozenset()

    def counted_in(self, nodes: Sequence[Candidate]) -> list[Candidate]:
        """The nodes with these placements added to their tasks (and to
        their promised memory where memory is declared)."""
        return [
            dataclasses.replace(
                node,
                active_tasks=node.active_tasks + self.tasks[node.id],
                reserved_memory_mb=node.reserved_memory_mb
                + (self.memory_mb[node.id] if declares_memory(node.resources) else 0.0),
            )
            if node.id in self.tasks
            else node
            for node in nodes
        ]


class Reservations:
    """Thread-safe. `lock` is held by whoever decides placements, from
    taking `held()` to `hold`ing what it decided, so decisions do not
    overlap; the book itself has a lock of its own, so apply's `release`
    never waits for a decision.

    `held()` must be taken before the state is read: a placement applied
    in between is then counted twice (a slot left idle for a moment), never
    not at all."""

    def __init__(self, monotonic: Callable[[], float]) -> None:
        self.lock = threading.RLock()
        self._book = threading.Lock()
        self._monotonic = monotonic
        self._held: dict[str, _Held] = {}
        self._passed_over: frozenset[str] = frozenset()

    def __len__(self) -> int:
        return len(self._held)

    def held(self) -> Held:
        now = self._monotonic()
        tasks: dict[str, int] = {}
        memory: dict[str, float] = {}
        with self._book:
            for task_id, held in list(self._held.items()):
                if held.expires_at <= now:
                    del self._held[task_id]
                    continue
                tasks[held.node] = tasks.get(held.node, 0) + 1
                memory[held.node] = memory.get(held.node, 0.0) + held.memory_mb
            task_ids = frozenset(self._held)
            passed_over = self._passed_over
        return Held(tasks, memory, task_ids, passed_over)

    def hold(self, placements: Iterable[Placement], tasks: Iterable[PendingTask]) -> None:
        memory = {task.id: float(task.constraints.min_memory_mb) for task in tasks}
        expires_at = self._monotonic() + EXPIRES_AFTER_S
        with self._book:
            for placement in placements:
                self._held[placement.task_id] = _Held(
                    placement.node, memory.get(placement.task_id, 0.0), expires_at
                )

    def release(self, task_ids: Iterable[str]) -> None:
        """The placements of these tasks are applied (or will never be)."""
        if not self._held:
            return
        with self._book:
            for task_id in task_ids:
                self._held.pop(task_id, None)

    def pass_over(self, task_ids: frozenset[str]) -> None:
        """Records the queued tasks that the last scheduling round, having
        read the whole runnable queue, could not place or could not take yet
        (backing off, waiting for a limit): a submission may be placed ahead
        of them, as the round placed others ahead of them. Empty when the
        round did not see the whole queue."""
        with self._book:
            self._passed_over = task_ids

    def clear(self) -> None:
        with self._book:
            self._held.clear()
            self._passed_over = frozenset()
