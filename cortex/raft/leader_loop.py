"""A background thread that works only while this node is the Raft leader:
every interval, or at once when woken."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from cortex.errors import CortexError
from cortex.raft.proposer import Proposer
from cortex.state.queries import StateReader

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LeaderContext:
    """What every leader-only loop works with: this node's id, whether it
    leads right now, the proposer its entries go through, and the state."""

    node_id: str
    is_leader: Callable[[], bool]
    proposer: Proposer
    reader: StateReader


class LeaderLoop:
    """Subclasses implement `work()` (return True when more is waiting, to run
    again at once) and may override `wait_s()` and `on_follower()`."""

    def __init__(self, name: str, context: LeaderContext, interval_s: float) -> None:
        self.name = name
        self._node_id = context.node_id
        self._is_leader = context.is_leader
        self._proposer = context.proposer
        self._reader = context.reader
        self._interval_s = interval_s
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def wake(self) -> None:
        self._wake.set()

    def wait_s(self) -> float:
        return self._interval_s

    def on_follower(self) -> None:
        """Called each interval this node is not the leader."""

    def work(self) -> bool:
        raise NotImplementedError

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.wait_s())
            self._wake.clear()
            if self._stop.is_set():
                return
            if not self._is_leader():
                self.on_follower()
                continue
            try:
                while self.work() and not self._stop.is_set() and self._is_leader():
                    pass
            except CortexError as err:
                log.warning("%s round did not complete: %s", self.name, err)
            except Exception:
                log.exception("%s failed", self.name)
