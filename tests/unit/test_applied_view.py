"""The nodes and their active tasks as the last applied batch left them
(`cortex.scheduler.applied_view`), read by the applying thread on a real
state machine: on the leader the view matches what the database holds after
every batch, it is read before any other listener runs (so a placement
released by the scheduler's listener is already counted), a follower keeps
none, and placement works from it."""

from __future__ import annotations

import sqlite3

import pytest

from cortex.membership.board import ResourceBoard
from cortex.raft.leader_loop import LeaderContext
from cortex.scheduler.applied_view import AppliedView
from cortex.scheduler.loop import SchedulerLoop
from cortex.spec import parse_task_spec
from cortex.state import entries as e
from cortex.state.transitions import TaskChange
from tests.steps_by_hand import FakeClock, HeldProposer
from tests.workflow_sim import WorkflowLog


def noop() -> dict[str, object]:
    return parse_task_spec({"type": "noop"}).model_dump(mode="json")


def assert_matches_database(view: AppliedView, log: WorkflowLog) -> None:
    seen = view.seen()
    assert seen is not None
    assert seen.index == log.index
    assert seen.nodes == log.reader.nodes()
    assert seen.active == log.reader.active_counts_by_node()


def test_the_leaders_view_matches_the_database_after_every_batch(log: WorkflowLog) -> None:
    view = AppliedView(log.machine, lambda: True)
    assert view.seen() is None  # nothing applied since it was made
    log.one(e.TaskSubmit("t1", noop()))
    assert_matches_database(view, log)
    log.one(e.TaskSubmit("t2", noop()))
    log.one(e.TaskAssign([{"task_id": "t1", "node": "n2", "attempt": 1},
                          {"task_id": "t2", "node": "n2", "attempt": 1}]))  # fmt: skip
    assert_matches_database(view, log)
    seen = view.seen()
    assert seen is not None and seen.active == {"n2": 2}
    log.one(e.TaskStarted("t1", 1, "n2"), node="n2")
    log.one(e.TaskComplete("t1", 1, "n2", {}, started_at=log.ts), node="n2")
    assert_matches_database(view, log)
    seen = view.seen()
    assert seen is not None and seen.active == {"n2": 1}
    # A node's row changing with no task changing.
    log.one(e.NodeJoin("n4", "n4:1", "n4:2", executors=["noop"], labels={"zone": "b"}))
    assert_matches_database(view, log)
    seen = view.seen()
    assert seen is not None and [n.id for n in seen.nodes] == ["n1", "n2", "n3", "n4"]


def test_a_follower_keeps_no_view(log: WorkflowLog) -> None:
    leading = [True]
    view = AppliedView(log.machine, lambda: leading[0])
    log.one(e.TaskSubmit("t1", noop()))
    assert view.seen() is not None
    leading[0] = False
    log.one(e.TaskSubmit("t2", noop()))
    assert view.seen() is None


def test_the_view_is_read_before_every_other_listener(log: WorkflowLog) -> None:
    """Listeners added before it, handing off or reading, still find it
    up to date with the batch they are told of."""
    found: list[tuple[int, int | None]] = []

    def listener(index: int, changes: list[TaskChange]) -> None:
        seen = view.seen()
        found.append((index, seen.index if seen is not None else None))

    log.machine.add_listener(listener)
    log.machine.add_listener(listener, last=True)
    view = AppliedView(log.machine, lambda: True)
    log.one(e.TaskSubmit("t1", noop()))
    assert found == [(log.index, log.index)] * 2


def test_placement_counts_from_the_view(log: WorkflowLog) -> None:
    """One slot per node, placements made with their submissions: the
    fourth finds no room while the first is only assigned, and takes its
    node once it completed, as the view (not the database) tells it. The
    scheduler's listener releases each applied placement after the view
    was read."""
    for node in ("n1", "n2", "n3"):
        log.one(e.NodeJoin(node, f"{node}:1", f"{node}:2", executors=["noop"],
                           resources={"max_tasks": 1}))  # fmt: skip
    clock = FakeClock(wall_s=1_000.0)
    reads: list[str] = []

    class CountingReader(type(log.reader)):  # type: ignore[misc]
        def nodes(self, include_removed: bool = False):  # type: ignore[no-untyped-def]
            reads.append("nodes")
            return super().nodes(include_removed)

        def active_counts_by_node(self) -> dict[str, int]:
            reads.append("active")
            return super().active_counts_by_node()

    reader = CountingReader(log.machine.path)
    view = AppliedView(log.machine, lambda: True)
    loop = SchedulerLoop(
        LeaderContext("n1", lambda: True, HeldProposer(log), reader, clock),
        ResourceBoard(clock),
        reachable=lambda node: True,
        view=view,
    )
    log.machine.add_listener(lambda index, changes: loop.on_change(changes))
    log.one(e.TaskSubmit("t-before", noop()))  # a batch applied while leading
    log.one(e.TaskCancel("t-before"))

    def place(task_id: str) -> bytes | None:
        return loop.at_proposal.place(
            e.encode_batch([e.Entry.create(e.TaskSubmit(task_id, noop()), "n2")])
        )

    placed = [place(f"t{i}") for i in range(3)]
    assert all(p is not None for p in placed)
    assert place("t3") is None
    for data in placed:
        assert data is not None
        log.index += 1
        log.machine.apply_batch(log.index, data)
    assert place("t3") is None  # applied: counted by the view, no longer held
    task = log.reader.get_task("t0")
    assert task is not None and task.node is not None
    log.one(e.TaskComplete("t0", 1, task.node, {}, started_at=log.ts), node=task.node)
    again = place("t3")
    assert again is not None
    (item,) = e.decode_batch(again)[-1].payload["assignments"]  # type: ignore[union-attr]
    assert item["node"] == task.node
    assert reads == []  # every placement read the view


def test_a_read_that_fails_leaves_no_view(
    log: WorkflowLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stale view would count tasks long gone or miss new ones: when the
    read after a batch fails, placement goes back to the database."""
    view = AppliedView(log.machine, lambda: True)
    log.one(e.TaskSubmit("t1", noop()))
    assert view.seen() is not None

    def fail(read: object) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(log.machine, "read_as_applied", fail)
    log.one(e.TaskSubmit("t2", noop()))  # the listener's error is logged, apply goes on
    assert view.seen() is None
