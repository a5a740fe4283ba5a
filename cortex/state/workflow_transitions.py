"""The deterministic effect of workflow entries, and `settle_workflows`, which
runs after every entry: it merges a completed task's `context_update` into
its workflow's context (log order is completion order) and ends a workflow
once all its tasks are terminal. Conditions are never evaluated here: the
leader evaluates them and `WORKFLOW_ADVANCE` carries the decisions."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from cortex.state import entries as e
from cortex.state.canonical import dump as _dump
from cortex.state.reasons import (
    DUPLICATE_ID,
    IDEMPOTENCY_CONFLICT,
    ILLEGAL_TRANSITION,
    INVALID_PAYLOAD,
    INVALID_SPEC,
    INVALID_WORKFLOW,
    UNKNOWN_WORKFLOW,
    Rejected,
    quoted,
)
from cortex.state.spec_rules import SpecError, check_task_spec
from cortex.state.sql_lists import select_in
from cortex.state.task_states import TERMINAL_STATES
from cortex.state.transitions import (
    ApplyContext,
    EntryHandler,
    TaskChange,
    fairness_key,
)
from cortex.state.workflow_rules import (
    MAX_CONTEXT_BYTES,
    WORKFLOW_TERMINAL_STATES,
    default_verdict,
    find_cycle,
    workflow_outcome,
)

MAX_WORKFLOW_TASKS = 10_000
MAX_NAME_CHARS = 200
MAX_KEY_CHARS = 128
MAX_REASON_CHARS = 2000
# Tasks one WORKFLOW_CANCEL cancels at most, so no apply runs long.
CANCEL_BATCH = 200
_NON_TERMINAL = "('pending', 'queued', 'assigned', 'running')"
_TASK_FIELDS = frozenset({"key", "task_id", "spec", "depends_on", "condition", "pos"})


@dataclass(frozen=True)
class _TaskItem:
    key: str
    task_id: str
    spec: dict[str, Any]  # canonical, from `check_task_spec`
    depends_on: list[str]
    condition: str | None
    pos: int


def _task_item(index: int, raw: Any) -> _TaskItem:
    if not isinstance(raw, dict):
        raise Rejected(INVALID_WORKFLOW, f"workflow task {index} is not an object")
    unknown = sorted(str(name) for name in raw if name not in _TASK_FIELDS)
    if unknown:
        raise Rejected(
            INVALID_WORKFLOW,
            f"workflow task {index} has unknown fields {', '.join(map(quoted, unknown))}",
        )
    key, task_id = raw.get("key"), raw.get("task_id")
    depends_on, condition = raw.get("depends_on", []), raw.get("condition")
    pos = raw.get("pos", index)
    if not isinstance(key, str) or not key or len(key) > MAX_KEY_CHARS:
        raise Rejected(INVALID_WORKFLOW, f"workflow task {index} has no valid key")
    if not isinstance(task_id, str) or not task_id:
        raise Rejected(INVALID_WORKFLOW, f"workflow task {key} has no task_id")
    if not isinstance(depends_on, list) or not all(isinstance(d, str) for d in depends_on):
        raise Rejected(INVALID_WORKFLOW, f"workflow task {key}: depends_on is not a list of keys")
    if len(set(depends_on)) != len(depends_on):
        raise Rejected(INVALID_WORKFLOW, f"workflow task {key} lists a dependency twice")
    if condition is not None and not isinstance(condition, str):
        raise Rejected(INVALID_WORKFLOW, f"workflow task {key}: condition is not a string")
    if isinstance(pos, bool) or not isinstance(pos, int) or not 0 <= pos < MAX_WORKFLOW_TASKS:
        raise Rejected(INVALID_WORKFLOW, f"workflow task {key}: pos is not a valid position")
    if not isinstance(raw.get("spec"), dict):
        raise Rejected(INVALID_SPEC, f"workflow task {key}: spec is not an object")
    try:
        spec = check_task_spec(raw["spec"])
    except SpecError as err:
        raise Rejected(INVALID_SPEC, f"workflow task {key}: {err}") from None
    return _TaskItem(key, task_id, spec, depends_on, condition or None, pos)


def _existing_keys(ctx: ApplyContext, workflow_id: str, keys: list[str]) -> set[str]:
    return {
        row[0]
        for row in select_in(
            ctx.cur,
            "SELECT workflow_key FROM tasks WHERE workflow_id = ? AND workflow_key IN ({})",
            keys,
            before=(workflow_id,),
        )
    }


def _task_items(ctx: ApplyContext, workflow_id: str, raw: list[Any]) -> list[_TaskItem]:
    """One part's tasks, checked against the tasks earlier parts brought: new
    keys, dependencies on tasks of earlier parts or of this one, no cycle.
    A cycle through earlier parts is impossible, since their tasks could only
    depend on tasks before them."""
    if not raw:
        raise Rejected(INVALID_WORKFLOW, "a workflow needs at least one task")
    if len(raw) > MAX_WORKFLOW_TASKS:
        raise Rejected(INVALID_WORKFLOW, f"a workflow has at most {MAX_WORKFLOW_TASKS} tasks")
    items = [_task_item(i, item) for i, item in enumerate(raw)]
    keys = [item.key for item in items]
    if len(set(keys)) != len(keys):
        raise Rejected(INVALID_WORKFLOW, "workflow task keys are not unique")
    if len({item.task_id for item in items}) != len(items):
        raise Rejected(INVALID_WORKFLOW, "workflow task ids are not unique")
    if len({item.pos for item in items}) != len(items):
        raise Rejected(INVALID_WORKFLOW, "workflow task positions are not unique")
    again = _existing_keys(ctx, workflow_id, keys)
    if again:
        raise Rejected(
            INVALID_WORKFLOW, f"workflow task key {quoted(min(again))} is already in the workflow"
        )
    known = set(keys)
    outside = sorted({d for item in items for d in item.depends_on if d not in known})
    earlier = _existing_keys(ctx, workflow_id, outside)
    for item in items:
        missing = [d for d in item.depends_on if d not in known and d not in earlier]
        if missing:
            raise Rejected(
                INVALID_WORKFLOW,
                f"workflow task {item.key} depends on unknown task {missing[0]}",
            )
    cycle = find_cycle({item.key: [d for d in item.depends_on if d in known] for item in items})
    if cycle:
        raise Rejected(INVALID_WORKFLOW, f"dependency cycle: {' -> '.join(cycle)}")
    ids = [item.task_id for item in items]
    taken = next(select_in(ctx.cur, "SELECT id FROM tasks WHERE id IN ({}) LIMIT 1", ids), None)
    if taken is not None:
        raise Rejected(DUPLICATE_ID, f"task id {taken['id']} already exists")
    return items


def _insert_tasks(
    ctx: ApplyContext, workflow_id: str, items: list[_TaskItem], traceparent: str | None
) -> None:
    """Tasks without dependencies or condition start queued, the rest
    pending; queued ones of a workflow still `submitting` are not scheduled.
    Each keeps `traceparent`, the context of its workflow's run."""
    cur, ts = ctx.cur, ctx.entry.ts
    states = ["pending" if item.depends_on or item.condition else "queued" for item in items]
    cur.executemany(
        "INSERT INTO tasks (id, workflow_id, workflow_key, type, state, priority, spec,"
        " constraints, retry_policy, timeout_ms, labels, created_at, updated_at, submit_index,"
        " workflow_pos, condition, traceparent, concurrency_key, fairness_key)"
        " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        [
            (item.task_id, workflow_id, item.key, item.spec["type"], state,
             item.spec["priority"], _dump(item.spec), _dump(item.spec["constraints"]),
             _dump(item.spec["retry_policy"]), item.spec["timeout_ms"],
             _dump(item.spec["labels"]), ts, ts, ctx.index, item.pos, item.condition,
             traceparent, item.spec["concurrency_key"], fairness_key(item.spec))
            for item, state in zip(items, states, strict=True)
        ],
    )  # fmt: skip
    cur.executemany(
        "INSERT INTO task_dependencies (workflow_id, task_key, depends_on_key, condition)"
        " VALUES (?,?,?,?)",
        [(workflow_id, item.key, dep, item.condition) for item in items for dep in item.depends_on],
    )
    for item, state in zip(items, states, strict=True):
        ctx.event("submitted", item.task_id, None, state, ctx.entry.node, 0,
                  {"workflow_id": workflow_id, "key": item.key})  # fmt: skip
        ctx.changes.append(TaskChange(item.task_id, state, None, 0))


def workflow_submit(ctx: ApplyContext, p: e.WorkflowSubmit) -> dict[str, Any]:
    cur = ctx.cur
    if p.idempotency_key:
        prior = cur.execute(
            "SELECT id, json_extract(definition, '$.digest') AS digest FROM workflows"
            " WHERE idempotency_key = ?",
            (p.idempotency_key,),
        ).fetchone()
        if prior is not None:
            if p.definition_digest and prior["digest"] and prior["digest"] != p.definition_digest:
                raise Rejected(
                    IDEMPOTENCY_CONFLICT,
                    f"idempotency key {quoted(p.idempotency_key)} is already used by workflow"
                    f" {prior['id']}, submitted with a different definition",
                )
            return {"workflow_id": prior["id"], "created": False}
    if cur.execute("SELECT 1 FROM workflows WHERE id = ?", (p.workflow_id,)).fetchone():
        return {"workflow_id": p.workflow_id, "created": False}
    if not p.workflow_id or not p.name or len(p.name) > MAX_NAME_CHARS:
        raise Rejected(
            INVALID_WORKFLOW,
            f"a workflow needs an id and a name of at most {MAX_NAME_CHARS} characters",
        )
    context = _dump(p.context)
    if len(context) > MAX_CONTEXT_BYTES:
        raise Rejected(INVALID_WORKFLOW, f"workflow context is over {MAX_CONTEXT_BYTES} bytes")
    total = p.total_tasks or len(p.tasks)
    if not len(p.tasks) <= total <= MAX_WORKFLOW_TASKS:
        raise Rejected(
            INVALID_WORKFLOW,
            f"total_tasks {total} is not between the {len(p.tasks)} tasks sent and"
            f" {MAX_WORKFLOW_TASKS}",
        )
    items = _task_items(ctx, p.workflow_id, p.tasks)
    ts = ctx.entry.ts
    state = "running" if len(items) == total else "submitting"
    cur.execute(
        "INSERT INTO workflows (id, name, state, definition, context, created_at, idempotency_key,"
        " updated_at, submit_index, total_tasks, parts, traceparent, run_traceparent)"
        " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (p.workflow_id, p.name, state, _dump(_definition_record(p)), context, ts,
         p.idempotency_key or None, ts, ctx.index, total, 1, p.traceparent, p.run_traceparent),
    )  # fmt: skip
    ctx.event("workflow_submitted", detail={"workflow_id": p.workflow_id, "name": p.name,
                                            "tasks": total})  # fmt: skip
    _insert_tasks(ctx, p.workflow_id, items, p.run_traceparent)
    return {"workflow_id": p.workflow_id, "created": True, "tasks": len(items), "state": state}


def _definition_record(p: e.WorkflowSubmit) -> dict[str, Any]:
    """What the `definition` column keeps of a workflow (its tasks are rows
    of their own): its name and its definition's digest."""
    return {"name": p.name, **({"digest": p.definition_digest} if p.definition_digest else {})}


def workflow_tasks(ctx: ApplyContext, p: e.WorkflowTasks) -> dict[str, Any]:
    workflow = _workflow(ctx, p.workflow_id)
    if p.part < 1:
        raise Rejected(INVALID_PAYLOAD, f"part {p.part} is not a later part (1 or more)")
    if p.part < workflow["parts"]:
        return {"workflow_id": p.workflow_id, "created": False, "part": p.part,
                "state": workflow["state"]}  # fmt: skip
    if workflow["state"] != "submitting":
        raise Rejected(
            ILLEGAL_TRANSITION,
            f"workflow {p.workflow_id} is {workflow['state']}, not waiting for parts",
        )
    if p.part != workflow["parts"]:
        raise Rejected(
            INVALID_PAYLOAD,
            f"part {p.part} of workflow {p.workflow_id}, expected {workflow['parts']}",
        )
    items = _task_items(ctx, p.workflow_id, p.tasks)
    held = ctx.cur.execute(
        "SELECT COUNT(*) FROM tasks WHERE workflow_id = ?", (p.workflow_id,)
    ).fetchone()[0]
    if held + len(items) > workflow["total_tasks"]:
        raise Rejected(
            INVALID_WORKFLOW,
            f"part {p.part} brings workflow {p.workflow_id} past its {workflow['total_tasks']}"
            " tasks",
        )
    _insert_tasks(ctx, p.workflow_id, items, workflow["run_traceparent"])
    state = "running" if held + len(items) == workflow["total_tasks"] else "submitting"
    ctx.cur.execute(
        "UPDATE workflows SET parts = ?, state = ?, updated_at = ? WHERE id = ?",
        (p.part + 1, state, ctx.entry.ts, p.workflow_id),
    )
    if state == "running":
        ctx.event("workflow_received", from_state="submitting", to_state="running",
                  detail={"workflow_id": p.workflow_id, "parts": p.part + 1})  # fmt: skip
        # Its queued tasks are now schedulable: tell the scheduler.
        for (task_id,) in ctx.cur.execute(
            "SELECT id FROM tasks WHERE workflow_id = ? AND state = 'queued' ORDER BY rowid",
            (p.workflow_id,),
        ).fetchall():
            ctx.changes.append(TaskChange(task_id, "queued", None, 0))
    return {"workflow_id": p.workflow_id, "created": True, "part": p.part, "state": state}


def _workflow(ctx: ApplyContext, workflow_id: str) -> sqlite3.Row:
    row = ctx.cur.execute("SELECT * FROM workflows WHERE id = ?", (workflow_id,)).fetchone()
    if row is None:
        raise Rejected(UNKNOWN_WORKFLOW, f"workflow {workflow_id} does not exist")
    return row


def _dependency_states(ctx: ApplyContext, workflow_id: str, key: str) -> dict[str, str]:
    # CROSS JOIN keeps the dependencies as the outer loop, so each one is a
    # lookup by key (not a scan of the workflow's tasks by state).
    rows = ctx.cur.execute(
        "SELECT d.depends_on_key AS key, t.state AS state FROM task_dependencies d"
        " CROSS JOIN tasks t ON t.workflow_id = d.workflow_id AND t.workflow_key = d.depends_on_key"
        " WHERE d.workflow_id = ? AND d.task_key = ? ORDER BY d.rowid",
        (workflow_id, key),
    ).fetchall()
    return {row["key"]: row["state"] for row in rows}


def _apply_decision(ctx: ApplyContext, workflow_id: str, raw: Any) -> str:
    if not isinstance(raw, dict):
        raise Rejected(INVALID_PAYLOAD, "a decision is not an object")
    task_id, key = raw.get("task_id"), raw.get("key")
    decision, reason = raw.get("decision"), raw.get("reason", "")
    if not isinstance(task_id, str) or not isinstance(key, str) or not isinstance(reason, str):
        raise Rejected(INVALID_PAYLOAD, "a decision needs task_id, key and reason strings")
    if decision not in ("run", "skip", "fail"):
        raise Rejected(INVALID_PAYLOAD, f"decision for {key} is not run, skip or fail")
    task = ctx.task(task_id)
    if task["workflow_id"] != workflow_id or task["workflow_key"] != key:
        raise Rejected(
            INVALID_PAYLOAD, f"task {task_id} is not task {key} of workflow {workflow_id}"
        )
    if task["state"] != "pending":
        raise Rejected(
            ILLEGAL_TRANSITION, f"task {key} is {task['state']}, not pending: already decided"
        )
    dependencies = _dependency_states(ctx, workflow_id, key)
    for dependency, state in dependencies.items():
        if state not in TERMINAL_STATES:
            raise Rejected(
                ILLEGAL_TRANSITION, f"dependency {dependency} of task {key} is still {state}"
            )
    if not task["condition"]:
        expected, _ = default_verdict(dependencies)
        if decision == "fail" or expected != (decision == "run"):
            raise Rejected(
                ILLEGAL_TRANSITION,
                f"decision to {decision} {key} contradicts its dependencies' states",
            )
    detail = {"workflow_id": workflow_id, "reason": reason[:MAX_REASON_CHARS]}
    if decision == "run":
        ctx.move(task, "queued", "released", None, task["attempt"], detail)
        return "released"
    if decision == "fail":
        # Its condition threw, timed out or did not come to a boolean.
        ctx.move(task, "failed", "failed", None, task["attempt"], {**detail, "condition": True},
                 set_error=reason[:MAX_REASON_CHARS], set_completed_at=ctx.entry.ts)  # fmt: skip
        return "failed"
    ctx.move(task, "skipped", "skipped", None, task["attempt"], detail,
             set_error=reason[:MAX_REASON_CHARS], set_completed_at=ctx.entry.ts)  # fmt: skip
    return "skipped"


def workflow_advance(ctx: ApplyContext, p: e.WorkflowAdvance) -> dict[str, Any]:
    """Applies each decision on its own: a stale or duplicate one (its task
    is no longer pending, e.g. decided by an earlier leader) is recorded as
    rejected without undoing the others."""
    workflow = _workflow(ctx, p.workflow_id)
    if workflow["state"] != "running":
        raise Rejected(ILLEGAL_TRANSITION, f"workflow {p.workflow_id} is {workflow['state']}")
    counts = {"released": 0, "skipped": 0, "failed": 0, "rejected": 0}
    for raw in p.decisions:
        try:
            counts[_apply_decision(ctx, p.workflow_id, raw)] += 1
        except Rejected as why:
            counts["rejected"] += 1
            task_id = raw.get("task_id") if isinstance(raw, dict) else None
            ctx.rejected(task_id if isinstance(task_id, str) else None, why.code, why.text,
                         workflow_id=p.workflow_id)  # fmt: skip
    return counts


def workflow_cancel(ctx: ApplyContext, p: e.WorkflowCancel) -> dict[str, Any]:
    """Cancels the workflow and at most `CANCEL_BATCH` of its unfinished
    tasks; while some remain (`remaining` in the result), a WORKFLOW_CANCEL
    of the already cancelled workflow cancels the next ones. A workflow that
    was still `submitting` frees its idempotency key, so submitting again
    starts afresh."""
    workflow = _workflow(ctx, p.workflow_id)
    reason = p.reason[:MAX_REASON_CHARS] or "cancelled by request"
    tasks = ctx.cur.execute(
        f"SELECT * FROM tasks WHERE workflow_id = ? AND state IN {_NON_TERMINAL}"
        " ORDER BY rowid LIMIT ?",
        (p.workflow_id, CANCEL_BATCH + 1),
    ).fetchall()
    if workflow["state"] in WORKFLOW_TERMINAL_STATES:
        if workflow["state"] != "cancelled" or not tasks:
            raise Rejected(
                ILLEGAL_TRANSITION, f"workflow {p.workflow_id} is already {workflow['state']}"
            )
        reason = workflow["error"] or reason
    else:
        ctx.cur.execute(
            "UPDATE workflows SET state = 'cancelled', error = ?, completed_at = ?, updated_at = ?,"
            " idempotency_key = CASE WHEN state = 'submitting' THEN NULL ELSE idempotency_key END"
            " WHERE id = ?",
            (reason, ctx.entry.ts, ctx.entry.ts, p.workflow_id),
        )
    for task in tasks[:CANCEL_BATCH]:
        ctx.move(task, "cancelled", "cancelled", task["assigned_node"], task["attempt"],
                 {"reason": reason, "workflow_id": p.workflow_id},
                 set_completed_at=ctx.entry.ts, set_error=reason)  # fmt: skip
    remaining = 0
    if len(tasks) > CANCEL_BATCH:
        remaining = ctx.cur.execute(
            f"SELECT COUNT(*) FROM tasks WHERE workflow_id = ? AND state IN {_NON_TERMINAL}",
            (p.workflow_id,),
        ).fetchone()[0]
    if workflow["state"] != "cancelled":
        ctx.event("workflow_cancelled", from_state=workflow["state"], to_state="cancelled",
                  detail={"workflow_id": p.workflow_id, "reason": reason,
                          "tasks": len(tasks[:CANCEL_BATCH]) + remaining})  # fmt: skip
    return {"cancelled_tasks": len(tasks[:CANCEL_BATCH]), "remaining": remaining}


# -- after every entry ---------------------------------------------------------


def settle_workflows(ctx: ApplyContext) -> None:
    """Workflow consequences of the task changes an entry made: context
    updates of completed tasks, and workflows whose tasks are all terminal
    now end. A change known to be of a standalone task needs no look."""
    watched = [c for c in ctx.changes if c.state in TERMINAL_STATES and c.in_workflow is not False]
    if not watched:
        return
    ids = list(dict.fromkeys(c.task_id for c in watched))
    rows: dict[str, sqlite3.Row] = {
        row["id"]: row
        for row in select_in(
            ctx.cur,
            "SELECT id, workflow_id, workflow_key, result FROM tasks"
            " WHERE workflow_id IS NOT NULL AND id IN ({})",
            ids,
        )
    }
    touched: dict[str, None] = {}
    for change in watched:
        row = rows.get(change.task_id)
        if row is None:
            continue
        if change.state == "completed":
            _merge_context(ctx, row)
        touched[row["workflow_id"]] = None
    for workflow_id in touched:
        _finish_if_done(ctx, workflow_id)


def _merge_context(ctx: ApplyContext, row: sqlite3.Row) -> None:
    """Shallow merge (top-level keys replace) of the task's context_update,
    while its workflow runs (a dead letter retried after its workflow failed
    changes nothing of it)."""
    result = json.loads(row["result"]) if row["result"] else None
    update = result.get("context_update") if isinstance(result, dict) else None
    if not isinstance(update, dict) or not update:
        return
    workflow = _workflow(ctx, row["workflow_id"])
    if workflow["state"] != "running":
        return
    merged = {**json.loads(workflow["context"]), **update}
    text = _dump(merged)
    detail: dict[str, Any] = {"workflow_id": workflow["id"], "keys": sorted(update)[:100]}
    if len(text) > MAX_CONTEXT_BYTES:
        detail["reason"] = f"the context would be {len(text)} bytes, over {MAX_CONTEXT_BYTES}"
        ctx.event("context_update_rejected", row["id"], detail=detail)
        return
    ctx.cur.execute(
        "UPDATE workflows SET context = ?, updated_at = ? WHERE id = ?",
        (text, ctx.entry.ts, workflow["id"]),
    )
    ctx.event("context_updated", row["id"], detail=detail)


def _finish_if_done(ctx: ApplyContext, workflow_id: str) -> None:
    workflow = _workflow(ctx, workflow_id)
    if workflow["state"] != "running":
        return
    busy = ctx.cur.execute(
        f"SELECT 1 FROM tasks WHERE workflow_id = ? AND state IN {_NON_TERMINAL} LIMIT 1",
        (workflow_id,),
    ).fetchone()
    if busy is not None:
        return
    rows = ctx.cur.execute(
        "SELECT workflow_key, state, error FROM tasks WHERE workflow_id = ? ORDER BY rowid",
        (workflow_id,),
    ).fetchall()
    # Why a task failed or was dead-lettered goes into the workflow's error.
    notes = {r["workflow_key"]: r["error"] for r in rows
             if r["state"] in ("failed", "dead_letter") and r["error"]}  # fmt: skip
    outcome = workflow_outcome(((r["workflow_key"], r["state"]) for r in rows), notes)
    if outcome is None:
        return
    state, error = outcome
    ctx.cur.execute(
        "UPDATE workflows SET state = ?, error = ?, completed_at = ?, updated_at = ? WHERE id = ?",
        (state, error, ctx.entry.ts, ctx.entry.ts, workflow_id),
    )
    detail: dict[str, Any] = {"workflow_id": workflow_id}
    if error:
        detail["error"] = error
    ctx.event(f"workflow_{state}", from_state="running", to_state=state, detail=detail)


WORKFLOW_HANDLERS: dict[type[e.Payload], EntryHandler] = {
    e.WorkflowSubmit: workflow_submit,
    e.WorkflowTasks: workflow_tasks,
    e.WorkflowAdvance: workflow_advance,
    e.WorkflowCancel: workflow_cancel,
}
