"""The seeded client workload: submissions to any node (with idempotency keys,
retried after a failure, as a careful client does) and cancels. A submission
is acknowledged when the node it went to answers with its applied result;
those must never be lost."""

from __future__ import annotations

import heapq
import random
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from cortex.errors import CortexError
from cortex.state import entries as e

if TYPE_CHECKING:
    from cortex.sim.harness import Simulation

# Mean gap between client operations, microseconds.
MEAN_GAP_US = 120_000
RETRY_AFTER_US = 500_000


class Workload:
    def __init__(self, sim: Simulation, rng: random.Random) -> None:
        self._sim = sim
        self._rng = rng
        self._queue: list[tuple[int, int, str, tuple[Any, ...]]] = []
        self._seq = 0
        self._pending: list[Future[dict[str, Any]]] = []
        self.acknowledged: dict[str, str] = {}  # task id -> idempotency key
        self._submitted = 0
        self._last_attempt_us = -1

    def _at(self, at_us: int, kind: str, *args: Any) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (at_us, self._seq, kind, args))

    def schedule(self, until_us: int) -> None:
        at = 0
        while True:
            at += int(self._rng.expovariate(1 / MEAN_GAP_US)) + 1
            if at >= until_us:
                return
            kind = "submit" if self._rng.random() < 0.85 else "cancel"
            self._at(at, kind)

    def next_at(self) -> int | None:
        return self._queue[0][0] if self._queue else None

    def attempted_after(self, at_us: int) -> bool:
        return self._last_attempt_us > at_us

    def in_flight(self) -> int:
        self._pending = [f for f in self._pending if not f.done()]
        return len(self._pending)

    def run_due(self) -> None:
        now = self._sim.clock.now_us
        while self._queue and self._queue[0][0] <= now:
            _, _, kind, args = heapq.heappop(self._queue)
            if kind == "submit":
                self._submit(*args)
            elif kind == "cancel":
                self._cancel()

    def _node(self) -> Any:
        live = [n for n in self._sim.nodes.values() if n.running and not n.paused]
        return self._rng.choice(live) if live else None

    def _submit(self, key: str | None = None, task_id: str | None = None) -> None:
        if key is None:
            self._submitted += 1
            key = f"key-{self._submitted}"
            task_id = f"task-{self._submitted}"
        assert task_id is not None
        node = self._node()
        if node is None or node.proposer is None:
            self._retry(key, task_id)
            return
        spec = {"type": "noop", "priority": self._rng.randint(0, 10)}
        self._sim.clock.current = node.id
        try:
            node.proposer.check_writable()
            entry = e.Entry.create(e.TaskSubmit(task_id, spec, idempotency_key=key), node.id)
        except CortexError:
            self._retry(key, task_id)
            return
        finally:
            self._sim.clock.current = None
        future = node.proposer.submit(entry)
        self._pending.append(future)
        self._last_attempt_us = self._sim.clock.now_us
        self._sim.trace.add("submit", node.id, key)

        def answered(done: Future[dict[str, Any]]) -> None:
            try:
                result = done.result()
            except CortexError:
                self._retry(key, task_id)
                return
            if result.get("ok"):
                self.acknowledged[str(result["task_id"])] = key
                self._sim.trace.add("acknowledged", key, result["task_id"])
            else:
                self._sim.trace.add("refused", key, result.get("reason"))

        future.add_done_callback(answered)

    def _retry(self, key: str, task_id: str) -> None:
        self._at(self._sim.clock.now_us + RETRY_AFTER_US, "submit", key, task_id)

    def _cancel(self) -> None:
        node = self._node()
        if node is None or node.proposer is None or not self.acknowledged:
            return
        task_id = self._rng.choice(sorted(self.acknowledged))
        self._sim.clock.current = node.id
        try:
            entry = e.Entry.create(e.TaskCancel(task_id, "simulated client"), node.id)
        finally:
            self._sim.clock.current = None
        self._pending.append(node.proposer.submit(entry))
        self._sim.trace.add("cancel", node.id, task_id)
