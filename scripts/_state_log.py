"""A state machine on a database file of its own, fed entries as a node's
log would be, for benchmarks that need a real state database without a
cluster. Every entry is written by the first of `NODES`, which have joined."""

from __future__ import annotations

from pathlib import Path

from cortex.state import entries as e
from cortex.state.machine import StateMachine

NODES = ("node-1", "node-2", "node-3")


class StateLog:
    def __init__(self, path: Path) -> None:
        self.machine = StateMachine(str(path))
        self.index = 0
        for node in NODES:
            self.apply(e.NodeJoin(node, f"{node}:1", f"{node}:2", executors=["noop"]))

    def apply(self, *payloads: e.Payload) -> None:
        """Applies the payloads as one Raft entry; each must be accepted."""
        self.index += 1
        entries = [e.Entry.create(p, node=NODES[0], ts=1_000 + self.index) for p in payloads]
        results = self.machine.apply_batch(self.index, e.encode_batch(entries))
        assert results is not None and all(r.get("ok") for r in results), results

    def close(self) -> None:
        self.machine.close()
