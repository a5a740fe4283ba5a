"""Random DAGs with random task outcomes, driven through a real
StateMachine by the leader's real decision logic (conditions in real V8).

Hypothesis draws the DAG's shape, conditions, retry policies and initial
context, then every step: advance (sometimes twice, as two leaders around a
failover would), complete, fail, cancel a task, retry a dead letter, or
cancel the workflow. Properties, checked from the replicated events:

- every task ends terminal and so does the workflow;
- no task is assigned before all its dependencies are terminal;
- each task is decided at most once, and decisions without a condition
  follow the rule (run only if every dependency completed); only a task
  with a condition fails without running (its condition threw);
- the workflow's final state agrees with its tasks' states;
- a second database fed the same log has the same digest."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from cortex.state import entries as e
from cortex.state.task_states import TERMINAL_STATES
from cortex.state.workflow_rules import UNSUCCESSFUL_TASK_STATES
from cortex.workflows.decisions import sandbox_evaluator
from cortex.workflows.sandbox import ConditionSandbox
from tests.workflow_sim import NODES, WorkflowLog

CONDITIONS = [
    None,
    None,
    None,
    "Object.values(parent).every(p => p.state === 'completed')",
    "Object.values(parent).some(p => p.exitCode !== 0)",
    "workflow.context.flag === true",
    "Object.keys(parent).length % 2 === 0",
    "parent[workflow.context.missing].state",  # throws: its task fails
]
MAX_STEPS = 400


@pytest.fixture(scope="module")
def sandbox() -> Iterator[ConditionSandbox]:
    box = ConditionSandbox()
    yield box
    box.close()


@st.composite
def dags(draw: st.DrawFn) -> dict[str, Any]:
    size = draw(st.integers(1, 9))
    tasks: dict[str, Any] = {}
    for i in range(size):
        task: dict[str, Any] = {
            "spec": {
                "command": "x",
                "retryPolicy": {
                    "maxRetries": draw(st.integers(0, 1)),
                    "retryable": draw(st.booleans()),
                    "backoffMs": 0,
                },
            }
        }
        if i:
            deps = draw(st.lists(st.integers(0, i - 1), unique=True, max_size=3))
            if deps:
                task["dependsOn"] = [f"t{d}" for d in deps]
        condition = draw(st.sampled_from(CONDITIONS))
        if condition:
            task["condition"] = condition
        tasks[f"t{i}"] = task
    return {"name": "random", "context": {"flag": draw(st.booleans())}, "tasks": tasks}


def _step(
    log: WorkflowLog, workflow_id: str, data: st.DataObject, sandbox: ConditionSandbox
) -> bool:
    """One random move; False when nothing can move any more."""
    workflow = log.reader.get_workflow(workflow_id)
    assert workflow is not None
    if workflow.state != "running":
        return False
    ready = log.reader.ready_workflow_tasks().get(workflow_id, [])
    queued = [t for t in workflow.tasks if t.state == "queued"]
    dead = [t for t in workflow.tasks if t.state == "dead_letter"]
    moves = ["advance", "advance", "advance twice"] if ready else []
    moves += ["complete", "complete", "complete", "fail", "cancel task"] if queued else []
    if not moves:
        return False
    moves += ["retry dead letter"] if dead else []
    moves += ["cancel workflow"]
    move = data.draw(st.sampled_from(moves))
    if move == "cancel workflow" and data.draw(st.integers(0, 9)):
        move = moves[0]  # rarely: most workflows should run to the end
    if move == "advance":
        log.advance(workflow_id, sandbox_evaluator(sandbox))
    elif move == "advance twice":
        # Two leaders decide from the same state; the later copy is stale.
        current = log.reader.get_workflow(workflow_id)
        assert current is not None
        from cortex.workflows.decisions import decide
        from cortex.workflows.engine import task_nodes

        decisions = [d.to_entry() for d in decide(task_nodes(current), current.context,
                                                  sandbox_evaluator(sandbox))]  # fmt: skip
        first = log.one(e.WorkflowAdvance(workflow_id, decisions))
        second = log.one(e.WorkflowAdvance(workflow_id, decisions))
        assert first["ok"] and first["rejected"] == 0, first
        if second["ok"]:
            assert second["rejected"] == len(decisions), second
        else:  # the first copy ended the workflow
            assert "is completed" in second["reason"] or "is failed" in second["reason"]
    elif move in ("complete", "fail"):
        task = data.draw(st.sampled_from(queued))
        node = data.draw(st.sampled_from(NODES))
        update = {"by": task.key} if data.draw(st.booleans()) else None
        extra = {"context_update": update} if update else {}
        log.complete(task.task_id, node, 0 if move == "complete" else 1, **extra)
    elif move == "cancel task":
        task = data.draw(st.sampled_from(queued))
        assert log.one(e.TaskCancel(task.task_id, "random cancel"))["ok"]
    elif move == "retry dead letter":
        task = data.draw(st.sampled_from(dead))
        log.one(e.TaskRetry(task.task_id, task.attempt, "retried from the dead-letter queue"))
    else:
        assert log.one(e.WorkflowCancel(workflow_id, "random cancel"))["ok"]
    return True


def _check_invariants(log: WorkflowLog, workflow_id: str, definition: dict[str, Any]) -> None:
    workflow = log.reader.get_workflow(workflow_id)
    assert workflow is not None
    states = {t.key: t.state for t in workflow.tasks}
    assert workflow.state in ("completed", "failed", "cancelled"), (workflow.state, states)
    assert all(s in TERMINAL_STATES for s in states.values()), states

    key_of = {t.task_id: t.key for t in workflow.tasks}
    deps = {key: spec.get("dependsOn", []) for key, spec in definition["tasks"].items()}
    conditions = {key: spec.get("condition") for key, spec in definition["tasks"].items()}
    current: dict[str, str] = {}
    decided: dict[str, int] = {}
    cancelled_workflow = False
    for ev in log.events():
        key = key_of.get(ev["task_id"])
        if ev["event"] == "workflow_cancelled":
            cancelled_workflow = True
        if key is None:
            continue
        if ev["event"] == "assigned":
            waiting = {d: current[d] for d in deps[key] if current[d] not in TERMINAL_STATES}
            assert not waiting, f"{key} assigned at seq {ev['seq']} while {waiting}"
        condition_failed = ev["event"] == "failed" and ev["from_state"] == "pending"
        if condition_failed:
            assert conditions[key] and "threw" in json.loads(ev["detail"])["reason"], ev
        if ev["event"] in ("released", "skipped") or condition_failed:
            decided[key] = decided.get(key, 0) + 1
            if not conditions[key]:
                all_completed = all(current[d] == "completed" for d in deps[key])
                assert all_completed == (ev["event"] == "released"), (key, ev["event"], current)
        if ev["to_state"] is not None:
            current[key] = ev["to_state"]
    assert all(count == 1 for count in decided.values()), decided
    assert current == states

    if cancelled_workflow:
        assert workflow.state == "cancelled"
    elif any(s in UNSUCCESSFUL_TASK_STATES for s in states.values()):
        assert workflow.state == "failed" and workflow.error
    else:
        assert workflow.state == "completed" and workflow.error is None


# Shrinking is off: hypothesis's shrinker trips over its own assertion on
# these interactive (st.data) runs; a failure still prints every draw.
@settings(
    max_examples=60,
    phases=[Phase.explicit, Phase.generate],
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(definition=dags(), data=st.data())
def test_random_workflows_end_consistently(definition, data, sandbox):
    with tempfile.TemporaryDirectory() as tmp:
        log = WorkflowLog(Path(tmp) / "a" / "state.db")
        try:
            workflow_id, _ = log.submit(json.dumps(definition), sandbox)
            steps = 0
            while _step(log, workflow_id, data, sandbox):
                steps += 1
                assert steps < MAX_STEPS, "the workflow does not finish"
            _check_invariants(log, workflow_id, definition)
            other = log.replay_into(Path(tmp) / "b" / "state.db")
            try:
                assert other.digest() == log.machine.digest()
            finally:
                other.close()
        finally:
            log.close()
