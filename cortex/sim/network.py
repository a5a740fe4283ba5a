"""The simulated network between nodes.

Raft messages travel as pysyncobj sends them over TCP: per directed link in
order and without duplicates while a connection lasts. Peer calls (heartbeats)
are separate gRPC requests: no order between them, and a duplicating link
delivers some twice, as a client's retry would. Faults act as on a
real network: a link can be cut (one way or both: a partition), a connection
can be reset (what was in flight on it is lost), and links can be slow.
Messages to a paused node wait for it, as in its socket buffers. Each message
is copied (pickled), so no object is shared between nodes."""

from __future__ import annotations

import heapq
import pickle
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cortex.sim.clock import SimClock
from cortex.sim.trace import Trace

# One hop on a quiet network, in microseconds.
BASE_DELAY_US = (200, 2_000)


RAFT = "raft"
PEER = "peer"


@dataclass(order=True)
class _Delivery:
    at_us: int
    seq: int
    src: str = field(compare=False)
    dst: str = field(compare=False)
    epoch: int = field(compare=False)
    data: bytes = field(compare=False)
    channel: str = field(compare=False, default=RAFT)


Receiver = Callable[[str, Any], None]


class SimNetwork:
    def __init__(self, clock: SimClock, rng: random.Random, trace: Trace) -> None:
        self._clock = clock
        self._rng = rng
        self._trace = trace
        self._queue: list[_Delivery] = []
        self._seq = 0
        # Directed links that drop everything (partitions, one-way cuts).
        self.cut: set[tuple[str, str]] = set()
        # Extra one-way delay per directed link, microseconds.
        self.slow: dict[tuple[str, str], int] = {}
        self._epoch: dict[tuple[str, str], int] = {}
        self._last_at: dict[tuple[str, str], int] = {}
        self._receivers: dict[tuple[str, str], Receiver] = {}
        # Directed links that deliver some peer calls twice.
        self.duplicating: set[tuple[str, str]] = set()
        # Messages that reached a paused node, kept for when it runs again.
        self._held: dict[str, list[_Delivery]] = {}
        self.sent = 0
        self.dropped = 0

    def attach(self, node: str, receive: Receiver, channel: str = RAFT) -> None:
        self._receivers[(node, channel)] = receive

    def detach(self, node: str) -> None:
        """The node's process is gone: what is on the way to it is lost."""
        for channel in (RAFT, PEER):
            self._receivers.pop((node, channel), None)
        self._held.pop(node, None)
        for link in list(self._epoch):
            if node in link:
                self._epoch[link] += 1

    def send(self, src: str, dst: str, message: Any, channel: str = RAFT) -> None:
        self.sent += 1
        link = (src, dst)
        if link in self.cut:
            self.dropped += 1
            self._trace.add("drop", src, dst, _kind(message))
            return
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        copies = 2 if channel == PEER and link in self.duplicating else 1
        for _ in range(copies):
            delay = self._rng.randint(*BASE_DELAY_US) + self.slow.get(link, 0)
            at = self._clock.now_us + delay
            if channel == RAFT:  # in order per link, as over one TCP connection
                at = max(at, self._last_at.get(link, 0))
                self._last_at[link] = at
            self._seq += 1
            heapq.heappush(
                self._queue,
                _Delivery(at, self._seq, src, dst, self._epoch.get(link, 0), data, channel),
            )

    def reset(self, a: str, b: str) -> None:
        """Resets the connection between `a` and `b`: in-flight messages are lost."""
        for link in ((a, b), (b, a)):
            self._epoch[link] = self._epoch.get(link, 0) + 1
        self._trace.add("reset", a, b)

    def next_at(self) -> int | None:
        return self._queue[0].at_us if self._queue else None

    def deliver_due(self, ready: Callable[[str], bool]) -> list[str]:
        """Hands every message due by now to its receiver; a receiver that is
        not ready (paused) gets them when `release`d. Returns the nodes that
        got a message."""
        touched: list[str] = []
        while self._queue and self._queue[0].at_us <= self._clock.now_us:
            delivery = heapq.heappop(self._queue)
            link = (delivery.src, delivery.dst)
            if delivery.epoch != self._epoch.get(link, 0):
                self.dropped += 1
                continue
            receive = self._receivers.get((delivery.dst, delivery.channel))
            if receive is None:
                self.dropped += 1
                continue
            if not ready(delivery.dst):
                self._held.setdefault(delivery.dst, []).append(delivery)
                continue
            receive(delivery.src, pickle.loads(delivery.data))
            if delivery.dst not in touched:
                touched.append(delivery.dst)
        return touched

    def release(self, node: str) -> None:
        """A paused node runs again: what arrived meanwhile is delivered now."""
        for delivery in self._held.pop(node, []):
            delivery.at_us = self._clock.now_us
            heapq.heappush(self._queue, delivery)


def _kind(message: Any) -> str:
    if isinstance(message, dict):
        return str(message.get("type", "?"))
    return type(message).__name__
