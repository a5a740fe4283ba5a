"""Group commit at the leader: batches proposed by different nodes at the
same moment share one Raft entry.

Every node's proposer keeps one batch in flight, so a busy three-node
cluster has three proposers (and the scheduler's placements, through the
leader's) each sending a batch per commit. Each batch was its own log
entry, and an entry costs every node about a millisecond of CPU whatever it
holds (the append and its acknowledgement on the wire, a sync, a SQLite
transaction, the listeners). The leader now takes the batches waiting in
pysyncobj's command queue together, in their order, into one entry of
`RaftGroup.apply_merged`: every node applies them in one transaction, as
one batch of all their entries, and returns each batch's results apart.

Who proposed what is kept: a batch of the leader's own gets its results
through its callback, handed its part (`Part`); a follower that forwarded a
batch is told the entry's index as pysyncobj tells it (an
`apply_command_response`) plus the batch's position in the entry
(`PART_KEY`), and its node hands its callback that part. The command queue
is read by the Raft thread alone; a command read but not taken (it is not
a batch, or would make the entry too large) is handed out first next time,
so nothing is reordered.

Every node of a cluster must run code that knows `apply_merged` and
`PART_KEY`; a node that does not would misread a merged entry.

The leader also waits a little for its own next batch before it logs what
other nodes forwarded. Its proposer keeps one batch in flight and sends the
next as soon as that one is applied; a follower's batch (most often its
agent's reports of attempts ended) that arrived meanwhile used to be logged
alone at the leader's next tick, a moment before the leader's own batch
came, which then was an entry of its own too. With 32 clients submitting
one task per call, half the cluster's entries held a follower's reports and
nothing else. So while the leader's proposer holds entries it will send
next (`MergingQueue.batch_coming`) and none of its batches waits here, what
waits here stays, for at most `MAX_HOLD_S`, and leaves with that batch in
one entry. `scripts/bench_compare.py --pairs 3 -- --tasks 6000
--concurrency 32`, with the entries' task caps in place: 13.0 tasks an
entry instead of 6.7 (medians), 3.94 ms of CPU a task instead of 4.06,
throughput 1.07 times that of the pair's run without (median; 2 pairs of 3
above 1; 1.02 in 5 pairs on another day). Bulk submission: 33.5 tasks an
entry instead of 26.9, throughput within the runs' spread. A leader with
nothing queued holds nothing, so one client's task at a time waits for no
one (one client, 5 pairs: 1.09 times, submit to running p50 6 ms against
7; the commands waited 7 to 20 times in 1,000 tasks, never 30 ms). Growing
a million tasks of history (`scripts/bench_scale.py`), no election with it
or without, one round of appends over 0.4 s apart on each side."""

from __future__ import annotations

import queue
import re
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import pysyncobj.pickle
import pysyncobj.syncobj

from cortex.state.entries import TasksPurge

# The field of an `apply_command_response` naming the forwarded batch's
# position in a merged entry (pysyncobj ignores fields it does not know).
PART_KEY = "cortex_part"
# An entry holds at most this many batches and bytes of them: the
# proposer's own bounds for one batch.
MAX_MERGED_BATCHES = 64
MAX_MERGED_BYTES = 4 * 1024 * 1024
# And at most this many tasks written (`batch_tasks`): two full batches of
# submissions placed as they are logged (`cortex.raft.proposer.MAX_BATCH_TASKS`).
# Every node applies an entry in one go, and a leader sends no heartbeat
# meanwhile.
MAX_MERGED_TASKS = 256
_TASK_KEY = b'"task_id":'
# A retention purge names no task: it writes up to its `limit`.
_PURGE_MARK = f'"type":"{TasksPurge.TYPE}"'.encode()
_LIMIT = re.compile(rb'"limit":(\d+)')
# The longest commands wait at the leader for its own next batch (module
# docstring): under load a batch in flight is applied within a few tens of
# ms; a batch that never comes (its proposer's batch in flight was lost with
# a leader) costs what waits at most this much.
MAX_HOLD_S = 0.03

Callback = Callable[[Any, int], None]
# pysyncobj's queued command: its bytes and its callback, which is a
# callable, a forwarding follower's (node, request id), or None.
Queued = tuple[bytes, Any]


class CommandQueue(Protocol):
    def put_nowait(self, value: Queued) -> None: ...

    def get_nowait(self) -> Queued: ...


class Leader(Protocol):
    """What the queue asks of the Raft group it serves."""

    def merges_now(self) -> bool:
        """Whether this node is the leader taking commands into its log now."""
        ...

    def batch_of(self, command: bytes) -> bytes | None:
        """The batch an `apply_batch` command carries, or None for any other."""
        ...

    def merged(self, batches: Sequence[bytes]) -> bytes:
        """The command applying `batches` together (`apply_merged`)."""
        ...

    def announce_part(self, requester: tuple[Any, Any], part: int) -> None:
        """Tells a follower that forwarded a batch where the entry about to
        be logged will hold it."""
        ...


class Part:
    """A callback given its own batch's results out of a merged entry's."""

    __slots__ = ("_callback", "_number")

    def __init__(self, callback: Callback, number: int) -> None:
        self._callback = callback
        self._number = number

    def __call__(self, result: Any, error: int) -> None:
        self._callback(part_of(result, self._number), error)


def part_of(result: Any, number: int) -> Any:
    """Batch `number`'s results out of a merged entry's; None when this node
    has none for it (its state came from a snapshot that held the entry)."""
    if isinstance(result, list) and 0 <= number < len(result):
        return result[number]
    return None


class Parts:
    """The merged entry's callback on the leader: each of its own batches'
    callbacks, handed its part."""

    __slots__ = ("_parts",)

    def __init__(self, parts: list[Part]) -> None:
        self._parts = parts

    def __call__(self, result: Any, error: int) -> None:
        for part in self._parts:
            part(result, error)


class MergingQueue:
    """pysyncobj's command queue, which on the leader hands out the batches
    waiting in it, in order, as one `apply_merged` command, once this
    node's own next batch is among them or none is coming (module
    docstring)."""

    def __init__(
        self,
        inner: CommandQueue,
        leader: Leader,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._inner = inner
        self._leader = leader
        self._clock = clock
        # Commands read from `inner` and not handed out yet, in order (read
        # and written by the Raft thread alone).
        self._waiting: deque[Queued] = deque()
        # When the commands waiting began to wait for this node's next batch.
        self._holding_since: float | None = None
        self._gave_up = False
        # Whether this node's proposer holds entries it will send next; set
        # by the node once its proposer exists.
        self.batch_coming: Callable[[], bool] | None = None
        # Batches that went into merged entries, and those entries.
        self.merged_batches = 0
        self.merged_entries = 0
        # Times commands waited for this node's next batch, and times they
        # left after `MAX_HOLD_S` without it.
        self.holds = 0
        self.holds_given_up = 0

    def put_nowait(self, value: Queued) -> None:
        self._inner.put_nowait(value)

    def get_nowait(self) -> Queued:
        if self._holds():
            raise queue.Empty
        first = self._next()
        if not self._leader.merges_now():
            return first
        batch = self._leader.batch_of(first[0])
        if batch is None:
            return first
        taken: list[tuple[Queued, bytes]] = [(first, batch)]
        size = len(batch)
        tasks = batch_tasks(batch)
        while len(taken) < MAX_MERGED_BATCHES:
            try:
                queued = self._next()
            except queue.Empty:
                break
            more = self._leader.batch_of(queued[0])
            more_tasks = 0 if more is None else batch_tasks(more)
            if (
                more is None
                or size + len(more) > MAX_MERGED_BYTES
                or tasks + more_tasks > MAX_MERGED_TASKS
            ):
                self._waiting.appendleft(queued)
                break
            taken.append((queued, more))
            size += len(more)
            tasks += more_tasks
        if len(taken) == 1:
            return first
        return self._merge(taken)

    def _holds(self) -> bool:
        """Whether what waits stays for this node's next batch: on the
        leader, while its proposer has one coming and none of its batches
        waits here, for at most `MAX_HOLD_S` from when the first of them
        began to wait."""
        coming = self.batch_coming
        if coming is None or not self._leader.merges_now() or not coming():
            self._holding_since = None
            return False
        self._take_all()
        if not self._waiting:
            self._holding_since = None
            return False
        if any(callable(callback) for _, callback in self._waiting):
            # This node's batch is here (a forwarded batch's callback is the
            # follower's address, a tuple): all of them leave together.
            self._holding_since = None
            return False
        now = self._clock()
        if self._holding_since is None:
            self._holding_since = now
            self._gave_up = False
            self.holds += 1
        if now - self._holding_since < MAX_HOLD_S:
            return True
        if not self._gave_up:
            # What waits leaves now, and what arrives before it has all left
            # leaves with it: no command waits twice.
            self._gave_up = True
            self.holds_given_up += 1
        return False

    def _take_all(self) -> None:
        while True:
            try:
                self._waiting.append(self._inner.get_nowait())
            except queue.Empty:
                return

    def _next(self) -> Queued:
        return self._waiting.popleft() if self._waiting else self._inner.get_nowait()

    def _merge(self, taken: list[tuple[Queued, bytes]]) -> Queued:
        own: list[Part] = []
        for number, ((_, callback), _) in enumerate(taken):
            if isinstance(callback, tuple):
                self._leader.announce_part(callback, number)
            elif callback is not None:
                own.append(Part(callback, number))
        self.merged_batches += len(taken)
        self.merged_entries += 1
        command = self._leader.merged([batch for _, batch in taken])
        return command, Parts(own) if own else None


def batch_tasks(batch: bytes) -> int:
    """The tasks a batch writes, as its `"task_id":` keys count them, without
    decoding it: one in a submission, a report or a cancel, one a placement
    in an assignment, one a task in a workflow's part; and a purge's `limit`,
    the tasks it may remove. Inside a JSON string a quote is escaped, so only
    keys match; a key of either name in a task's own data counts too many,
    which only makes an entry smaller."""
    tasks = batch.count(_TASK_KEY)
    if _PURGE_MARK in batch:
        tasks += sum(int(limit) for limit in _LIMIT.findall(batch))
    return max(tasks, 1)


def batch_call(command: Any) -> tuple[Any, bytes] | None:
    """A queued command calling a replicated method with one batch (a
    follower's forwarded `apply_batch`, or this node's own): pysyncobj's
    command type byte, then the pickle of (method id, (batch,)). Its method
    id and batch."""
    if not isinstance(command, bytes) or command[:1] != REGULAR_COMMAND:
        return None
    try:
        call = pysyncobj.pickle.loads(command[1:])
    except Exception:
        return None
    if (
        isinstance(call, tuple)
        and len(call) == 2
        and isinstance(call[1], tuple)
        and len(call[1]) == 1
        and isinstance(call[1][0], bytes)
    ):
        return call[0], call[1][0]
    return None


REGULAR_COMMAND = bytes([pysyncobj.syncobj._COMMAND_TYPE.REGULAR])
