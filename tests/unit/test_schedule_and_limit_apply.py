"""Schedules and limits per key as replicated state, applied to a real
StateMachine on a SQLite file: a slot decided twice (a leader change)
creates one task; buffered and cancelled runs; missed slots recorded, not
dropped; a placement past a key's max-running count or rate is refused by
apply whatever the leader believed; a replay and a snapshot copy give the
same digest."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cortex.schedules.runs import SCHEDULE_ID_ENV, SCHEDULED_TIME_ENV, slot_time
from cortex.state.entries import (
    LimitDelete,
    LimitSet,
    ScheduleCreate,
    ScheduleDelete,
    ScheduleFire,
    SchedulePause,
    TaskAssign,
    TaskComplete,
    TaskStarted,
    TaskSubmit,
    WeightSet,
)
from cortex.state.limit_bounds import TOKEN_UNITS
from cortex.state.machine import StateMachine, copy_database
from cortex.state.queries import StateReader
from cortex.state.schedule_transitions import KEPT_FIRINGS, schedule_idempotency_key
from tests.unit.test_state_transitions import Log, assign, code_of, join

SHELL = {"command": ["true"]}


@pytest.fixture
def machine(tmp_path: Path) -> Iterator[StateMachine]:
    sm = StateMachine(str(tmp_path / "node" / "state.db"))
    yield sm
    sm.close()


@pytest.fixture
def log(machine: StateMachine) -> Log:
    log = Log(machine)
    assert log.one(join("n1"))["ok"] and log.one(join("n2"))["ok"]
    return log


@pytest.fixture
def reader(machine: StateMachine) -> StateReader:
    return StateReader(machine.path)


def create(log: Log, overlap: str = "skip", ts: int = 10_000) -> None:
    payload = ScheduleCreate("s1", "every-second", {"every_ms": 1000}, {"task": SHELL}, overlap)
    assert log.one(payload, ts=ts)["created"]


def fire(slot: int, task_id: str, action: str = "fire", **extra: Any) -> dict[str, Any]:
    spec = {**SHELL, "env": {SCHEDULE_ID_ENV: "s1", SCHEDULED_TIME_ENV: slot_time(slot)}}
    return {"slot_ms": slot, "action": action, "task_id": task_id, "spec": spec, **extra}


def scheduled_tasks(reader: StateReader) -> list[tuple[str, str | None]]:
    page = reader.list_tasks(None, None, None, None, 1000, None, False, None, None)
    return [(t.id, t.idempotency_key) for t in page.tasks]


# -- schedules ----------------------------------------------------------------------


def test_a_slot_decided_twice_creates_one_task(log: Log, reader: StateReader) -> None:
    create(log)
    first = log.one(ScheduleFire("s1", [fire(11_000, "a")]), ts=11_001)
    # The next leader, not knowing the first decision applied, decides again.
    again = log.one(ScheduleFire("s1", [fire(11_000, "b"), fire(12_000, "c")]), ts=12_001)
    assert first["runs"] == ["a"] and again["runs"] == ["c"] and again["ignored"] == 1
    assert scheduled_tasks(reader) == [
        ("a", schedule_idempotency_key("s1", 11_000)),
        ("c", schedule_idempotency_key("s1", 12_000)),
    ]
    view = reader.find_schedule("every-second")
    assert view is not None
    assert (view.last_slot_ms, view.fired, view.last_fired_slot_ms) == (12_000, 2, 12_000)
    assert [(f.slot_ms, f.action, f.run_id, f.run_state) for f in view.recent] == [
        (12_000, "fire", "c", "queued"),
        (11_000, "fire", "a", "queued"),
    ]
    assert view.active_runs == ("a", "c")
    task = reader.get_task("a")
    assert task is not None and task.spec["env"][SCHEDULED_TIME_ENV] == "1970-01-01T00:00:11.000Z"


def test_missed_slots_are_recorded_with_their_count(log: Log, reader: StateReader) -> None:
    create(log)
    missed = {"slot_ms": 50_000, "first_slot_ms": 11_000, "count": 40, "action": "missed",
              "reason": "older than the catch-up window"}  # fmt: skip
    result = log.one(ScheduleFire("s1", [missed, fire(51_000, "late")]), ts=111_000)
    assert result["missed"] == 40 and result["runs"] == ["late"]
    view = reader.find_schedule("s1")
    assert view is not None and (view.missed, view.fired, view.last_slot_ms) == (40, 1, 51_000)
    assert [(f.action, f.count, f.first_slot_ms) for f in view.recent] == [
        ("fire", 1, 51_000),
        ("missed", 40, 11_000),
    ]


def test_a_buffered_slot_fires_once_after_the_run_before_it(log: Log, reader: StateReader) -> None:
    create(log, overlap="buffer_one")
    log.one(ScheduleFire("s1", [fire(11_000, "a")]), ts=11_000)
    log.one(ScheduleFire("s1", [{"slot_ms": 12_000, "action": "buffered"}]), ts=12_000)
    view = reader.find_schedule("s1")
    assert view is not None and view.buffered_slot_ms == 12_000
    assert log.one(assign("a", "n1", 1))["placed"] == 1
    log.one(TaskStarted("a", 1, "n1"))
    log.one(TaskComplete("a", 1, "n1", {"exit_code": 0}))
    # The buffered slot is older than the newest decided, and still fires once.
    assert log.one(ScheduleFire("s1", [fire(12_000, "b")]), ts=12_500)["runs"] == ["b"]
    assert log.one(ScheduleFire("s1", [fire(12_000, "b2")]), ts=12_600)["ignored"] == 1
    view = reader.find_schedule("s1")
    assert view is not None and view.buffered_slot_ms is None and view.fired == 2


def test_cancel_previous_cancels_only_this_schedules_runs(log: Log, reader: StateReader) -> None:
    create(log, overlap="cancel_previous")
    log.one(TaskSubmit("other", SHELL))
    log.one(ScheduleFire("s1", [fire(11_000, "a")]), ts=11_000)
    log.one(ScheduleFire("s1", [fire(12_000, "b", cancel=["a", "other"])]), ts=12_000)
    states = {t: (reader.get_task(t) or pytest.fail(t)).state for t in ("a", "b", "other")}
    assert states == {"a": "cancelled", "b": "queued", "other": "queued"}


def test_paused_and_deleted_schedules_fire_nothing(log: Log, reader: StateReader) -> None:
    create(log)
    log.one(SchedulePause("s1", True), ts=10_500)
    assert log.one(ScheduleFire("s1", [fire(11_000, "a")]), ts=11_000)["ignored"] == 1
    # A trigger by hand still runs while paused.
    trigger = fire(11_500, "by-hand", action="trigger")
    assert log.one(ScheduleFire("s1", [trigger]), ts=11_500)["runs"] == ["by-hand"]
    # Resumed: the pause's slots are not due.
    log.one(SchedulePause("s1", False), ts=20_500)
    view = reader.find_schedule("s1")
    assert view is not None and view.last_slot_ms == 20_500 and not view.paused
    assert log.one(ScheduleFire("s1", [fire(15_000, "x")]), ts=20_600)["ignored"] == 1
    log.one(ScheduleDelete("s1"))
    assert code_of(log.one(ScheduleFire("s1", [fire(21_000, "y")]))) == "unknown_schedule"
    assert reader.find_schedule("s1") is None and reader.get_task("by-hand") is not None


def test_a_firing_whose_task_cannot_be_created_is_recorded_failed(
    log: Log, reader: StateReader
) -> None:
    create(log)
    bad = {"slot_ms": 11_000, "action": "fire", "task_id": "a", "spec": {"priority": 99}}
    result = log.one(ScheduleFire("s1", [bad, fire(12_000, "b")]), ts=12_000)
    assert result["runs"] == ["b"]
    view = reader.find_schedule("s1")
    assert view is not None
    assert [(f.action, f.slot_ms) for f in view.recent] == [("fire", 12_000), ("failed", 11_000)]
    assert view.recent[1].reason.startswith("invalid_spec: ")
    assert reader.get_task("a") is None


def test_only_the_newest_firings_are_kept(log: Log, reader: StateReader) -> None:
    create(log)
    skips = [{"slot_ms": 11_000 + i * 1000, "action": "skipped"} for i in range(KEPT_FIRINGS + 30)]
    log.one(ScheduleFire("s1", skips), ts=500_000)
    count = log.machine._conn.execute("SELECT COUNT(*) FROM schedule_firings").fetchone()[0]
    view = reader.find_schedule("s1")
    assert count == KEPT_FIRINGS and view is not None and view.skipped == KEPT_FIRINGS + 30


def test_bad_schedules_are_refused_with_their_reason(log: Log) -> None:
    create(log)
    same_name = ScheduleCreate("s2", "every-second", {"every_ms": 1000}, {"task": SHELL})
    assert code_of(log.one(same_name)) == "name_taken"
    for timing in (
        {"every_ms": 999},
        {"cron": "", "timezone": "UTC"},
        {"every_ms": 1, "cron": "x"},
    ):
        bad = ScheduleCreate("s3", "other", timing, {"task": SHELL})
        assert code_of(log.one(bad)) == "invalid_schedule"
    for target in ({"task": {"priority": 11, **SHELL}}, {"workflow": "x", "format": "toml"}, {}):
        bad = ScheduleCreate("s3", "other", {"every_ms": 1000}, target)
        assert code_of(log.one(bad)) == "invalid_schedule"
    bad_overlap = ScheduleCreate("s3", "other", {"every_ms": 1000}, {"task": SHELL}, "sometimes")
    assert code_of(log.one(bad_overlap)) == "invalid_schedule"
    no_run = ScheduleFire("s1", [{"slot_ms": 11_000, "action": "fire"}])
    assert code_of(log.one(no_run)) == "invalid_schedule"


# -- limits per key -----------------------------------------------------------------


def submit_keyed(log: Log, count: int, key: str = "deploy") -> list[str]:
    ids = [f"{key}-{i}" for i in range(count)]
    for task_id in ids:
        assert log.one(TaskSubmit(task_id, {**SHELL, "concurrencyKey": key}))["ok"]
    return ids


def test_apply_refuses_a_placement_past_max_running(log: Log, reader: StateReader) -> None:
    assert log.one(LimitSet("deploy", max_running=2))["created"]
    ids = submit_keyed(log, 3)
    result = log.one(assign(ids[0], "n1", 1))
    assert result["placed"] == 1
    # A leader that believed there was room proposes two more in one round.
    both = TaskAssign([{"task_id": t, "node": "n2", "attempt": 1} for t in ids[1:]])
    assert log.one(both) == {"ok": True, "placed": 1, "rejected": 1}
    (rejected,) = [e for e in reader.task_events(ids[2]) if e.event == "rejected"]
    assert rejected.detail is not None and rejected.detail["code"] == "limit_reached"
    assert "at 2/2 running" in rejected.detail["reason"]
    (limit,) = reader.limits(0)
    assert (limit.running, limit.queued) == (2, 1)
    # Once one ends, the third is placed.
    log.one(TaskStarted(ids[0], 1, "n1"))
    log.one(TaskComplete(ids[0], 1, "n1", {"exit_code": 0}))
    assert log.one(assign(ids[2], "n1", 1))["placed"] == 1


def test_the_rate_is_a_replicated_token_bucket(log: Log, reader: StateReader) -> None:
    # 60 per minute: a token a second, bursts of 2.
    log.one(LimitSet("api", rate_per_min=60, burst=2))
    ids = submit_keyed(log, 4, "api")
    placed = [log.one(assign(t, "n1", 1), ts=5_000)["placed"] for t in ids[:3]]
    assert placed == [1, 1, 0]
    assert log.one(assign(ids[2], "n1", 1), ts=5_999)["placed"] == 0
    assert log.one(assign(ids[2], "n1", 1), ts=6_000)["placed"] == 1
    # An entry stamped earlier (another proposer's clock) takes at the bucket's time.
    assert log.one(assign(ids[3], "n1", 1), ts=4_000)["placed"] == 0
    row = log.machine._conn.execute("SELECT * FROM key_limits").fetchone()
    assert (row["bucket_units"], row["bucket_at"]) == (0, 6_000)
    # Lowering the burst caps what the bucket holds.
    log.one(LimitSet("api", rate_per_min=60, burst=1), ts=60_000)
    (limit,) = reader.limits(60_000)
    assert limit.tokens == 1.0 and limit.burst == 1
    assert TOKEN_UNITS == 60_000


def test_limits_and_weights_are_set_replaced_and_deleted(log: Log, reader: StateReader) -> None:
    log.one(LimitSet("deploy", max_running=1))
    assert log.one(LimitSet("deploy", max_running=3))["created"] is False
    assert [(v.key, v.max_running) for v in reader.limits(0)] == [("deploy", 3)]
    assert log.one(LimitDelete("deploy"))["deleted"] is True
    assert log.one(LimitDelete("deploy"))["deleted"] is False
    assert code_of(log.one(LimitSet("deploy"))) == "invalid_payload"
    log.one(WeightSet("tenant-a", 3))
    assert reader.weights() == {"tenant-a": 3}
    log.one(WeightSet("tenant-a", 1))
    assert reader.weights() == {}


def test_a_replay_and_a_snapshot_copy_give_the_same_digest(log: Log, tmp_path: Path) -> None:
    create(log, overlap="buffer_one")
    log.one(LimitSet("deploy", max_running=1, rate_per_min=120, burst=3))
    log.one(WeightSet("tenant-a", 5))
    ids = submit_keyed(log, 2)
    log.one(assign(ids[0], "n1", 1), ts=20_000)
    log.one(ScheduleFire("s1", [fire(11_000, "a"), {"slot_ms": 12_000, "action": "buffered"}]))
    snapshot = tmp_path / "snapshot.db"
    copy_database(log.machine.path, str(snapshot))
    replayed = StateMachine(str(tmp_path / "replay" / "state.db"))
    try:
        for index, data in log.batches:
            replayed.apply_batch(index, data)
        copied = StateMachine(str(snapshot))
        try:
            assert replayed.digest() == log.machine.digest() == copied.digest()
        finally:
            copied.close()
    finally:
        replayed.close()
