"""The seeded fault schedule: power cuts (one node or several at once, losing
what was not synced), process kills, pauses, partitions (symmetric, one-way,
and splits into two sides), connection resets, slow links, clock jumps and a
full disk. Every fault is undone later; `heal` undoes them all at once."""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cortex.sim.harness import Simulation
    from cortex.sim.node import SimNode

MEAN_GAP_US = 2_000_000


class FaultPlan:
    def __init__(self, sim: Simulation, rng: random.Random) -> None:
        self._sim = sim
        self._rng = rng
        self._queue: list[tuple[int, int, str, tuple[Any, ...]]] = []
        self._seq = 0
        self.injected = 0
        self._healing = False
        # The furthest any node's clock was put ahead: entries carry their
        # proposer's time, so a retry's back-off counts from it (see harness).
        self.max_ahead_us = 0

    # -- scheduling -------------------------------------------------------------

    def _at(self, at_us: int, action: str, *args: Any) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (at_us, self._seq, action, args))

    def schedule(self, until_us: int) -> None:
        at = 1_000_000
        while True:
            at += int(self._rng.expovariate(1 / MEAN_GAP_US)) + 1
            if at >= until_us:
                return
            self._at(at, "inject")

    def next_at(self) -> int | None:
        return self._queue[0][0] if self._queue else None

    def run_due(self) -> None:
        now = self._sim.clock.now_us
        while self._queue and self._queue[0][0] <= now:
            _, _, action, args = heapq.heappop(self._queue)
            getattr(self, f"_{action}")(*args)

    def _later(self, low_s: float, high_s: float, action: str, *args: Any) -> None:
        delay = int(self._rng.uniform(low_s, high_s) * 1_000_000)
        self._at(self._sim.clock.now_us + delay, action, *args)

    # -- faults -------------------------------------------------------------------

    def _inject(self) -> None:
        kinds: list[tuple[str, Callable[[], None], int]] = [
            ("power cut", self._power_cut, 3),
            ("power cut of a majority", self._power_cut_many, 1),
            ("kill", self._kill, 2),
            ("pause", self._pause, 2),
            ("isolate", self._isolate, 2),
            ("one-way cut", self._one_way, 2),
            ("split", self._split, 1),
            ("reset", self._reset, 2),
            ("slow link", self._slow, 2),
            ("clock jump", self._clock_jump, 1),
            ("full disk", self._full_disk, 1),
        ]
        total = sum(weight for _, _, weight in kinds)
        pick = self._rng.uniform(0, total)
        for name, inject, weight in kinds:
            pick -= weight
            if pick <= 0:
                self.injected += 1
                self._sim.trace.add("fault", name)
                inject()
                return

    def _live(self) -> list[SimNode]:
        return [n for n in self._sim.nodes.values() if n.running]

    def _ids(self) -> list[str]:
        return list(self._sim.nodes)

    def _power_cut(self) -> None:
        live = self._live()
        if live:
            node = self._rng.choice(live)
            node.crash(self._rng)
            self._later(0.5, 5.0, "restart", node.id)

    def _power_cut_many(self) -> None:
        live = self._live()
        count = min(len(live), len(self._sim.nodes) // 2 + 1)
        for node in self._rng.sample(live, count):
            node.crash(self._rng)
            self._later(0.5, 4.0, "restart", node.id)

    def _kill(self) -> None:
        live = self._live()
        if live:
            node = self._rng.choice(live)
            node.fail_stop("killed")
            self._later(0.2, 3.0, "restart", node.id)

    def _restart(self, node_id: str) -> None:
        node = self._sim.nodes[node_id]
        if node.running or node.disk_full:
            return
        self._sim.start_node(node)

    def stopped(self, node: SimNode) -> None:
        """A node stopped itself on a local fault: it is started again later
        (once its disk has room)."""
        self._later(0.5, 3.0, "restart", node.id)

    def _pause(self) -> None:
        live = [n for n in self._live() if not n.paused]
        if live:
            node = self._rng.choice(live)
            node.paused = True
            self._later(0.3, 6.0, "resume", node.id)

    def _resume(self, node_id: str) -> None:
        node = self._sim.nodes[node_id]
        if node.paused:
            node.paused = False
            self._sim.network.release(node.address)
            self._sim.trace.add("resume", node_id)

    def _cut(self, links: list[tuple[str, str]], low_s: float, high_s: float) -> None:
        addresses = {node_id: node.address for node_id, node in self._sim.nodes.items()}
        cut = [(addresses[a], addresses[b]) for a, b in links]
        self._sim.network.cut.update(cut)
        self._sim.trace.add("cut", *(f"{a}>{b}" for a, b in links))
        self._later(low_s, high_s, "mend", tuple(cut))

    def _mend(self, cut: tuple[tuple[str, str], ...]) -> None:
        self._sim.network.cut.difference_update(cut)
        self._sim.trace.add("mend", len(cut))

    def _isolate(self) -> None:
        node = self._rng.choice(self._ids())
        others = [n for n in self._ids() if n != node]
        self._cut([(node, o) for o in others] + [(o, node) for o in others], 1.0, 8.0)

    def _one_way(self) -> None:
        a, b = self._rng.sample(self._ids(), 2)
        self._cut([(a, b)], 1.0, 8.0)

    def _split(self) -> None:
        ids = self._ids()
        self._rng.shuffle(ids)
        side = ids[: self._rng.randint(1, len(ids) - 1)]
        rest = [n for n in ids if n not in side]
        self._cut([(a, b) for a in side for b in rest] + [(b, a) for a in side for b in rest],
                  1.0, 8.0)  # fmt: skip

    def _reset(self) -> None:
        a, b = self._rng.sample(self._ids(), 2)
        self._sim.network.reset(self._sim.nodes[a].address, self._sim.nodes[b].address)

    def _slow(self) -> None:
        a, b = self._rng.sample(self._ids(), 2)
        link = (self._sim.nodes[a].address, self._sim.nodes[b].address)
        self._sim.network.slow[link] = self._rng.randint(20_000, 600_000)
        self._later(1.0, 8.0, "unslow", link)

    def _unslow(self, link: tuple[str, str]) -> None:
        self._sim.network.slow.pop(link, None)

    def _clock_jump(self) -> None:
        node = self._rng.choice(self._ids())
        by = self._rng.choice([-1, 1]) * self._rng.randint(1, 60) * 1_000_000
        self._sim.clock.jump(node, by)
        self.max_ahead_us = max(self.max_ahead_us, self._sim.clock.offsets_us.get(node, 0))
        self._sim.trace.add("clock", node, by)

    def _full_disk(self) -> None:
        live = self._live()
        if not live:
            return
        node = self._rng.choice(live)
        node.fill_disk()
        self._later(1.0, 6.0, "free_disk", node.id)

    def _free_disk(self, node_id: str) -> None:
        node = self._sim.nodes[node_id]
        node.free_disk()
        if not node.running:
            self._later(0.1, 1.0, "restart", node_id)

    # -- the end of faults ---------------------------------------------------------

    def heal(self) -> None:
        """Undoes every fault: links mended and fast, clocks right, disks with
        room, paused nodes running, stopped ones started."""
        self._queue = [item for item in self._queue if item[2] not in ("inject",)]
        heapq.heapify(self._queue)
        self._sim.network.cut.clear()
        self._sim.network.slow.clear()
        self._sim.clock.offsets_us.clear()
        for node in self._sim.nodes.values():
            node.free_disk()
            if node.paused:
                self._resume(node.id)
            if not node.running:
                self._sim.start_node(node)
        self._queue = []
