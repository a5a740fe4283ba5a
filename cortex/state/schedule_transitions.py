"""The deterministic effect of schedule entries: SCHEDULE_CREATE,
SCHEDULE_PAUSE, SCHEDULE_DELETE, and SCHEDULE_FIRE, the leader's decision
for a schedule's due slots, which creates each firing's task or workflow in
the same entry.

A slot is decided once: a decision for a slot at or before the newest one
decided (a buffered slot firing aside) is left alone, so the same decisions
proposed twice, by a leader whose first proposal's answer was lost or by the
next leader, apply once. Each run also carries the idempotency key
`schedule:ID:SLOT`, so no slot can create a second task or workflow.

Apply checks the shape of a timing, never a cron expression's meaning (that
belongs to a library whose versions may differ between nodes): the edge
validates it, and the leader computes the slots."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from cortex.state import digest
from cortex.state import entries as e
from cortex.state.canonical import dump as _dump
from cortex.state.reasons import (
    INVALID_SCHEDULE,
    NAME_TAKEN,
    UNKNOWN_SCHEDULE,
    Rejected,
    quoted,
)
from cortex.state.schedule_bounds import (
    DEFAULT_CATCHUP_WINDOW_MS,
    MAX_CATCHUP_WINDOW_MS,
    MAX_CRON_CHARS,
    MAX_EVERY_MS,
    MIN_EVERY_MS,
    OVERLAP_POLICIES,
)
from cortex.state.spec_rules import SpecError, check_task_spec, key_problem
from cortex.state.task_states import TERMINAL_STATES
from cortex.state.transitions import (
    ApplyContext,
    EntryHandler,
    task_submit,
)
from cortex.state.workflow_rules import WORKFLOW_TERMINAL_STATES
from cortex.state.workflow_transitions import workflow_cancel, workflow_submit

__all__ = ["DEFAULT_CATCHUP_WINDOW_MS", "OVERLAP_POLICIES", "SCHEDULE_HANDLERS"]
ACTIONS = ("fire", "missed", "skipped", "buffered", "trigger")
# Firings kept per schedule (older ones are dropped as newer ones are written).
KEPT_FIRINGS = 100
MAX_TIMEZONE_CHARS = 64
MAX_WORKFLOW_TEXT_BYTES = 256 * 1024
WORKFLOW_FORMATS = ("yaml", "json")


def schedule_idempotency_key(schedule_id: str, slot_ms: int) -> str:
    """The idempotency key of the run a schedule's slot starts."""
    return f"schedule:{schedule_id}:{slot_ms}"


def trigger_idempotency_key(schedule_id: str, run_id: str) -> str:
    """The idempotency key of a run started by hand (`schedule trigger`)."""
    return f"schedule:{schedule_id}:trigger:{run_id}"


def timing_shape_problem(timing: dict[str, Any]) -> str | None:
    """What is wrong with a timing's shape, or None: `{every_ms}` in range,
    or `{cron, timezone}` as bounded strings."""
    if set(timing) == {"every_ms"}:
        every = timing["every_ms"]
        if isinstance(every, bool) or not isinstance(every, int):
            return "every_ms must be an integer"
        if not MIN_EVERY_MS <= every <= MAX_EVERY_MS:
            return f"every must be between {MIN_EVERY_MS} ms and {MAX_EVERY_MS} ms"
        return None
    if set(timing) == {"cron", "timezone"}:
        cron, zone = timing["cron"], timing["timezone"]
        if not isinstance(cron, str) or not 0 < len(cron) <= MAX_CRON_CHARS:
            return f"cron must be a string of 1 to {MAX_CRON_CHARS} characters"
        if not isinstance(zone, str) or not 0 < len(zone) <= MAX_TIMEZONE_CHARS:
            return f"timezone must be a string of 1 to {MAX_TIMEZONE_CHARS} characters"
        return None
    return "timing must be {every_ms} or {cron, timezone}"


def _target(target: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A schedule's target in canonical form, and its kind."""
    if set(target) == {"task"}:
        try:
            return "task", {"task": check_task_spec(target["task"])}
        except SpecError as err:
            raise Rejected(INVALID_SCHEDULE, f"task spec: {err}") from None
    if set(target) == {"workflow", "format"}:
        text, fmt = target["workflow"], target["format"]
        if not isinstance(text, str) or len(text.encode()) > MAX_WORKFLOW_TEXT_BYTES:
            raise Rejected(
                INVALID_SCHEDULE,
                f"a workflow definition must be text of at most {MAX_WORKFLOW_TEXT_BYTES} bytes",
            )
        if fmt not in WORKFLOW_FORMATS:
            raise Rejected(INVALID_SCHEDULE, f"workflow format must be one of {WORKFLOW_FORMATS}")
        return "workflow", {"workflow": text, "format": fmt}
    raise Rejected(INVALID_SCHEDULE, "target must be {task} or {workflow, format}")


def schedule_create(ctx: ApplyContext, p: e.ScheduleCreate) -> dict[str, Any]:
    cur, ts = ctx.cur, ctx.entry.ts
    if cur.execute("SELECT 1 FROM schedules WHERE id = ?", (p.schedule_id,)).fetchone():
        return {"schedule_id": p.schedule_id, "created": False}
    if not p.schedule_id:
        raise Rejected(INVALID_SCHEDULE, "a schedule needs an id")
    problem = key_problem(p.name)
    if problem:
        raise Rejected(INVALID_SCHEDULE, f"name {quoted(p.name)} {problem}")
    problem = timing_shape_problem(p.timing)
    if problem:
        raise Rejected(INVALID_SCHEDULE, problem)
    if p.overlap not in OVERLAP_POLICIES:
        raise Rejected(INVALID_SCHEDULE, f"overlap must be one of {', '.join(OVERLAP_POLICIES)}")
    if not 0 <= p.catchup_window_ms <= MAX_CATCHUP_WINDOW_MS:
        raise Rejected(
            INVALID_SCHEDULE, f"catch-up window must be between 0 and {MAX_CATCHUP_WINDOW_MS} ms"
        )
    kind, target = _target(p.target)
    taken = cur.execute("SELECT id FROM schedules WHERE name = ?", (p.name,)).fetchone()
    if taken is not None:
        raise Rejected(NAME_TAKEN, f"schedule name {quoted(p.name)} is taken by {taken['id']}")
    cur.execute(
        "INSERT INTO schedules (id, name, timing, target_kind, target, overlap, catchup_window_ms,"
        " paused, anchor_ms, last_slot_ms, created_at, updated_at, submit_index)"
        " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (p.schedule_id, p.name, _dump(p.timing), kind, _dump(target), p.overlap,
         p.catchup_window_ms, int(p.paused), ts, ts, ts, ts, ctx.index),
    )  # fmt: skip
    ctx.event("schedule_created", detail={"schedule_id": p.schedule_id, "name": p.name})
    return {"schedule_id": p.schedule_id, "created": True}


def _schedule(ctx: ApplyContext, schedule_id: str) -> Any:
    row = ctx.cur.execute("SELECT * FROM schedules WHERE id = ?", (schedule_id,)).fetchone()
    if row is None:
        raise Rejected(UNKNOWN_SCHEDULE, f"schedule {quoted(schedule_id)} does not exist")
    return row


def schedule_pause(ctx: ApplyContext, p: e.SchedulePause) -> dict[str, Any]:
    row = _schedule(ctx, p.schedule_id)
    if bool(row["paused"]) == p.paused:
        return {"changed": False}
    ts = ctx.entry.ts
    # A resumed schedule fires from now on: the pause's slots are not due.
    last = row["last_slot_ms"] if p.paused else max(row["last_slot_ms"], ts)
    ctx.cur.execute(
        "UPDATE schedules SET paused = ?, last_slot_ms = ?, updated_at = ? WHERE id = ?",
        (int(p.paused), last, ts, p.schedule_id),
    )
    ctx.event("schedule_paused" if p.paused else "schedule_resumed",
              detail={"schedule_id": p.schedule_id, "name": row["name"]})  # fmt: skip
    return {"changed": True}


def schedule_delete(ctx: ApplyContext, p: e.ScheduleDelete) -> dict[str, Any]:
    row = _schedule(ctx, p.schedule_id)
    ctx.cur.execute("DELETE FROM schedule_firings WHERE schedule_id = ?", (p.schedule_id,))
    ctx.cur.execute("DELETE FROM schedules WHERE id = ?", (p.schedule_id,))
    ctx.event("schedule_deleted", detail={"schedule_id": p.schedule_id, "name": row["name"]})
    return {}


def _check_decision(d: e.SlotDecision) -> None:
    if d.action not in ACTIONS:
        raise Rejected(INVALID_SCHEDULE, f"unknown slot action {quoted(d.action)}")
    if d.count < 1 or d.first_slot_ms > d.slot_ms or d.slot_ms < 0:
        raise Rejected(INVALID_SCHEDULE, f"slot {d.slot_ms}: bad count or first slot")
    runs = (d.task_id is not None) + (d.workflow is not None)
    if d.action in ("fire", "trigger") and runs != 1:
        raise Rejected(INVALID_SCHEDULE, f"slot {d.slot_ms}: a firing names one task or workflow")
    if d.action not in ("fire", "trigger") and (runs or d.cancel):
        raise Rejected(INVALID_SCHEDULE, f"slot {d.slot_ms}: only a firing starts or cancels")


def _start_run(ctx: ApplyContext, schedule: Any, d: e.SlotDecision) -> tuple[str, str]:
    """Creates a firing's task or workflow; returns (kind, id)."""
    if d.action == "trigger":
        key = trigger_idempotency_key(
            schedule["id"], d.task_id or str((d.workflow or {}).get("workflow_id"))
        )
    else:
        key = schedule_idempotency_key(schedule["id"], d.slot_ms)
    if d.task_id is not None:
        if schedule["target_kind"] != "task" or d.spec is None:
            raise Rejected(INVALID_SCHEDULE, f"slot {d.slot_ms}: a task firing needs a task spec")
        result = task_submit(ctx, e.TaskSubmit(d.task_id, d.spec, key))
        return "task", result["task_id"]
    if schedule["target_kind"] != "workflow":
        raise Rejected(INVALID_SCHEDULE, f"slot {d.slot_ms}: this schedule starts tasks")
    payload = e.WorkflowSubmit.from_dict(d.workflow or {})
    if not isinstance(payload, e.WorkflowSubmit) or payload.total_tasks:
        raise Rejected(INVALID_SCHEDULE, f"slot {d.slot_ms}: a firing's workflow comes whole")
    result = workflow_submit(ctx, replace(payload, idempotency_key=key))
    return "workflow", result["workflow_id"]


def _cancel_runs(ctx: ApplyContext, schedule: Any, runs: list[str], slot_ms: int) -> int:
    """Cancels those of `runs` this schedule started that have not ended."""
    reason = f"cancelled by schedule {schedule['name']}: slot {slot_ms} fired (cancel_previous)"
    cancelled = 0
    for run_id in runs:
        kind = ctx.cur.execute(
            "SELECT run_kind FROM schedule_firings WHERE run_id = ? AND schedule_id = ?",
            (run_id, schedule["id"]),
        ).fetchone()
        if kind is None:
            continue
        if kind["run_kind"] == "task":
            task = ctx.cur.execute("SELECT * FROM tasks WHERE id = ?", (run_id,)).fetchone()
            if task is None or task["state"] in TERMINAL_STATES:
                continue
            ctx.move(task, "cancelled", "cancelled", task["assigned_node"], task["attempt"],
                     {"reason": reason}, set_completed_at=ctx.entry.ts, set_error=reason)  # fmt: skip
        else:
            state = ctx.cur.execute(
                "SELECT state FROM workflows WHERE id = ?", (run_id,)
            ).fetchone()
            if state is None or state["state"] in WORKFLOW_TERMINAL_STATES:
                continue
            workflow_cancel(ctx, e.WorkflowCancel(run_id, reason))
        cancelled += 1
    return cancelled


def schedule_fire(ctx: ApplyContext, p: e.ScheduleFire) -> dict[str, Any]:
    schedule = _schedule(ctx, p.schedule_id)
    decisions = p.items()
    for d in decisions:
        _check_decision(d)
    cur, ts = ctx.cur, ctx.entry.ts
    last, buffered = schedule["last_slot_ms"], schedule["buffered_slot_ms"]
    counts = {"fired": 0, "missed": 0, "skipped": 0}
    ignored, runs = 0, []
    fired_at, fired_slot = schedule["last_fired_at"], schedule["last_fired_slot_ms"]
    for d in decisions:
        firing_buffered = d.action == "fire" and d.slot_ms == buffered
        if d.action != "trigger" and (
            schedule["paused"] or (d.slot_ms <= last and not firing_buffered)
        ):
            ignored += 1
            continue
        run_kind = run_id = None
        action, reason = d.action, d.reason
        if d.action in ("fire", "trigger"):
            mark, digest_mark = len(ctx.changes), digest.mark(cur.connection)
            cur.execute("SAVEPOINT firing")
            try:
                run_kind, run_id = _start_run(ctx, schedule, d)
                _cancel_runs(ctx, schedule, d.cancel, d.slot_ms)
                cur.execute("RELEASE firing")
                counts["fired"] += 1
                fired_at = ts
                if d.action == "fire":
                    fired_slot = d.slot_ms
                runs.append(run_id)
            except Rejected as why:
                cur.execute("ROLLBACK TO firing")
                cur.execute("RELEASE firing")
                digest.rewind(cur.connection, digest_mark)
                del ctx.changes[mark:]
                action, reason = "failed", why.reason
        elif d.action in ("missed", "skipped"):
            counts[d.action] += d.count
        if firing_buffered or (d.action == "buffered"):
            buffered = d.slot_ms if d.action == "buffered" else None
        if d.action != "trigger":
            last = max(last, d.slot_ms)
        cur.execute(
            "INSERT INTO schedule_firings (schedule_id, slot_ms, first_slot_ms, slot_count, action,"
            " reason, run_kind, run_id, raft_index, ts) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (schedule["id"], d.slot_ms, d.first_slot_ms or d.slot_ms, d.count, action,
             reason[:500], run_kind, run_id, ctx.index, ts),
        )  # fmt: skip
    cur.execute(
        "UPDATE schedules SET last_slot_ms = ?, buffered_slot_ms = ?, last_fired_at = ?,"
        " last_fired_slot_ms = ?, fired = fired + ?, missed = missed + ?, skipped = skipped + ?,"
        " updated_at = ? WHERE id = ?",
        (last, buffered, fired_at, fired_slot, counts["fired"], counts["missed"],
         counts["skipped"], ts, schedule["id"]),
    )  # fmt: skip
    cur.execute(
        "DELETE FROM schedule_firings WHERE schedule_id = ? AND seq <= (SELECT seq FROM"
        " schedule_firings WHERE schedule_id = ? ORDER BY seq DESC LIMIT 1 OFFSET ?)",
        (schedule["id"], schedule["id"], KEPT_FIRINGS),
    )
    return {"schedule_id": schedule["id"], "runs": runs, "ignored": ignored, **counts}


SCHEDULE_HANDLERS: dict[type[e.Payload], EntryHandler] = {
    e.ScheduleCreate: schedule_create,
    e.SchedulePause: schedule_pause,
    e.ScheduleDelete: schedule_delete,
    e.ScheduleFire: schedule_fire,
}
