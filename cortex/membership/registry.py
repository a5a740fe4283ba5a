"""Keeps this node's row in the replicated `nodes` table current: proposes
NODE_JOIN when the row is missing or differs from the node's configuration."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from cortex.errors import CortexError
from cortex.raft.proposer import Proposer
from cortex.state import entries as e
from cortex.state.queries import StateReader

log = logging.getLogger(__name__)

SHUTDOWN_REASON = "graceful shutdown"


class NodeRegistration:
    def __init__(
        self,
        join: e.NodeJoin,
        proposer: Proposer,
        reader: StateReader,
        is_ready: Callable[[], bool],
        interval_s: float = 0.5,
    ) -> None:
        self._join = join
        self._proposer = proposer
        self._reader = reader
        self._is_ready = is_ready
        self._interval_s = interval_s
        self._stop = threading.Event()
        self.registered = threading.Event()
        self._thread = threading.Thread(target=self._run, name="registration", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _back_from_shutdown(self) -> bool:
        for node in self._reader.nodes():
            if node.id == self._join.node_id:
                return node.status == "draining" and node.status_reason == SHUTDOWN_REASON
        return False

    def _current(self) -> bool:
        for node in self._reader.nodes():
            if node.id == self._join.node_id:
                return (
                    node.raft_address == self._join.raft_address
                    and node.grpc_address == self._join.grpc_address
                    and node.labels == self._join.labels
                    and node.executors == sorted(self._join.executors)
                    and node.resources == self._join.resources
                    and node.status != "offline"
                )
        return False

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s if not self.registered.is_set() else 5.0):
            if not self._is_ready():
                continue
            if self._current():
                self.registered.set()
                continue
            self.registered.clear()
            try:
                self._proposer.propose_one(
                    e.Entry.create(self._join, self._join.node_id), timeout=5.0
                )
            except CortexError as err:
                log.info("node registration not committed yet: %s", err)
