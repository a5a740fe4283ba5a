"""The leader's read index: before a linearizable read is answered, the leader
confirms it still leads by committing a READ_BARRIER entry through the log
(a majority of voters must take it in the current term), so no newer leader
can have committed anything the read would miss. Reads that arrive while a
barrier is in flight share the next one: one entry per round trip, however
many readers wait."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from cortex.errors import Unavailable
from cortex.raft.proposer import EntrySubmitter
from cortex.state.entries import Entry, ReadBarrier


class ReadBarriers:
    """`read_index(timeout_s)`: an index the caller may answer a linearizable
    read at once it has applied that far. Only meaningful on the leader: a
    barrier a deposed leader proposes never commits, and the read fails."""

    def __init__(
        self, node_id: str, proposer: EntrySubmitter, applied_index: Callable[[], int]
    ) -> None:
        self._node_id = node_id
        self._proposer = proposer
        self._applied_index = applied_index
        self._lock = threading.RLock()
        # The barrier proposed and not yet applied, and the one the readers
        # that arrived meanwhile wait for (proposed when the first is done, so
        # it is proposed after each of them arrived). Reentrant: a proposal
        # that fails at once settles inside `_launch`.
        self._running: Future[int] | None = None
        self._next: Future[int] | None = None
        self._waiting = 0

    @property
    def waiting(self) -> int:
        """Readers waiting for a barrier now."""
        return self._waiting

    def read_index(self, timeout_s: float) -> int:
        with self._lock:
            if self._next is None:
                self._next = Future()
            # Taken before a launch: a proposal that fails at once settles
            # inside `_launch` and clears both slots.
            mine = self._next
            if self._running is None:
                self._launch()
            self._waiting += 1
        try:
            return mine.result(timeout=max(timeout_s, 0.001))
        except FutureTimeout:
            raise Unavailable(
                f"node {self._node_id} could not confirm its leadership with a quorum within"
                f" {timeout_s:.1f}s; a linearizable read needs one (retry, or read STALE)"
            ) from None
        finally:
            with self._lock:
                self._waiting -= 1

    def _launch(self) -> None:
        """Proposes the barrier the waiting readers share (under the lock)."""
        running, self._running, self._next = self._next, self._next, None
        assert running is not None
        try:
            applied: Future[Any] = self._proposer.submit_all(
                [Entry.create(ReadBarrier(), self._node_id)]
            )
        except Exception as err:  # a stopped proposer
            applied = Future()
            applied.set_exception(Unavailable(f"could not propose a read barrier: {err}"))
        applied.add_done_callback(lambda outcome: self._settle(running, outcome))

    def _settle(self, barrier: Future[int], outcome: Future[Any]) -> None:
        error = outcome.exception()
        if error is None:
            # Applied here, so this node's applied index is at or past it.
            barrier.set_result(self._applied_index())
        else:
            barrier.set_exception(
                error
                if isinstance(error, Unavailable)
                else Unavailable(f"read barrier failed: {error}")
            )
        with self._lock:
            self._running = None
            if self._next is not None:
                self._launch()
