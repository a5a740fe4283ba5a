"""The leader's schedule loop and the scheduler's limits and fair shares,
driven by hand on a real state machine with a clock the test moves: due
slots become one SCHEDULE_FIRE per schedule; a decision proposed again by
the next leader creates nothing more; slots older than the catch-up window
are recorded missed (one record for a run of them); a key at its
max-running count or rate holds its tasks back, and the loop wakes for the
next token; a key with one task is placed beside another's backlog."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cortex.membership.board import ResourceBoard
from cortex.raft.leader_loop import LeaderContext
from cortex.scheduler.loop import SchedulerLoop
from cortex.schedules.loop import ScheduleLoop
from cortex.schedules.runs import RunBuilder, slot_time
from cortex.state import entries as e
from cortex.state.transitions import TaskChange
from cortex.steps import WaitSignal
from cortex.workflows.sandbox import ConditionSandbox
from tests.steps_by_hand import FakeClock, HeldProposer, Stepper
from tests.workflow_sim import NODES, WorkflowLog

START_MS = 1_800_000_000_000
# A task's end, as apply's listeners hear of it.
ENDED = TaskChange("t-ended", "completed", "n1", 1)


@pytest.fixture
def runs() -> Iterator[RunBuilder]:
    sandbox = ConditionSandbox()
    yield RunBuilder(sandbox, 1024 * 1024)
    sandbox.close()


def schedule(log: WorkflowLog, overlap: str = "skip", window_ms: int = 60_000) -> None:
    payload = e.ScheduleCreate("s1", "tick", {"every_ms": 1000}, {"task": {"type": "noop"}},
                               overlap, window_ms)  # fmt: skip
    log.index += 1
    entry = e.Entry.create(payload, "n1", ts=START_MS)
    results = log.machine.apply_batch(log.index, e.encode_batch([entry]))
    assert results is not None and results[0]["ok"], results


def loop_at(log: WorkflowLog, runs: RunBuilder, clock: FakeClock) -> tuple[HeldProposer, Stepper]:
    proposer = HeldProposer(log)
    loop = ScheduleLoop(LeaderContext("n1", lambda: True, proposer, log.reader, clock), runs)
    stepper = Stepper(loop.main())
    return proposer, stepper


def decisions(proposer: HeldProposer, number: int = 0) -> list[tuple[int, str, int]]:
    (payload,) = proposer.payloads(number)
    assert isinstance(payload, e.ScheduleFire)
    return [(d.slot_ms - START_MS, d.action, d.count) for d in payload.items()]


def test_the_loop_sleeps_until_the_next_slot_and_fires_it(
    log: WorkflowLog, runs: RunBuilder
) -> None:
    schedule(log)
    clock = FakeClock(wall_s=(START_MS + 700) / 1000)
    proposer, stepper = loop_at(log, runs, clock)
    assert isinstance(stepper.waiting, WaitSignal)
    assert stepper.waiting.seconds == pytest.approx(0.3)
    clock.advance(0.3)
    stepper.resume(False)
    assert decisions(proposer) == [(1000, "fire", 1)]
    (entry,), _ = proposer.held[0]
    fired = entry.decode_payload()
    assert isinstance(fired, e.ScheduleFire)
    spec = fired.items()[0].spec
    assert spec is not None and spec["env"]["CORTEX_SCHEDULED_TIME"] == slot_time(START_MS + 1000)
    assert spec["env"]["CORTEX_SCHEDULE_ID"] == "s1"
    proposer.apply_next()
    stepper.settle()
    assert isinstance(stepper.waiting, WaitSignal)
    assert stepper.waiting.seconds == pytest.approx(1.0)


def test_a_new_leader_deciding_again_creates_no_second_task(
    log: WorkflowLog, runs: RunBuilder
) -> None:
    schedule(log, overlap="allow_all")
    clock = FakeClock(wall_s=(START_MS + 2_000) / 1000)
    old, old_stepper = loop_at(log, runs, clock)
    old_stepper.resume(True)
    new, new_stepper = loop_at(log, runs, clock)
    new_stepper.resume(True)
    # Both leaders proposed the same two slots; both proposals commit.
    assert decisions(old) == decisions(new) == [(1000, "fire", 1), (2000, "fire", 1)]
    assert old.apply_next()[0]["fired"] == 2
    assert new.apply_next()[0] == {
        "ok": True, "schedule_id": "s1", "runs": [], "ignored": 2,
        "fired": 0, "missed": 0, "skipped": 0,
    }  # fmt: skip
    times = [t.spec["env"]["CORTEX_SCHEDULED_TIME"] for t in log.reader.list_tasks(
        None, None, None, None, 100, None, False, None, None).tasks]  # fmt: skip
    assert sorted(times) == [slot_time(START_MS + 1000), slot_time(START_MS + 2000)]


def test_slots_past_the_catch_up_window_are_missed_in_one_record(
    log: WorkflowLog, runs: RunBuilder
) -> None:
    schedule(log, overlap="skip", window_ms=2_500)
    # The cluster was down; a leader comes back 10.5 s after creation.
    clock = FakeClock(wall_s=(START_MS + 10_500) / 1000)
    proposer, stepper = loop_at(log, runs, clock)
    stepper.resume(True)
    assert decisions(proposer) == [
        (7000, "missed", 7),  # slots 1 s .. 7 s, as one decision
        (8000, "fire", 1),
        (9000, "skipped", 1),
        (10000, "skipped", 1),
    ]
    proposer.apply_next()
    view = log.reader.find_schedule("tick")
    assert view is not None and (view.missed, view.fired, view.skipped) == (7, 1, 2)


# -- limits and fair shares in the scheduler's rounds ------------------------------


def scheduler_at(log: WorkflowLog, clock: FakeClock) -> tuple[HeldProposer, Stepper]:
    proposer = HeldProposer(log)
    loop = SchedulerLoop(
        LeaderContext("n1", lambda: True, proposer, log.reader, clock),
        ResourceBoard(clock),
        reachable=lambda node: True,
    )
    return proposer, Stepper(loop.main())


def placed(proposer: HeldProposer) -> list[str]:
    (payload,) = proposer.payloads(0)
    assert isinstance(payload, e.TaskAssign)
    return [item["task_id"] for item in payload.assignments]


def test_a_key_at_max_running_holds_its_tasks(log: WorkflowLog) -> None:
    assert log.one(e.LimitSet("deploy", max_running=2))["ok"]
    for number in range(8):
        spec = {"type": "noop", "concurrencyKey": "deploy"}
        assert log.one(e.TaskSubmit(f"d{number}", spec))["ok"]
    assert log.one(e.TaskSubmit("free", {"type": "noop"}))["ok"]
    proposer, stepper = scheduler_at(log, FakeClock(wall_s=START_MS / 1000))
    stepper.resume(True)
    assert sorted(placed(proposer)) == ["d0", "d1", "free"]
    proposer.apply_next()
    stepper.settle()
    stepper.resume(True)
    assert proposer.held == []


def test_a_rate_limited_key_wakes_the_loop_for_its_next_token(log: WorkflowLog) -> None:
    # 5 per second, bursts of 1.
    assert log.one(e.LimitSet("api", rate_per_min=300, burst=1))["ok"]
    for number in range(3):
        assert log.one(e.TaskSubmit(f"a{number}", {"type": "noop", "concurrencyKey": "api"}))["ok"]
    clock = FakeClock(wall_s=START_MS / 1000)
    proposer, stepper = scheduler_at(log, clock)
    stepper.resume(True)
    assert placed(proposer) == ["a0"]
    proposer.apply_next()
    stepper.settle()
    assert isinstance(stepper.waiting, WaitSignal)
    assert stepper.waiting.seconds == pytest.approx(0.2)
    clock.advance(0.2)
    stepper.resume(False)
    assert placed(proposer) == ["a1"]


def test_one_task_of_another_key_is_placed_beside_a_deep_backlog(log: WorkflowLog) -> None:
    for node in NODES:
        joined = e.NodeJoin(node, f"{node}:1", f"{node}:2", executors=["noop"],
                            resources={"max_tasks": 2})  # fmt: skip
        assert log.one(joined)["ok"]
    for number in range(2_000):
        spec = {"type": "noop", "fairnessKey": "big"}
        assert log.one(e.TaskSubmit(f"big-{number:04d}", spec))["ok"]
    assert log.one(e.TaskSubmit("small-0", {"type": "noop", "fairnessKey": "small"}))["ok"]
    proposer, stepper = scheduler_at(log, FakeClock(wall_s=START_MS / 1000))
    stepper.resume(True)
    chosen = placed(proposer)
    assert len(chosen) == 2 * len(NODES) and "small-0" in chosen


def test_a_task_ending_wakes_the_loop_only_when_there_are_schedules(
    log: WorkflowLog, runs: RunBuilder
) -> None:
    """A buffered slot may fire when a run ends; with no schedule there is
    no slot, and once the loop has read none, an ending wakes nothing."""
    clock = FakeClock(wall_s=START_MS / 1000)
    loop = ScheduleLoop(
        LeaderContext("n1", lambda: True, HeldProposer(log), log.reader, clock), runs
    )
    Stepper(loop.main())  # reads the schedules (none) to know how long to sleep
    loop.on_change([ENDED])
    assert not loop._wake.is_set()
    schedule(log)
    Stepper(loop.main())
    loop.on_change([ENDED])
    assert loop._wake.is_set()


def test_a_loop_that_was_a_follower_wakes_on_a_task_ending_until_it_reads_again(
    log: WorkflowLog, runs: RunBuilder
) -> None:
    """Schedules another leader created while this node followed are not
    known here: until it reads them again, an ending wakes it."""
    leading = [True]
    clock = FakeClock(wall_s=START_MS / 1000)
    context = LeaderContext("n1", lambda: leading[0], HeldProposer(log), log.reader, clock)
    loop = ScheduleLoop(context, runs)
    stepper = Stepper(loop.main())  # reads the schedules (none)
    leading[0] = False
    stepper.resume(True)  # an interval as a follower
    leading[0] = True
    loop.on_change([ENDED])
    assert loop._wake.is_set()
