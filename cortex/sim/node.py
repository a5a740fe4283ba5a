"""One simulated node: its data dir, state machine, Raft member and proposer
(and, above them, the Cortex components the harness drives), with the
faults that happen to a process and its disk: fail-stop, crash (power cut:
everything not synced is lost), pause, a full disk."""

from __future__ import annotations

import errno
import functools
import os
import random
import shutil
from collections.abc import Callable
from typing import Any

from cortex.raft.group import SNAPSHOT_FILE, RaftGroup, RaftSettings
from cortex.raft.journal import LOG_FILE, META_FILE, DurableJournal, FakeSyncDisk
from cortex.sim.clock import SimClock
from cortex.sim.network import SimNetwork
from cortex.sim.proposer import SimProposer
from cortex.sim.trace import Trace
from cortex.sim.transport import SimTransport
from cortex.state.machine import StateMachine

SECRET = "simulated-cluster-secret"
DB_FILE = "state.db"


class NodeStopped(Exception):
    """A node hit a local fault and stopped (what `stop_node` does for real)."""

    def __init__(self, what: str, err: BaseException) -> None:
        super().__init__(f"{what}: {err}")


class SimJournal(DurableJournal):
    """The durable journal with a disk that can fill up; what is synced is
    tracked, not written through (a simulated power cut applies it)."""

    quota_bytes: int | None = None
    disk = FakeSyncDisk()
    # Next to nothing kept in memory: simulated nodes read their older
    # entries back from the file all the time, faults and restarts included.
    default_hot_bytes = 4096
    # Grown ahead a page at a time: the zeros after the records come and go
    # through every fault, at next to no cost in files.
    preallocate_bytes = 4096

    def _append_record(self, command: bytes, index: int, term: int) -> None:
        if self.quota_bytes is not None and self._end + len(command) + 24 > self.quota_bytes:
            self._on_fault(
                f"appending raft index {index} to the journal failed",
                OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)),
            )
        super()._append_record(command, index, term)


def raft_address(node_id: str) -> str:
    return f"{node_id}.sim:7100"


def peer_address(node_id: str) -> str:
    return f"{node_id}.sim:7300"


class SimNode:
    def __init__(
        self,
        node_id: str,
        data_dir: str,
        peers: list[str],
        clock: SimClock,
        network: SimNetwork,
        trace: Trace,
        sync: bool,
        on_applied: Callable[[str, int, str], None],
        labels: dict[str, str] | None = None,
        build_components: Callable[[SimNode], Any] | None = None,
    ) -> None:
        self.id = node_id
        self.address = raft_address(node_id)
        self.peer_address = peer_address(node_id)
        self.labels = labels or {}
        self.secret = SECRET
        self.clock = clock
        self.network = network
        self._build_components = build_components
        self.components: Any = None
        self.ready = False
        self.removal: str | None = None
        # Taken out of the cluster for good: never started again.
        self.retired = False
        self.data_dir = data_dir
        self.peers = peers
        self._clock = clock
        self._network = network
        self._trace = trace
        self._sync = sync
        self._on_applied = on_applied
        self.running = False
        self.paused = False
        self.disk_full = False
        self.next_tick_us = 0
        self.machine: StateMachine | None = None
        self.group: RaftGroup | None = None
        self.proposer: SimProposer | None = None
        self.journal: SimJournal | None = None
        self.transport: SimTransport | None = None
        self.boots = 0

    # -- life -----------------------------------------------------------------

    def start(self) -> None:
        os.makedirs(self.data_dir, exist_ok=True)
        self.boots += 1
        self._clock.current = self.id
        try:
            machine = StateMachine(os.path.join(self.data_dir, DB_FILE))
            # Durability is modelled (see `crash`), so SQLite need not sync.
            machine._conn.execute("PRAGMA synchronous=OFF")
            if self.disk_full:
                _fill_database(machine)
            self.machine = machine
            machine.add_listener(self._applied)
            settings = RaftSettings(
                self_address=self.address,
                peers=[p for p in self.peers if p != self.address],
                data_dir=self.data_dir,
                secret=SECRET,
                compaction_min_entries=200,
                compaction_min_time_s=30.0,
                sync=self._sync,
                auto_tick=False,
            )
            journal_class = self._journal_class()
            self.ready = False
            self.group = RaftGroup(
                settings,
                machine,
                on_ready=self._became_ready,
                journal_class=journal_class,
                transport_class=functools.partial(self._make_transport, network=self._network),
            )
            self.journal = self.group.journal  # type: ignore[assignment]
            self.proposer = SimProposer(self.group, self._clock)
            self.running = True
            self.paused = False
            if self._build_components is not None:
                self.components = self._build_components(self)
            self._trace.add(
                "start", self.id, f"boot={self.boots}", f"applied={machine.applied_index}"
            )
        finally:
            self._clock.current = None

    def _became_ready(self) -> None:
        self.ready = True

    def is_ready(self) -> bool:
        return self.ready

    def removed(self, reason: str) -> None:
        """The cluster took this node out (it learns from its own log)."""
        self.removal = reason

    @property
    def reader(self) -> Any:
        return self.components.reader if self.components is not None else None

    def next_event_at(self) -> int:
        later = self.components.next_at() if self.components is not None else None
        return min(self.next_tick_us, later) if later is not None else self.next_tick_us

    def _journal_class(self) -> type[SimJournal]:
        full = self.disk_full

        class Journal(SimJournal):
            quota_bytes = 0 if full else None

        return Journal

    def _make_transport(self, *args: Any, **kwargs: Any) -> SimTransport:
        self.transport = SimTransport(*args, **kwargs)
        return self.transport

    def _applied(self, index: int, changes: list[Any]) -> None:
        assert self.machine is not None
        self._on_applied(self.id, index, self.machine.digest())

    def step(self) -> None:
        """One pass of the node's Raft loop (poll included), then what its
        components proposed leaves as one batch."""
        assert self.group is not None and self.proposer is not None
        self._clock.current = self.id
        try:
            self.group.doTick(0.0)
            if self.components is not None:
                self.components.run_due()
            self.proposer.flush()
            self.proposer.expire()
        finally:
            self._clock.current = None

    @property
    def wants_step(self) -> bool:
        return bool(
            (self.transport is not None and self.transport.has_mail)
            or (self.proposer is not None and self.proposer.has_queued)
            or (self.components is not None and self.components.wants_step())
        )

    def fill_disk(self) -> None:
        """No room left: the next journal append or database write fails."""
        self.disk_full = True
        if self.journal is not None:
            self.journal.quota_bytes = self.journal._end
        if self.machine is not None:
            _fill_database(self.machine)
        self._trace.add("disk-full", self.id)

    def free_disk(self) -> None:
        """Room again, for a node still running as much as for one starting."""
        if self.disk_full:
            self.disk_full = False
            if self.journal is not None:
                self.journal.quota_bytes = None
            if self.machine is not None:
                self.machine._conn.execute(f"PRAGMA max_page_count = {_NO_PAGE_LIMIT}")
            self._trace.add("disk-freed", self.id)

    def fail_stop(self, why: str) -> None:
        """The process exited on a local fault: its files stay as they are
        (the page cache survives a process exit)."""
        self._trace.add("fail-stop", self.id, why)
        self._halt()

    def crash(self, rng: random.Random) -> None:
        """A power cut: the journal keeps what it synced, term and vote what was
        last written durably, and the database may lose its last transactions
        (modelled as losing all of them: the node rebuilds it from snapshot and
        journal). Without sync nothing survives."""
        assert self.journal is not None
        synced_end, meta = self.journal.durable_state()
        self._halt()
        log_path = os.path.join(self.data_dir, LOG_FILE)
        meta_path = os.path.join(self.data_dir, META_FILE)
        if synced_end > 0:
            os.truncate(log_path, synced_end)
        elif os.path.exists(log_path):
            os.remove(log_path)
        if meta is not None:
            with open(meta_path, "wb") as f:
                f.write(meta)
        elif os.path.exists(meta_path):
            os.remove(meta_path)
        lose_database = not self._sync or rng.random() < 0.5
        if lose_database:
            for suffix in ("", "-wal", "-shm"):
                path = os.path.join(self.data_dir, DB_FILE + suffix)
                if os.path.exists(path):
                    os.remove(path)
        if not self._sync:
            snapshot = os.path.join(self.data_dir, SNAPSHOT_FILE)
            if os.path.exists(snapshot):
                os.remove(snapshot)
        self._trace.add("crash", self.id, f"journal={synced_end}", f"db_lost={lose_database}")

    def _halt(self) -> None:
        if self.components is not None:
            self.components.close()
            self.components = None
        if self.proposer is not None:
            self.proposer.stop()
        if self.transport is not None:
            self.transport.destroy()
        if self.journal is not None:
            os.close(self.journal._fd)
            self.journal._fd = -1
        if self.machine is not None:
            self.machine.close()
        self.machine = self.group = self.proposer = self.journal = self.transport = None
        self.running = False
        self.paused = False

    def wipe(self) -> None:
        shutil.rmtree(self.data_dir, ignore_errors=True)


# SQLite's own ceiling on a database's pages.
_NO_PAGE_LIMIT = 4294967294


def _fill_database(machine: StateMachine) -> None:
    """A full disk, as SQLite sees it: no room for one more page."""
    conn = machine._conn
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {max(pages, 1)}")
