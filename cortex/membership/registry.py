"""Keeps this node's row in the replicated `nodes` table current: proposes
NODE_JOIN when the row is missing or differs from the node's configuration,
ends the drain this node started when it last shut down, and notices when the
node has been removed from the cluster. The loop is a step (`cortex.steps`)."""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable

from cortex.errors import CortexError
from cortex.raft.proposer import EntrySubmitter
from cortex.state import entries as e
from cortex.state.queries import NodeView, StateReader
from cortex.steps import SYSTEM_CLOCK, Clock, Sleep, Step, start_thread, wall_ms

log = logging.getLogger(__name__)

SHUTDOWN_REASON = "graceful shutdown"
BACK_REASON = "back from a graceful shutdown"
# Once registered, the row is checked this often (removal, config drift).
REGISTERED_CHECK_S = 2.0


def _shutdown_drain(row: NodeView | None) -> bool:
    return row is not None and row.status == "draining" and row.status_reason == SHUTDOWN_REASON


class NodeRegistration:
    def __init__(
        self,
        join: e.NodeJoin,
        proposer: EntrySubmitter,
        reader: StateReader,
        is_ready: Callable[[], bool],
        interval_s: float = 0.5,
        on_removed: Callable[[str], None] | None = None,
        clock: Clock = SYSTEM_CLOCK,
        joining_since: int | None = None,
        on_joining: Callable[[int], None] | None = None,
    ) -> None:
        self._join = join
        self._proposer = proposer
        self._reader = reader
        self._is_ready = is_ready
        self._interval_s = interval_s
        self._on_removed = on_removed
        self._clock = clock
        self._joining_since = joining_since
        self._on_joining = on_joining
        self._stop = threading.Event()

    def start(self) -> None:
        start_thread("registration", self.main(), self._stop)

    def stop(self) -> None:
        self._stop.set()

    def set_executors(self, executors: list[str]) -> None:
        """The executors this node runs now: registered again (NODE_JOIN) at
        the next look, as the registered row no longer matches."""
        self._join = dataclasses.replace(self._join, executors=sorted(executors))

    def _own_row(self) -> NodeView | None:
        return self._reader.node(self._join.node_id, include_removed=True)

    def _current(self, row: NodeView | None) -> bool:
        return (
            row is not None
            and row.raft_address == self._join.raft_address
            and row.grpc_address == self._join.grpc_address
            and row.peer_address == self._join.peer_address
            and row.labels == self._join.labels
            and row.executors == sorted(self._join.executors)
            and row.resources == self._join.resources
            and row.status not in ("offline", "removed")
        )

    def main(self) -> Step[None]:
        # The applied index when this data dir first asked to join: a removal
        # after it is this node's own, even when the node was down then and
        # finds it in its log on restart; one before it is an old removal,
        # which joining again (from an empty data dir) undoes.
        since = self._joining_since
        registered = False
        # Whether to end the last run's shutdown drain; None until first looked at.
        resume: bool | None = None
        while not self._stop.is_set():
            yield Sleep(REGISTERED_CHECK_S if registered else self._interval_s)
            if self._stop.is_set():
                return
            if not self._is_ready():
                continue
            row = self._own_row()
            if row is not None and row.status == "removed" and self._own_removal(since):
                log.warning("node %s was removed from the cluster: %s",
                            self._join.node_id, row.status_reason)  # fmt: skip
                if self._on_removed is not None:
                    self._on_removed(row.status_reason)
                return
            if resume is None:
                # Only a drain found on start is the last run's shutdown drain;
                # a later one is this run's own.
                resume = _shutdown_drain(row)
            if resume and _shutdown_drain(row):
                back = e.NodeStatus(self._join.node_id, "active", BACK_REASON)
                resume = not (yield from self._propose(back))
                continue
            resume = False
            registered = self._current(row)
            if registered:
                continue
            if since is None:
                since = self._reader.applied_index()
                if self._on_joining is not None:
                    self._on_joining(since)
            join = self._join
            if row is not None and row.status == "removed":
                # An old removal, which this join names so apply lets it undo it.
                undone = self._reader.removal_index(join.node_id) or since
                join = dataclasses.replace(join, rejoin_after=undone)
            yield from self._propose(join)

    def _own_removal(self, since: int | None) -> bool:
        if since is None:
            return False
        removed_at = self._reader.removal_index(self._join.node_id)
        # Its event purged (older than task retention): taken as its own.
        return removed_at is None or removed_at > since

    def _propose(self, payload: e.Payload) -> Step[bool]:
        """True once the entry is applied and accepted."""
        entry = e.Entry.create(payload, self._join.node_id, ts=wall_ms(self._clock))
        try:
            (result,) = yield self._proposer.submit_all([entry])
        except CortexError as err:
            log.info("node registration not committed yet: %s", err)
            return False
        return bool(result.get("ok"))
