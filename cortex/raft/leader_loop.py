"""A background thread that works only while this node is the Raft leader:
every interval, or at once when woken."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from cortex.errors import CortexError

log = logging.getLogger(__name__)


class LeaderLoop:
    """Subclasses implement `work()` (return True when more is waiting, to run
    again at once) and may override `wait_s()` and `on_follower()`."""

    def __init__(self, name: str, is_leader: Callable[[], bool], interval_s: float) -> None:
        self.name = name
        self._is_leader = is_leader
        self._interval_s = interval_s
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.rounds = 0

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
