"""The event trace of a simulated run: every event the harness records, each
stamped with simulated time, hashed as it goes. The same seed gives the same
trace, byte for byte; `trace_hash` is what runs are compared by."""

from __future__ import annotations

import hashlib

from cortex.sim.clock import SimClock


class Trace:
    def __init__(self, clock: SimClock, keep: bool = False) -> None:
        self._clock = clock
        self._hash = hashlib.sha256()
        self.keep = keep
        self.lines: list[str] = []
        self.count = 0

    def add(self, kind: str, *fields: object) -> None:
        line = f"{self._clock.now_us:>12} {kind} {' '.join(str(f) for f in fields)}"
        self._hash.update(line.encode("utf-8", "surrogatepass"))
        self._hash.update(b"\n")
        self.count += 1
        if self.keep:
            self.lines.append(line)

    def hexdigest(self) -> str:
        return self._hash.hexdigest()
