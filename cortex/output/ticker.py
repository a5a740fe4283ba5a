"""Wake-ups for readers that wait on the replicated state: a StateMachine
listener bumps a counter after each applied batch (cheap enough for the Raft
thread) and waiters re-read the database when it moves."""

from __future__ import annotations

import threading

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
