"""The leader's decisions for a schedule's slots, driven over random runs
(clock steps of any size, runs of any length): every slot gets exactly one
decision, once; none fires older than the catch-up window; each overlap
policy keeps its promise about concurrent runs."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from hypothesis import given, settings
from hypothesis import strategies as st

from cortex.schedules.firing import OVERLAP_POLICIES, ScheduleState, SlotDecision, plan_slots
from cortex.schedules.slots import Timing, slots_between

EVERY_MS = 1000
ANCHOR = 10_000


@dataclass
class Run:
    slot_ms: int
    ends_ms: int


@dataclass
class World:
    """The replicated state as the leader's decisions would leave it, and
    the runs fired so far."""

    state: ScheduleState
    runs: dict[str, Run] = field(default_factory=dict)
    decided: list[SlotDecision] = field(default_factory=list)
    concurrent_max: int = 0
    cancelled: set[str] = field(default_factory=set)

    def step(self, now_ms: int) -> list[SlotDecision]:
        active = tuple(
            run_id
            for run_id, run in self.runs.items()
            if run.ends_ms > now_ms and run_id not in self.cancelled
        )
        self.state = replace(self.state, active_runs=active)
        decisions = plan_slots(self.state, now_ms)
        for decision in decisions:
            self.apply(decision, now_ms)
        self.decided.extend(decisions)
        return decisions

    def apply(self, decision: SlotDecision, now_ms: int) -> None:
        buffered = self.state.buffered_slot_ms
        if decision.action == "fire" and decision.slot_ms == buffered:
            buffered = None
        elif decision.action == "buffered":
            buffered = decision.slot_ms
        self.cancelled.update(decision.cancel)
        if decision.action == "fire":
            run_id = f"run-{decision.slot_ms}"
            assert run_id not in self.runs, f"slot {decision.slot_ms} fired twice"
            self.runs[run_id] = Run(decision.slot_ms, now_ms + self.duration(decision.slot_ms))
        running = sum(
            1
            for run_id, run in self.runs.items()
            if run.ends_ms > now_ms and run_id not in self.cancelled
        )
        self.concurrent_max = max(self.concurrent_max, running)
        self.state = replace(
            self.state,
            last_slot_ms=max(self.state.last_slot_ms, decision.slot_ms),
            buffered_slot_ms=buffered,
            active_runs=tuple(
                run_id
                for run_id, run in self.runs.items()
                if run.ends_ms > now_ms and run_id not in self.cancelled
            ),
        )

    durations: dict[int, int] = field(default_factory=dict)

    def duration(self, slot_ms: int) -> int:
        return self.durations.get(slot_ms, 100)


steps = st.lists(st.integers(min_value=1, max_value=7_000), min_size=1, max_size=40)
windows = st.sampled_from([0, 1_500, 5_000, 60_000])


def world(overlap: str, window: int, durations: list[int]) -> World:
    state = ScheduleState(
        Timing(every_ms=EVERY_MS),
        ANCHOR,
        ANCHOR,
        overlap,
        window,  # type: ignore[arg-type]
    )
    slots = range(ANCHOR + EVERY_MS, ANCHOR + EVERY_MS * 400, EVERY_MS)
    return World(state, durations=dict(zip(slots, durations, strict=False)))


@settings(max_examples=200, deadline=None)
@given(
    overlap=st.sampled_from(OVERLAP_POLICIES),
    window=windows,
    advances=steps,
    durations=st.lists(st.integers(min_value=1, max_value=4_000), max_size=400),
)
def test_every_slot_is_decided_exactly_once_and_none_fires_late(
    overlap: str, window: int, advances: list[int], durations: list[int]
) -> None:
    w = world(overlap, window, durations)
    now = ANCHOR
    for advance in advances:
        now += advance
        for decision in w.step(now):
            if decision.action == "fire" and decision.reason == "":
                assert decision.slot_ms >= now - window, decision
            assert decision.slot_ms <= now
    # Buffered slots are decided twice: kept, then fired.
    first_decisions = [d.slot_ms for d in w.decided if not (d.action == "fire" and d.reason)]
    assert first_decisions == slots_between(Timing(every_ms=EVERY_MS), ANCHOR, ANCHOR, now)
    fired = [d.slot_ms for d in w.decided if d.action == "fire"]
    assert len(fired) == len(set(fired))
    buffered = [d.slot_ms for d in w.decided if d.action == "buffered"]
    assert set(fired) >= set(buffered[:-1])  # all but possibly the last fired since


@settings(max_examples=200, deadline=None)
@given(
    window=windows,
    advances=steps,
    durations=st.lists(st.integers(min_value=1, max_value=4_000), max_size=400),
)
def test_allow_all_fires_every_slot_inside_the_window(
    window: int, advances: list[int], durations: list[int]
) -> None:
    w = world("allow_all", window, durations)
    now = ANCHOR
    for advance in advances:
        now += advance
        decisions = w.step(now)
        assert all((d.action == "fire") == (d.slot_ms >= now - window) for d in decisions), (
            decisions
        )


@settings(max_examples=200, deadline=None)
@given(
    overlap=st.sampled_from(["skip", "buffer_one", "cancel_previous"]),
    advances=steps,
    durations=st.lists(st.integers(min_value=1, max_value=4_000), max_size=400),
)
def test_policies_other_than_allow_all_never_run_two_at_once(
    overlap: str, advances: list[int], durations: list[int]
) -> None:
    w = world(overlap, 60_000, durations)
    now = ANCHOR
    for advance in advances:
        now += advance
        w.step(now)
        assert w.concurrent_max <= 1, overlap
        # buffer_one keeps at most one slot waiting.
        assert sum(1 for d in w.decided if d.action == "buffered") - sum(
            1 for d in w.decided if d.action == "fire" and d.reason
        ) in (0, 1)


def test_skip_skips_while_the_previous_run_runs() -> None:
    state = ScheduleState(Timing(every_ms=EVERY_MS), 0, 0, "skip", active_runs=("run-a",))
    assert [d.action for d in plan_slots(state, 3_000)] == ["skipped"] * 3
    idle = replace(state, active_runs=())
    assert [d.action for d in plan_slots(idle, 3_000)] == ["fire", "skipped", "skipped"]


def test_buffer_one_keeps_one_slot_and_fires_it_when_the_run_ends() -> None:
    state = ScheduleState(Timing(every_ms=EVERY_MS), 0, 0, "buffer_one", active_runs=("run-a",))
    assert [d.action for d in plan_slots(state, 3_000)] == ["buffered", "skipped", "skipped"]
    later = replace(state, last_slot_ms=3_000, buffered_slot_ms=1_000, active_runs=())
    decisions = plan_slots(later, 3_500)
    assert decisions == [SlotDecision(1_000, "fire", "buffered while the previous run ran")]


def test_cancel_previous_fires_the_newest_and_cancels_the_active_runs() -> None:
    state = ScheduleState(
        Timing(every_ms=EVERY_MS), 0, 0, "cancel_previous", active_runs=("run-a", "run-b")
    )
    decisions = plan_slots(state, 3_000)
    assert [(d.slot_ms, d.action) for d in decisions] == [
        (1_000, "skipped"), (2_000, "skipped"), (3_000, "fire"),
    ]  # fmt: skip
    assert decisions[-1].cancel == ("run-a", "run-b")


def test_slots_older_than_the_window_are_missed_and_paused_schedules_decide_nothing() -> None:
    state = ScheduleState(Timing(every_ms=EVERY_MS), 0, 0, "allow_all", catchup_window_ms=2_500)
    decisions = plan_slots(state, 10_000)
    assert [d.slot_ms for d in decisions if d.action == "missed"] == list(
        range(1_000, 8_000, 1_000)
    )
    assert [d.slot_ms for d in decisions if d.action == "fire"] == [8_000, 9_000, 10_000]
    assert plan_slots(replace(state, paused=True), 10_000) == []
