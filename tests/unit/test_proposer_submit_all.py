"""`Proposer.submit_all`, what the node's loops yield: one future for all
their entries, with every result in order once applied; failed at once when
the node cannot write, and with Unavailable when the entries are not
committed in time, as `propose` is. The Raft group here is a stand-in that
answers (or not) as the test says; the real one is in the cluster tests."""

from __future__ import annotations

import gc
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any

import pytest

from cortex.errors import Unavailable
from cortex.raft.proposer import BACKLOG_ENTRIES, Proposer, _Deadlines
from cortex.raft.proposer import entry_tasks as proposer_tasks
from cortex.state import entries as e
from tests.cluster import wait_until

Callback = Callable[[Any, int], None]


class StandInGroup:
    def __init__(self, answers: bool = True) -> None:
        self.leader_address: str | None = "127.0.0.1:1"
        self.hasQuorum = True
        self.answers = answers
        self.batches: list[list[str]] = []
        self._lock = threading.Lock()

    def propose_batch(self, data: bytes, callback: Callback) -> None:
        decoded = e.decode_batch(data)
        ids = [entry.id for entry in decoded if isinstance(entry, e.Entry)]
        with self._lock:
            self.batches.append(ids)
        if self.answers:
            callback([{"ok": True, "id": entry_id} for entry_id in ids], 0)


def entries(count: int) -> list[e.Entry]:
    return [e.Entry.create(e.TaskCancel(f"t-{n}", "test"), "n1") for n in range(count)]


@pytest.fixture
def group() -> StandInGroup:
    return StandInGroup()


@pytest.fixture
def proposer(group: StandInGroup) -> Iterator[Proposer]:
    proposer = Proposer(group, commit_timeout_s=0.3)  # type: ignore[arg-type]
    yield proposer
    proposer.stop()


def test_every_result_arrives_in_order(proposer: Proposer) -> None:
    proposed = entries(5)
    results = proposer.submit_all(proposed).result(10)
    assert [r["id"] for r in results] == [entry.id for entry in proposed]


def test_a_node_that_cannot_write_fails_the_future_at_once(
    proposer: Proposer, group: StandInGroup
) -> None:
    group.leader_address = None
    failed = proposer.submit_all(entries(2))
    assert failed.done()
    with pytest.raises(Unavailable, match="no Raft leader is known"):
        failed.result(0)
    group.leader_address, group.hasQuorum = "127.0.0.1:1", False
    with pytest.raises(Unavailable, match="cannot reach a quorum"):
        proposer.submit_all(entries(1)).result(0)
    assert group.batches == []


def test_entries_not_committed_in_time_fail_with_unavailable(
    proposer: Proposer, group: StandInGroup
) -> None:
    group.answers = False
    future = proposer.submit_all(entries(3))
    error = future.exception(timeout=10)
    assert isinstance(error, Unavailable)
    assert "not committed within" in str(error) and "idempotency key" in str(error)
    # They were proposed all the same: they may still be applied.
    wait_until(lambda: sum(len(b) for b in group.batches) == 3, 10, what="the proposal")


def test_a_rejected_batch_fails_the_future() -> None:
    class RefusingGroup(StandInGroup):
        def propose_batch(self, data: bytes, callback: Callback) -> None:
            callback(None, 1)

    proposer = Proposer(RefusingGroup(), commit_timeout_s=30)  # type: ignore[arg-type]
    try:
        with pytest.raises(Unavailable, match="entry not committed"):
            proposer.submit_all(entries(2)).result(10)
    finally:
        proposer.stop()


def test_a_stopped_proposer_takes_nothing(proposer: Proposer) -> None:
    proposer.stop()
    with pytest.raises(Unavailable, match="shutting down"):
        proposer.submit_all(entries(1)).result(10)


def test_stopping_fails_what_is_still_waiting(group: StandInGroup) -> None:
    group.answers = False
    proposer = Proposer(group, commit_timeout_s=60)  # type: ignore[arg-type]
    future = proposer.submit_all(entries(2))
    proposer.stop()
    with pytest.raises(Unavailable, match="shutting down"):
        future.result(10)


class HeldGroup(StandInGroup):
    """Answers nothing until `release`: what is proposed meanwhile queues."""

    def __init__(self) -> None:
        super().__init__(answers=False)
        self.held: list[tuple[list[str], Callback]] = []

    def propose_batch(self, data: bytes, callback: Callback) -> None:
        super().propose_batch(data, callback)
        self.held.append((self.batches[-1], callback))

    def release(self) -> None:
        ids, callback = self.held.pop(0)
        callback([{"ok": True, "id": entry_id} for entry_id in ids], 0)


def test_a_start_and_its_outcome_proposed_together_leave_as_one_entry() -> None:
    """Queued behind a batch in flight, a start, its outcome and another entry
    leave as one batch of two entries; both reporters get the outcome's
    result, the other entry its own."""
    group = HeldGroup()
    proposer = Proposer(group, max_in_flight=1, commit_timeout_s=10)  # type: ignore[arg-type]
    try:
        blocker = proposer.submit_all(entries(1))
        wait_until(lambda: len(group.batches) == 1, 5, what="the first batch in flight")
        started = e.Entry.create(e.TaskStarted("t-1", 1, "n1"), "n1", ts=1_000)
        other = e.Entry.create(e.TaskCancel("t-2", "test"), "n2")
        done = e.Entry.create(e.TaskComplete("t-1", 1, "n1", {"exit_code": 0}), "n1", ts=1_005)
        together = proposer.submit_all([started, done, other])
        group.release()
        blocker.result(5)
        wait_until(lambda: len(group.batches) == 2, 5, what="the second batch")
        group.release()
        results = together.result(5)
    finally:
        proposer.stop()
    assert group.batches[1] == [done.id, other.id]
    assert [result["id"] for result in results] == [done.id, done.id, other.id]


def test_a_settled_proposal_is_let_go_of_before_its_deadline() -> None:
    """The deadline does not keep an applied batch (and its results) in
    memory until the commit timeout."""
    group = HeldGroup()
    proposer = Proposer(group, commit_timeout_s=600)  # type: ignore[arg-type]
    try:
        combined = proposer.submit_all(entries(3))
        wait_until(lambda: group.held, 5, 0.01, "the batch proposed")
        assert not combined.done()  # so it waits under a deadline
        group.release()
        assert [r["ok"] for r in combined.result(5)] == [True, True, True]
        freed = weakref.ref(combined)
        gc.disable()
        try:
            del combined
            # The proposer's thread may not have left the batch's frame yet.
            wait_until(lambda: freed() is None, 5, 0.01, "the settled proposal freed")
        finally:
            gc.enable()
    finally:
        proposer.stop()


def test_a_deadline_passed_by_settled_futures_still_fails_the_pending_one() -> None:
    deadlines = _Deadlines()
    try:
        settled: list[Future[int]] = [Future() for _ in range(3)]
        for future in settled:
            deadlines.add(future, 0.1)
        pending: Future[int] = Future()
        deadlines.add(pending, 0.3)
        for number, future in enumerate(settled):
            future.set_result(number)
        with pytest.raises(Unavailable, match="not committed"):
            pending.result(5)
        assert [future.result(0) for future in settled] == [0, 1, 2]
    finally:
        deadlines.stop()


class ThreadNotingGroup(HeldGroup):
    """`HeldGroup` that notes which thread proposed each batch."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[str] = []

    def propose_batch(self, data: bytes, callback: Callback) -> None:
        self.threads.append(threading.current_thread().name)
        super().propose_batch(data, callback)


def test_entries_that_find_the_proposer_idle_leave_from_the_callers_thread() -> None:
    """Nothing in flight or queued: the caller sends them itself, as one
    batch, before `submit_all` returns (no hand-off to the proposer's thread)."""
    group = ThreadNotingGroup()
    proposer = Proposer(group, commit_timeout_s=10)  # type: ignore[arg-type]
    try:
        proposed = entries(2)
        combined = proposer.submit_all(proposed)
        assert group.batches == [[entry.id for entry in proposed]]
        assert group.threads == [threading.current_thread().name]
        group.release()
        assert [r["id"] for r in combined.result(5)] == [entry.id for entry in proposed]
        # Idle again once applied: the next one leaves at once too.
        single = entries(1)[0]
        future = proposer.submit(single)
        assert group.batches[-1] == [single.id] and len(group.threads) == 2
        group.release()
        assert future.result(5)["id"] == single.id
    finally:
        proposer.stop()


def test_entries_behind_a_batch_in_flight_wait_and_leave_together() -> None:
    """One batch in flight at a time still: what arrives meanwhile, from
    any thread, waits for it and then leaves as one batch, from the
    proposer's thread, in the order it came."""
    group = ThreadNotingGroup()
    proposer = Proposer(group, commit_timeout_s=10)  # type: ignore[arg-type]
    try:
        first = proposer.submit_all(entries(1))
        waiting = entries(3)
        futures = [proposer.submit(entry) for entry in waiting]
        other_thread = threading.Thread(target=lambda: futures.append(proposer.submit(extra)))
        extra = entries(1)[0]
        other_thread.start()
        other_thread.join(5)
        assert len(group.batches) == 1, "nothing more leaves while a batch is in flight"
        group.release()
        first.result(5)
        wait_until(lambda: len(group.batches) == 2, 5, what="the waiting entries' batch")
        assert group.batches[1] == [entry.id for entry in waiting] + [extra.id]
        assert group.threads[1] == "proposer"
        group.release()
        assert [f.result(5)["id"] for f in futures] == [e.id for e in [*waiting, extra]]
    finally:
        proposer.stop()


def test_a_backlog_that_fills_a_batch_leaves_beside_the_batch_in_flight() -> None:
    """`BACKLOG_ENTRIES` entries queued behind a batch in flight leave at
    once, together, as a second batch in flight; what comes after them
    waits for a batch to be applied (never a third in flight)."""
    group = ThreadNotingGroup()
    proposer = Proposer(group, commit_timeout_s=10)  # type: ignore[arg-type]
    try:
        first = proposer.submit_all(entries(1))
        backlog = entries(BACKLOG_ENTRIES)
        futures = [proposer.submit(entry) for entry in backlog]
        wait_until(lambda: len(group.batches) == 2, 5, what="the backlog's batch")
        assert len(group.held) == 2, "the first batch is still in flight"
        assert group.batches[1] == [entry.id for entry in backlog]
        assert group.threads[1] == "proposer"
        later = [proposer.submit(entry) for entry in entries(BACKLOG_ENTRIES)]
        wait_until(lambda: proposer._gathering, 5, what="the next backlog taken to wait")
        # Its thread looks again every 0.1 s: over three looks, nothing leaves.
        deadline = time.monotonic() + 0.3
        while time.monotonic() < deadline:
            assert len(group.batches) == 2, "a third batch left while two were in flight"
        group.release()
        first.result(5)
        wait_until(lambda: len(group.batches) == 3, 5, what="the batch after the backlog")
        group.release()
        group.release()
        assert [f.result(5)["id"] for f in futures] == [entry.id for entry in backlog]
        assert all(f.result(5)["ok"] for f in later)
    finally:
        proposer.stop()


def test_entries_too_many_for_one_batch_are_split_as_before(group: StandInGroup) -> None:
    """Sent at once only when they fit in one batch: more go through the
    queue, and the proposer's thread cuts them into batches."""
    proposer = Proposer(group, max_batch_tasks=2, commit_timeout_s=10)  # type: ignore[arg-type]
    try:
        proposed = entries(5)
        results = proposer.submit_all(proposed).result(5)
    finally:
        proposer.stop()
    assert [r["id"] for r in results] == [entry.id for entry in proposed]
    assert all(len(batch) <= 2 for batch in group.batches)
    assert sum(group.batches, []) == [entry.id for entry in proposed]


def test_batches_are_cut_by_the_tasks_their_entries_write(group: StandInGroup) -> None:
    """An assignment counts the tasks it places, a workflow's part the
    tasks it brings and a purge the tasks it may remove (`entry_tasks`): a
    batch takes no entry once it holds the most tasks, whatever the count of
    its entries, so no entry takes long to apply. Only its last entry may
    take it past the most."""
    proposer = Proposer(group, max_batch_tasks=4, commit_timeout_s=10)  # type: ignore[arg-type]

    def assign(count: int, name: str) -> e.Entry:
        placed = [{"task_id": f"{name}-{n}", "node": "n1", "attempt": 1} for n in range(count)]
        return e.Entry.create(e.TaskAssign(placed), "n1")

    part = e.Entry.create(
        e.WorkflowTasks("w-1", 1, [{"key": f"k{n}", "task_id": f"w-{n}"} for n in range(3)]), "n1"
    )
    purge = e.Entry.create(e.TasksPurge(before_ms=1, limit=3), "n1")
    proposed = [
        assign(3, "a"), *entries(3), assign(2, "b"), part, purge, *entries(2), assign(5, "c"),
    ]  # fmt: skip
    tasks = {entry.id: proposer_tasks(entry) for entry in proposed}
    try:
        results = proposer.submit_all(proposed).result(5)
    finally:
        proposer.stop()
    assert [r["id"] for r in results] == [entry.id for entry in proposed]
    assert sum(group.batches, []) == [entry.id for entry in proposed]
    assert [tasks[entry.id] for entry in proposed] == [3, 1, 1, 1, 2, 3, 3, 1, 1, 5]
    for batch in group.batches:
        assert sum(tasks[entry_id] for entry_id in batch[:-1]) < 4, group.batches


def _propose_in_thread(proposer: Proposer, entry: e.Entry, name: str) -> list[Any]:
    """Starts `propose` (a request's way in, which blocks) on a thread named
    `name`; the list gets its result."""
    results: list[Any] = []
    thread = threading.Thread(
        target=lambda: results.append(proposer.propose([entry], timeout=10)[0]), name=name
    )
    thread.start()
    return results


def test_a_requests_entry_leaves_beside_a_loops_batch_in_flight() -> None:
    """A loop's batch in flight (an agent's report) does not hold back a
    request's entry that finds nothing queued: it leaves at once from the
    request's thread, before the loop's batch is applied."""
    group = ThreadNotingGroup()
    proposer = Proposer(group, commit_timeout_s=10)  # type: ignore[arg-type]
    try:
        report = proposer.submit_all(entries(1))
        request = entries(1)[0]
        results = _propose_in_thread(proposer, request, "request")
        wait_until(lambda: len(group.batches) == 2, 5, what="the request's batch")
        assert len(group.held) == 2, "the loop's batch is still in flight"
        assert group.batches[1] == [request.id] and group.threads[1] == "request"
        group.release()
        group.release()
        wait_until(lambda: results, 5, what="the request's result")
        assert results[0]["id"] == request.id and report.result(5)[0]["ok"]
        # Two in flight: what comes next waits for both, as one batch.
        later = entries(2)
        futures = [proposer.submit(entry) for entry in later]
        assert group.batches[2] == [later[0].id]
        group.release()
        wait_until(lambda: len(group.batches) == 4, 5, what="the next batch")
        assert group.batches[3] == [later[1].id] and group.threads[3] == "proposer"
        group.release()
        assert [f.result(5)["id"] for f in futures] == [entry.id for entry in later]
    finally:
        proposer.stop()


def test_a_requests_entry_waits_behind_a_requests_batch_in_flight() -> None:
    """Behind another request's batch, a request's entry queues as before
    and leaves from the proposer's thread once that batch is applied; a
    loop's entry waits behind a request's batch the same way."""
    group = ThreadNotingGroup()
    proposer = Proposer(group, commit_timeout_s=10)  # type: ignore[arg-type]
    try:
        first, second = entries(2)
        first_results = _propose_in_thread(proposer, first, "first")
        wait_until(lambda: len(group.batches) == 1, 5, what="the first request's batch")
        second_results = _propose_in_thread(proposer, second, "second")
        wait_until(lambda: proposer._gathering, 5, what="the second request taken to wait")
        reported = entries(1)
        report = proposer.submit_all(reported)
        assert len(group.batches) == 1, "nothing more leaves while a request's batch is in flight"
        group.release()
        wait_until(lambda: len(group.batches) == 2, 5, what="the waiting entries' batch")
        assert group.threads[1] == "proposer"
        assert group.batches[1] == [second.id, reported[0].id], "they leave together, in order"
        group.release()
        wait_until(lambda: first_results and second_results, 5, what="both results")
        assert [first_results[0]["id"], second_results[0]["id"]] == [first.id, second.id]
        assert report.result(5)[0]["ok"]
    finally:
        proposer.stop()


def test_a_requests_batch_through_submit_all_leaves_beside_a_loops_batch() -> None:
    """A client's batch (SubmitTasks: `submit_all` for a request) leaves
    beside a loop's batch in flight as `propose`'s entries do; a loop's
    second batch still waits."""
    group = ThreadNotingGroup()
    proposer = Proposer(group, commit_timeout_s=10)  # type: ignore[arg-type]
    try:
        report = proposer.submit_all(entries(1))
        submitted = entries(3)
        batch = proposer.submit_all(submitted, request=True)
        assert group.batches[1] == [entry.id for entry in submitted]
        another_report = proposer.submit_all(entries(1))
        assert len(group.batches) == 2, "a loop's batch waits behind both"
        group.release()
        group.release()
        assert [r["id"] for r in batch.result(5)] == [entry.id for entry in submitted]
        assert report.result(5)[0]["ok"]
        wait_until(lambda: len(group.batches) == 3, 5, what="the waiting report's batch")
        group.release()
        assert another_report.result(5)[0]["ok"]
    finally:
        proposer.stop()
