"""The node's member of the pysyncobj Raft group: one replicated method that
applies a batch of entries to the state machine."""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import pysyncobj.pickle
import pysyncobj.syncobj
from pysyncobj import SyncObj, SyncObjConf, replicated
from pysyncobj.config import FAIL_REASON
from pysyncobj.journal import Journal

from cortex.config import ELECTION_TIMEOUT_MAX_S, ELECTION_TIMEOUT_MIN_S
from cortex.errors import Unavailable
from cortex.failstop import stop_node
from cortex.raft.compaction import DEFAULT_FLOOR_BYTES, CompactionGate, CompactionPolicy
from cortex.raft.journal import DurableJournal, JournalStats, discard_temporary_files
from cortex.raft.merging import (
    PART_KEY,
    REGULAR_COMMAND,
    MergingQueue,
    Part,
    batch_call,
)
from cortex.raft.pre_vote import PreVote
from cortex.raft.snapshot import SnapshotStore
from cortex.raft.transport import DurableTransport, install_bounded_connections
from cortex.state.machine import StateMachine

log = logging.getLogger(__name__)

FAIL_REASON_NAMES = {
    value: name.lower()
    for name, value in vars(FAIL_REASON).items()
    if not name.startswith("_") and isinstance(value, int)
}

SNAPSHOT_FILE = "raft.snapshot"
_RAFT_STATES = {0: "follower", 1: "candidate", 2: "leader"}
_FOLLOWER, _LEADER = 0, 2
# The longest the Raft thread of a follower sleeps when nothing arrives
# before its election deadline (see `RaftGroup._tick_wait`).
IDLE_TICK_MAX_S = 0.5
_create_journal = pysyncobj.syncobj.createJournal
_OVERLAP_MESSAGE = "truncating already-applied log entries"


class ResentEntriesNotice(logging.Filter):
    """pysyncobj logs a CRITICAL "truncating already-applied log entries ...
    state machine may have diverged" whenever it cuts a follower's log below
    the applied index. An append that matches the log no longer gets there
    (`cortex.raft.transport.keep_matching_entries`); one that conflicts
    does, and is harmless while the entries it cuts up to the applied index
    come back the same. What would not be is caught elsewhere: the journal
    compares every entry added again with the one it replaces and stops the
    node when an applied one differs (`DurableJournal._cut_file`). So the
    message becomes an INFO saying so."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.CRITICAL and str(record.msg).startswith(_OVERLAP_MESSAGE):
            record.levelno, record.levelname = logging.INFO, "INFO"
            record.msg = (
                f"{record.msg}; harmless when the leader sent the same entries again: the"
                " journal stops this node if an applied entry is replaced by another"
            )
        return True


logging.getLogger(pysyncobj.syncobj.__name__).addFilter(ResentEntriesNotice())


def _journal_or_file(journal: Any) -> Any:
    """pysyncobj builds its journal from `conf.journalFile` by name; Cortex
    hands it a ready `DurableJournal` there instead (pysyncobj is pinned)."""
    return journal if isinstance(journal, Journal) else _create_journal(journal)


pysyncobj.syncobj.createJournal = _journal_or_file
install_bounded_connections()


class BatchPlacer(Protocol):
    """Adds to a batch a leader takes into its log (the scheduler's
    `PlacementAtProposal`)."""

    def place(self, data: bytes) -> bytes | None:
        """The batch to log instead of `data`, or None to log `data`."""
        ...


def _placed_forwarded(placer: BatchPlacer, command: Any) -> Any:
    """A forwarded command as the `placer` has the leader log it. A command
    forwarded again (its leader stepped down before logging it) is placed
    again; apply refuses the second placement of a task."""
    call = batch_call(command)
    placed = placer.place(call[1]) if call is not None else None
    if call is None or placed is None:
        return command
    return REGULAR_COMMAND + pysyncobj.pickle.dumps((call[0], (placed,)))


@dataclass(frozen=True)
class RaftSettings:
    self_address: str
    peers: list[str]
    data_dir: str
    secret: str
    compaction_min_entries: int = 5000
    compaction_min_time_s: float = 300.0
    # Compaction waits for the journal to reach this fraction of the last
    # snapshot's size, once that is past `compaction_floor_bytes`
    # (`cortex.raft.compaction`).
    compaction_log_ratio: float = 0.5
    compaction_floor_bytes: int = DEFAULT_FLOOR_BYTES
    # How long a voter hears nothing from a leader before it stands for
    # election: drawn at random between the two (`cortex.config` bounds them).
    election_timeout_s: tuple[float, float] = (ELECTION_TIMEOUT_MIN_S, ELECTION_TIMEOUT_MAX_S)
    leader_fallback_timeout_s: float = 5.0
    # Where to listen when it differs from `self_address` (e.g. 0.0.0.0:7100).
    bind_address: str | None = None
    # Sync the journal before acknowledging; off only for throwaway clusters.
    sync: bool = True
    # False: the owner drives the group with `doTick` (the simulator does).
    auto_tick: bool = True
    # A read-only member: it dials the voters in `peers`, takes the log from
    # the leader and applies it, but has no vote, never stands for election
    # and listens on no Raft port (`self_address` and `bind_address` unused).
    observer: bool = False


CONNECTION_TIMEOUT_S = 2.0


class RaftGroup(SyncObj):  # type: ignore[misc]
    """Connections, locks and threads stay off this object: pysyncobj would try
    to pickle them. The snapshot goes through `SnapshotStore` instead.

    An observer is pysyncobj's read-only node (`selfNode` None): it connects
    to every voter, which takes it as a read-only peer, and the leader sends
    it appends and snapshots like to any follower; it proposes by forwarding
    to the leader like a follower too. pysyncobj never forgets a read-only
    node's leader (it holds no election), so the observer judges the leader
    by when its last append arrived."""

    # Whether pre-vote let this voter stand for election in the tick under
    # way (`_SyncObj__connectedToAnyone`); the Raft thread's alone.
    _may_stand = False

    def __init__(
        self,
        settings: RaftSettings,
        machine: StateMachine,
        on_ready: Callable[[], None] | None = None,
        journal_class: type[DurableJournal] | None = None,
        transport_class: Callable[..., Any] | None = None,
    ) -> None:
        """`journal_class` and `transport_class` (called with pysyncobj's
        arguments and `journal=`) replace the file journal and TCP transport;
        the simulator passes its own."""
        self._machine = machine
        # Sees every batch this node takes into the log while it leads.
        self.placer: BatchPlacer | None = None
        self.observer = settings.observer
        # When the leader's last append reached this observer (pysyncobj's clock).
        self._leader_heard_at: float | None = None
        # When this node, leading, last sent its appends (pysyncobj's clock),
        # and who is told each interval between two (`_SyncObj__sendAppendEntries`).
        self._appends_sent_at: float | None = None
        self.on_append_gap: Callable[[float], None] | None = None
        # Told on the Raft thread when this node becomes or stops being the leader.
        self._role_listeners: list[Callable[[bool], None]] = []
        self.election_timeout_s = settings.election_timeout_s
        # Made before pysyncobj starts ticking, which reads it.
        self._pre_vote = (
            None
            if settings.observer
            else PreVote(
                self, functools.partial(self._hears_from_leader, settings.election_timeout_s[0])
            )
        )
        os.makedirs(settings.data_dir, exist_ok=True)
        discard_temporary_files(settings.data_dir)
        self.journal = (journal_class or DurableJournal)(
            settings.data_dir, sync=settings.sync, applied_index=lambda: machine.applied_index
        )
        snapshots = SnapshotStore(machine, self.journal, inline=not settings.auto_tick)
        conf = SyncObjConf(
            password=settings.secret,
            bindAddress=settings.bind_address,
            appendEntriesUseBatch=False,
            dynamicMembershipChange=True,
            commandsWaitLeader=False,
            journalFile=self.journal,
            fullDumpFile=os.path.join(settings.data_dir, SNAPSHOT_FILE),
            serializer=snapshots.serialize,
            deserializer=snapshots.deserialize,
            serializeChecker=snapshots.check,
            logCompactionMinEntries=settings.compaction_min_entries,
            logCompactionMinTime=settings.compaction_min_time_s,
            raftMinTimeout=settings.election_timeout_s[0],
            raftMaxTimeout=settings.election_timeout_s[1],
            leaderFallbackTimeout=settings.leader_fallback_timeout_s,
            connectionRetryTime=1.0,
            # pysyncobj drops a connection silent this long; it must outlast
            # the longest election timeout (pysyncobj refuses less).
            connectionTimeout=max(CONNECTION_TIMEOUT_S, settings.election_timeout_s[1]),
            onReady=on_ready,
            onStateChanged=self._state_changed,
            autoTick=settings.auto_tick,
        )
        self.compaction = CompactionGate(
            conf,
            CompactionPolicy(
                settings.compaction_min_entries,
                settings.compaction_min_time_s,
                settings.compaction_log_ratio,
                settings.compaction_floor_bytes,
            ),
            self.journal,
            os.path.join(settings.data_dir, SNAPSHOT_FILE),
            # pysyncobj's clock: the simulator routes it.
            lambda: pysyncobj.syncobj.monotonicTime(),
            functools.partial(self._compaction_place, settings),
        )
        super().__init__(
            None if settings.observer else settings.self_address,
            settings.peers,
            conf,
            transportClass=functools.partial(
                transport_class or DurableTransport, journal=self.journal
            ),
        )
        self.addOnTickCallback(self.compaction.tick)
        ticking = self._SyncObj__thread
        if ticking is not None:
            # pysyncobj leaves it unnamed ("Thread-N (_autoTickThread)").
            ticking.name = "raft"
            self._poll_until_due()
        self._batch_method = self._method_id("apply_batch")
        self._merged_method = self._method_id("apply_merged")
        self.commands = MergingQueue(getattr(self, "_SyncObj__commandsQueue"), self)  # noqa: B009
        setattr(self, "_SyncObj__commandsQueue", self.commands)  # noqa: B010 (pysyncobj's name)
        self._take_parts()
        self._note_leader_contact()
        if self._pre_vote is not None:
            self._watch_messages(self._pre_vote.handles)

    def _compaction_place(self, settings: RaftSettings) -> float:
        """This voter's rank among the voters (by Raft address) over their
        number: where it waits in the compaction spread, so the nodes of a
        cluster take turns copying their state. Before pysyncobj knows the
        members, from the settings."""
        me = getattr(self, "_SyncObj__selfNode", None)
        if me is not None:
            voters = {str(node) for node in self._SyncObj__otherNodes} | {str(me)}
            mine = str(me)
        elif settings.observer:
            return 0.0
        else:
            voters = {*settings.peers, settings.self_address}
            mine = settings.self_address
        return sorted(voters).index(mine) / len(voters)

    # -- merged entries (cortex.raft.merging) --------------------------------

    def merges_now(self) -> bool:
        return bool(self._SyncObj__raftState == _LEADER)

    def batch_of(self, command: bytes) -> bytes | None:
        call = batch_call(command)
        return call[1] if call is not None and call[0] == self._batch_method else None

    def merged(self, batches: Sequence[bytes]) -> bytes:
        call = (self._merged_method, (tuple(batches),))
        return REGULAR_COMMAND + pysyncobj.pickle.dumps(call)

    def announce_part(self, requester: tuple[Any, Any], part: int) -> None:
        """pysyncobj's answer to a forwarded command, sent as it logs one
        (the entry goes at the next index, in this term), plus the part."""
        node, request_id = requester
        self._SyncObj__transport.send(
            node,
            {
                "type": "apply_command_response",
                "request_id": request_id,
                "log_idx": self._SyncObj__getCurrentLogIndex() + 1,
                "log_term": self._SyncObj__raftCurrentTerm,
                PART_KEY: part,
            },
        )

    def _method_id(self, name: str) -> Any:
        return self._methodToID[self._getFuncName(name)]

    def _take_parts(self) -> None:
        """The callback of a batch this node forwarded, logged in a merged
        entry, gets its part of the entry's results."""

        def look(node: Any, message: dict[str, Any]) -> None:
            if message.get("type") == "apply_command_response" and isinstance(
                message.get(PART_KEY), int
            ):
                # pysyncobj replaces this dict when the leader changes.
                waiting = self._SyncObj__commandsWaitingReply
                callback = waiting.get(message.get("request_id"))
                if callback is not None:
                    waiting[message["request_id"]] = Part(callback, message[PART_KEY])

        self._watch_messages(look)

    def _note_leader_contact(self) -> None:
        """Times each append from the leader (of the current term or a newer one)."""

        def look(node: Any, message: dict[str, Any]) -> None:
            if (
                message.get("type") == "append_entries"
                and message.get("term", 0) >= self.raftCurrentTerm
            ):
                self._leader_heard_at = pysyncobj.syncobj.monotonicTime()

        self._watch_messages(look)

    def _watch_messages(self, look: Callable[[Any, dict[str, Any]], bool | None]) -> None:
        """Wraps pysyncobj's message handler: `look` sees each message (a
        dict) before pysyncobj handles it; one it returns True for is its
        own, and pysyncobj never sees it."""
        transport = self._SyncObj__transport
        deliver = transport._onMessageReceivedCallback

        def received(node: Any, message: Any) -> None:
            if isinstance(message, dict) and look(node, message):
                return
            deliver(node, message)

        transport.setOnMessageReceivedCallback(received)

    def add_role_listener(self, listener: Callable[[bool], None]) -> None:
        """`listener(leading)` runs on the Raft thread each time this node
        becomes the leader (True) or stops being it (False); it must only
        hand work off (wake a loop)."""
        self._role_listeners.append(listener)

    def _SyncObj__onBecomeLeader(self) -> None:  # noqa: N802 (pysyncobj's name)
        """pysyncobj logs a new leader's no-op entry and sends it while
        handling the vote that elected it, in the middle of a poll that may
        go on to read a fast follower's answer to it; the leader syncs what
        it logged only after the poll. The no-op is synced at once, so the
        leader reads no answer naming an entry it has not synced
        (`sync_around_poll`)."""
        super()._SyncObj__onBecomeLeader()
        self.journal.sync()

    def _state_changed(self, old: int, new: int) -> None:
        if _LEADER not in (old, new):
            return
        self._appends_sent_at = None
        if old == _LEADER:
            self._release_waiting()
        for listener in self._role_listeners:
            try:
                listener(new == _LEADER)
            except Exception:  # never let an exception reach pysyncobj
                log.exception("role listener failed")

    def _onTick(self, timeToWait: float = 0.0) -> None:  # noqa: N802, N803 (pysyncobj's names)
        """pysyncobj's tick looks at a follower's election deadline before it
        polls its sockets. A Raft thread held up past the deadline (a journal
        sync behind a disk busy with a snapshot, a long apply) would stand
        for election at once, although the leader's appends sit unread in
        its sockets, and its higher term would depose the leader. Such a
        follower reads what has arrived first: an append from the leader
        moves the deadline, and only a silent leader leads to an election,
        once a majority would vote for this node (`cortex.raft.pre_vote`)."""
        if self._pre_vote is not None and self._election_due():
            if self._SyncObj__raftState == _FOLLOWER:
                self._poller.poll(0.0)
            if self._election_due():
                self._may_stand = self._pre_vote.before_standing()
        try:
            super()._onTick(timeToWait)
        finally:
            self._may_stand = False
        if (
            self._SyncObj__raftState != _LEADER
            and (self._SyncObj__commandsWaitingReply or self._SyncObj__commandsWaitingCommit)
            and not self._hears_from_leader()
        ):
            # Forwarded to a leader this node no longer hears from (it is cut
            # off, or the leader is): pysyncobj waits for the leader's answer,
            # or for the index it named to be applied here, which come only
            # once the link is back, and the callers waited for the whole
            # commit timeout.
            self._release_waiting()

    def _SyncObj__connectedToAnyone(self) -> bool:  # noqa: N802 (pysyncobj's name)
        """pysyncobj's tick asks this only once the election deadline has
        passed, and stands for election when it holds. With pre-vote, it
        holds only when the look before the tick let this voter stand: the
        deadline can pass between that look and pysyncobj's own (the thread
        descheduled there, a slow write of its term), and a voter cut off
        then stood without asking, a term higher each time."""
        connected = bool(SyncObj._SyncObj__connectedToAnyone(self))  # type: ignore[attr-defined]
        return connected and (self._pre_vote is None or self._may_stand)

    def _election_due(self) -> bool:
        """Whether this voter's election deadline has passed while it follows
        or stands (pysyncobj's tick would start an election)."""
        return bool(
            self._SyncObj__raftState != _LEADER
            and self._SyncObj__selfNode is not None
            and self._SyncObj__raftElectionDeadline < pysyncobj.syncobj.monotonicTime()
            and self._SyncObj__transport.ready
        )

    def _poll_until_due(self) -> None:
        """pysyncobj's Raft thread ticks, then polls its sockets for at most
        `autoTickPeriod` (0.05 s), whether or not its next tick has anything
        to do: twenty wake-ups a second on an idle node, besides the
        leader's heartbeats and their answers, each costing the node a
        thread's wake-up (`scripts/bench_idle.py`). Its poll waits instead
        until the tick is due (`_tick_wait`). A message, a proposal (its
        queue wakes the poll) or a peer's connection ends the poll at
        once, as before; only the empty ticks between go."""
        poller = self._poller
        poll = poller.poll

        def poll_until_due(timeout: float) -> Any:
            return poll(self._tick_wait(timeout))

        poller.poll = poll_until_due

    def _tick_wait(self, period: float) -> float:
        """How long the Raft thread may sleep for want of messages: the
        leader until its next heartbeat is due, a voting follower until its
        election deadline (at most `IDLE_TICK_MAX_S`, so connections are
        retried and compaction looked at as often as pysyncobj's second-long
        timers need); a candidate or an observer, and any node whose moment
        has passed, `period` as before."""
        state = self._SyncObj__raftState
        if state == _LEADER:
            due = self._SyncObj__newAppendEntriesTime
        elif state == _FOLLOWER and not self.observer:
            due = self._SyncObj__raftElectionDeadline
        else:
            return period
        wait = due - pysyncobj.syncobj.monotonicTime()
        return period if wait <= 0 else min(wait, IDLE_TICK_MAX_S)

    def _hears_from_leader(self, within_s: float | None = None) -> bool:
        """Whether an append from a leader arrived at most `within_s` ago
        (by default, the longest election timeout)."""
        heard = self._leader_heard_at
        silence = self.election_timeout_s[1] if within_s is None else within_s
        return heard is not None and pysyncobj.syncobj.monotonicTime() - heard <= silence

    def _release_waiting(self) -> None:
        """Answers this node's proposals not yet applied: as it stops
        leading, or, following, once it has not heard from the leader for
        the longest election timeout. pysyncobj keeps waiting for each until
        its index is applied here (or the leader answers a forwarded one),
        which a node cut off from the others reaches only once it is back;
        a leader cut off steps down when a majority has not answered for
        `leader_fallback_timeout_s`. Their clients waited for the whole
        commit timeout. Whether such an entry commits is up to the leader
        of the majority: each caller hears the outcome is unknown (and
        retries with its idempotency key); when the entry is applied here
        later, nobody is waiting for it."""
        committing = self._SyncObj__commandsWaitingCommit
        answering = self._SyncObj__commandsWaitingReply
        callbacks = [callback for index in sorted(committing) for _, callback in committing[index]]
        callbacks += [answering[number] for number in sorted(answering)]
        committing.clear()
        answering.clear()
        for callback in callbacks:
            try:
                callback(None, FAIL_REASON.UNKNOWN_OUTCOME)
            except Exception:  # never let an exception reach pysyncobj
                log.exception("a proposal's callback failed")

    def _SyncObj__deleteEntriesTo(self, toIDx: int) -> None:  # noqa: N802 (pysyncobj's name)
        """pysyncobj drops the log before a finished snapshot's index, the
        entry at it becoming the log's first. It takes that entry to be in
        the log still, but an append that conflicts with entries this node
        holds cuts them from memory until the leader sends them again (see
        `ResentEntriesNotice`), so a snapshot taken of applied entries can
        finish while the log ends before its index: dropping "up to" it then
        emptied the whole log, and the next append failed on the empty log
        (found by the deterministic simulation). The log is then left whole;
        the next compaction drops what it can."""
        last = self._SyncObj__getCurrentLogIndex()
        if toIDx > last:
            log.info(
                "compaction at index %d keeps the whole log: it ends at %d while the leader"
                " resends entries", toIDx, last,
            )  # fmt: skip
            return
        super()._SyncObj__deleteEntriesTo(toIDx)

    def _SyncObj__applyLogEntries(self) -> bool:  # noqa: N802 (pysyncobj's name)
        """Applies what is committed; returns whether appends must go out
        now. pysyncobj's leader applies the entries a new commit index
        covers and only then sends the followers that index, so each
        follower applied an entry one leader apply after it was committed:
        about a millisecond for one task, tens of milliseconds for a batch
        of hundreds. The leader here sends the index first; the followers
        apply while it does. Nothing else changes: the index is the one the
        leader would send after applying, and appends are not sent twice.

        Likewise the proposals waiting in the command queue are taken before
        the apply, not after it: a leader logs them and sends them with the
        index (one append per follower for both), a follower forwards them,
        and their commit goes on while this node applies. A submission that
        reached a node as it applied used to wait for the whole apply (about
        a millisecond for one task) before it left. The leader still syncs
        what it logged before it reads any acknowledgement
        (`sync_around_poll`)."""
        if (
            self._SyncObj__raftCommitIndex <= self._SyncObj__raftLastApplied
            or not self._SyncObj__transport.ready
        ):
            return bool(super()._SyncObj__applyLogEntries())
        logged = self._SyncObj__getCurrentLogIndex()
        self._checkCommandsToApply()
        announce = self._SyncObj__raftState == _LEADER
        if announce and self._SyncObj__getCurrentLogIndex() == logged:
            self._SyncObj__sendAppendEntries()
        applied = bool(super()._SyncObj__applyLogEntries())
        return applied and not announce

    def _SyncObj__doApplyCommand(self, command: bytes) -> Any:  # noqa: N802 (pysyncobj's name)
        """Applies one committed entry. pysyncobj's leader applies every
        entry a tick finds committed before it sends its next appends, so a
        tick that applied several large ones kept the followers without a
        heartbeat for their sum; a follower that hears nothing for its
        election timeout (0.4 s at the shortest) stands for election. Under
        a bulk submission (`scripts/bench_scale.py`) a busy leader took 0.2
        to 0.55 s for each entry of hundreds of tasks. A leader whose
        heartbeat is due sends its appends between two entries, so the
        followers wait at most for the longest one."""
        result = super()._SyncObj__doApplyCommand(command)
        if (
            self._SyncObj__raftState == _LEADER
            and pysyncobj.syncobj.monotonicTime() > self._SyncObj__newAppendEntriesTime
        ):
            self._SyncObj__sendAppendEntries()
        return result

    def _SyncObj__sendAppendEntries(self) -> None:  # noqa: N802 (pysyncobj's name)
        """The leader's appends (entries, or a heartbeat) to every follower;
        `on_append_gap` is told how long since the last ones
        (`cortex_raft_append_gap_seconds`): a gap near the shortest election
        timeout is one near losing the leadership."""
        now = pysyncobj.syncobj.monotonicTime()
        if self._appends_sent_at is not None and self.on_append_gap is not None:
            self.on_append_gap(now - self._appends_sent_at)
        self._appends_sent_at = now
        super()._SyncObj__sendAppendEntries()

    def propose_batch(self, data: bytes, callback: Callable[[Any, int], None]) -> None:
        """Proposes a batch: `apply_batch` on every node once committed, and
        `callback` with its results here. The results hold one per entry of
        `data`, in order, and may hold more after them (`placer`)."""
        if self.placer is not None and self._isLeader():
            data = self.placer.place(data) or data
        self.apply_batch(data, callback=callback)

    def _applyCommand(self, command: Any, callback: Any, commandType: Any = None) -> None:  # noqa: N802,N803 (pysyncobj's names)
        """pysyncobj's way in for every command. This node's own come with
        a type; one forwarded by a follower comes typed already, and is seen
        by the `placer` here, as the leader takes it."""
        if commandType is None and self.placer is not None and self._isLeader():
            command = _placed_forwarded(self.placer, command)
        super()._applyCommand(command, callback, commandType)

    @replicated
    def apply_batch(self, data: bytes) -> list[dict[str, Any]] | None:
        results = self._apply_next([data])
        return None if results is None else results[0]

    @replicated
    def apply_merged(self, batches: tuple[bytes, ...]) -> list[list[dict[str, Any]]] | None:
        """Batches the leader logged together (`cortex.raft.merging`)."""
        return self._apply_next(list(batches))

    def _apply_next(self, batches: list[bytes]) -> list[list[dict[str, Any]]] | None:
        # pysyncobj advances raftLastApplied after this returns, so this
        # entry's index is one past it.
        index = self.raftLastApplied + 1
        try:
            return self._machine.apply_batches(index, batches)
        except BaseException as err:  # never let an exception reach pysyncobj
            stop_node(f"applying raft index {index} failed", err, "Start the node again.")

    def journal_stats(self) -> JournalStats:
        return self.journal.stats()

    @property
    def leader_address(self) -> str | None:
        leader = self._getLeader()
        if leader is None or (self.observer and not self._hears_from_leader()):
            return None
        return str(leader)

    @property
    def is_leader(self) -> bool:
        return bool(self._isLeader())

    @property
    def hasQuorum(self) -> bool:  # noqa: N802 (pysyncobj's name)
        """A voter: whether it reaches a majority of the voters. An observer:
        whether it hears from the leader (which steps down without a quorum)."""
        if self.observer:
            return self._hears_from_leader()
        return bool(super().hasQuorum)

    @property
    def raft_role(self) -> str:
        """The Raft part this node plays now: leader, follower, candidate, or
        observer (never anything else, for an observer)."""
        if self.observer:
            return "observer"
        return _RAFT_STATES.get(self._SyncObj__raftState, "unknown")

    @property
    def members(self) -> list[str]:
        """The voters' Raft addresses (an observer is none of them)."""
        voters = {str(node) for node in self.otherNodes}
        if self.selfNode is not None:
            voters.add(str(self.selfNode))
        return sorted(voters)

    def remove_member(self, address: str, timeout_s: float) -> None:
        """Takes `address` out of the Raft group (through the leader) and waits
        until the change is committed."""
        done = threading.Event()
        outcome: list[int] = []

        def finished(result: Any, error: int) -> None:
            outcome.append(error)
            done.set()

        self.removeNodeFromCluster(address, callback=finished)
        if not done.wait(timeout_s):
            raise Unavailable(
                f"removing {address} from the Raft group was not confirmed within {timeout_s:g}s;"
                " check `cortex status` and retry"
            )
        if outcome[0] != FAIL_REASON.SUCCESS:
            name = FAIL_REASON_NAMES.get(outcome[0], str(outcome[0]))
            raise Unavailable(f"the Raft group did not remove {address} ({name}); retry")
