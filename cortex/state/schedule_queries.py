"""Reads of schedules: each with its recent firings and the runs of earlier
firings still active (what the overlap policy looks at)."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, replace
from typing import Any

from cortex.state.task_states import TERMINAL_STATES
from cortex.state.workflow_rules import WORKFLOW_TERMINAL_STATES

# How many of a schedule's newest firings a view carries.
RECENT_FIRINGS = 20


@dataclass(frozen=True)
class FiringView:
    """One decision about a schedule's slot (or `count` slots, from
    `first_slot_ms` to `slot_ms`, missed together): `fire`, `trigger` (by
    hand), `missed`, `skipped`, `buffered`, or `failed` (its run could not be
    created); the run it started and that run's state now (None once purged)."""

    slot_ms: int
    first_slot_ms: int
    count: int
    action: str
    reason: str
    run_kind: str | None
    run_id: str | None
    run_state: str | None
    decided_at: int
    raft_index: int


@dataclass(frozen=True)
class ScheduleView:
    """A schedule as replicated. `timing`: `{every_ms}` or `{cron, timezone}`;
    `target`: `{task: spec}` or `{workflow: text, format}`. `last_slot_ms`:
    the newest slot decided (the creation or resume time before any);
    `next_slot_ms` is filled in by the reader of the clock, not stored."""

    id: str
    name: str
    timing: dict[str, Any]
    target_kind: str
    target: dict[str, Any]
    overlap: str
    catchup_window_ms: int
    paused: bool
    anchor_ms: int
    last_slot_ms: int
    buffered_slot_ms: int | None
    last_fired_at: int | None
    last_fired_slot_ms: int | None
    fired: int
    missed: int
    skipped: int
    created_at: int
    updated_at: int
    active_runs: tuple[str, ...] = ()
    recent: tuple[FiringView, ...] = ()
    next_slot_ms: int | None = None

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> ScheduleView:
        return cls(
            id=row["id"], name=row["name"], timing=json.loads(row["timing"]),
            target_kind=row["target_kind"], target=json.loads(row["target"]),
            overlap=row["overlap"], catchup_window_ms=row["catchup_window_ms"],
            paused=bool(row["paused"]), anchor_ms=row["anchor_ms"],
            last_slot_ms=row["last_slot_ms"], buffered_slot_ms=row["buffered_slot_ms"],
            last_fired_at=row["last_fired_at"], last_fired_slot_ms=row["last_fired_slot_ms"],
            fired=row["fired"], missed=row["missed"], skipped=row["skipped"],
            created_at=row["created_at"], updated_at=row["updated_at"],
        )  # fmt: skip


_FIRING_SELECT = (
    "SELECT f.*, CASE f.run_kind WHEN 'task' THEN (SELECT state FROM tasks WHERE id = f.run_id)"
    " WHEN 'workflow' THEN (SELECT state FROM workflows WHERE id = f.run_id) END AS run_state"
    " FROM schedule_firings f"
)
_ENDED = TERMINAL_STATES | WORKFLOW_TERMINAL_STATES


def _firing(row: sqlite3.Row) -> FiringView:
    return FiringView(
        row["slot_ms"], row["first_slot_ms"], row["slot_count"], row["action"], row["reason"],
        row["run_kind"], row["run_id"], row["run_state"], row["ts"], row["raft_index"],
    )  # fmt: skip


class ScheduleQueries:
    """Schedule reads; the host class supplies this thread's connection."""

    def _conn(self) -> sqlite3.Connection:
        raise NotImplementedError

    def schedule_rows(self) -> list[ScheduleView]:
        """Every schedule without its firings (what the leader's loop reads)."""
        rows = self._conn().execute("SELECT * FROM schedules ORDER BY name").fetchall()
        return [ScheduleView.from_row(row) for row in rows]

    def find_schedule(self, name_or_id: str) -> ScheduleView | None:
        """The schedule with this name or id, with its recent firings and active runs."""
        conn = self._conn()
        conn.execute("BEGIN")
        try:
            row = conn.execute(
                "SELECT * FROM schedules WHERE name = ? OR id = ? ORDER BY name = ? DESC LIMIT 1",
                (name_or_id, name_or_id, name_or_id),
            ).fetchone()
            if row is None:
                return None
            return self._full(ScheduleView.from_row(row))
        finally:
            conn.execute("COMMIT")

    def schedules(self) -> list[ScheduleView]:
        conn = self._conn()
        conn.execute("BEGIN")
        try:
            return [self._full(view) for view in self.schedule_rows()]
        finally:
            conn.execute("COMMIT")

    def _full(self, view: ScheduleView) -> ScheduleView:
        rows = (
            self._conn()
            .execute(
                f"{_FIRING_SELECT} WHERE f.schedule_id = ? ORDER BY f.seq DESC LIMIT ?",
                (view.id, RECENT_FIRINGS),
            )
            .fetchall()
        )
        return replace(
            view, recent=tuple(_firing(r) for r in rows), active_runs=self.active_runs(view.id)
        )

    def active_runs(self, schedule_id: str) -> tuple[str, ...]:
        """The tasks and workflows this schedule started that have not ended."""
        rows = (
            self._conn()
            .execute(
                f"SELECT run_id, run_state FROM ({_FIRING_SELECT} WHERE f.schedule_id = ?"
                " AND f.run_id IS NOT NULL) ORDER BY seq",
                (schedule_id,),
            )
            .fetchall()
        )
        return tuple(
            row["run_id"]
            for row in rows
            if row["run_state"] is not None and row["run_state"] not in _ENDED
        )
