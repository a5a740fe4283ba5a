"""Which heartbeats a receiver takes. Every sender picks a random boot id
when its process starts and numbers its reports from 1; a receiver keeps,
per sender, the boot id and highest number it took and refuses anything not
newer in the same boot. What the receiver has not seen (after its own
restart, or from a new boot of the sender) is taken only when it was sent
within the freshness window of the receiver's clock, so a captured report
is useless once the window has passed.

Clock assumption: the nodes' clocks agree to well within `max_clock_skew_s`
(NTP does); the window is that plus one heartbeat interval, in both
directions. A node whose clock is further off has its reports refused, with
a log line on both sides saying by how much."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from cortex.errors import FailedPrecondition
from cortex.steps import SYSTEM_CLOCK, Clock, wall_ms


class StaleHeartbeat(FailedPrecondition):
    """A heartbeat that is a replay, too old, or from too far in the future."""


@dataclass(frozen=True)
class _Seen:
    boot_id: str
    seq: int
    sent_at_ms: int


class HeartbeatGuard:
    def __init__(self, window_s: float, clock: Clock = SYSTEM_CLOCK) -> None:
        self.window_ms = int(window_s * 1000)
        self._clock = clock
        self._seen: dict[str, _Seen] = {}
        self._lock = threading.Lock()

    def admit(self, node_id: str, boot_id: str, seq: int, sent_at_ms: int) -> None:
        """Takes note of a report (already authenticated) or raises StaleHeartbeat."""
        if not boot_id or seq <= 0:
            raise StaleHeartbeat(
                f"heartbeat from {node_id} has no boot id or sequence number "
                "(a node of an older version?)"
            )
        skew = sent_at_ms - wall_ms(self._clock)
        if abs(skew) > self.window_ms:
            when = "old" if skew < 0 else "ahead of this node's clock"
            raise StaleHeartbeat(
                f"heartbeat from {node_id} sent at {sent_at_ms} is {abs(skew) / 1000:.1f}s {when}"
                f" (taken within {self.window_ms / 1000:g}s): a replay, or clocks out of sync"
                " (config key max_clock_skew_s)"
            )
        with self._lock:
            seen = self._seen.get(node_id)
            if seen is not None and seen.boot_id == boot_id and seq <= seen.seq:
                raise StaleHeartbeat(
                    f"heartbeat from {node_id} number {seq} of boot {boot_id[:8]} is not newer"
                    f" than number {seen.seq} already taken: a replay"
                )
            if seen is not None and seen.boot_id != boot_id and sent_at_ms <= seen.sent_at_ms:
                # An earlier boot's report, replayed within the window.
                raise StaleHeartbeat(
                    f"heartbeat from {node_id} of boot {boot_id[:8]} was sent before the last"
                    f" one taken (boot {seen.boot_id[:8]}): a replay"
                )
            self._seen[node_id] = _Seen(boot_id, seq, sent_at_ms)
