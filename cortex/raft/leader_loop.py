"""Work done only while this node is the Raft leader: every interval, or at
once when woken. The loop is a step (`cortex.steps`): a thread drives it in a
real node, the simulator in a simulated one."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from cortex.errors import CortexError
from cortex.raft.proposer import EntrySubmitter
from cortex.state.queries import StateReader
from cortex.steps import SYSTEM_CLOCK, Clock, Signal, Step, Stopped, WaitSignal, start_thread

log = logging.getLogger(__name__)

# How long a follower's loop sleeps unless woken: a node is told when it
# becomes or stops being the leader (`RaftGroup.add_role_listener`), which
# wakes its loops, so this only bounds how late `on_follower` runs should
# that word never come.
FOLLOWER_WAIT_S = 10.0


@dataclass(frozen=True)
class LeaderContext:
    """What every leader-only loop works with: this node's id, whether it
    leads right now, the proposer its entries go through, the state, and
    the clock it reads time from."""

    node_id: str
    is_leader: Callable[[], bool]
    proposer: EntrySubmitter
    reader: StateReader
    clock: Clock = SYSTEM_CLOCK


class LeaderLoop:
    """Subclasses implement `work()`, a step returning True when more is
    waiting (to run again at once), and may override `wait_s()` and
    `on_follower()`."""

    def __init__(self, name: str, context: LeaderContext, interval_s: float) -> None:
        self.name = name
        self._node_id = context.node_id
        self._is_leader = context.is_leader
        self._proposer = context.proposer
        self._reader = context.reader
        self._clock = context.clock
        self._interval_s = interval_s
        self._wake = Signal()
        self._stop = threading.Event()
        # Set when this node stopped leading, until `on_follower` ran: a node
        # that lost and won the lead again before its loop woke must still
        # forget what it knew as the leader before.
        self._deposed = threading.Event()

    def start(self) -> None:
        start_thread(self.name, self.main(), self._stop)

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def wake(self) -> None:
        """Runs a round now, on the leader. A follower's loop is not woken
        by work: it calls `on_follower` when this node stops leading."""
        if self._is_leader():
            self._wake.set()

    def role_changed(self, leading: bool) -> None:
        """This node became the leader (a round runs now) or stopped being
        it (`on_follower` runs now, however soon it leads again); any thread."""
        if not leading:
            self._deposed.set()
        self._wake.set()

    def wait_s(self) -> float:
        """How long the leader waits for a wake-up before its next round."""
        return self._interval_s

    def on_follower(self) -> None:
        """Called when this node is found not leading: after it stopped
        leading, and every `FOLLOWER_WAIT_S` while it follows."""

    def work(self) -> Step[bool]:
        raise NotImplementedError

    def main(self) -> Step[None]:
        """The whole loop: wait for a wake-up or the interval; as a follower
        call `on_follower()`, as the leader run rounds while more is waiting.
        A round that fails is logged and the loop goes on."""
        while not self._stop.is_set():
            yield WaitSignal(self._wake, self.wait_s() if self._is_leader() else FOLLOWER_WAIT_S)
            if self._stop.is_set():
                return
            leading = self._is_leader()
            if not leading or self._deposed.is_set():
                self._deposed.clear()
                self.on_follower()
            if not leading:
                continue
            try:
                while (yield from self.work()) and not self._stop.is_set() and self._is_leader():
                    pass
            except Stopped:
                raise
            except CortexError as err:
                log.warning("%s round did not complete: %s", self.name, err)
            except Exception:
                log.exception("%s failed", self.name)
