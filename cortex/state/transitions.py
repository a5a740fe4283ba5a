"""The deterministic effect of task entries on the database, and the
`ApplyContext` every entry handler works through (node, workflow and purge
entries have modules of their own; `cortex.state.handlers` puts them all
together). Handlers read only the entry and the database; they raise `Rejected(code, text)` (codes in
`cortex.state.reasons`) for an entry that decodes but is not a legal
transition, and the machine records it. Nothing here uses floating point
arithmetic or lets a library's message into the database."""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from cortex.state import entries as e
from cortex.state.backoff import backoff_delay_ms, nearest_thousandths
from cortex.state.canonical import dump as _dump
from cortex.state.dead_letters import workflow_retry_scope
from cortex.state.key_limits import KeyCharges
from cortex.state.reasons import (
    IDEMPOTENCY_CONFLICT,
    ILLEGAL_TRANSITION,
    INVALID_SPEC,
    STALE_REPORT,
    UNKNOWN_NODE,
    UNKNOWN_TASK,
    ReasonCode,
    Rejected,
    quoted,
)
from cortex.state.runs import Run
from cortex.state.spec_rules import SpecError, check_task_spec
from cortex.state.task_states import ACTIVE_STATES, TERMINAL_STATES

DEFAULT_FAIRNESS_KEY = "default"


# A task's row as read, or as a handler has already moved it on this entry.
TaskRow = sqlite3.Row | Mapping[str, Any]


@dataclass(frozen=True)
class TaskChange:
    """What an applied entry did to one task, for in-process listeners; a
    state change made by `ApplyContext.move` also carries the task's type and
    times as its row holds them right after (for the metrics, which then
    need not read the row back)."""

    task_id: str
    state: str
    node: str | None
    attempt: int
    type: str | None = None
    created_at: int | None = None
    started_at: int | None = None
    completed_at: int | None = None
    # Whether the task belongs to a workflow, when the change knows (None:
    # not known); a task's workflow never changes once it is submitted.
    in_workflow: bool | None = None


def last_changes(changes: list[TaskChange]) -> list[TaskChange]:
    """Each task's last change among `changes` (one entry may move a task
    more than once: submitted and placed, ended and queued again), in the
    order the tasks first changed: where the task stands after them."""
    return list({change.task_id: change for change in changes}.values())


def _in_workflow(task: TaskRow) -> bool | None:
    try:
        return task["workflow_id"] is not None
    except (IndexError, KeyError):
        return None


def _column(task: TaskRow, name: str) -> Any:
    """A column of a task row, None when the row was read without it."""
    try:
        return task[name]
    except (IndexError, KeyError):
        return None


@dataclass
class ApplyContext:
    cur: sqlite3.Cursor
    index: int
    entry: e.Entry
    changes: list[TaskChange]
    # The entry's batch holds plain JSON for certain (no NaN, no infinity,
    # no lone surrogate), so specs need not be searched for them.
    plain_json: bool = False
    # Columns the next `move` sets besides its own: a start recorded from an
    # outcome's `started_at` (`start_with_outcome`).
    carried: dict[str, Any] | None = None
    # The run the entry is applied in (`cortex.state.runs`): its tasks' rows
    # were read before it, and its writes are held until the run ends.
    run: Run | None = None

    def write(self, sql: str, params: tuple[Any, ...]) -> None:
        """Writes a row now, or when the entry's run ends."""
        if self.run is None:
            self.cur.execute(sql, params)
        else:
            self.run.hold(sql, params)

    def event(
        self,
        event: str,
        task_id: str | None = None,
        from_state: str | None = None,
        to_state: str | None = None,
        node: str | None = None,
        attempt: int | None = None,
        detail: dict[str, Any] | None = None,
        ts: int | None = None,
    ) -> None:
        self.write(
            _EVENT_INSERT,
            (
                self.index,
                self.entry.id,
                self.entry.type,
                task_id,
                event,
                from_state,
                to_state,
                node,
                attempt,
                _dump(detail) if detail is not None else None,
                self.entry.ts if ts is None else ts,
            ),
        )

    def task(self, task_id: str) -> sqlite3.Row:
        if self.run is not None:
            row = self.run.tasks.get(task_id)
        else:
            row = self.cur.execute("SELECT * FROM tasks WHERE id = ?", (task_id,)).fetchone()
        if row is None:
            raise Rejected(UNKNOWN_TASK, f"task {task_id} does not exist")
        return row

    def task_exists(self, task_id: str) -> bool:
        if self.run is not None:
            return task_id in self.run.tasks
        return (
            self.cur.execute("SELECT 1 FROM tasks WHERE id = ?", (task_id,)).fetchone() is not None
        )

    def prior_submission(self, key: str) -> sqlite3.Row | None:
        """The task an idempotency key was first used for (`task_id`) and its
        spec (`spec`, None once the task is purged); a run holds only new keys."""
        if self.run is not None:
            return None
        row: sqlite3.Row | None = self.cur.execute(
            "SELECT s.task_id AS task_id, t.spec AS spec FROM submissions s"
            " LEFT JOIN tasks t ON t.id = s.task_id WHERE s.idempotency_key = ?",
            (key,),
        ).fetchone()
        return row

    def node_status(self, node: str) -> str | None:
        """A node's status, None for a node the cluster does not know."""
        statuses = self.run.node_statuses if self.run is not None else None
        if statuses is not None and node in statuses:
            return statuses[node]
        row = self.cur.execute("SELECT status FROM nodes WHERE id = ?", (node,)).fetchone()
        status = None if row is None else str(row["status"])
        if statuses is not None:
            statuses[node] = status
        return status

    def rejected(
        self, task_id: str | None, code: ReasonCode, text: str, **extra: Any
    ) -> dict[str, Any]:
        """Records a refusal (of the entry, or of one item of it) as a
        `rejected` event; returns the result the proposer gets."""
        reason = f"{code}: {text}"
        self.event(
            "rejected",
            task_id,
            detail={"reason": reason, "code": code, "entry_type": self.entry.type, **extra},
        )
        return {"ok": False, "reason": reason}

    def move(
        self,
        task: TaskRow,
        to_state: str,
        event: str,
        node: str | None,
        attempt: int,
        detail: dict[str, Any] | None = None,
        **updates: Any,
    ) -> None:
        """Changes a task's state (plus the `set_` columns) and writes its event."""
        columns = {name.removeprefix("set_"): value for name, value in updates.items()}
        if self.carried:
            columns.update(self.carried)
            self.carried = None
        columns["state"] = to_state
        columns["updated_at"] = self.entry.ts
        self.write(_task_update_sql(tuple(columns)), (*columns.values(), task["id"]))
        self.event(event, task["id"], task["state"], to_state, node, attempt, detail)
        started = columns["started_at"] if "started_at" in columns else _column(task, "started_at")
        completed = (
            columns["completed_at"] if "completed_at" in columns else _column(task, "completed_at")
        )
        self.changes.append(
            TaskChange(
                task["id"], to_state, node, attempt,
                _column(task, "type"), _column(task, "created_at"), started, completed,
                _in_workflow(task),
            )
        )  # fmt: skip

    def start_with_outcome(self, task: sqlite3.Row, p: e.TaskComplete | e.TaskFailed) -> TaskRow:
        """An outcome carrying its attempt's start (`started_at`, see
        `entries.fold_starts`) for a task still `assigned`: records the start
        as TASK_STARTED would have (its event, at its time, and `started_at`,
        which the outcome's `move` writes in the same update) and returns the
        task as running. Otherwise the task as it is."""
        if p.started_at is None or task["state"] != "assigned":
            return task
        self.event("started", task["id"], "assigned", "running", p.node, p.attempt, ts=p.started_at)
        self.changes.append(
            TaskChange(task["id"], "running", p.node, p.attempt,
                       task["type"], task["created_at"], p.started_at)
        )  # fmt: skip
        self.carried = {"started_at": p.started_at}
        return _Moved(task, {"state": "running", "started_at": p.started_at})


class _Moved(Mapping[str, Any]):
    """A task row as a transition left it before its update is written: the
    `changed` columns over the row read (no copy of the row's other columns)."""

    __slots__ = ("_changed", "_row")

    def __init__(self, row: TaskRow, changed: dict[str, Any]) -> None:
        self._row = row
        self._changed = changed

    def __getitem__(self, name: str) -> Any:
        changed = self._changed
        return changed[name] if name in changed else self._row[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._row.keys())

    def __len__(self) -> int:
        return len(self._row.keys())


_EVENT_INSERT = (
    "INSERT INTO task_events (raft_index, entry_id, entry_type, task_id, event,"
    " from_state, to_state, node, attempt, detail, ts) VALUES (?,?,?,?,?,?,?,?,?,?,?)"
)


@functools.cache
def _task_update_sql(columns: tuple[str, ...]) -> str:
    """The UPDATE of a task row that sets `columns`: a handful of texts,
    made once each instead of on every move."""
    return f"UPDATE tasks SET {', '.join(f'{name} = ?' for name in columns)} WHERE id = ?"


# The function that applies one payload type: returns the result's fields, or
# raises Rejected.
EntryHandler = Callable[[ApplyContext, Any], dict[str, Any]]


def _check_fence(task: sqlite3.Row, attempt: int, node: str, allowed: frozenset[str]) -> None:
    if task["state"] not in allowed:
        raise Rejected(
            ILLEGAL_TRANSITION,
            f"task {task['id']} is {task['state']}, not {'/'.join(sorted(allowed))}",
        )
    if task["attempt"] != attempt or task["assigned_node"] != node:
        raise Rejected(
            STALE_REPORT,
            f"task {task['id']}: attempt {attempt} on {node}, current is"
            f" attempt {task['attempt']} on {task['assigned_node']}",
        )


def task_submit(ctx: ApplyContext, p: e.TaskSubmit) -> dict[str, Any]:
    if p.idempotency_key:
        prior = ctx.prior_submission(p.idempotency_key)
        if prior is not None:
            if prior["spec"] is not None and not same_spec(json.loads(prior["spec"]), p.spec):
                raise Rejected(
                    IDEMPOTENCY_CONFLICT,
                    f"idempotency key {quoted(p.idempotency_key)} is already used by task"
                    f" {prior['task_id']}, submitted with a different spec",
                )
            return {"task_id": prior["task_id"], "created": False}
    if ctx.task_exists(p.task_id):
        return {"task_id": p.task_id, "created": False}
    try:
        spec = check_task_spec(p.spec, plain_json=ctx.plain_json)
    except SpecError as err:
        raise Rejected(INVALID_SPEC, str(err)) from None
    ctx.write(
        "INSERT INTO tasks (id, workflow_id, workflow_key, type, state, priority, spec,"
        " constraints, retry_policy, timeout_ms, labels, idempotency_key, created_at,"
        " updated_at, submit_index, traceparent, concurrency_key, fairness_key)"
        " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            p.task_id,
            p.workflow_id,
            p.workflow_key,
            spec["type"],
            "queued",
            spec["priority"],
            _dump(spec),
            _dump(spec["constraints"]),
            _dump(spec["retry_policy"]),
            spec["timeout_ms"],
            _dump(spec["labels"]),
            p.idempotency_key,
            ctx.entry.ts,
            ctx.entry.ts,
            ctx.index,
            p.traceparent,
            spec["concurrency_key"],
            fairness_key(spec),
        ),
    )
    if p.idempotency_key:
        ctx.write(
            "INSERT INTO submissions (idempotency_key, task_id, raft_index) VALUES (?,?,?)",
            (p.idempotency_key, p.task_id, ctx.index),
        )
    ctx.event("submitted", p.task_id, None, "queued", ctx.entry.node, 0)
    ctx.changes.append(TaskChange(p.task_id, "queued", None, 0))
    return {"task_id": p.task_id, "created": True}


def fairness_key(spec: dict[str, Any]) -> str:
    """The fairness key a task's placements count against."""
    return spec["fairness_key"] or DEFAULT_FAIRNESS_KEY


def same_spec(stored: dict[str, Any], submitted: Any) -> bool:
    """Whether a submitted spec is a task's stored one, both in canonical
    form (defaults filled in, aliases resolved); a spec that breaks the
    rules is never the same."""
    try:
        return check_task_spec(stored) == check_task_spec(submitted)
    except SpecError:
        return False


def task_assign(ctx: ApplyContext, p: e.TaskAssign) -> dict[str, Any]:
    """Applies each placement of the round on its own; a stale one is
    recorded as rejected without undoing the others."""
    placed, rejected = 0, 0
    limits = KeyCharges(ctx)
    for item in p.items():
        try:
            task = ctx.task(item.task_id)
            if task["state"] != "queued":
                raise Rejected(
                    ILLEGAL_TRANSITION, f"task {item.task_id} is {task['state']}, not queued"
                )
            if item.attempt != task["attempt"] + 1:
                raise Rejected(
                    STALE_REPORT,
                    f"assignment of task {item.task_id} for attempt {item.attempt}, "
                    f"expected {task['attempt'] + 1}",
                )
            if task["workflow_id"] is not None:
                # A submission not yet whole, or a cancel under way, holds the
                # workflow's queued tasks (a dead letter retried after its
                # workflow failed runs on its own).
                held = ctx.cur.execute(
                    "SELECT state FROM workflows WHERE id = ?"
                    " AND state IN ('submitting', 'cancelled')",
                    (task["workflow_id"],),
                ).fetchone()
                if held is not None:
                    raise Rejected(
                        ILLEGAL_TRANSITION,
                        f"task {item.task_id} belongs to a {held['state']} workflow",
                    )
            status = ctx.node_status(item.node)
            if status is None:
                raise Rejected(
                    UNKNOWN_NODE, f"assignment of task {item.task_id} to unknown node {item.node}"
                )
            if status == "removed":
                raise Rejected(
                    ILLEGAL_TRANSITION,
                    f"assignment of task {item.task_id} to removed node {item.node}",
                )
            limits.charge(task)
            ctx.move(
                task,
                "assigned",
                "assigned",
                item.node,
                item.attempt,
                set_assigned_node=item.node,
                set_attempt=item.attempt,
                set_assigned_at=ctx.entry.ts,
            )
            placed += 1
        except Rejected as why:
            rejected += 1
            ctx.rejected(item.task_id, why.code, why.text)
    return {"placed": placed, "rejected": rejected}


def task_started(ctx: ApplyContext, p: e.TaskStarted) -> dict[str, Any]:
    task = ctx.task(p.task_id)
    _check_fence(task, p.attempt, p.node, frozenset({"assigned"}))
    detail = {"pid": p.pid} if p.pid is not None else None
    ctx.move(task, "running", "started", p.node, p.attempt, detail, set_started_at=ctx.entry.ts)
    return {}


def task_complete(ctx: ApplyContext, p: e.TaskComplete) -> dict[str, Any]:
    task = ctx.task(p.task_id)
    _check_fence(task, p.attempt, p.node, ACTIVE_STATES)
    moving = ctx.start_with_outcome(task, p)
    ctx.move(
        moving,
        "completed",
        "completed",
        p.node,
        p.attempt,
        {"exit_code": p.result.get("exit_code")},
        set_result=_dump(p.result),
        set_completed_at=ctx.entry.ts,
        set_error=None,
    )
    return {}


def _fail_or_retry(
    ctx: ApplyContext,
    task: TaskRow,
    reason: str,
    node: str | None,
    result: dict[str, Any] | None,
    permanent: bool = False,
) -> str:
    policy = json.loads(task["retry_policy"])
    columns: dict[str, Any] = {"set_error": reason}
    if result is not None:
        columns["set_result"] = _dump(result)
    # The dead-letter queue holds tasks that spent a retry budget: without
    # one (not retryable, no retries, a permanent error) a task just fails.
    if permanent or not policy["retryable"] or policy["max_retries"] == 0:
        detail: dict[str, Any] = {"reason": reason, **({"permanent": True} if permanent else {})}
        ctx.move(
            task, "failed", "failed", node, task["attempt"], detail,
            set_completed_at=ctx.entry.ts, **columns,
        )  # fmt: skip
        return "failed"
    if task["retries"] >= policy["max_retries"]:
        ctx.move(
            task, "dead_letter", "dead_lettered", node, task["attempt"],
            {"reason": reason, "retries": task["retries"]},
            set_completed_at=ctx.entry.ts, set_dead_lettered_at=ctx.entry.ts, **columns,
        )  # fmt: skip
        return "dead_letter"
    retry_number = task["retries"] + 1
    # Exact integers: the stored multiplier (a float) becomes whole thousandths.
    delay = backoff_delay_ms(
        policy["backoff_ms"], nearest_thousandths(policy["backoff_multiplier"]), retry_number
    )
    ctx.move(
        task, "queued", "retried", node, task["attempt"],
        {"reason": reason, "retry": retry_number, "delay_ms": delay},
        set_retries=retry_number, set_assigned_node=None, set_scheduled_after=ctx.entry.ts + delay,
        **columns,
    )  # fmt: skip
    return "queued"


def task_failed(ctx: ApplyContext, p: e.TaskFailed) -> dict[str, Any]:
    task = ctx.task(p.task_id)
    _check_fence(task, p.attempt, p.node, ACTIVE_STATES)
    moving = ctx.start_with_outcome(task, p)
    ctx.event("attempt_failed", p.task_id, moving["state"], None, p.node, p.attempt,
              {"reason": p.reason})  # fmt: skip
    return {"state": _fail_or_retry(ctx, moving, p.reason, p.node, p.result, p.permanent)}


def task_retry(ctx: ApplyContext, p: e.TaskRetry) -> dict[str, Any]:
    task = ctx.task(p.task_id)
    if task["state"] == "dead_letter":
        return _retry_dead_letter(ctx, task, p)
    if task["state"] not in ACTIVE_STATES and task["state"] != "queued":
        raise Rejected(
            ILLEGAL_TRANSITION,
            f"task {p.task_id} is {task['state']}; only active tasks can be re-queued",
        )
    if task["attempt"] != p.attempt:
        raise Rejected(
            STALE_REPORT,
            f"retry for attempt {p.attempt} of task {p.task_id}, current is {task['attempt']}",
        )
    if not p.spend_attempt:
        requeue(ctx, task, p.reason)
        return {"state": "queued"}
    return {"state": _fail_or_retry(ctx, task, p.reason, task["assigned_node"], None)}


def _retry_dead_letter(ctx: ApplyContext, task: sqlite3.Row, p: e.TaskRetry) -> dict[str, Any]:
    """Back to the queue with a fresh retry budget (its retries count from 0
    again); a workflow task rejoins its workflow or runs on its own
    (`cortex.state.dead_letters`). The result and the event say which."""
    budget = json.loads(task["retry_policy"])["max_retries"]
    outcome: dict[str, Any] = {"state": "queued", "retry_budget": budget}
    if task["workflow_id"] is not None:
        outcome.update(workflow_retry_scope(ctx.cur, task))
    ctx.move(
        task, "queued", "retried", None, task["attempt"],
        {"reason": p.reason, "from_dead_letter": True,
         **{k: v for k, v in outcome.items() if k != "state"}},
        set_retries=0, set_assigned_node=None, set_scheduled_after=ctx.entry.ts + p.delay_ms,
    )  # fmt: skip
    return outcome


def requeue(ctx: ApplyContext, task: sqlite3.Row, reason: str) -> None:
    """Back to the queue without spending a retry: the node, not the task, failed."""
    ctx.move(
        task, "queued", "requeued", task["assigned_node"], task["attempt"],
        {"reason": reason}, set_assigned_node=None,
    )  # fmt: skip


def task_cancel(ctx: ApplyContext, p: e.TaskCancel) -> dict[str, Any]:
    task = ctx.task(p.task_id)
    if task["state"] in TERMINAL_STATES:
        raise Rejected(ILLEGAL_TRANSITION, f"task {p.task_id} is already {task['state']}")
    ctx.move(
        task, "cancelled", "cancelled", task["assigned_node"], task["attempt"],
        {"reason": p.reason}, set_completed_at=ctx.entry.ts, set_error=p.reason,
    )  # fmt: skip
    return {}


def task_dead_letter(ctx: ApplyContext, p: e.TaskDeadLetter) -> dict[str, Any]:
    task = ctx.task(p.task_id)
    if task["state"] in TERMINAL_STATES:
        raise Rejected(ILLEGAL_TRANSITION, f"task {p.task_id} is already {task['state']}")
    ctx.move(
        task, "dead_letter", "dead_lettered", task["assigned_node"], task["attempt"],
        {"reason": p.reason}, set_completed_at=ctx.entry.ts, set_dead_lettered_at=ctx.entry.ts,
        set_error=p.reason,
    )  # fmt: skip
    return {}


TASK_HANDLERS: dict[type[e.Payload], EntryHandler] = {
    e.TaskSubmit: task_submit,
    e.TaskAssign: task_assign,
    e.TaskStarted: task_started,
    e.TaskComplete: task_complete,
    e.TaskFailed: task_failed,
    e.TaskRetry: task_retry,
    e.TaskCancel: task_cancel,
    e.TaskDeadLetter: task_dead_letter,
}
