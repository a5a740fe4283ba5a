"""The state machine and the proposer, timed for the Raft histograms: the
node builds these instead of the plain ones. Neither changes behaviour; each
hands a duration in seconds to a callback (a histogram's `observe`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from cortex.raft.group import RaftGroup
from cortex.raft.proposer import DEFAULT_COMMIT_TIMEOUT_S, Proposer
from cortex.state.entries import Entry
from cortex.state.machine import StateMachine

Observe = Callable[[float], None]


class TimedStateMachine(StateMachine):
    """Times each batch applied (listeners included: they run on the Raft
    thread too); a batch already applied, skipped during a journal replay,
    is not counted."""

    def __init__(
        self, path: str, on_applied: Observe, autocheckpoint_pages: int | None = None
    ) -> None:
        super().__init__(path, autocheckpoint_pages=autocheckpoint_pages)
        self._on_applied = on_applied

    def apply_batches(self, index: int, batches: list[bytes]) -> list[list[dict[str, Any]]] | None:
        started = time.perf_counter()
        results = super().apply_batches(index, batches)
        if results is not None:
            self._on_applied(time.perf_counter() - started)
        return results


class TimedProposer(Proposer):
    """Times every entry this node proposes, from its submission to its
    result on this node (committed by a quorum and applied here). Entries
    that fail (no leader, a timeout) are not counted."""

    def __init__(
        self,
        group: RaftGroup,
        on_committed: Observe,
        commit_timeout_s: float = DEFAULT_COMMIT_TIMEOUT_S,
    ) -> None:
        super().__init__(group, commit_timeout_s=commit_timeout_s)
        self._on_committed = on_committed

    def _submit(self, entries: list[Entry], request: bool = False) -> list[Future[dict[str, Any]]]:
        # Every way in (`submit`, `submit_all`, `propose`) comes through here.
        started = time.perf_counter()
        futures = super()._submit(entries, request)

        def observe(done: Future[dict[str, Any]]) -> None:
            if not done.cancelled() and done.exception() is None:
                self._on_committed(time.perf_counter() - started)

        for future in futures:
            future.add_done_callback(observe)
        return futures
