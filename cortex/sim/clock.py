"""Simulated time: one clock for the whole run, in microseconds, and per node
a wall-clock offset (a node's clock may jump). Monotonic time is the same
for every node; wall time is monotonic time plus an epoch plus the offset."""

from __future__ import annotations

from dataclasses import dataclass, field

# Wall time at simulated time zero: 2026-01-01T00:00:00Z, in microseconds.
EPOCH_US = 1_767_225_600_000_000


@dataclass
class SimClock:
    now_us: int = 0
    # The node whose code runs at the moment (its wall offset applies).
    current: str | None = None
    offsets_us: dict[str, int] = field(default_factory=dict)

    def monotonic(self) -> float:
        return self.now_us / 1_000_000

    def wall_us(self, node: str | None = None) -> int:
        who = self.current if node is None else node
        return EPOCH_US + self.now_us + self.offsets_us.get(who or "", 0)

    def wall_ms(self, node: str | None = None) -> int:
        return self.wall_us(node) // 1000

    def time(self) -> float:
        """`time.time()` as the current node sees it."""
        return self.wall_us() / 1_000_000

    def jump(self, node: str, by_us: int) -> None:
        self.offsets_us[node] = self.offsets_us.get(node, 0) + by_us
