"""Proposing in the simulation: the same interface as `cortex.raft.Proposer`
(`submit` an entry, get a future of its result), without its thread. What is
submitted during a node's step leaves as one batch (one Raft entry) at the
end of the step; a batch whose outcome does not come within the timeout
fails its futures with `Unavailable`, as the real proposer does."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from cortex.errors import Unavailable
from cortex.raft.group import RaftGroup
from cortex.raft.proposer import check_writable, fail_overdue, settle_batch
from cortex.sim.clock import SimClock
from cortex.state.entries import Entry, encode_batch, fold_starts
from cortex.steps import gather

TIMEOUT_US = 10_000_000


class SimProposer:
    def __init__(self, group: RaftGroup, clock: SimClock) -> None:
        self._group = group
        self._clock = clock
        self._queued: list[tuple[Entry, Future[dict[str, Any]]]] = []
        # Batches proposed and not answered: (give-up time, futures).
        self._in_flight: dict[int, tuple[int, list[Future[dict[str, Any]]]]] = {}
        self._number = 0
        self.stopped = False
        # Sees every entry proposed here (the harness checks scheduling rounds).
        self.watch: Callable[[Entry], None] | None = None

    def submit_all(self, entries: list[Entry]) -> Future[list[dict[str, Any]]]:
        return gather([self.submit(entry) for entry in entries])

    def check_writable(self) -> None:
        check_writable(self._group)

    def submit(self, entry: Entry) -> Future[dict[str, Any]]:
        future: Future[dict[str, Any]] = Future()
        if self.watch is not None:
            self.watch(entry)
        if self.stopped:
            future.set_exception(Unavailable("node is shutting down"))
        else:
            self._queued.append((entry, future))
        return future

    @property
    def has_queued(self) -> bool:
        return bool(self._queued)

    def flush(self) -> None:
        """Proposes what was submitted since the last flush, as one batch."""
        if not self._queued:
            return
        batch, self._queued = self._queued, []
        futures = [future for _, future in batch]
        self._number += 1
        number = self._number
        self._in_flight[number] = (self._clock.now_us + TIMEOUT_US, futures)

        entries, carriers = fold_starts([entry for entry, _ in batch])

        def on_applied(results: Any, error: int) -> None:
            if self._in_flight.pop(number, None) is not None:
                settle_batch(futures, results, error, carriers)

        self._group.propose_batch(encode_batch(entries), on_applied)

    def expire(self) -> None:
        """Fails the batches whose outcome is overdue."""
        fail_overdue(self._in_flight, self._clock.now_us)

    def stop(self) -> None:
        """The node is gone: nothing it proposed will be answered here."""
        self.stopped = True
        for _, future in self._queued:
            future.set_exception(Unavailable("node stopped"))
        self._queued = []
        for _, futures in self._in_flight.values():
            for future in futures:
                if not future.done():
                    future.set_exception(Unavailable("node stopped"))
        self._in_flight.clear()
