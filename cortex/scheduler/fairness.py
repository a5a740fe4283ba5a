"""Fair queues: within a priority level, placements are shared between
fairness keys in proportion to their weights.

The next task comes from the key with the smallest share in use, `(active
+ placed) / weight`, where `active` is what the replicated state says the
key has assigned or running and `placed` what this round gave it; ties go to
the key served longest ago (`LastServed`, the leader's memory across
rounds; a key never served first), then to the key whose head task is
oldest, then to the key's name. A key's own tasks
keep their order (oldest first). So a key with ten thousand tasks queued
takes its share, and a key with one task gets it placed in the same round.
Priority stays strict: a level is exhausted before the next one is served.
Pure: plain data in, tasks out."""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterator, Sequence
from fractions import Fraction

from cortex.scheduler.model import PendingTask
from cortex.state.limit_bounds import DEFAULT_WEIGHT, MAX_WEIGHT
from cortex.state.transitions import DEFAULT_FAIRNESS_KEY

__all__ = ["DEFAULT_FAIRNESS_KEY", "DEFAULT_WEIGHT", "MAX_WEIGHT", "FairQueue", "LastServed"]


class LastServed:
    """When each key last had a task placed, as a count of placements; kept
    by the leader across rounds (not replicated: a new leader starts
    afresh, which only changes how ties break)."""

    def __init__(self) -> None:
        self._counter = 0
        self._served: dict[str, int] = {}

    def of(self, key: str) -> int:
        return self._served.get(key, -1)

    def serve(self, key: str) -> None:
        self._counter += 1
        self._served[key] = self._counter

    def forget_all_but(self, keys: set[str]) -> None:
        """Drops keys with nothing queued, so the memory stays small."""
        self._served = {k: v for k, v in self._served.items() if k in keys}


class FairQueue:
    """Tasks in the order a round should try them; tell it which were placed
    (`placed`), since only placements count against a key's share."""

    def __init__(
        self,
        tasks: Sequence[PendingTask],
        active: dict[str, int],
        weights: dict[str, int],
        served: LastServed | None = None,
    ) -> None:
        self._active = active
        self._weights = weights
        self._served = served if served is not None else LastServed()
        self._placed: dict[str, int] = {}
        levels: dict[int, dict[str, deque[PendingTask]]] = {}
        for task in sorted(tasks, key=lambda t: (t.created_at, t.id)):
            queues = levels.setdefault(task.priority, {})
            queues.setdefault(task.fairness_key, deque()).append(task)
        self._levels = [levels[p] for p in sorted(levels, reverse=True)]

    def _share(self, key: str) -> Fraction:
        used = self._active.get(key, 0) + self._placed.get(key, 0)
        return Fraction(used, max(self._weights.get(key, DEFAULT_WEIGHT), 1))

    def __iter__(self) -> Iterator[PendingTask]:
        for queues in self._levels:
            if len(queues) == 1:  # one key: its own order, no shares to weigh
                yield from next(iter(queues.values()))
                continue
            heap = [self._rank(key, queue) for key, queue in queues.items()]
            heapq.heapify(heap)
            while heap:
                key = heapq.heappop(heap)[-1]
                queue = queues[key]
                yield queue.popleft()
                if queue:
                    heapq.heappush(heap, self._rank(key, queue))

    def _rank(self, key: str, queue: deque[PendingTask]) -> tuple[Fraction, int, int, str, str]:
        head = queue[0]
        return (self._share(key), self._served.of(key), head.created_at, head.id, key)

    def placed(self, task: PendingTask) -> None:
        key = task.fairness_key
        self._placed[key] = self._placed.get(key, 0) + 1
        self._served.serve(key)
