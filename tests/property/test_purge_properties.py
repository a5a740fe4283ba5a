"""Generated histories with purges, checked against a model of retention.

Hypothesis draws standalone tasks and small workflows driven to random ends
(completed, failed, cancelled, dead-lettered, skipped, or still queued and
running) at random clock times, interleaved with `TASKS_PURGE` entries with
random cutoffs and limits. After each purge the database must hold exactly
what the model keeps, computed in Python from the rows before it:

- units (a standalone task, or a whole finished workflow without a dead
  letter) that finished before the cutoff go oldest first, by completion
  time, kind and id, as many as fit the limit (the first always goes);
- a removed task takes all its events along; no other task goes;
- the oldest `limit` events that belong to no task go;
- nothing is left dangling (events, dependencies, tasks of a gone workflow).

At the end, a second database fed the same log has the same digest, and
replaying the log (also after a restart) changes nothing."""

from __future__ import annotations

import sqlite3
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from cortex.state import entries as e
from cortex.state.machine import StateMachine
from tests.workflow_sim import WorkflowLog

PURGEABLE = frozenset({"completed", "failed", "cancelled", "skipped"})
FINISHED_WORKFLOW = frozenset({"completed", "failed", "cancelled"})
CHAIN = """
name: chain
tasks:
  a: {spec: {command: "true", retryPolicy: {maxRetries: 0}}}
  b: {spec: {command: "true", retryPolicy: {retryable: false}}, dependsOn: [a]}
  c: {spec: {command: "true", retryPolicy: {retryable: false}}, dependsOn: [a]}
"""
START_MS = 10_000
TASK_ENDS = ["completed", "completed", "failed", "cancelled", "dead_letter", "queued", "running"]


@dataclass(frozen=True)
class Rows:
    tasks: dict[str, tuple[str, str | None, int | None]]  # id -> state, workflow, completed_at
    workflows: dict[str, tuple[str, int | None]]  # id -> state, completed_at
    events: dict[int, tuple[str | None, str, int]]  # seq -> task_id, event, ts
    dependencies: set[str]  # workflow ids


def read_rows(path: str) -> Rows:
    conn = sqlite3.connect(path)
    try:
        return Rows(
            {r[0]: (r[1], r[2], r[3])
             for r in conn.execute("SELECT id, state, workflow_id, completed_at FROM tasks")},
            {r[0]: (r[1], r[2])
             for r in conn.execute("SELECT id, state, completed_at FROM workflows")},
            {r[0]: (r[1], r[2], r[3])
             for r in conn.execute("SELECT seq, task_id, event, ts FROM task_events")},
            {r[0] for r in conn.execute("SELECT DISTINCT workflow_id FROM task_dependencies")},
        )  # fmt: skip
    finally:
        conn.close()


def expected_after(before: Rows, cutoff: int, limit: int) -> tuple[set[str], set[str], set[int]]:
    """The model: (task ids, workflow ids, event seqs) a purge removes."""
    units: list[tuple[int, str, str, int]] = []
    for task_id, (state, workflow, done) in before.tasks.items():
        if workflow is None and state in PURGEABLE and done is not None and done < cutoff:
            units.append((done, "task", task_id, 1))
    for workflow_id, (state, done) in before.workflows.items():
        members = [t for t, row in before.tasks.items() if row[1] == workflow_id]
        if (
            state in FINISHED_WORKFLOW
            and done is not None
            and done < cutoff
            and all(before.tasks[t][0] != "dead_letter" for t in members)
        ):
            units.append((done, "workflow", workflow_id, len(members)))
    tasks, workflows, budget = set(), set(), limit
    for _done, kind, unit_id, size in sorted(units):
        if (tasks or workflows) and size > budget:
            break
        if kind == "task":
            tasks.add(unit_id)
        else:
            workflows.add(unit_id)
            tasks |= {t for t, row in before.tasks.items() if row[1] == unit_id}
        budget -= size
        if budget <= 0:
            break
    loose = sorted(
        (ts, seq)
        for seq, (task_id, name, ts) in before.events.items()
        if ts < cutoff and (task_id is None or (name == "rejected" and task_id not in before.tasks))
    )[:limit]
    seqs = {seq for _, seq in loose}
    seqs |= {seq for seq, (task_id, _, _) in before.events.items() if task_id in tasks}
    return tasks, workflows, seqs


# ---------------------------------------------------------------- driving


def standalone(log: WorkflowLog, task_id: str, end: str) -> None:
    spec = {"command": "true", "retryPolicy": {"maxRetries": 0, "retryable": end != "failed"}}
    assert log.one(e.TaskSubmit(task_id, spec))["created"]
    if end in ("completed", "failed"):
        log.complete(task_id, exit_code=0 if end == "completed" else 1)
    elif end == "cancelled":
        assert log.one(e.TaskCancel(task_id))["ok"]
    elif end == "dead_letter":
        log.complete(task_id, exit_code=1)  # no retries left
    elif end == "running":
        log.start(task_id)


def workflow(log: WorkflowLog, data: st.DataObject) -> None:
    workflow_id, _ = log.submit(CHAIN)
    while True:
        log.settle(workflow_id, None)
        current = log.reader.get_workflow(workflow_id)
        assert current is not None
        queued = [t for t in current.tasks if t.state == "queued"]
        if current.state != "running" or not queued:
            return
        move = data.draw(st.sampled_from(["complete"] * 4 + ["fail", "cancel", "stop"]))
        task = data.draw(st.sampled_from(queued))
        if move == "complete":
            log.complete(task.task_id)
        elif move == "fail":  # a dead letter for a, failed for b and c
            log.complete(task.task_id, exit_code=1)
        elif move == "cancel":
            assert log.one(e.WorkflowCancel(workflow_id))["ok"]
        else:
            return  # left running


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_purges_remove_exactly_what_the_model_says(data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        log = WorkflowLog(Path(tmp) / "a" / "state.db")
        try:
            clock, count = START_MS, 0
            for _ in range(data.draw(st.integers(1, 30), label="steps")):
                clock += data.draw(st.sampled_from([0, 0, 10, 500, 3000]))
                log.ts = clock
                step = data.draw(st.sampled_from(["task"] * 3 + ["workflow"] * 2 + ["purge"] * 2))
                if step == "task":
                    count += 1
                    standalone(log, f"s{count:03d}", data.draw(st.sampled_from(TASK_ENDS)))
                elif step == "workflow":
                    workflow(log, data)
                else:
                    before = read_rows(log.machine.path)
                    cutoff = data.draw(st.integers(START_MS, log.ts + 10), label="cutoff")
                    limit = data.draw(st.integers(1, 10), label="limit")
                    result = log.one(e.TasksPurge(cutoff, limit))
                    assert result["ok"], result
                    after = read_rows(log.machine.path)
                    tasks, workflows, seqs = expected_after(before, cutoff, limit)
                    assert set(after.tasks) == set(before.tasks) - tasks
                    assert set(after.workflows) == set(before.workflows) - workflows
                    new = set(after.events) - set(before.events)
                    assert set(after.events) - new == set(before.events) - seqs
                    assert [after.events[s][1] for s in new] == ["purged"]
                    assert min(new) > max(before.events)
                    assert result["tasks"] == len(tasks)
                    assert result["workflows"] == len(workflows)
                    if tasks:
                        event("a purge removed tasks")
                    if workflows:
                        event("a purge removed a workflow")
                    _check_nothing_dangles(after)
            _check_determinism_and_replay(log, Path(tmp))
        finally:
            log.close()


def _check_nothing_dangles(rows: Rows) -> None:
    for task_id, name, _ in rows.events.values():
        assert task_id is None or task_id in rows.tasks or name == "rejected"
    assert rows.dependencies <= set(rows.workflows)
    assert {row[1] for row in rows.tasks.values() if row[1]} <= set(rows.workflows)


def _check_determinism_and_replay(log: WorkflowLog, tmp: Path) -> None:
    other = log.replay_into(tmp / "b" / "state.db")
    try:
        assert other.digest() == log.machine.digest()
    finally:
        other.close()
    digest = log.machine.digest()
    for index, batch in log.batches:
        assert log.machine.apply_batch(index, batch) is None
    log.machine.close()
    log.machine = StateMachine(log.machine.path)
    for index, batch in log.batches:
        assert log.machine.apply_batch(index, batch) is None
    assert log.machine.digest() == digest
