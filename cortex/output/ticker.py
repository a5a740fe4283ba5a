"""Wake-ups for readers that wait on the replicated state: a StateMachine
listener bumps a counter after each applied batch (cheap enough for the Raft
thread) and waiters re-read the database when it moves."""

from __future__ import annotations

import threading

from cortex.errors import Unavailable
from cortex.state.transitions import TaskChange


class StateTicker:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._generation = 0
        self._closed = False

    @property
    def generation(self) -> int:
        with self._cond:
            return self._generation

    @property
    def closed(self) -> bool:
        return self._closed

    def on_change(self, index: int, changes: list[TaskChange]) -> None:
        """StateMachine listener: runs on the Raft thread, only notifies."""
        with self._cond:
            self._generation += 1
            self._cond.notify_all()

    def wait(self, seen: int, timeout: float) -> int:
        """Blocks until a batch after generation `seen` is applied, the
        ticker closes, or `timeout` passes; returns the current generation."""
        with self._cond:
            self._cond.wait_for(lambda: self._generation != seen or self._closed, timeout)
            return self._generation

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()


class StreamSlots:
    """Caps the server streams a node holds open at once: each one keeps a
    gRPC worker thread for as long as it lasts."""

    def __init__(self, node_id: str, limit: int) -> None:
        self._node_id = node_id
        self.limit = limit
        self._lock = threading.Lock()
        self.in_use = 0

    def acquire(self) -> None:
        with self._lock:
            if self.in_use >= self.limit:
                raise Unavailable(
                    f"node {self._node_id} already serves {self.limit} output and event streams"
                    " (config key max_streams); retry later or ask another node"
                )
            self.in_use += 1

    def release(self) -> None:
        with self._lock:
            self.in_use = max(self.in_use - 1, 0)
