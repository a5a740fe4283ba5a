"""Proposing entries: commands from many threads are coalesced into batches
(one Raft entry each) with a bounded number of batches in flight, and every
caller gets its own entry's result once the batch is applied locally.

Request handlers wait for their entries (`propose`); the node's loops, which
are steps (`cortex.steps`), yield one future for all their entries
(`submit_all`)."""

from __future__ import annotations

import functools
import heapq
import itertools
import logging
import math
import queue
import threading
import time
from concurrent.futures import Future, InvalidStateError
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Protocol

from pysyncobj.config import FAIL_REASON

from cortex.errors import Unavailable
from cortex.raft.group import FAIL_REASON_NAMES, RaftGroup
from cortex.state.entries import Entry, TasksPurge, encode_batch, fold_starts
from cortex.steps import gather

log = logging.getLogger(__name__)

_Pending = tuple[Entry, "Future[dict[str, Any]]"]
# Entries queued that leave without waiting for the batch in flight (at
# most one more batch in flight; see `Proposer`).
BACKLOG_ENTRIES = 32
# The tasks a batch's entries write, at most (`entry_tasks`; a batch may pass
# it by its last entry). Every node applies a batch in one go on its Raft
# thread, and a leader sends no heartbeat during an apply. Growing 150,000
# tasks of history in calls of 1,000 (`scripts/bench_scale.py`), batches of
# up to 512 entries (1,024 tasks written once placed and merged) took a busy
# leader 0.2 to 0.55 s each, about half of it CPU: 54 to 70 of its ~6,300
# rounds of appends came more than 0.25 s apart and 4 to 8 more than 0.4 s,
# the shortest election timeout. With 128, 3 to 6 of ~8,200 and none, and
# the growth took as long (182 s against 182). Each entry costs every node
# about a millisecond whatever it holds: under 10 µs a task at this size.
MAX_BATCH_TASKS = 128


def entry_tasks(entry: Entry) -> int:
    """The tasks an entry writes: those an assignment places, a workflow's
    part brings and a purge may remove, else one."""
    payload = entry.payload
    if entry.type == TasksPurge.TYPE:
        limit = payload.get("limit")
        return limit if isinstance(limit, int) and limit > 0 else 1
    for many in ("assignments", "tasks"):
        items = payload.get(many)
        if isinstance(items, list):
            return max(len(items), 1)
    return 1


DEFAULT_COMMIT_TIMEOUT_S = 10.0
# The longest the deadline thread sleeps between two looks.
_IDLE_S = 1.0


class EntrySubmitter(Protocol):
    """What the node's loops and agent propose through: the `Proposer` in a
    real node, the simulator's proposer in a simulated one."""

    def submit(self, entry: Entry) -> Future[dict[str, Any]]:
        """The entry's result once it is applied on this node; nobody waits."""
        ...

    def submit_all(self, entries: list[Entry]) -> Future[list[dict[str, Any]]]:
        """Every entry's result, in order, once all are applied on this node;
        fails with Unavailable when they are not committed in time."""
        ...


def _not_committed(timeout: float) -> Unavailable:
    return Unavailable(
        f"entry not committed within {timeout:.0f}s; it may still be applied, "
        "so retry with the same idempotency key"
    )


class _Deadlines:
    """Fails futures still pending at their deadline, all from one thread
    (started with the first deadline). A future is let go of as soon as it
    is settled: held to its deadline, every proposal of the last
    `commit_timeout_s` seconds stayed in memory with its results (ten
    thousand at a few hundred tasks a second).

    The thread sleeps until the deadline of the oldest future still
    pending, at most `_IDLE_S`, and is woken only for a deadline earlier
    than that: it used to wake at every proposal's deadline, settled or
    not, a thousand times a second under load."""

    def __init__(self) -> None:
        # (deadline, order); the futures still pending by order.
        self._heap: list[tuple[float, int]] = []
        self._pending: dict[int, tuple[Future[Any], float]] = {}
        self._order = itertools.count()
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopped = False
        # When the thread looks next (-inf while it is not waiting).
        self._wake_at = -math.inf

    def add(self, future: Future[Any], timeout: float) -> None:
        with self._changed:
            if self._stopped:
                return
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="proposal-deadlines", daemon=True
                )
                self._thread.start()
            order = next(self._order)
            deadline = time.monotonic() + timeout
            self._pending[order] = (future, timeout)
            heapq.heappush(self._heap, (deadline, order))
            if deadline < self._wake_at:
                self._changed.notify()
        # Outside the lock: a future settled meanwhile runs this at once.
        future.add_done_callback(functools.partial(self._settled, order))

    def _settled(self, order: int, _: Future[Any]) -> None:
        with self._changed:
            self._pending.pop(order, None)

    def stop(self) -> None:
        """Fails what is still pending: nothing will answer it on this node."""
        with self._changed:
            self._stopped = True
            pending, self._pending, self._heap = self._pending, {}, []
            self._changed.notify()
        for future, _ in pending.values():
            _fail(future, Unavailable("node is shutting down"))

    def _run(self) -> None:
        while True:
            with self._changed:
                overdue = self._next_overdue()
                if overdue is None:
                    return
            _fail(*overdue)

    def _next_overdue(self) -> tuple[Future[Any], Unavailable] | None:
        """Waits (holding the condition) for a pending future's deadline to
        pass; None once stopped."""
        heap = self._heap
        while not self._stopped:
            while heap and heap[0][1] not in self._pending:
                heapq.heappop(heap)  # settled
            now = time.monotonic()
            if heap and heap[0][0] <= now:
                self._wake_at = -math.inf
                _, order = heapq.heappop(heap)
                future, timeout = self._pending.pop(order)
                return future, _not_committed(timeout)
            self._wake_at = min(heap[0][0] if heap else math.inf, now + _IDLE_S)
            self._changed.wait(self._wake_at - now)
        return None


def _fail(future: Future[Any], error: Unavailable) -> None:
    if future.done():
        return
    try:
        future.set_exception(error)
    except InvalidStateError:
        pass  # its outcome arrived meanwhile


def check_writable(group: RaftGroup) -> None:
    """Raises Unavailable at once when the node cannot reach a quorum or knows
    no leader, instead of letting the caller wait."""
    if group.leader_address is None:
        raise Unavailable(
            "no Raft leader is known to this node (election in progress or no quorum)"
        )
    if not group.hasQuorum:
        raise Unavailable("this node cannot reach a quorum of the cluster")


# Failures after which the entry may still be committed by the next leader.
_OUTCOME_UNKNOWN = frozenset({FAIL_REASON.LEADER_CHANGED, FAIL_REASON.UNKNOWN_OUTCOME})


def settle_batch(
    futures: list[Future[dict[str, Any]]],
    results: Any,
    error: int,
    carriers: list[int] | None = None,
) -> None:
    """Hands each entry of a batch its result once the batch is applied on this
    node, or every one the reason there is none. With `carriers` (from
    `entries.fold_starts`), future i gets the result of entry `carriers[i]`,
    every entry proposed carrying at least its own. Shared with the
    simulator's proposer."""
    if error != 0:
        failure = Unavailable(_failure_text(error))
        for future in futures:
            future.set_exception(failure)
        return
    if carriers is None:
        carriers = list(range(len(futures)))
    if not isinstance(results, list) or len(results) <= max(carriers, default=-1):
        # This node's state came from a snapshot that already held the
        # batch, or the batch could not be decoded: the outcome of each
        # entry is unknown here, not a rejection.
        unknown = Unavailable(
            "the entry's outcome is not known on this node; retry with the same idempotency key"
        )
        for future in futures:
            future.set_exception(unknown)
        return
    for future, carrier in zip(futures, carriers, strict=True):
        future.set_result(results[carrier])


def _failure_text(error: int) -> str:
    reason = FAIL_REASON_NAMES.get(error, error)
    if error in _OUTCOME_UNKNOWN:
        return (
            f"leadership changed, or this node lost touch with the leader, before the entry"
            f" was committed ({reason}); it may still be applied, so retry with the same"
            " idempotency key"
        )
    return f"entry not committed ({reason}); retry with the same idempotency key"


def fail_overdue(in_flight: dict[int, tuple[Any, list[Future[dict[str, Any]]]]], now: Any) -> None:
    """Drops the batches whose give-up time has passed and fails their futures."""
    for number, (give_up, futures) in list(in_flight.items()):
        if give_up <= now:
            del in_flight[number]
            for future in futures:
                if not future.done():
                    future.set_exception(Unavailable("no answer from the leader"))


class Proposer:
    """One batch in flight on purpose: while it commits, new commands queue
    up and leave together as the next batch (one Raft entry, one SQLite
    transaction on every node). An entry costs every node about a
    millisecond of CPU whatever it holds, so fewer, fuller entries are what
    a busy cluster needs: with two batches in flight, 32 clients submitting
    one task per call made 0.34 entries per task and ran 290 tasks/s; with
    one, 0.21 and 340 tasks/s, and the latency of one task at a time did
    not move (`scripts/bench_core.py`).

    A backlog that fills a batch by itself has nothing to gain from waiting:
    when at least `BACKLOG_ENTRIES` entries are queued, they leave at once as
    a second batch in flight (never a third). A bulk submission's entries,
    or an agent's reports of tens of attempts ending together, used to wait
    for the commit of the batch before them; at the leader the second batch
    often joins other nodes' batches in one entry (`cortex.raft.merging`).
    `bench_core.py --tasks 20000 --mode batch`, five runs each, in pairs:
    1,637 tasks/s (median) before, 1,837 after, 25.5 tasks an entry before,
    28.5 after (letting only a bulk submission's own entries leave that way
    gave 1,675 against 1,714: the agents' bursts count too); 32 clients
    submitting one task per call seldom queue that many and kept their 6.7
    tasks an entry.

    Entries that find no batch in flight and nothing queued or being
    gathered have nothing to wait for and nobody to share an entry with:
    the caller's thread sends them at once (`_submit`), as one batch when
    they fit in one, instead of handing them to the proposer's thread,
    which would wake only to send them alone. They take the batch's place
    in flight all the same, so what comes after them queues behind them as
    before.

    A request's entries (`propose`, or `submit_all` for a request: a client
    call waits for them) that find nothing queued and in flight only what
    the node's own loops sent that way (`submit_all`: an agent's report, a
    scheduling round) leave at once too, as one more batch in flight: at
    one task at a time, a submission arriving at the node whose agent had
    just reported the last task's end waited for that report's commit, a
    third of the time (the proposal's wait p90 3 ms against p50 0.1,
    `scripts/bench_core.py --concurrency 1 --path`). Under load the queue
    is seldom empty and batches stay as full (32 clients: 6.0 tasks per
    entry before, 6.3 after, within the noise of
    `scripts/bench_compare.py`)."""

    def __init__(
        self,
        group: RaftGroup,
        max_batch_tasks: int = MAX_BATCH_TASKS,
        max_batch_bytes: int = 4 * 1024 * 1024,
        max_in_flight: int = 1,
        commit_timeout_s: float = DEFAULT_COMMIT_TIMEOUT_S,
    ) -> None:
        self._group = group
        self.commit_timeout_s = commit_timeout_s
        self._deadlines = _Deadlines()
        self._queue: queue.Queue[_Pending | None] = queue.Queue(maxsize=50_000)
        self._max_tasks = max_batch_tasks
        self._max_bytes = max_batch_bytes
        self._max_in_flight = max_in_flight
        # batch number -> (give-up time, futures); a batch whose callback never
        # comes (its leader died after taking it) is dropped at its deadline.
        self._in_flight: dict[int, tuple[float, list[Future[dict[str, Any]]]]] = {}
        self._in_flight_changed = threading.Condition()
        self._batch_number = 0
        # The batches in flight that a loop sent from its own thread
        # (`submit_all`), which a request's entries need not wait behind.
        self._loop_batches: set[int] = set()
        # Set (under `_in_flight_changed`) while the proposer's thread holds
        # entries it took from the queue and has not sent yet.
        self._gathering = False
        self.in_flight_timeout = 10.0
        self._thread = threading.Thread(target=self._run, name="proposer", daemon=True)
        self._stopped = False
        self._thread.start()

    def check_writable(self) -> None:
        check_writable(self._group)

    def has_next_batch(self) -> bool:
        """Whether entries wait here to leave as this node's next batch:
        queued, or being gathered by the proposer's thread (which may be
        waiting for the batch in flight to be applied). Read without the
        lock, by the Raft thread (`cortex.raft.merging`)."""
        return self._gathering or not self._queue.empty()

    def submit(self, entry: Entry) -> Future[dict[str, Any]]:
        return self._submit([entry])[0]

    def _submit(self, entries: list[Entry], request: bool = False) -> list[Future[dict[str, Any]]]:
        """A future of each entry's result; the entries are sent at once
        when nothing is in flight or waiting, or only a loop's batch for a
        `request`'s (class docstring), else queued."""
        futures: list[Future[dict[str, Any]]] = [Future() for _ in entries]
        if self._stopped:
            for future in futures:
                future.set_exception(Unavailable("node is shutting down"))
            return futures
        batch = list(zip(entries, futures, strict=True))
        number = self._claim_idle(request) if self._may_send_now(entries, request) else None
        if number is not None:
            self._send(batch, number)
            return futures
        for item in batch:
            try:
                self._queue.put(item, timeout=5)
            except queue.Full:
                item[1].set_exception(Unavailable("too many proposals queued on this node; retry"))
        return futures

    def _may_send_now(self, entries: list[Entry], request: bool) -> bool:
        """Whether the proposer looks idle (read without the lock;
        `_claim_idle` makes sure) and `entries` fit in one batch. A lone
        entry always does, as it does for the proposer's thread; the size
        of several is only worked out when they could leave now."""
        if self._gathering or not self._queue.empty():
            return False
        if self._in_flight and not (request and self._only_loop_batches()):
            return False
        return len(entries) == 1 or (
            sum(entry_tasks(entry) for entry in entries) <= self._max_tasks
            and sum(len(str(entry.payload)) for entry in entries) <= self._max_bytes
        )

    def _only_loop_batches(self) -> bool:
        """Whether every batch in flight is one a loop sent from its thread,
        and no more of them than `max_in_flight` (so one request's batch at
        most goes beside them)."""
        in_flight = list(self._in_flight)
        return len(in_flight) <= self._max_in_flight and all(
            number in self._loop_batches for number in in_flight
        )

    def _claim_idle(self, request: bool) -> int | None:
        """The number of a batch to send now, when no batch is in flight (or,
        for a `request`, only loops' batches) and nothing is queued or being
        gathered by the proposer's thread; None otherwise."""
        with self._in_flight_changed:
            if self._gathering or not self._queue.empty():
                return None
            if len(self._in_flight) >= self._max_in_flight and not (
                request and self._only_loop_batches()
            ):
                return None
            number = self._claim()
            if not request:
                self._loop_batches.add(number)
            return number

    def _claim(self) -> int:
        """A place in flight for the next batch (under `_in_flight_changed`);
        its futures are filled in by `_send`."""
        self._batch_number += 1
        number = self._batch_number
        self._in_flight[number] = (time.monotonic() + self.in_flight_timeout, [])
        # Batches given up on (`fail_overdue`) leave the set here.
        self._loop_batches.intersection_update(self._in_flight)
        return number

    def submit_all(
        self, entries: list[Entry], request: bool = False
    ) -> Future[list[dict[str, Any]]]:
        """One future of every entry's result, in order, once each is applied
        on this node. Fails with Unavailable at once when this node cannot
        write, and after `commit_timeout_s` when not all are committed (they
        may still be applied), as `propose` does. A `request`'s entries are
        a client call's, as `propose`'s are (class docstring)."""
        try:
            self.check_writable()
        except Unavailable as err:
            failed: Future[list[dict[str, Any]]] = Future()
            failed.set_exception(err)
            return failed
        combined = gather(self._submit(entries, request))
        if not combined.done():
            self._deadlines.add(combined, self.commit_timeout_s)
        return combined

    def propose(self, entries: list[Entry], timeout: float = 10.0) -> list[dict[str, Any]]:
        """Proposes entries and waits until each is applied on this node."""
        self.check_writable()
        futures = self._submit(entries, request=True)
        deadline = time.monotonic() + timeout
        results = []
        for future in futures:
            try:
                results.append(future.result(timeout=max(deadline - time.monotonic(), 0.001)))
            except FutureTimeout:
                raise _not_committed(timeout) from None
        return results

    def propose_one(self, entry: Entry, timeout: float = 10.0) -> dict[str, Any]:
        return self.propose([entry], timeout)[0]

    def stop(self) -> None:
        self._stopped = True
        self._queue.put(None)
        self._deadlines.stop()

    def _run(self) -> None:
        while self._send_next():
            pass

    def _send_next(self) -> bool:
        """Waits for the next batch and sends it; False once stopped. Its own
        frame, so nothing of a batch is held while waiting for the next."""
        item = self._queue.get()
        if item is None:
            return False
        # Room first, then the batch: what queues while the batches in
        # flight commit leaves with this one, instead of after it.
        number = self._wait_for_room()
        batch = [item]
        size = len(str(item[0].payload))
        tasks = entry_tasks(item[0])
        while tasks < self._max_tasks and size < self._max_bytes:
            try:
                more = self._queue.get_nowait()
            except queue.Empty:
                break
            if more is None:
                self._queue.put(None)
                break
            batch.append(more)
            size += len(str(more[0].payload))
            tasks += entry_tasks(more[0])
        try:
            self._send(batch, number)
        finally:
            with self._in_flight_changed:
                self._gathering = False
        return True

    def _wait_for_room(self) -> int:
        """Waits for room in flight and claims it for the batch this thread
        is gathering."""
        with self._in_flight_changed:
            self._gathering = True
            while len(self._in_flight) >= self._max_in_flight + self._backlog_room():
                fail_overdue(self._in_flight, time.monotonic())
                self._in_flight_changed.wait(0.1)
            return self._claim()

    def _backlog_room(self) -> int:
        """One more batch in flight when the queue (with the entry this
        thread took from it) fills a batch by itself, else none. A backlog
        that grows to that while waiting is seen within the wait's 0.1 s."""
        backlog = self._queue.qsize() + 1
        return 1 if backlog >= min(BACKLOG_ENTRIES, self._max_tasks) else 0

    def _finish(self, number: int) -> bool:
        with self._in_flight_changed:
            known = self._in_flight.pop(number, None) is not None
            self._loop_batches.discard(number)
            self._in_flight_changed.notify_all()
            return known

    def _send(self, batch: list[_Pending], number: int) -> None:
        """Proposes `batch` as the batch `number` claimed (`_claim`)."""
        futures = [future for _, future in batch]
        with self._in_flight_changed:
            claimed = self._in_flight.get(number)
            if claimed is not None:
                self._in_flight[number] = (claimed[0], futures)
        if claimed is None:
            # Given up on (`fail_overdue`) before it was even sent.
            for future in futures:
                _fail(future, Unavailable("no answer from the leader"))
            return

        entries, carriers = fold_starts([entry for entry, _ in batch])

        def on_applied(results: Any, error: int) -> None:
            if self._finish(number):
                settle_batch(futures, results, error, carriers)

        try:
            self._group.propose_batch(encode_batch(entries), on_applied)
        except Exception as err:
            self._finish(number)
            for future in futures:
                future.set_exception(Unavailable(f"could not propose: {err}"))
