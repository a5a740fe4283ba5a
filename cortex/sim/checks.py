"""Invariants read from a node's replicated state at the end of a run (its
audit log holds every transition in log order), and the check of each
scheduling round as the leader proposes it."""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from collections.abc import Iterable

from cortex.sim.invariants import (
    LIMITS_AND_SLOTS_HOLD,
    ONE_COMPLETION_PER_TASK,
    WORKFLOW_RULES,
)
from cortex.state.queries import StateReader

TERMINAL = frozenset({"completed", "failed", "cancelled", "skipped", "dead_letter"})
_REPORTS = ("started", "completed", "attempt_failed")


def completions_and_fencing(conn: sqlite3.Connection) -> Iterable[tuple[str, str]]:
    """Invariant 3: one completion per task; every accepted report comes from
    the task's current attempt on its assigned node, never from a node after
    it was removed."""
    removed_at: dict[str, int] = {}
    for node, seq, event in conn.execute(
        "SELECT node, seq, event FROM task_events WHERE event IN ('node_left', 'node_joined')"
        " ORDER BY seq"
    ):
        if event == "node_left":
            removed_at.setdefault(node, seq)
        elif node in removed_at:
            # Simulated nodes keep their data dirs: none may come back.
            yield ONE_COMPLETION_PER_TASK, f"node {node} joined again after its removal"
    current: dict[str, tuple[int, str]] = {}
    completions: dict[str, int] = defaultdict(int)
    for seq, task_id, event, node, attempt in conn.execute(
        "SELECT seq, task_id, event, node, attempt FROM task_events"
        " WHERE task_id IS NOT NULL ORDER BY seq"
    ):
        if event == "assigned":
            current[task_id] = (attempt, node)
        elif event in _REPORTS:
            if current.get(task_id) != (attempt, node):
                yield (
                    ONE_COMPLETION_PER_TASK,
                    (
                        f"task {task_id}: {event} from attempt {attempt} on {node} accepted while the"
                        f" current attempt was {current.get(task_id)}"
                    ),
                )
            if node in removed_at and seq > removed_at[node]:
                yield ONE_COMPLETION_PER_TASK, f"task {task_id}: {event} from removed node {node}"
            if event == "completed":
                completions[task_id] += 1
    for task_id, count in completions.items():
        if count > 1:
            yield ONE_COMPLETION_PER_TASK, f"task {task_id} completed {count} times"


def workflow_rules(conn: sqlite3.Connection) -> Iterable[tuple[str, str]]:
    """Invariant 5: a workflow task is released only once all its
    dependencies are terminal, and without a condition only when they all
    completed; it is assigned only after its release; without a condition,
    a dependency that did not complete means it is skipped (or cancelled with
    its workflow)."""
    terminal_at: dict[str, int] = {}
    released_at: dict[str, int] = {}
    assigned_at: dict[str, int] = {}
    for seq, task_id, event, to_state in conn.execute(
        "SELECT seq, task_id, event, to_state FROM task_events WHERE task_id IS NOT NULL"
        " ORDER BY seq"
    ):
        if to_state in TERMINAL and task_id not in terminal_at:
            terminal_at[task_id] = seq
        if event == "released":
            released_at.setdefault(task_id, seq)
        if event == "assigned":
            assigned_at.setdefault(task_id, seq)
    rows = conn.execute(
        "SELECT t.id, t.workflow_id, t.workflow_key, t.state, t.condition, w.state"
        " FROM tasks t JOIN workflows w ON w.id = t.workflow_id"
    ).fetchall()
    by_key = {(r[1], r[2]): r for r in rows}
    deps: dict[tuple[str, str], list[str]] = defaultdict(list)
    for workflow_id, key, dependency in conn.execute(
        "SELECT workflow_id, task_key, depends_on_key FROM task_dependencies"
    ):
        deps[(workflow_id, key)].append(dependency)
    for (workflow_id, key), dependencies in deps.items():
        row = by_key.get((workflow_id, key))
        if row is None:
            continue
        task_id, state, condition, workflow_state = row[0], row[3], row[4], row[5]
        parents = [by_key.get((workflow_id, d)) for d in dependencies]
        if task_id in assigned_at and task_id not in released_at:
            yield WORKFLOW_RULES, f"workflow {workflow_id} task {key} ran without being released"
        if task_id in released_at:
            for dependency, parent in zip(dependencies, parents, strict=True):
                if parent is None:
                    continue
                done = terminal_at.get(parent[0])
                if done is None or done > released_at[task_id]:
                    yield (
                        WORKFLOW_RULES,
                        (
                            f"workflow {workflow_id} task {key} released before its dependency"
                            f" {dependency} ended"
                        ),
                    )
        if condition or any(p is None for p in parents):
            continue
        if any(p[3] in TERMINAL and p[3] != "completed" for p in parents if p is not None):
            if task_id in released_at:
                yield (
                    WORKFLOW_RULES,
                    (f"workflow {workflow_id} task {key} ran though a dependency did not complete"),
                )
            # (A task still pending has not been decided yet: fine until the end.)
            ended = state in TERMINAL and state not in ("skipped", "cancelled")
            if ended and workflow_state != "cancelled":
                yield (
                    WORKFLOW_RULES,
                    (
                        f"workflow {workflow_id} task {key} is {state}, not skipped, though a"
                        " dependency did not complete"
                    ),
                )


def outcomes(conn: sqlite3.Connection) -> Iterable[tuple[str, str]]:
    """Invariant 5, on the final states: a completed workflow holds no task
    that failed, was dead-lettered or cancelled; the dead-letter queue holds
    only tasks that had a retry budget to spend (without one, a task fails);
    a task fails without running only by its workflow condition."""
    for workflow_id, key, state in conn.execute(
        "SELECT w.id, t.workflow_key, t.state FROM workflows w JOIN tasks t ON t.workflow_id = w.id"
        " WHERE w.state = 'completed' AND t.state IN ('failed', 'dead_letter', 'cancelled')"
    ):
        yield WORKFLOW_RULES, f"workflow {workflow_id} completed though its task {key} is {state}"
    for (task_id,) in conn.execute(
        "SELECT id FROM tasks WHERE state = 'dead_letter'"
        " AND json_extract(retry_policy, '$.max_retries') = 0"
    ):
        yield WORKFLOW_RULES, f"task {task_id} was dead-lettered without a retry budget"
    for task_id, condition in conn.execute(
        "SELECT id, condition FROM tasks WHERE state = 'failed' AND attempt = 0"
    ):
        if not condition:
            yield WORKFLOW_RULES, f"task {task_id} failed without running and has no condition"


def limits_and_slots(conn: sqlite3.Connection) -> Iterable[tuple[str, str]]:
    """Replays the audit log: once a key's max-running limit is set, none of
    its tasks becomes active (assigned) while as many as it allows are
    active already; and no slot of a schedule (its tasks'
    CORTEX_SCHEDULED_TIME) started two tasks. Tasks active before their
    key's limit was set, or lowered, run on: a limit bounds placements, and
    an active task starting counts as nothing new."""
    keys = dict(
        conn.execute("SELECT id, concurrency_key FROM tasks WHERE concurrency_key IS NOT NULL")
    )
    limits: dict[str, int] = {}
    active: dict[str, set[str]] = defaultdict(set)
    for event, task_id, to_state, detail in conn.execute(
        "SELECT event, task_id, to_state, detail FROM task_events ORDER BY seq"
    ):
        if event == "limit_set":
            limit = json.loads(detail)
            limits[limit["key"]] = limit["max_running"]
            continue
        key = keys.get(task_id)
        if key is None or to_state is None:
            continue
        if to_state in ("assigned", "running"):
            if task_id in active[key]:
                continue
            active[key].add(task_id)
            if limits.get(key) and len(active[key]) > limits[key]:
                yield (
                    LIMITS_AND_SLOTS_HOLD,
                    (
                        f"key {key} had {len(active[key])} tasks active, over its limit {limits[key]}"
                    ),
                )
        else:
            active[key].discard(task_id)
    for schedule_id, slot, count in conn.execute(
        "SELECT json_extract(spec, '$.env.CORTEX_SCHEDULE_ID') AS s,"
        " json_extract(spec, '$.env.CORTEX_SCHEDULED_TIME') AS slot, COUNT(*) FROM tasks"
        " WHERE s IS NOT NULL AND idempotency_key NOT LIKE '%:trigger:%'"
        " GROUP BY s, slot HAVING COUNT(*) > 1"
    ):
        yield LIMITS_AND_SLOTS_HOLD, f"schedule {schedule_id} slot {slot} started {count} tasks"


def scheduling_round(reader: StateReader, placements: list[dict[str, object]]) -> list[str]:
    """Invariant 4, on the state the leader decided from: every placement goes
    to an active node, and no node gets more than its max_tasks and
    prefetch_tasks together."""
    nodes = {node.id: node for node in reader.nodes(include_removed=True)}
    active = reader.active_counts_by_node()
    added: dict[str, int] = defaultdict(int)
    problems = []
    for placement in placements:
        node_id = str(placement.get("node"))
        node = nodes.get(node_id)
        if node is None or node.status != "active":
            status = node.status if node else "unknown"
            problems.append(f"task {placement.get('task_id')} placed on {status} node {node_id}")
            continue
        added[node_id] += 1
        limit = node.max_tasks + node.prefetch_tasks if node.max_tasks else 0
        if limit and active.get(node_id, 0) + added[node_id] > limit:
            problems.append(
                f"node {node_id} given {active.get(node_id, 0) + added[node_id]} tasks,"
                f" over its max_tasks and prefetch_tasks {limit}"
            )
    return problems


def terminal_counts(conn: sqlite3.Connection) -> tuple[int, int]:
    """(unfinished tasks, unfinished workflows)."""
    tasks = conn.execute(
        "SELECT COUNT(*) FROM tasks WHERE state NOT IN"
        " ('completed', 'failed', 'cancelled', 'skipped', 'dead_letter')"
    ).fetchone()[0]
    workflows = conn.execute(
        "SELECT COUNT(*) FROM workflows WHERE state NOT IN ('completed', 'failed', 'cancelled')"
    ).fetchone()[0]
    return int(tasks), int(workflows)
