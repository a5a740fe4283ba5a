"""Fair queueing of sandbox work across flows (a flow is one workflow's
conditions, or one submission's syntax checks).

Each flow has its own FIFO queue. The next item comes from the flow with the
least evaluation time charged to it recently (decaying with a half-life),
plus what its next item is expected to cost, learnt from earlier runs of the
same source; ties go to the item queued first. So a workflow that has spent
the workers' time, or whose next condition is known to be slow (it timed out
before), waits behind one that has not: a newcomer waits for about one
evaluation, however many slow ones are queued. Pure: the clock is injected."""

from __future__ import annotations

import itertools
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from cortex.workflows.lru_cache import LruCache

T = TypeVar("T")

DEFAULT_HALF_LIFE_S = 10.0
# Sources whose cost is remembered (a hash each); the oldest are forgotten.
DEFAULT_MAX_COSTS = 4096
# A flow with nothing queued is forgotten once its charge decays below this.
_NEGLIGIBLE_S = 0.001
_SWEEP_EVERY = 256


@dataclass
class _Queued(Generic[T]):
    seq: int
    item: T
    cost_key: str | None


@dataclass
class _Flow(Generic[T]):
    charge: float = 0.0
    stamp: float = 0.0
    items: deque[_Queued[T]] = field(default_factory=deque)


class FairQueue(Generic[T]):
    def __init__(
        self,
        half_life_s: float = DEFAULT_HALF_LIFE_S,
        clock: Callable[[], float] = time.monotonic,
        max_costs: int = DEFAULT_MAX_COSTS,
    ) -> None:
        self._decay = math.log(2) / half_life_s
        self._clock = clock
        self._flows: dict[str, _Flow[T]] = {}
        self._costs: LruCache[str, float] = LruCache(max_costs)
        self._seq = itertools.count()
        self._length = 0
        self._operations = 0

    def __len__(self) -> int:
        return self._length

    def push(self, flow: str, item: T, cost_key: str | None = None) -> None:
        """Queues `item` at the end of `flow`'s queue; `cost_key` names what
        its cost is learnt under (the condition's source)."""
        self._flows.setdefault(flow, _Flow(stamp=self._clock()))
        self._flows[flow].items.append(_Queued(next(self._seq), item, cost_key))
        self._length += 1

    def pop(self) -> tuple[str, T, str | None] | None:
        """The next (flow, item, cost_key), or None when nothing is queued."""
        now = self._clock()
        best: tuple[float, int] | None = None
        chosen = ""
        for name, flow in self._flows.items():
            if not flow.items:
                continue
            head = flow.items[0]
            charge = self._charge(flow, now)
            if charge < _NEGLIGIBLE_S:
                charge = 0.0  # long ago: level with a fresh flow
            rank = (charge + self.expected_cost(head.cost_key), head.seq)
            if best is None or rank < best:
                best, chosen = rank, name
        if best is None:
            return None
        queued = self._flows[chosen].items.popleft()
        self._length -= 1
        self._sweep(now)
        return chosen, queued.item, queued.cost_key

    def remove(self, flow: str, item: T) -> bool:
        """Takes `item` out of `flow`'s queue (a cancelled evaluation)."""
        queue = self._flows.get(flow)
        if queue is None:
            return False
        for queued in queue.items:
            if queued.item is item:
                queue.items.remove(queued)
                self._length -= 1
                return True
        return False

    def drain(self) -> list[T]:
        """Empties every queue; returns what was queued."""
        items = [q.item for flow in self._flows.values() for q in flow.items]
        self._flows.clear()
        self._length = 0
        return items

    def record(self, flow: str, cost_key: str | None, seconds: float) -> None:
        """Charges `seconds` of work to `flow` and learns it as the cost of
        `cost_key` (a moving average over its runs)."""
        now = self._clock()
        state = self._flows.setdefault(flow, _Flow(stamp=now))
        state.charge = self._charge(state, now) + max(0.0, seconds)
        if cost_key is not None:
            known = self._costs.get(cost_key)
            self._costs.put(cost_key, seconds if known is None else (known + seconds) / 2)

    def expected_cost(self, cost_key: str | None) -> float:
        if cost_key is None:
            return 0.0
        return self._costs.get(cost_key) or 0.0

    def charge(self, flow: str) -> float:
        state = self._flows.get(flow)
        return 0.0 if state is None else self._charge(state, self._clock())

    def _charge(self, flow: _Flow[T], now: float) -> float:
        if now > flow.stamp:
            flow.charge *= math.exp(-self._decay * (now - flow.stamp))
            flow.stamp = now
        return flow.charge

    def _sweep(self, now: float) -> None:
        self._operations += 1
        if self._operations % _SWEEP_EVERY:
            return
        idle = [name for name, flow in self._flows.items()
                if not flow.items and self._charge(flow, now) < _NEGLIGIBLE_S]  # fmt: skip
        for name in idle:
            del self._flows[name]
