"""pysyncobj's TCP transport with two changes Cortex relies on.

**Acknowledgements wait for the journal sync.** A follower tells the leader
how far its log reaches (`next_node_idx`, success) right after appending; the
leader counts that towards a commit. Such acknowledgements are held while the
journal has unsynced appends and sent after the sync that covers them. The
Raft thread syncs right after the poll that delivered the appends, before it
goes on to commit or apply anything: one fdatasync covers every entry
appended in that pass (group commit). The leader's own entries, appended
(and sent) in its tick, are synced just before its poll, while the followers
sync their copies, so its sync is seldom what a commit waits for; either way
they are synced before its next commit decision counts them.

**A commit announcement is not acknowledged twice.** Once a majority has
an entry, the leader sends its new commit index at once, in an append with
no entries; each follower answers it as it answers every append, naming the
same next index it had just named for the entry itself. That answer tells the
leader nothing, and costs a send on the follower and a receive and a pass of
the Raft loop on the leader, for every entry. A follower leaves it out when
it acknowledged that same index to that leader, in the same term, less than
`ACK_REPEAT_S` ago; an answer to an append that carries entries, a refusal,
or one after a quiet spell is always sent, so the leader still hears from
each follower at least once per heartbeat period.

**Bounded frames.** pysyncobj reads a 32-bit length prefix and then buffers
that many bytes before checking anything, growing an immutable buffer. A
peer that has not yet shown it holds the cluster secret (its first frame has
not decrypted) may send frames of at most `MAX_UNPROVEN_FRAME` bytes, a
proven one `MAX_FRAME`; a longer prefix drops the connection at once, and
reading stops at each complete frame so the buffer never holds much more
than one.

**Frames are not compressed.** pysyncobj passes every frame through
`zlib.compress(..., 3)`; setting up a deflate stream costs about 17 µs even
for a 71-byte acknowledgement, and a Raft round is several such frames on
every node, so Cortex sends the pickle as it is. A frame still read may be
either: a pickle opens with 0x80, a zlib stream with 0x78, so frames from a
node that still compresses are read too.

**Frames are pickled with protocol 5.** pysyncobj pickles with protocol 2,
which has no opcode for bytes: each `bytes` value (an entry's command, a
snapshot chunk) goes as a latin-1 string rebuilt through `codecs.encode`
when read, every byte of 0x80 or more taking two in the frame. An append of
a 500-task batch took 580 µs to pickle instead of 19; a chunk of snapshot
pages, half again its size on the wire. Any protocol reads back alike, so
frames from a node that still sends protocol 2 are read too."""

from __future__ import annotations

import errno
import logging
import pickle
import socket
import struct
import zlib
from collections.abc import Callable
from typing import Any

import pysyncobj.pickle as pysyncobj_pickle
import pysyncobj.syncobj
import pysyncobj.tcp_server
import pysyncobj.transport
from pysyncobj.monotonic import monotonic as monotonic_time
from pysyncobj.tcp_connection import TcpConnection
from pysyncobj.transport import TCPTransport

from cortex.raft.frame_cipher import frame_cipher
from cortex.raft.journal import DurableJournal

log = logging.getLogger(__name__)

# How long an acknowledgement of a commit announcement that repeats the last
# one is left out (module docstring). Well under the leader's heartbeat
# period (pysyncobj's appendEntriesPeriod, 0.1 s), so idle heartbeats are
# all answered, and far under the leader's fallback timeout.
ACK_REPEAT_S = 0.05
# The key exchange is one sealed frame of 32 random bytes: well under 1 KiB.
MAX_UNPROVEN_FRAME = 64 * 1024
# Appends and snapshot chunks are split at 64 KiB, but a follower forwards a
# whole proposed batch (up to a few MiB) to the leader in one frame.
MAX_FRAME = 64 * 1024 * 1024
_PREFIX = struct.Struct("i")
_ACK = "next_node_idx"
_READ_BUFFER = "_TcpConnection__readBuffer"
_WRITE_BUFFER = "_TcpConnection__writeBuffer"
# The first byte of a pickle of protocol 2 or later (PROTO opcode).
_PICKLE_START = 0x80
# Protocol 5 carries bytes as they are (module docstring).
FRAME_PICKLE_PROTOCOL = 5


def frame_payload(message: Any) -> bytes:
    """What a frame carries before it is sealed: the message's pickle."""
    return pickle.dumps(message, protocol=FRAME_PICKLE_PROTOCOL)


def frame_message(payload: bytes) -> Any:
    """The message a frame's opened payload holds, compressed (by a node
    that still compresses) or not."""
    if payload[:1] and payload[0] != _PICKLE_START:
        payload = zlib.decompress(payload)
    return pysyncobj_pickle.loads(payload)


class BoundedTcpConnection(TcpConnection):  # type: ignore[misc]
    """pysyncobj's connection, reading into a bounded bytearray. Overrides its
    two private read methods (pysyncobj is pinned to 0.3.17)."""

    proven = False

    def _frame_limit(self) -> int:
        return MAX_FRAME if self.proven else MAX_UNPROVEN_FRAME

    def _refuse(self, size: int) -> None:
        log.warning(
            "raft port: dropping a connection that announced a %d-byte frame (limit %d%s)",
            size, self._frame_limit(),
            "" if self.proven else " before it proved the cluster secret",
        )  # fmt: skip
        self.disconnect()

    def send(self, message: Any) -> None:
        """pysyncobj's send without the compression (module docstring)."""
        if self.sendRandKey:
            message = (self.sendRandKey, message)
        data = frame_payload(message)
        if self.encryptor:
            data = self.encryptor.encrypt_at_time(data, int(monotonic_time()))
        setattr(self, _WRITE_BUFFER, getattr(self, _WRITE_BUFFER) + _PREFIX.pack(len(data)) + data)
        self._TcpConnection__trySendBuffer()

    def _TcpConnection__processRead(self) -> bool:
        sock = self._TcpConnection__socket
        try:
            incoming = sock.recv(self._TcpConnection__recvBufferSize)
        except OSError as err:
            if err.errno not in (errno.EAGAIN, errno.EWOULDBLOCK):
                self.disconnect()
            return False
        if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) or not incoming:
            self.disconnect()
            return False
        buffer = getattr(self, _READ_BUFFER)
        if not isinstance(buffer, bytearray):
            buffer = bytearray(buffer)
            setattr(self, _READ_BUFFER, buffer)
        buffer += incoming
        if len(buffer) < _PREFIX.size:
            return True
        (size,) = _PREFIX.unpack_from(buffer)
        if size < 0 or size > self._frame_limit():
            self._refuse(size)
            return False
        # Stop reading once a whole frame is in: the poller calls again for the rest.
        return len(buffer) < _PREFIX.size + size

    def _TcpConnection__processParseMessage(self) -> Any:
        buffer = getattr(self, _READ_BUFFER)
        if len(buffer) < _PREFIX.size:
            return None
        (size,) = _PREFIX.unpack_from(buffer)
        if size < 0 or size > self._frame_limit():
            self._refuse(size)
            return None
        if len(buffer) - _PREFIX.size < size:
            return None
        data = bytes(buffer[_PREFIX.size : _PREFIX.size + size])
        try:
            if self.encryptor:
                timestamp: int = self.encryptor.extract_timestamp(data)
                last: int = getattr(self, "recvLastTimestamp", 0)
                if timestamp < last:
                    raise ValueError("frame older than the last one")
                self.recvLastTimestamp = timestamp
                data = self.encryptor.decrypt(data)
            self.proven = True
            message = frame_message(data)
            if self.recvRandKey:
                rand_key, message = message
                if rand_key != self.recvRandKey:
                    raise ValueError("frame for another connection")
        except Exception:
            self.disconnect()
            return None
        del buffer[: _PREFIX.size + size]
        return message

    def disconnect(self) -> None:
        super().disconnect()
        self.proven = False


def install_bounded_connections() -> None:
    """pysyncobj creates connections by name in two modules (outgoing in the
    transport, incoming in the server); both get the bounded class. Its
    frames are sealed with `FrameCipher`, made where it made its Fernet."""
    pysyncobj.transport.TcpConnection = BoundedTcpConnection
    pysyncobj.tcp_server.TcpConnection = BoundedTcpConnection
    pysyncobj.syncobj.getEncryptor = frame_cipher


class AckHold:
    """A node's append acknowledgements, held while its journal has unsynced
    appends and sent by `flush` after the sync that covers them. The Raft
    thread calls `flush` right before and right after each poll
    (`sync_around_poll`). Shared by the TCP transport and the simulator's."""

    def __init__(
        self,
        journal: DurableJournal,
        deliver: Callable[[Any, Any], bool],
        clock: Callable[[], float] = lambda: pysyncobj.syncobj.monotonicTime(),
    ) -> None:
        self._journal = journal
        self._deliver = deliver
        # pysyncobj's clock: the simulator routes it.
        self._clock = clock
        self._held: list[tuple[Any, Any]] = []
        # While a message `keep_matching_entries` rewrote is handled: the
        # node it came from and the next index its acceptance must name.
        self._verified: tuple[Any, int] | None = None
        # While an append is handled: the node it came from, its term, and
        # whether it is a commit announcement (no entries).
        self._append: tuple[Any, Any, bool] | None = None
        # Per node: the (term, next index) of the last acceptance sent to
        # it, and when.
        self._accepted: dict[Any, tuple[tuple[Any, Any], float]] = {}

    def send(self, node: Any, message: Any) -> bool:
        if (
            self._verified is not None
            and isinstance(message, dict)
            and message.get("type") == _ACK
            and message.get("success")
            and node == self._verified[0]
        ):
            message = {**message, "next_node_idx": self._verified[1]}
        if self._repeats_acceptance(node, message):
            return True
        if (
            isinstance(message, dict)
            and message.get("type") == _ACK
            and (self._held or self._journal.dirty)
        ):
            self._held.append((node, message))
            return True
        return self._deliver(node, message)

    def _repeats_acceptance(self, node: Any, message: Any) -> bool:
        """Whether `message` accepts a commit announcement from `node` by
        naming the next index this node named to it last, in the same term,
        less than `ACK_REPEAT_S` ago; notes each acceptance it lets through."""
        if not _is_acceptance(message):
            return False
        handling = self._append
        if handling is None or handling[0] != node:
            return False
        accepted = (handling[1], message.get("next_node_idx"))
        now = self._clock()
        last = self._accepted.get(node)
        if (
            handling[2]
            and last is not None
            and last[0] == accepted
            and now - last[1] < ACK_REPEAT_S
        ):
            return True
        self._accepted[node] = (accepted, now)
        return False

    def flush(self) -> None:
        """Syncs the journal, then sends the acknowledgements it covers."""
        self._journal.sync()
        held, self._held = self._held, []
        for node, message in held:
            self._deliver(node, message)

    def receive(
        self, sync_obj: Any, node: Any, message: Any, handle: Callable[[Any, Any], None]
    ) -> None:
        """Hands a received message to pysyncobj (`handle`) after
        `guard_incoming` and `keep_matching_entries`; when the latter
        rewrote an append, the acceptance pysyncobj sends for it names the
        entries the append itself verified."""
        message, verified_next = keep_matching_entries(
            sync_obj, guard_incoming(sync_obj, node, gather_chunks(sync_obj, message))
        )
        self._verified = None if verified_next is None else (node, verified_next)
        self._append = _append_of(node, message)
        try:
            handle(node, message)
        finally:
            self._verified = None
            self._append = None


def _is_acceptance(message: Any) -> bool:
    """A follower's acknowledgement that it holds the entries up to its next
    index (not a refusal, nor a reset of the leader's next index)."""
    return (
        isinstance(message, dict)
        and message.get("type") == _ACK
        and bool(message.get("success"))
        and not message.get("reset")
    )


def _append_of(node: Any, message: Any) -> tuple[Any, Any, bool] | None:
    """For an append: the node, the term, and whether it carries no entries
    (a heartbeat, which announces the leader's commit index)."""
    if not (
        isinstance(message, dict)
        and message.get("type") == "append_entries"
        and "prevLogIdx" in message
    ):
        return None
    empty = "transmission" not in message and not message.get("entries")
    return node, message.get("term"), empty


def gather_chunks(sync_obj: Any, message: Any) -> Any:
    """An entry too big for one append comes in chunks ("start", "process",
    "finish"); the last one becomes the append of the whole entry, as
    pysyncobj would make it, so the rest of the path sees one kind of append.

    pysyncobj's leader labels a chunk "finish" once the chunks reach the
    length of the entry's command, not of its pickle, which is a few dozen
    bytes longer: when the pickle's last chunk holds only those bytes, the
    chunk before it says "finish" too. Unpickling that one failed on the
    Raft thread ("pickle data was truncated"; seen once in a million-task
    run). Such a chunk is taken as a "process" one, and the entry is whole
    when the real last chunk arrives."""
    if not (
        isinstance(message, dict)
        and message.get("type") == "append_entries"
        and "prevLogIdx" in message
        and message.get("transmission") == "finish"
    ):
        return message
    gathered = sync_obj._SyncObj__recvTransmission
    if not isinstance(gathered, bytes) or not isinstance(message.get("data"), bytes):
        return message
    try:
        entry = pysyncobj_pickle.loads(gathered + message["data"])
    except Exception:
        return {**message, "transmission": "process"}
    sync_obj._SyncObj__recvTransmission = ""
    whole = {k: v for k, v in message.items() if k not in ("transmission", "data")}
    return {**whole, "entries": [entry]}


def keep_matching_entries(sync_obj: Any, message: Any) -> tuple[Any, int | None]:
    """A follower takes an append that overlaps its log without removing
    anything when the entries it holds at those indexes match (Raft §5.3:
    only a conflict removes entries).

    pysyncobj removes everything after an append's previous index before it
    adds the append's entries, even when they match. When a leader sends a
    range a follower already has (see `_keep_next_index` for why it did, and
    a resend is cut at `appendEntriesBatchSizeBytes`), the follower loses the
    entries after that range, committed and applied ones included
    ("truncating already-applied log entries"), until they are sent again.
    A follower that lost committed entries can help elect a leader that
    lacks them: on a node that applied them the journal then stops the
    node, and the cluster has lost writes it acknowledged (seen at 200,000
    tasks of a million-task run on a loaded machine).

    Such an append is handed to pysyncobj as one that starts at the
    follower's last entry and carries only the entries past it, so nothing
    is removed; the leader's commit index is capped at the append's last
    entry (what the append verified, not the follower's tail). An entry sent
    in chunks comes here whole (`gather_chunks`). Returns the message
    and the next index the follower's acceptance must name (the append's
    last entry's plus one), or the message as it is and None: any other
    message, an append that does not overlap the log, and one that does not
    match where it starts or conflicts with it (pysyncobj removes from
    there, as Raft does)."""
    if (
        not isinstance(message, dict)
        or message.get("type") != "append_entries"
        or "prevLogIdx" not in message
        or "transmission" in message
    ):
        return message, None
    previous = message["prevLogIdx"]
    last = sync_obj._SyncObj__getCurrentLogIndex()
    if last <= previous:
        return message, None
    entries = message.get("entries") or []
    end = previous + len(entries)
    held = min(last, end) - previous  # how many of the entries the log has a place for
    ours = sync_obj._SyncObj__getEntries(previous, held + 1)
    if len(ours) != held + 1 or ours[0][2] != message.get("prevLogTerm"):
        return message, None
    for mine, theirs in zip(ours[1:], entries[:held], strict=True):
        if mine[1] != theirs[1] or mine[2] != theirs[2]:
            return message, None
    kept = {
        **message,
        "prevLogIdx": last,
        "prevLogTerm": sync_obj._SyncObj__getCurrentLogTerm(),
        "entries": entries[held:],
        "commit_index": min(message.get("commit_index", 0), end),
    }
    return kept, end + 1


def guard_incoming(sync_obj: Any, node: Any, message: Any) -> Any:
    """Corrections to what pysyncobj does with a message it receives: the
    first two found by the deterministic simulation, the third on a loaded
    million-task run (pysyncobj is pinned)."""
    message = _backtrack_only(sync_obj, node, without_unchecked_commit(message))
    return _keep_next_index(sync_obj, node, message)


def _keep_next_index(sync_obj: Any, node: Any, message: Any) -> Any:
    """A leader sends a follower its new entries as they come (its next
    index for the follower moves past them at once), and the follower
    acknowledges each append after the journal sync that covers it, so an
    acknowledgement names an index the leader has already sent past.
    pysyncobj takes an acceptance's index as the next index whenever it
    raises the match index: the next index goes back, and the leader sends
    again what the follower already holds, most of the time, big entries in
    chunks included.

    The acceptance still raises the match index, but leaves a next index
    that is ahead where it is: the match index is raised here, so pysyncobj
    finds nothing to raise and leaves both. Refusals still move it back."""
    if not _is_acceptance(message):
        return message
    next_index = sync_obj._SyncObj__raftNextIndex.get(node)
    match_index = sync_obj._SyncObj__raftMatchIndex.get(node)
    accepted = message.get("next_node_idx")
    if (
        isinstance(next_index, int)
        and isinstance(match_index, int)
        and isinstance(accepted, int)
        and accepted < next_index
        and match_index < accepted - 1
        and sync_obj._isLeader()
    ):
        sync_obj._SyncObj__raftMatchIndex[node] = accepted - 1
    return message


def _backtrack_only(sync_obj: Any, node: Any, message: Any) -> Any:
    """A follower refusing an append tells the leader where to resume: after
    a log mismatch, at the mismatching index; when the append starts past its
    log, after its last entry, conflicting entries included. The leader takes
    either hint as its next index for the follower, so a late answer to an
    earlier append can move it forward again past a mismatch found since, and
    under a steady stream of writes a follower holding a deposed leader's
    entries is never repaired. A refusal may only move the next index back."""
    if (
        isinstance(message, dict)
        and message.get("type") == "next_node_idx"
        and message.get("reset")
        and not message.get("success")
    ):
        current = sync_obj._SyncObj__raftNextIndex.get(node)
        if isinstance(current, int) and message.get("next_node_idx", 0) > current:
            return {**message, "next_node_idx": current}
    return message


def without_unchecked_commit(message: Any) -> Any:
    """pysyncobj advances a follower's commit index from every append_entries
    it takes, including those that carry no log position to check the
    follower's log against: a snapshot offered while the leader's serializer
    is busy, or one chunk of a snapshot transfer. A follower whose log still
    holds entries of a deposed leader then applies them as committed, and
    diverges for good (found by the deterministic simulation). Such messages
    lose their commit index here; the next regular append, checked against
    the follower's log, advances it."""
    if (
        isinstance(message, dict)
        and message.get("type") == "append_entries"
        and "prevLogIdx" not in message
        and message.get("commit_index")
    ):
        return {**message, "commit_index": 0}
    return message


def sync_around_poll(
    sync_obj: Any, flush: Callable[[], None], sync_first: Callable[[], None]
) -> None:
    """Runs `flush` after each of pysyncobj's polls: the poll delivers appends,
    and the Raft loop commits and applies only after the next one starts.
    And `sync_first` (`AckHold.flush`) before each poll: what the tick just
    logged (a leader's proposals, sent to the followers as they were logged)
    is synced while the followers sync their copies, instead of after the
    poll that waits for their answers."""
    poller = sync_obj._poller
    poll = poller.poll

    def synced_poll(timeout: float) -> Any:
        sync_first()
        polled = poll(timeout)
        flush()
        return polled

    poller.poll = synced_poll


class DurableTransport(TCPTransport):  # type: ignore[misc]
    def __init__(
        self, syncObj: Any, selfNode: Any, otherNodes: Any, *, journal: DurableJournal
    ) -> None:
        super().__init__(syncObj, selfNode, otherNodes)
        self._journal = journal
        self._acks = AckHold(journal, self._deliver)
        sync_around_poll(syncObj, self.flush, self.flush)

    def send(self, node: Any, message: Any) -> bool:
        return self._acks.send(node, message)

    def _onMessageReceived(self, node: Any, message: Any) -> None:  # noqa: N802
        self._acks.receive(self._syncObj, node, message, super()._onMessageReceived)

    def flush(self) -> None:
        self._acks.flush()

    def _deliver(self, node: Any, message: Any) -> bool:
        return bool(super().send(node, message))
