"""`cortex.raft.merging.MergingQueue`: what the leader's Raft thread takes
from pysyncobj's command queue. Its Raft group here is a stand-in that
records what the queue asks of it; the real group, with real nodes, is in
tests/integration/test_merged_entries.py and the simulator."""

from __future__ import annotations

import queue
from collections.abc import Sequence
from typing import Any

import pysyncobj.pickle
from pysyncobj.fast_queue import FastQueue

from cortex.raft.merging import (
    MAX_HOLD_S,
    MAX_MERGED_BATCHES,
    MAX_MERGED_BYTES,
    MAX_MERGED_TASKS,
    REGULAR_COMMAND,
    MergingQueue,
    batch_call,
    batch_tasks,
    part_of,
)
from cortex.state import entries as e

BATCH_METHOD = 0
OTHER_METHOD = 7


def command(batch: bytes, method: int = BATCH_METHOD) -> bytes:
    return REGULAR_COMMAND + pysyncobj.pickle.dumps((method, (batch,)))


class StandInGroup:
    def __init__(self, leader: bool = True) -> None:
        self.leader = leader
        self.announced: list[tuple[Any, int]] = []

    def merges_now(self) -> bool:
        return self.leader

    def batch_of(self, queued: bytes) -> bytes | None:
        call = batch_call(queued)
        return call[1] if call is not None and call[0] == BATCH_METHOD else None

    def merged(self, batches: Sequence[bytes]) -> bytes:
        return b"merged:" + b"|".join(batches)

    def announce_part(self, requester: tuple[Any, Any], part: int) -> None:
        self.announced.append((requester, part))


def queue_of(group: StandInGroup, *items: tuple[bytes, Any]) -> MergingQueue:
    merging = MergingQueue(FastQueue(0), group)
    for item in items:
        merging.put_nowait(item)
    return merging


def drain(merging: MergingQueue) -> list[tuple[bytes, Any]]:
    out = []
    while True:
        try:
            out.append(merging.get_nowait())
        except queue.Empty:
            return out


def test_waiting_batches_leave_as_one_command_and_each_callback_gets_its_part() -> None:
    group = StandInGroup()
    got: dict[str, Any] = {}
    merging = queue_of(
        group,
        (command(b"[a]"), lambda result, error: got.update(first=(result, error))),
        (command(b"[b]"), ("node-2", 41)),
        (command(b"[c]"), None),
        (command(b"[d]"), lambda result, error: got.update(fourth=(result, error))),
    )
    ((merged, callback),) = drain(merging)
    assert merged == b"merged:[a]|[b]|[c]|[d]"
    # The follower that forwarded the second batch is told its part.
    assert group.announced == [(("node-2", 41), 1)]
    callback([["ra"], ["rb"], ["rc"], ["rd"]], 0)
    assert got == {"first": (["ra"], 0), "fourth": (["rd"], 0)}
    assert (merging.merged_batches, merging.merged_entries) == (4, 1)


def test_a_failed_entry_fails_every_batch_in_it() -> None:
    group = StandInGroup()
    got: list[tuple[Any, int]] = []
    merging = queue_of(
        group,
        (command(b"[a]"), lambda result, error: got.append((result, error))),
        (command(b"[b]"), lambda result, error: got.append((result, error))),
    )
    ((_, callback),) = drain(merging)
    callback(None, 3)
    assert got == [(None, 3), (None, 3)]


def test_order_is_kept_around_commands_that_are_not_batches() -> None:
    group = StandInGroup()
    other = command(b"[x]", OTHER_METHOD)
    merging = queue_of(
        group,
        (command(b"[a]"), None),
        (command(b"[b]"), None),
        (other, None),
        (command(b"[c]"), None),
        (command(b"[d]"), None),
    )
    assert [queued for queued, _ in drain(merging)] == [
        b"merged:[a]|[b]",
        other,
        b"merged:[c]|[d]",
    ]


def test_a_lone_batch_and_a_follower_pass_through_unchanged() -> None:
    lone = command(b"[a]")
    assert drain(queue_of(StandInGroup(), (lone, None))) == [(lone, None)]
    follower = StandInGroup(leader=False)
    items = [(command(b"[a]"), None), (command(b"[b]"), ("node-3", 1))]
    assert drain(queue_of(follower, *items)) == items
    assert follower.announced == []


def test_an_entry_stops_at_its_count_and_the_rest_follows() -> None:
    batches = [f"[{n}]".encode() for n in range(MAX_MERGED_BATCHES + 3)]
    merging = queue_of(StandInGroup(), *[(command(batch), None) for batch in batches])
    assert [queued for queued, _ in drain(merging)] == [
        b"merged:" + b"|".join(batches[:MAX_MERGED_BATCHES]),
        b"merged:" + b"|".join(batches[MAX_MERGED_BATCHES:]),
    ]


def test_an_entry_stops_at_its_size_and_the_rest_follows() -> None:
    batches = [b"[" + bytes([97 + n]) * (MAX_MERGED_BYTES // 2 - 10) + b"]" for n in range(3)]
    merging = queue_of(StandInGroup(), *[(command(batch), None) for batch in batches])
    assert [queued for queued, _ in drain(merging)] == [
        b"merged:" + b"|".join(batches[:2]),
        command(batches[2]),
    ]


def test_an_entry_stops_at_the_tasks_it_writes_and_the_rest_follows() -> None:
    """Batches of real entries: a bulk submission's, one placing them, and
    reports. An entry takes no batch that would bring it past
    `MAX_MERGED_TASKS`, whatever its bytes and batches."""
    third = MAX_MERGED_TASKS // 3 + 1
    submits = e.encode_batch(
        [e.Entry.create(e.TaskSubmit(f"t-{n}", {"type": "noop"}), "n1") for n in range(third)]
    )
    placements = [{"task_id": f"t-{n}", "node": "n2", "attempt": 1} for n in range(third)]
    placed = e.encode_batch([e.Entry.create(e.TaskAssign(placements), "n1")])
    reports = e.encode_batch(
        [e.Entry.create(e.TaskStarted(f"t-{n}", 1, "n2"), "n2") for n in range(third)]
    )
    assert [batch_tasks(batch) for batch in (submits, placed, reports)] == [third] * 3
    merging = queue_of(StandInGroup(), *[(command(b), None) for b in (submits, placed, reports)])
    assert [queued for queued, _ in drain(merging)] == [
        b"merged:" + submits + b"|" + placed,
        command(reports),
    ]
    # A key of that name inside a string is escaped, and does not count.
    quoted = e.encode_batch(
        [e.Entry.create(e.TaskSubmit("t-1", {"type": "noop", "args": ['"task_id":']}), "n1")]
    )
    assert batch_tasks(quoted) == 1
    # A purge writes the tasks it may remove, and stays out of a full entry.
    purge = e.encode_batch([e.Entry.create(e.TasksPurge(before_ms=1, limit=third), "n1")])
    assert batch_tasks(purge) == third
    merging = queue_of(StandInGroup(), *[(command(b), None) for b in (submits, placed, purge)])
    assert [queued for queued, _ in drain(merging)] == [
        b"merged:" + submits + b"|" + placed,
        command(purge),
    ]


def test_a_part_this_node_has_no_results_for_is_unknown() -> None:
    assert part_of([["a"], ["b"]], 1) == ["b"]
    assert part_of([["a"]], 3) is None
    assert part_of(None, 0) is None


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def holding_queue(group: StandInGroup, clock: Clock, coming: list[bool]) -> MergingQueue:
    """A leader's queue whose proposer has a batch coming while `coming[0]`."""
    merging = MergingQueue(FastQueue(0), group, clock)
    merging.batch_coming = lambda: coming[0]
    return merging


def own(results: list[Any]) -> Any:
    return lambda result, error: results.append((result, error))


def test_forwarded_batches_wait_for_the_leaders_next_batch_and_leave_with_it() -> None:
    group, clock, coming = StandInGroup(), Clock(), [True]
    merging = holding_queue(group, clock, coming)
    merging.put_nowait((command(b"[f1]"), ("node-2", 1)))
    merging.put_nowait((command(b"[f2]"), ("node-3", 5)))
    assert drain(merging) == []
    clock.now += MAX_HOLD_S / 2
    assert drain(merging) == []
    got: list[Any] = []
    merging.put_nowait((command(b"[own]"), own(got)))
    ((merged, callback),) = drain(merging)
    # In the order they came, the followers told their parts.
    assert merged == b"merged:[f1]|[f2]|[own]"
    assert group.announced == [(("node-2", 1), 0), (("node-3", 5), 1)]
    callback([["r1"], ["r2"], ["mine"]], 0)
    assert got == [(["mine"], 0)]
    assert (merging.holds, merging.holds_given_up) == (1, 0)


def test_commands_leave_at_once_when_no_batch_of_the_leader_is_coming() -> None:
    group, clock, coming = StandInGroup(), Clock(), [False]
    merging = holding_queue(group, clock, coming)
    forwarded = (command(b"[f]"), ("node-2", 1))
    merging.put_nowait(forwarded)
    assert drain(merging) == [forwarded]
    assert merging.holds == 0
    # Nor when the leader's batch is already here, whatever else is coming.
    coming[0] = True
    merging.put_nowait(forwarded)
    merging.put_nowait((command(b"[own]"), own([])))
    ((merged, _),) = drain(merging)
    assert merged == b"merged:[f]|[own]"
    assert merging.holds == 0


def test_a_follower_holds_nothing() -> None:
    clock, coming = Clock(), [True]
    merging = holding_queue(StandInGroup(leader=False), clock, coming)
    items = [(command(b"[a]"), ("node-3", 1)), (command(b"[b]"), None)]
    for item in items:
        merging.put_nowait(item)
    assert drain(merging) == items
    assert merging.holds == 0


def test_a_batch_that_does_not_come_is_waited_for_at_most_max_hold() -> None:
    group, clock, coming = StandInGroup(), Clock(), [True]
    merging = holding_queue(group, clock, coming)
    merging.put_nowait((command(b"[a]"), ("node-2", 1)))
    assert drain(merging) == []
    clock.now += MAX_HOLD_S * 0.99
    assert drain(merging) == []
    merging.put_nowait((command(b"[b]"), ("node-3", 1)))
    clock.now += MAX_HOLD_S * 0.02
    ((merged, _),) = drain(merging)
    assert merged == b"merged:[a]|[b]"
    assert (merging.holds, merging.holds_given_up) == (1, 1)
    # Once all have left, the next to come waits afresh, and a leadership
    # lost meanwhile lets it go at once.
    merging.put_nowait((command(b"[c]"), ("node-2", 2)))
    assert drain(merging) == []
    assert merging.holds == 2
    group.leader = False
    assert [queued for queued, _ in drain(merging)] == [command(b"[c]")]


def test_order_is_kept_when_a_held_entry_fills_up() -> None:
    group, clock, coming = StandInGroup(), Clock(), [True]
    merging = holding_queue(group, clock, coming)
    other = command(b"[x]", OTHER_METHOD)
    batches = [f"[{n}]".encode() for n in range(MAX_MERGED_BATCHES + 1)]
    for batch in batches[:-1]:
        merging.put_nowait((command(batch), ("node-2", 1)))
    merging.put_nowait((other, None))
    assert drain(merging) == []
    merging.put_nowait((command(batches[-1]), own([])))
    assert [queued for queued, _ in drain(merging)] == [
        b"merged:" + b"|".join(batches[:MAX_MERGED_BATCHES]),
        other,
        command(batches[-1]),
    ]
