"""Placement with the submission (`cortex.scheduler.at_proposal`) on a real
state machine: a leader taking a batch of standalone submissions into its
log, with nothing queued, appends their assignment to it; the batch then
applies both, and every proposer still finds its entries' results first.
With a task queued, with no room, or for tasks the scheduler must place
itself, the batch is left as it is."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from cortex.membership.board import ResourceBoard
from cortex.raft.leader_loop import LeaderContext
from cortex.scheduler import at_proposal
from cortex.scheduler import loop as loop_module
from cortex.scheduler.loop import SchedulerLoop
from cortex.spec import parse_task_spec
from cortex.state import entries as e
from tests.steps_by_hand import FakeClock, HeldProposer, Stepper
from tests.workflow_sim import WorkflowLog


def scheduler(log: WorkflowLog) -> SchedulerLoop:
    clock = FakeClock(wall_s=1_000.0)
    return SchedulerLoop(
        LeaderContext("n1", lambda: True, HeldProposer(log), log.reader, clock),
        ResourceBoard(clock),
        reachable=lambda node: True,
    )


def one_slot_each(log: WorkflowLog) -> None:
    """Every node takes one task at a time."""
    for node in ("n1", "n2", "n3"):
        log.one(e.NodeJoin(node, f"{node}:1", f"{node}:2", executors=["noop"],
                           resources={"max_tasks": 1}))  # fmt: skip


def spec(**fields: Any) -> dict[str, Any]:
    """A spec as proposers send it: canonical."""
    return parse_task_spec({"type": "noop", **fields}).model_dump(mode="json")


def batch(*payloads: e.Payload) -> bytes:
    return e.encode_batch([e.Entry.create(p, "n2") for p in payloads])


def apply(log: WorkflowLog, data: bytes) -> list[dict[str, Any]]:
    log.index += 1
    results = log.machine.apply_batch(log.index, data)
    assert results is not None
    return results


def test_an_idle_clusters_submissions_carry_their_assignment(log: WorkflowLog) -> None:
    loop = scheduler(log)
    data = batch(e.TaskSubmit("t1", spec()), e.TaskSubmit("t2", spec(priority=9)))
    placed = loop.at_proposal.place(data)
    assert placed is not None and placed.startswith(data[:-1])
    entries = e.decode_batch(placed)
    assert [x.type for x in entries if isinstance(x, e.Entry)] == [
        "TASK_SUBMIT", "TASK_SUBMIT", "TASK_ASSIGN",
    ]  # fmt: skip
    assign = entries[2]
    assert isinstance(assign, e.Entry) and assign.node == "n1"
    items = assign.payload["assignments"]
    assert sorted(i["task_id"] for i in items) == ["t1", "t2"]
    assert {i["attempt"] for i in items} == {1}
    assert len(loop.reservations) == 2

    results = apply(log, placed)
    assert [r["ok"] for r in results] == [True, True, True] and results[2]["placed"] == 2
    for task_id in ("t1", "t2"):
        task = log.reader.get_task(task_id)
        assert task is not None and task.state == "assigned" and task.attempt == 1
    loop.applied(["t1", "t2"])
    assert len(loop.reservations) == 0


def test_a_queued_task_keeps_its_place_ahead_of_new_submissions(log: WorkflowLog) -> None:
    assert log.one(e.TaskSubmit("waiting", spec()))["ok"]
    loop = scheduler(log)
    assert loop.at_proposal.place(batch(e.TaskSubmit("t1", spec()))) is None
    assert len(loop.reservations) == 0


def test_the_queue_found_empty_is_read_again_only_once_a_task_is_left_queued(
    log: WorkflowLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The queue, read empty, is not read for later placements while
    applied entries leave nothing queued (the scheduler's listener counts
    those that do); the first that does has the next placement read it."""
    loop = scheduler(log)
    log.machine.add_listener(lambda index, changes: loop.on_change(changes))
    reads = []
    queued_ids = log.reader.queued_ids
    monkeypatch.setattr(log.reader, "queued_ids", lambda n: reads.append(n) or queued_ids(n))
    for i in range(3):
        placed = loop.at_proposal.place(batch(e.TaskSubmit(f"t{i}", spec())))
        assert placed is not None
        assert [r["ok"] for r in apply(log, placed)] == [True, True]
    assert len(reads) == 1 and loop.queue.known_empty

    assert log.one(e.TaskSubmit("waiting", spec()))["ok"]
    assert not loop.queue.known_empty
    assert loop.at_proposal.place(batch(e.TaskSubmit("t3", spec()))) is None
    assert len(reads) == 2
    # A snapshot replaces the whole state: nothing is known of its queue.
    loop.on_change([])
    assert not loop.queue.known_empty


def test_a_task_the_round_passed_over_keeps_no_submission_behind_it(log: WorkflowLog) -> None:
    """Two slots per node, four queued tasks, one of them needing a GPU no
    node has: the round places three and passes the fourth over, so new
    submissions are placed with their submission (the round placed others
    ahead of it too). A task queued after the round keeps them behind it."""
    for node in ("n1", "n2", "n3"):
        log.one(e.NodeJoin(node, f"{node}:1", f"{node}:2", executors=["noop"],
                           resources={"max_tasks": 2}))  # fmt: skip
    for i in range(3):
        assert log.one(e.TaskSubmit(f"q{i}", spec()))["ok"]
    assert log.one(e.TaskSubmit("gpu", spec(constraints={"requiresGpu": True})))["ok"]
    loop = scheduler(log)
    rounds = Stepper(loop.run_round())
    assert not rounds.done and len(loop.reservations) == 3
    assert loop.reservations.held().passed_over == {"gpu"}
    placed = loop.at_proposal.place(batch(e.TaskSubmit("new", spec())))
    assert placed is not None and len(loop.reservations) == 4

    assert log.one(e.TaskSubmit("late", spec()))["ok"]
    assert loop.at_proposal.place(batch(e.TaskSubmit("newer", spec()))) is None
    # A new leader knows of no round: it places nothing ahead of the queue.
    loop.on_follower()
    assert loop.reservations.held().passed_over == frozenset()


def test_a_task_backing_off_before_its_retry_keeps_no_submission_behind_it(
    log: WorkflowLog,
) -> None:
    one_slot_each(log)
    failing = {"type": "noop", "retryPolicy": {"maxRetries": 2, "backoffMs": 3_600_000}}
    assert log.one(e.TaskSubmit("flaky", failing))["ok"]
    assert log.one(e.TaskAssign([{"task_id": "flaky", "node": "n2", "attempt": 1}]))["placed"]
    assert log.one(e.TaskFailed("flaky", 1, "n2", "exit code 1"), node="n2")["state"] == "queued"
    loop = scheduler(log)
    assert loop.at_proposal.place(batch(e.TaskSubmit("t1", spec()))) is None
    # The round finds nothing it may run yet, and says so.
    rounds = Stepper(loop.run_round())
    assert rounds.done and rounds.result is False
    assert loop.reservations.held().passed_over == {"flaky"}
    assert loop.at_proposal.place(batch(e.TaskSubmit("t1", spec()))) is not None


def test_more_tasks_passed_over_than_a_round_records_keep_submissions_behind(
    log: WorkflowLog,
) -> None:
    one_slot_each(log)
    for i in range(loop_module.PASSED_OVER_MAX + 1):
        assert log.one(e.TaskSubmit(f"gpu{i}", spec(constraints={"requiresGpu": True})))["ok"]
    loop = scheduler(log)
    rounds = Stepper(loop.run_round())
    assert rounds.done and loop.reservations.held().passed_over == frozenset()
    assert loop.at_proposal.place(batch(e.TaskSubmit("t1", spec()))) is None


def test_placements_not_yet_applied_count_against_a_node(log: WorkflowLog) -> None:
    """Every node takes one task: three submissions placed one by one fill
    them; the fourth finds no room until an assignment is applied."""
    one_slot_each(log)
    loop = scheduler(log)
    placed = [loop.at_proposal.place(batch(e.TaskSubmit(f"t{i}", spec()))) for i in range(3)]
    assert all(p is not None for p in placed)
    nodes = set()
    for data in placed:
        assert data is not None
        (item,) = e.decode_batch(data)[-1].payload["assignments"]  # type: ignore[union-attr]
        nodes.add(item["node"])
    assert nodes == {"n1", "n2", "n3"}
    assert loop.at_proposal.place(batch(e.TaskSubmit("t3", spec()))) is None

    # The first applied and completed: its node's slot is free again.
    assert placed[0] is not None
    apply(log, placed[0])
    loop.applied(["t0"])
    task = log.reader.get_task("t0")
    assert task is not None and task.node is not None
    log.one(e.TaskComplete("t0", 1, task.node, {}, started_at=log.ts), node=task.node)
    again = loop.at_proposal.place(batch(e.TaskSubmit("t3", spec())))
    assert again is not None
    (item,) = e.decode_batch(again)[-1].payload["assignments"]  # type: ignore[union-attr]
    assert item["node"] == task.node


def _place_elsewhere(loop: SchedulerLoop) -> tuple[threading.Thread, list[bytes | None]]:
    """Task "t"'s submission placed on another thread (the Raft thread's,
    for a follower's batch), started; the list gets what `place` returned."""
    outcome: list[bytes | None] = []
    thread = threading.Thread(
        target=lambda: outcome.append(loop.at_proposal.place(batch(e.TaskSubmit("t", spec()))))
    )
    thread.start()
    return thread, outcome


def test_a_decision_longer_than_the_wait_is_not_waited_for(log: WorkflowLog) -> None:
    loop = scheduler(log)
    with loop.reservations.lock:
        thread, outcome = _place_elsewhere(loop)
        thread.join(10)
    assert outcome == [None]


class _WatchedLock:
    """The reservations' lock, telling when someone found it held."""

    def __init__(self, lock: Any) -> None:
        self._lock = lock
        self.asked = threading.Event()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if self._lock.acquire(False):
            return True
        self.asked.set()
        return bool(self._lock.acquire(blocking, timeout))

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def test_a_decision_ending_within_the_wait_is_waited_for(
    log: WorkflowLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another batch's placement deciding now (the leader's own, on its
    proposer's thread) does not send this batch to queue."""
    monkeypatch.setattr(at_proposal, "LOCK_WAIT_S", 60.0)
    loop = scheduler(log)
    watched = _WatchedLock(loop.reservations.lock)
    loop.reservations.lock = watched  # type: ignore[assignment]
    with loop.reservations.lock:
        thread, outcome = _place_elsewhere(loop)
        assert watched.asked.wait(10)
    thread.join(10)
    assert len(outcome) == 1 and outcome[0] is not None
    (item,) = e.decode_batch(outcome[0])[-1].payload["assignments"]  # type: ignore[union-attr]
    assert item["task_id"] == "t"


@pytest.mark.parametrize(
    "payload",
    [
        e.TaskSubmit("keyed", spec(concurrencyKey="gpu")),
        e.TaskSubmit("in-a-workflow", spec(), workflow_id="w1", workflow_key="a"),
        e.TaskCancel("t0"),
    ],
    ids=["concurrency-key", "workflow-task", "no-submission"],
)
def test_tasks_the_scheduler_places_itself_are_left_alone(
    log: WorkflowLog, payload: e.Payload
) -> None:
    assert scheduler(log).at_proposal.place(batch(payload)) is None


def test_a_bulk_submission_is_left_to_queue(log: WorkflowLog) -> None:
    count = 0
    payloads: list[e.Payload] = []
    while len(batch(*payloads)) <= at_proposal.MAX_PLACED_BATCH_BYTES:
        payloads.append(e.TaskSubmit(f"bulk-{count}", spec()))
        count += 1
    assert scheduler(log).at_proposal.place(batch(*payloads)) is None
    assert scheduler(log).at_proposal.place(batch(*payloads[:10])) is not None


def test_a_submission_refused_by_apply_refuses_its_placement_too(log: WorkflowLog) -> None:
    """The key's first task is the answer; the new task id never exists, so
    its placement is refused, and nothing else changes."""
    assert log.one(e.TaskSubmit("first", spec(), idempotency_key="k"))["ok"]
    log.one(e.TaskAssign([{"task_id": "first", "node": "n2", "attempt": 1}]))
    loop = scheduler(log)
    placed = loop.at_proposal.place(batch(e.TaskSubmit("second", spec(), idempotency_key="k")))
    assert placed is not None
    submitted, assigned = apply(log, placed)
    assert submitted["task_id"] == "first" and not submitted["created"]
    assert assigned["placed"] == 0 and assigned["rejected"] == 1
    assert log.reader.get_task("second") is None


def test_a_round_counts_placements_made_with_submissions_and_they_count_its_own(
    log: WorkflowLog,
) -> None:
    """One slot per node. Placed with their submissions, not yet applied,
    three tasks fill the cluster: a round finds no room for a queued one.
    Once two are applied and done, the round places it; until its entry is
    applied the task still shows queued, but placed already it waits for
    nobody: a new submission takes the slot left, and the next finds none."""
    one_slot_each(log)
    loop = scheduler(log)
    proposer = loop._proposer
    assert isinstance(proposer, HeldProposer)
    placed = [loop.at_proposal.place(batch(e.TaskSubmit(f"t{i}", spec()))) for i in range(3)]
    assert log.one(e.TaskSubmit("queued", spec()))["ok"]
    rounds = Stepper(loop.run_round())
    assert rounds.done and not proposer.held  # no room: nothing proposed

    for data in placed:
        assert data is not None
        apply(log, data)
    loop.applied(["t0", "t1", "t2"])
    for i in range(2):
        task = log.reader.get_task(f"t{i}")
        assert task is not None and task.node is not None
        log.one(e.TaskComplete(f"t{i}", 1, task.node, {}, started_at=log.ts), node=task.node)
    rounds = Stepper(loop.run_round())
    assert not rounds.done and len(proposer.held) == 1  # the round waits for its entry
    (item,) = proposer.payloads(0)[0].assignments  # type: ignore[attr-defined]
    assert item["task_id"] == "queued"
    assert log.reader.queued_ids(10) == ["queued"]
    assert loop.at_proposal.place(batch(e.TaskSubmit("new-1", spec()))) is not None
    assert loop.at_proposal.place(batch(e.TaskSubmit("new-2", spec()))) is None  # no room
    proposer.apply_next()
    rounds.settle()
    assert rounds.done and len(loop.reservations) == 1  # new-1's, not applied yet
    assert loop.at_proposal.place(batch(e.TaskSubmit("new-2", spec()))) is None


def test_tasks_of_one_shape_in_a_batch_share_their_constraints() -> None:
    """One parsed Constraints per shape, so the batch's tasks of that shape
    form one placement group and the nodes are scored once for them."""
    labelled = spec(constraints={"nodeLabels": ["ssd"]})
    data = batch(
        e.TaskSubmit("t1", spec()),
        e.TaskSubmit("t2", labelled),
        e.TaskSubmit("t3", spec()),
        e.TaskSubmit("t4", labelled),
    )
    tasks = {t.id: t for t in at_proposal._submitted_tasks(e.decode_batch(data))}
    assert tasks["t1"].constraints is tasks["t3"].constraints
    assert tasks["t2"].constraints is tasks["t4"].constraints
    assert tasks["t1"].constraints is not tasks["t2"].constraints
    assert tasks["t2"].constraints.node_labels == ["ssd"]
