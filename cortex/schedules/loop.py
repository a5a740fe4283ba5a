"""The leader-only schedule loop: when a schedule's slot comes due (or a
buffered slot's previous run ends), decide each due slot by the catch-up
window and the overlap policy (`cortex.schedules.firing`) and propose one
SCHEDULE_FIRE entry per schedule, which starts the runs as it applies.

A new leader reads the newest slot each schedule decided from the
replicated state and goes on from there: slots that came due while no
leader could fire them are fired late when inside the catch-up window, or
recorded as missed. Consecutive missed slots travel as one decision."""

from __future__ import annotations

import logging
from typing import Any

from cortex.errors import CortexError
from cortex.raft.leader_loop import LeaderContext, LeaderLoop
from cortex.schedules.firing import ScheduleState, SlotDecision, plan_slots
from cortex.schedules.operations import timing_of
from cortex.schedules.runs import RunBuilder
from cortex.schedules.slots import MAX_SLOTS_PER_CALL, next_slot
from cortex.state import entries as e
from cortex.state.schedule_queries import ScheduleView
from cortex.state.task_states import TERMINAL_STATES
from cortex.state.transitions import TaskChange
from cortex.steps import Step, wall_ms

log = logging.getLogger(__name__)


def schedule_state(view: ScheduleView, active_runs: tuple[str, ...]) -> ScheduleState:
    return ScheduleState(
        timing=timing_of(view), anchor_ms=view.anchor_ms, last_slot_ms=view.last_slot_ms,
        overlap=view.overlap,  # type: ignore[arg-type]
        catchup_window_ms=view.catchup_window_ms, paused=view.paused,
        active_runs=active_runs, buffered_slot_ms=view.buffered_slot_ms,
    )  # fmt: skip


def compress(decisions: list[SlotDecision]) -> list[SlotDecision | tuple[int, int, int, str]]:
    """Runs of consecutive `missed` decisions as (first, last, count, reason)."""
    out: list[SlotDecision | tuple[int, int, int, str]] = []
    for d in decisions:
        last = out[-1] if out else None
        if d.action == "missed" and isinstance(last, tuple):
            out[-1] = (last[0], d.slot_ms, last[2] + 1, last[3])
        elif d.action == "missed":
            out.append((d.slot_ms, d.slot_ms, 1, d.reason))
        else:
            out.append(d)
    return out


class ScheduleLoop(LeaderLoop):
    def __init__(self, context: LeaderContext, runs: RunBuilder, interval_s: float = 1.0) -> None:
        super().__init__("schedules", context, interval_s)
        self._runs = runs
        # Whether the last read of the schedules found any (True until the
        # first read): a run can end only after this loop read its schedule.
        self._any_schedules = True

    def on_follower(self) -> None:
        # Another leader may create schedules meanwhile.
        self._any_schedules = True

    def on_change(self, changes: list[TaskChange]) -> None:
        """State listener (Raft thread): when a task ended, a buffered slot
        may fire now, if there are schedules."""
        if self._any_schedules and any(c.state in TERMINAL_STATES for c in changes):
            self.wake()

    def _schedule_rows(self) -> list[ScheduleView]:
        rows = self._reader.schedule_rows()
        self._any_schedules = bool(rows)
        return rows

    def wait_s(self) -> float:
        """Until the next slot of any schedule, at most the interval. (A
        node that becomes the leader is woken at once, and fires the slots
        its predecessor left.)"""
        now_ms = wall_ms(self._clock)
        due = None
        for view in self._schedule_rows():
            if view.paused:
                continue
            try:
                slot = next_slot(timing_of(view), view.anchor_ms, view.last_slot_ms)
            except CortexError:
                continue
            due = slot if due is None else min(due, slot)
        if due is None:
            return self._interval_s
        return max(0.001, min(self._interval_s, (due - now_ms) / 1000))

    def work(self) -> Step[bool]:
        now_ms = wall_ms(self._clock)
        entries, more = [], False
        for view in self._schedule_rows():
            if view.paused:
                continue
            try:
                state = schedule_state(view, self._reader.active_runs(view.id))
                planned = plan_slots(state, now_ms)
            except CortexError as err:
                log.warning("schedule %s cannot be planned: %s", view.name, err)
                continue
            if not planned:
                continue
            more = more or len(planned) >= MAX_SLOTS_PER_CALL
            decisions = [self._decision(view, d) for d in compress(planned)]
            entries.append(
                e.Entry.create(e.ScheduleFire(view.id, decisions), self._node_id, ts=now_ms)
            )
        if not entries:
            return False
        results = yield self._proposer.submit_all(entries)
        for result in results:
            if not result.get("ok"):
                log.warning("schedule firing refused: %s", result.get("reason"))
        return more

    def _decision(
        self, view: ScheduleView, d: SlotDecision | tuple[int, int, int, str]
    ) -> dict[str, Any]:
        if isinstance(d, tuple):
            first, last, count, reason = d
            return {"slot_ms": last, "first_slot_ms": first, "count": count,
                    "action": "missed", "reason": reason}  # fmt: skip
        if d.action == "fire":
            return self._runs.firing(view, d.slot_ms, "fire", d.reason, d.cancel)
        return {"slot_ms": d.slot_ms, "action": d.action, "reason": d.reason}
