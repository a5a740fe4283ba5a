"""Workflow entries applied to a real StateMachine: submit, advance (and its
stale or duplicate decisions), context merging, the workflow's final state,
cancel, and dead-letter retries of workflow tasks."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from cortex.state import entries as e
from cortex.workflows.decisions import TaskNode
from cortex.workflows.sandbox import ConditionOutcome
from tests.workflow_sim import WorkflowLog

DIAMOND = """
name: diamond
context: {stage: start}
tasks:
  root: {spec: {command: "true"}}
  left: {spec: {command: "true"}, dependsOn: [root]}
  right: {spec: {command: "true"}, dependsOn: [root]}
  join: {spec: {command: "true"}, dependsOn: [left, right]}
"""


def always(value: bool):
    def evaluate(items):
        return [ConditionOutcome(value) for _ in items]

    return evaluate


@pytest.fixture
def log(tmp_path: Path) -> Iterator[WorkflowLog]:
    wl = WorkflowLog(tmp_path / "a" / "state.db")
    yield wl
    wl.close()


def test_submit_writes_the_workflow_its_tasks_and_dependencies(log):
    workflow_id, ids = log.submit(DIAMOND, key="k1")
    workflow = log.reader.get_workflow(workflow_id)
    assert workflow is not None and workflow.state == "running" and workflow.name == "diamond"
    assert workflow.context == {"stage": "start"}
    assert [(t.key, t.state, t.depends_on) for t in workflow.tasks] == [
        ("root", "queued", []),
        ("left", "pending", ["root"]),
        ("right", "pending", ["root"]),
        ("join", "pending", ["left", "right"]),
    ]
    assert workflow.tasks[0].task_id == ids["root"]
    submitted = [ev for ev in log.events() if ev["event"] == "submitted"]
    assert len(submitted) == 4 and submitted[1]["to_state"] == "pending"


def test_submit_is_idempotent_by_key_and_by_id(log):
    payload = e.WorkflowSubmit(
        "w1", "wf", [{"key": "a", "task_id": "t1", "spec": {"command": "x"}, "depends_on": [],
                      "condition": None}], {}, "key-1",
    )  # fmt: skip
    assert log.one(payload) == {"ok": True, "workflow_id": "w1", "created": True, "tasks": 1,
                                "state": "running"}  # fmt: skip
    again = e.WorkflowSubmit("w2", "wf", payload.tasks, {}, "key-1")
    assert log.one(again) == {"ok": True, "workflow_id": "w1", "created": False}
    assert log.one(payload)["created"] is False
    assert log.reader.list_workflows().total == 1


@pytest.mark.parametrize(
    ("tasks", "reason"),
    [
        ([], "invalid_workflow: a workflow needs at least one task"),
        ([{"key": "a", "task_id": "t1", "spec": {"command": "x"}, "depends_on": ["b"]}],
         "invalid_workflow: workflow task a depends on unknown task b"),
        ([{"key": "a", "task_id": "t1", "spec": {"command": "x"}, "depends_on": ["b"]},
          {"key": "b", "task_id": "t2", "spec": {"command": "x"}, "depends_on": ["a"]}],
         "invalid_workflow: dependency cycle: a -> b -> a"),
        ([{"key": "a", "task_id": "t1", "spec": {"command": "x"}},
          {"key": "a", "task_id": "t2", "spec": {"command": "x"}}],
         "invalid_workflow: workflow task keys are not unique"),
        ([{"key": "a", "task_id": "t1", "spec": {"type": "Nope"}}],
         "invalid_spec: workflow task a: type must be 1 to 64 lowercase letters, digits or"
         " underscores, starting with a letter"),
        ([{"key": "a", "task_id": "t1", "spec": {"timeoutMs": 0, "command": "x"}}],
         "invalid_spec: workflow task a: timeoutMs must be greater than 0"),
        ([{"key": "a", "task_id": "t1", "spec": {"command": "x"}, "extra": 1}],
         'invalid_workflow: workflow task 0 has unknown fields "extra"'),
        (["a"], "invalid_workflow: workflow task 0 is not an object"),
    ],
)  # fmt: skip
def test_an_invalid_submit_is_rejected_whole(log, tasks, reason):
    result = log.one(e.WorkflowSubmit("w1", "wf", tasks))
    assert result == {"ok": False, "reason": reason}
    assert log.reader.get_workflow("w1") is None
    assert log.reader.list_tasks().total == 0


def test_a_task_id_that_exists_already_rejects_the_submit(log):
    log.one(e.TaskSubmit("t1", {"command": "x"}))
    tasks = [{"key": "a", "task_id": "t1", "spec": {"command": "x"}, "depends_on": []}]
    result = log.one(e.WorkflowSubmit("w1", "wf", tasks))
    assert result["reason"] == "duplicate_id: task id t1 already exists"


def test_the_diamond_runs_in_order_and_completes(log):
    workflow_id, ids = log.submit(DIAMOND)
    assert log.advance(workflow_id, None) == []  # root still queued
    log.complete(ids["root"])
    released = log.advance(workflow_id, None)
    assert [(d["key"], d["decision"]) for d in released] == [("left", "run"), ("right", "run")]
    log.complete(ids["left"], "n2")
    assert log.advance(workflow_id, None) == []  # join waits for right
    log.complete(ids["right"], "n3")
    assert [d["key"] for d in log.advance(workflow_id, None)] == ["join"]
    log.complete(ids["join"])
    workflow = log.reader.get_workflow(workflow_id)
    assert workflow is not None and workflow.state == "completed" and workflow.error is None
    assert workflow.completed_at is not None
    assert [ev["event"] for ev in log.events() if ev["task_id"] is None][-1] == "workflow_completed"


def test_stale_and_duplicate_decisions_are_rejected_one_by_one(log):
    workflow_id, ids = log.submit(DIAMOND)
    log.complete(ids["root"])
    decisions = [{"task_id": ids["left"], "key": "left", "decision": "run", "reason": "r"}]
    first = log.one(e.WorkflowAdvance(workflow_id, decisions))
    assert first == {"ok": True, "released": 1, "skipped": 0, "failed": 0, "rejected": 0}
    # A second leader's copy of the same decision, plus one fresh one.
    duplicate = [
        *decisions,
        {"task_id": ids["right"], "key": "right", "decision": "run", "reason": "r"},
    ]
    second = log.one(e.WorkflowAdvance(workflow_id, duplicate))
    assert second == {"ok": True, "released": 1, "skipped": 0, "failed": 0, "rejected": 1}
    rejected = [ev for ev in log.events(ids["left"]) if ev["event"] == "rejected"]
    detail = json.loads(rejected[0]["detail"])
    assert detail["code"] == "illegal_transition" and "already decided" in detail["reason"]
    assert detail["workflow_id"] == workflow_id
    assert log.state(ids["left"]) == "queued"


@pytest.mark.parametrize(
    ("decision", "why"),
    [
        (
            {"key": "join", "decision": "run"},
            "illegal_transition: dependency left of task join is still pending",
        ),
        (
            {"key": "left", "decision": "skip"},
            "illegal_transition: decision to skip left contradicts",
        ),
        (
            {"key": "left", "decision": "maybe"},
            "invalid_payload: decision for left is not run, skip or fail",
        ),
        (
            {"key": "left", "decision": "fail"},
            "illegal_transition: decision to fail left contradicts",
        ),
        ({"key": "right", "decision": "run", "task": "left"}, "invalid_payload: task "),
    ],
)
def test_decisions_that_do_not_fit_the_state_are_rejected(log, decision, why):
    workflow_id, ids = log.submit(DIAMOND)
    log.complete(ids["root"])
    raw = {"task_id": ids[decision.pop("task", decision["key"])], "reason": "", **decision}
    result = log.one(e.WorkflowAdvance(workflow_id, [raw]))
    assert result["rejected"] == 1
    detail = json.loads([ev for ev in log.events() if ev["event"] == "rejected"][-1]["detail"])
    assert detail["reason"].startswith(why)
    assert detail["code"] == why.split(":")[0]


def test_advance_on_an_unknown_or_finished_workflow_is_rejected(log):
    unknown = log.one(e.WorkflowAdvance("nope", []))
    assert unknown["reason"] == "unknown_workflow: workflow nope does not exist"
    workflow_id, ids = log.submit(DIAMOND)
    log.one(e.WorkflowCancel(workflow_id, "stop"))
    finished = log.one(e.WorkflowAdvance(workflow_id, []))
    assert finished["reason"] == f"illegal_transition: workflow {workflow_id} is cancelled"


def test_a_failure_skips_dependents_without_condition_and_fails_the_workflow(log):
    workflow_id, ids = log.submit(DIAMOND.replace('root: {spec: {command: "true"}}',
                                                  'root: {spec: {command: "x"}, retryPolicy: {retryable: false}}'))  # fmt: skip
    log.complete(ids["root"], exit_code=1)
    assert log.state(ids["root"]) == "failed"
    log.settle(workflow_id, None)
    assert [log.state(ids[k]) for k in ("left", "right", "join")] == ["skipped"] * 3
    workflow = log.reader.get_workflow(workflow_id)
    assert workflow is not None and workflow.state == "failed"
    assert workflow.error == "tasks did not succeed: root failed (exit code 1)"
    assert (
        workflow.tasks[3].skip_reason == "dependency did not complete: left skipped, right skipped"
    )


def test_conditions_decide_and_skipped_is_not_a_failure(log):
    text = """
name: cond
tasks:
  a: {spec: {command: "true"}}
  go: {spec: {command: "true"}, dependsOn: [a], condition: "c1"}
  stop: {spec: {command: "true"}, dependsOn: [a], condition: "c1"}
"""
    workflow_id, ids = log.submit(text)
    log.complete(ids["a"])
    workflow = log.reader.get_workflow(workflow_id)
    # Decisions with different outcomes for the same condition text, as if the
    # context changed in between: apply trusts the leader for conditions.
    log.one(e.WorkflowAdvance(workflow_id, [
        {"task_id": ids["go"], "key": "go", "decision": "run", "reason": "condition is true"},
        {"task_id": ids["stop"], "key": "stop", "decision": "skip", "reason": "condition is false"},
    ]))  # fmt: skip
    assert workflow is not None
    log.complete(ids["go"])
    final = log.reader.get_workflow(workflow_id)
    assert final is not None and final.state == "completed"
    assert final.tasks[2].skip_reason == "condition is false"


def test_context_updates_merge_in_completion_order(log):
    workflow_id, ids = log.submit(DIAMOND)
    log.complete(ids["root"], context_update={"stage": "built", "a": 1})
    log.settle(workflow_id, None)
    log.complete(ids["right"], context_update={"a": 2, "right": True})
    log.complete(ids["left"], context_update={"a": 3})
    workflow = log.reader.get_workflow(workflow_id)
    assert workflow is not None
    assert workflow.context == {"stage": "built", "a": 3, "right": True}
    assert log.reader.workflow_context_text(workflow_id) == json.dumps(
        {"a": 3, "right": True, "stage": "built"}, sort_keys=True, separators=(",", ":")
    )
    updated = [ev for ev in log.events() if ev["event"] == "context_updated"]
    assert [json.loads(ev["detail"])["keys"] for ev in updated] == [
        ["a", "stage"],
        ["a", "right"],
        ["a"],
    ]


def test_a_context_update_that_is_not_an_object_or_too_big_is_ignored(log):
    workflow_id, ids = log.submit(DIAMOND)
    log.complete(ids["root"], context_update=["not", "an", "object"])
    log.settle(workflow_id, None)
    log.complete(ids["left"], context_update={"big": "x" * (1024 * 1024 + 1)})
    workflow = log.reader.get_workflow(workflow_id)
    assert workflow is not None and workflow.context == {"stage": "start"}
    assert log.state(ids["left"]) == "completed"
    assert [ev["event"] for ev in log.events(ids["left"])][-1] == "context_update_rejected"


def test_cancel_cancels_every_unfinished_task(log):
    workflow_id, ids = log.submit(DIAMOND)
    log.complete(ids["root"])
    log.settle(workflow_id, None)
    log.start(ids["left"], "n2")
    result = log.one(e.WorkflowCancel(workflow_id, "no longer needed"))
    assert result == {"ok": True, "cancelled_tasks": 3, "remaining": 0}
    workflow = log.reader.get_workflow(workflow_id)
    assert workflow is not None and workflow.state == "cancelled"
    assert workflow.error == "no longer needed"
    assert [t.state for t in workflow.tasks] == ["completed", "cancelled", "cancelled", "cancelled"]
    assert "already cancelled" in log.one(e.WorkflowCancel(workflow_id))["reason"]
    # A late report from the cancelled attempt is fenced off.
    late = log.one(e.TaskComplete(ids["left"], 1, "n2", {"exit_code": 0}), node="n2")
    assert late["ok"] is False


DLQ_FLOW = """
name: dlq
tasks:
  flaky: {spec: {command: x, retryPolicy: {maxRetries: 1, backoffMs: 0}}}
  slow: {spec: {command: x}}
  after: {spec: {command: x}, dependsOn: [flaky, slow]}
  first: {spec: {command: x}, dependsOn: [flaky]}
"""


def _dead_letter(log, task_id):
    log.complete(task_id, exit_code=1)
    log.complete(task_id, exit_code=1)
    assert log.state(task_id) == "dead_letter"


def test_a_dead_letter_retried_before_its_dependents_are_decided_rejoins(log):
    text = DLQ_FLOW.replace("  first: {spec: {command: x}, dependsOn: [flaky]}\n", "")
    workflow_id, ids = log.submit(text)
    _dead_letter(log, ids["flaky"])
    log.settle(workflow_id, None)
    assert log.state(ids["after"]) == "pending"  # slow still queued
    retry = log.one(e.TaskRetry(ids["flaky"], 2, "retried from the dead-letter queue"))
    assert retry == {"ok": True, "state": "queued", "retry_budget": 1, "workflow_id": workflow_id,
                     "workflow_state": "running", "rejoined": True}  # fmt: skip
    task = log.reader.get_task(ids["flaky"])
    assert task is not None and task.retries == 0  # a fresh budget
    log.complete(ids["flaky"])
    log.complete(ids["slow"])
    log.settle(workflow_id, None)
    log.complete(ids["after"])
    workflow = log.reader.get_workflow(workflow_id)
    assert workflow is not None and workflow.state == "completed"


def test_a_dead_letter_fails_its_workflow_and_retried_then_runs_on_its_own(log):
    workflow_id, ids = log.submit(DLQ_FLOW)
    _dead_letter(log, ids["flaky"])
    log.settle(workflow_id, None)
    assert log.state(ids["first"]) == "skipped"
    # A dependent was decided from the dead letter: it cannot rejoin now.
    refused = log.one(e.TaskRetry(ids["flaky"], 2, "retried from the dead-letter queue"))
    assert (
        refused["ok"] is False
        and "its dependent first was decided (skipped)" in (refused["reason"])
    )
    log.complete(ids["slow"])
    log.settle(workflow_id, None)
    workflow = log.reader.get_workflow(workflow_id)
    assert workflow is not None and workflow.state == "failed"
    assert workflow.error == "tasks did not succeed: flaky dead_letter (exit code 1)"
    retry = log.one(e.TaskRetry(ids["flaky"], 2, "retried from the dead-letter queue"))
    assert retry["ok"] and retry["workflow_state"] == "failed" and retry["rejoined"] is False
    (retried,) = [ev for ev in log.events(ids["flaky"]) if ev["event"] == "retried"][-1:]
    assert json.loads(retried["detail"])["rejoined"] is False
    # It runs (a failed workflow does not hold its tasks) and changes nothing of it.
    log.complete(ids["flaky"], context_update={"late": True})
    after = log.reader.get_workflow(workflow_id)
    assert after is not None and (after.state, after.error, after.context) == (
        "failed", workflow.error, workflow.context,
    )  # fmt: skip
    assert log.state(ids["flaky"]) == "completed" and log.state(ids["first"]) == "skipped"


def test_a_dead_letter_of_a_cancelled_workflow_is_not_retried(log):
    workflow_id, ids = log.submit(DLQ_FLOW)
    _dead_letter(log, ids["flaky"])
    log.one(e.WorkflowCancel(workflow_id, "stop"))
    refused = log.one(e.TaskRetry(ids["flaky"], 2, "retried from the dead-letter queue"))
    assert refused["ok"] is False and "which is cancelled" in refused["reason"]
    assert log.state(ids["flaky"]) == "dead_letter"


def test_a_condition_that_fails_fails_its_task_and_the_workflow(log):
    text = """
name: broken
tasks:
  a: {spec: {command: "true"}}
  b: {spec: {command: "true"}, dependsOn: [a], condition: "c1"}
  c: {spec: {command: "true"}, dependsOn: [b]}
"""
    workflow_id, ids = log.submit(text)
    log.complete(ids["a"])
    reason = "condition threw TypeError: Cannot read properties of undefined"
    threw = {"c1": ConditionOutcome(None, "threw", reason.removeprefix("condition "))}
    log.settle(workflow_id, lambda requests: [threw[r.condition] for r in requests])
    assert [log.state(ids[k]) for k in "abc"] == ["completed", "failed", "skipped"]
    task = log.reader.get_task(ids["b"])
    assert task is not None and task.error == reason and task.attempt == 0
    failed = [ev for ev in log.events(ids["b"]) if ev["event"] == "failed"]
    assert json.loads(failed[0]["detail"])["condition"] is True
    workflow = log.reader.get_workflow(workflow_id)
    assert workflow is not None and workflow.state == "failed"
    assert workflow.error == f"tasks did not succeed: b failed ({reason})"


def test_a_condition_on_a_root_leaves_it_pending_for_the_leader(log):
    text = """
name: gate
context: {env: dev}
tasks:
  prod-only: {type: noop, condition: "workflow.context.env === 'prod'"}
"""
    workflow_id, ids = log.submit(text)
    assert log.state(ids["prod-only"]) == "pending"
    assert log.reader.ready_workflow_tasks() == {workflow_id: [ids["prod-only"]]}
    log.settle(workflow_id, always(False))
    workflow = log.reader.get_workflow(workflow_id)
    assert workflow is not None and workflow.state == "completed"


def test_ready_tasks_are_pending_ones_whose_dependencies_are_all_terminal(log):
    workflow_id, ids = log.submit(DIAMOND)
    assert log.reader.ready_workflow_tasks() == {}
    log.complete(ids["root"])
    assert log.reader.ready_workflow_tasks() == {workflow_id: [ids["left"], ids["right"]]}


def test_two_machines_fed_the_same_log_have_the_same_digest(log, tmp_path):
    workflow_id, ids = log.submit(DIAMOND)
    log.complete(ids["root"], context_update={"x": 1})
    log.settle(workflow_id, None)
    log.complete(ids["left"], exit_code=1)
    log.one(e.WorkflowCancel(workflow_id))
    other = log.replay_into(tmp_path / "b" / "state.db")
    try:
        assert other.digest() == log.machine.digest()
    finally:
        other.close()


def test_listing_workflows_newest_first_with_counts(log):
    first, _ = log.submit(DIAMOND)
    second, ids = log.submit(DIAMOND.replace("diamond", "second"))
    log.one(e.WorkflowCancel(second))
    page = log.reader.list_workflows()
    assert [w.id for w in page.workflows] == [second, first] and page.total == 2
    assert page.workflows[0].task_counts == {"cancelled": 4}
    assert page.workflows[1].task_counts == {"queued": 1, "pending": 3}
    assert [w.id for w in log.reader.list_workflows(["running"]).workflows] == [first]
    first_page = log.reader.list_workflows(limit=1)
    assert [w.id for w in first_page.workflows] == [second]
    assert first_page.next_key is not None and first_page.next_key.id == second
    rest = log.reader.list_workflows(limit=1, after=first_page.next_key)
    assert [w.id for w in rest.workflows] == [first] and rest.next_key is None
    oldest = log.reader.list_workflows(newest_first=False)
    assert [w.id for w in oldest.workflows] == [first, second]


def test_task_nodes_for_the_decision_logic(log):
    from cortex.workflows.engine import task_nodes

    workflow_id, ids = log.submit(DIAMOND)
    workflow = log.reader.get_workflow(workflow_id)
    assert workflow is not None
    assert task_nodes(workflow)["join"] == TaskNode(
        "join", ids["join"], "pending", ("left", "right")
    )
