"""What the leader decides for a schedule's due slots: fire each, or record
it missed, skipped or buffered, by the catch-up window and the overlap
policy. Each decision becomes one replicated entry keyed by (schedule, slot),
so a decision proposed twice (across a leader change) applies once.

- A slot older than `now - catchup_window` is *missed*: recorded, never
  fired late (after an outage longer than the window).
- Otherwise, while a run of an earlier slot is still active:
  `allow_all` fires anyway; `skip` skips the slot; `buffer_one` keeps one
  slot to fire when the active run ends and skips the rest;
  `cancel_previous` cancels the active runs and fires. When several slots
  are due at once under `cancel_previous`, only the newest fires and the
  older ones are skipped as superseded (each would cancel the one before).

Pure: the caller passes the replicated state and its clock reading."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from cortex.schedules.slots import MAX_SLOTS_PER_CALL, Timing, slots_between
from cortex.state.schedule_bounds import DEFAULT_CATCHUP_WINDOW_MS, OVERLAP_POLICIES

__all__ = [
    "DEFAULT_CATCHUP_WINDOW_MS",
    "OVERLAP_POLICIES",
    "ScheduleState",
    "SlotDecision",
    "plan_slots",
]

Overlap = Literal["skip", "buffer_one", "allow_all", "cancel_previous"]
Action = Literal["fire", "missed", "skipped", "buffered"]


@dataclass(frozen=True)
class ScheduleState:
    """A schedule as the replicated state holds it. `last_slot_ms`: the
    newest slot decided (the creation or resume time before any);
    `active_runs`: ids of the tasks or workflows of earlier firings that
    have not ended; `buffered_slot_ms`: a slot kept by `buffer_one`."""

    timing: Timing
    anchor_ms: int
    last_slot_ms: int
    overlap: Overlap = "skip"
    catchup_window_ms: int = DEFAULT_CATCHUP_WINDOW_MS
    paused: bool = False
    active_runs: tuple[str, ...] = ()
    buffered_slot_ms: int | None = None


@dataclass(frozen=True)
class SlotDecision:
    slot_ms: int
    action: Action
    reason: str = ""
    # Runs to cancel as this slot fires (`cancel_previous`).
    cancel: tuple[str, ...] = field(default=())


def plan_slots(
    state: ScheduleState, now_ms: int, limit: int = MAX_SLOTS_PER_CALL
) -> list[SlotDecision]:
    """The decisions for every slot due by `now_ms`, oldest first (at most
    `limit` new slots; the rest come at the next call)."""
    if state.paused:
        return []
    decisions: list[SlotDecision] = []
    running = bool(state.active_runs)
    buffered = state.buffered_slot_ms
    if buffered is not None and not running:
        decisions.append(SlotDecision(buffered, "fire", "buffered while the previous run ran"))
        running, buffered = True, None
    due = slots_between(state.timing, state.anchor_ms, state.last_slot_ms, now_ms, limit)
    oldest_allowed = now_ms - state.catchup_window_ms
    in_window = [slot for slot in due if slot >= oldest_allowed]
    decisions.extend(
        SlotDecision(slot, "missed", "older than the catch-up window")
        for slot in due
        if slot < oldest_allowed
    )
    if state.overlap == "cancel_previous":
        decisions.extend(_cancelling(in_window, state.active_runs))
        return decisions
    for slot in in_window:
        if not running or state.overlap == "allow_all":
            decisions.append(SlotDecision(slot, "fire"))
            running = True
        elif state.overlap == "buffer_one" and buffered is None:
            decisions.append(SlotDecision(slot, "buffered", "the previous run is still running"))
            buffered = slot
        elif state.overlap == "buffer_one":
            decisions.append(SlotDecision(slot, "skipped", "a slot is already buffered"))
        else:
            decisions.append(SlotDecision(slot, "skipped", "the previous run is still running"))
    return decisions


def _cancelling(slots: Sequence[int], active: tuple[str, ...]) -> list[SlotDecision]:
    if not slots:
        return []
    *older, newest = slots
    superseded = [SlotDecision(slot, "skipped", "superseded by a later slot") for slot in older]
    return [*superseded, SlotDecision(newest, "fire", cancel=active)]
