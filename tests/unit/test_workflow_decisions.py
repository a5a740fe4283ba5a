"""The leader's pure decision logic. Most tests script the condition
outcomes (the logic takes the evaluator as a parameter); the last one runs
real conditions in V8."""

from __future__ import annotations

from typing import Any

from cortex.state.workflow_rules import default_verdict, find_cycle, workflow_outcome
from cortex.workflows.condition_input import condition_input, upstream
from cortex.workflows.decisions import (
    ConditionRequest,
    TaskNode,
    decide,
    ready,
    sandbox_evaluator,
)
from cortex.workflows.sandbox import ConditionOutcome, ConditionSandbox

OK = {"exit_code": 0, "stdout": "fine", "stderr": ""}
FAILED = {"exit_code": 3, "stdout": "", "stderr": "bad"}


def _dag(*nodes: TaskNode) -> dict[str, TaskNode]:
    return {n.key: n for n in nodes}


class Scripted:
    """Answers conditions from a table (None: not known yet) and records what
    it was asked, with each request's input."""

    def __init__(self, answers: dict[str, ConditionOutcome | None]) -> None:
        self.answers = answers
        self.asked: list[tuple[str, dict[str, Any]]] = []
        self.requests: list[ConditionRequest] = []

    def __call__(self, requests: list[ConditionRequest]) -> list[ConditionOutcome | None]:
        self.requests.extend(requests)
        self.asked.extend((r.condition, r.input()) for r in requests)
        return [self.answers[r.condition] for r in requests]


def test_without_condition_a_task_runs_only_when_every_dependency_completed():
    nodes = _dag(
        TaskNode("a", "ta", "completed", result=OK),
        TaskNode("b", "tb", "failed", result=FAILED),
        TaskNode("c", "tc", "pending", ("a",)),
        TaskNode("d", "td", "pending", ("a", "b")),
    )
    decisions = {d.key: d for d in decide(nodes, {}, Scripted({}))}
    assert decisions["c"].run and decisions["c"].reason == "all dependencies completed"
    assert not decisions["d"].run and "b failed" in decisions["d"].reason


def test_tasks_wait_until_all_dependencies_are_terminal():
    nodes = _dag(
        TaskNode("a", "ta", "completed", result=OK),
        TaskNode("b", "tb", "running"),
        TaskNode("c", "tc", "pending", ("a", "b")),
    )
    assert decide(nodes, {}, Scripted({})) == []
    assert ready(nodes, {k: n.state for k, n in nodes.items()}) == []


def test_skips_cascade_in_one_call_but_a_released_task_stops_the_cascade():
    nodes = _dag(
        TaskNode("a", "ta", "failed", result=FAILED),
        TaskNode("b", "tb", "pending", ("a",)),
        TaskNode("c", "tc", "pending", ("b",)),
        TaskNode("d", "td", "pending", ("c",), "parent.a.exitCode !== 0"),
        TaskNode("e", "te", "pending", ("d",)),
    )
    evaluate = Scripted({"parent.a.exitCode !== 0": ConditionOutcome(True)})
    decisions = decide(nodes, {}, evaluate)
    assert [(d.key, d.run) for d in decisions] == [("b", False), ("c", False), ("d", True)]
    assert "b skipped" in decisions[1].reason
    # d's condition saw its whole upstream, with the states decided on the way.
    (condition, data), = evaluate.asked  # fmt: skip
    assert data["parent"]["c"]["state"] == "skipped" and data["parent"]["a"]["exitCode"] == 3


def test_conditions_decide_and_a_condition_that_fails_fails_its_task():
    nodes = _dag(
        TaskNode("build", "t1", "completed", result=OK),
        TaskNode("deploy", "t2", "pending", ("build",), "yes"),
        TaskNode("notify", "t3", "pending", ("build",), "no"),
        TaskNode("spin", "t4", "pending", ("build",), "spin"),
        TaskNode("oops", "t5", "pending", ("build",), "oops"),
    )
    evaluate = Scripted(
        {
            "yes": ConditionOutcome(True),
            "no": ConditionOutcome(False),
            "spin": ConditionOutcome(None, "timeout", "timed out after 100 ms"),
            "oops": ConditionOutcome(None, "threw", "threw TypeError: x is undefined"),
        }
    )
    decisions = {d.key: d for d in decide(nodes, {"v": 1}, evaluate)}
    assert decisions["deploy"].run and decisions["deploy"].reason == "condition is true"
    assert not decisions["notify"].run and decisions["notify"].reason == "condition is false"
    assert decisions["notify"].verdict == "skip"
    assert decisions["spin"].verdict == "fail"
    assert decisions["spin"].reason == "condition timed out after 100 ms"
    assert decisions["oops"].verdict == "fail"
    assert decisions["oops"].reason == "condition threw TypeError: x is undefined"
    assert decisions["oops"].to_entry()["decision"] == "fail"
    assert len(evaluate.asked) == 4  # one batch


def test_without_an_evaluator_only_condition_free_tasks_are_decided():
    nodes = _dag(
        TaskNode("a", "ta", "completed", result=OK),
        TaskNode("b", "tb", "pending", ("a",)),
        TaskNode("c", "tc", "pending", ("a",), "true"),
        TaskNode("d", "td", "pending", ("c",)),
    )
    assert [d.key for d in decide(nodes, {}, None)] == ["b"]


def test_conditions_past_the_limit_wait_for_the_next_call():
    nodes = _dag(
        TaskNode("a", "ta", "completed", result=OK),
        *(TaskNode(f"c{i}", f"t{i}", "pending", ("a",), "no") for i in range(5)),
        TaskNode("plain", "tp", "pending", ("a",)),
        TaskNode("after", "tz", "pending", ("c4",)),
    )
    evaluate = Scripted({"no": ConditionOutcome(False)})
    first = decide(nodes, {}, evaluate, max_conditions=2)
    assert [d.key for d in first] == ["c0", "c1", "plain"]
    assert len(evaluate.asked) == 2
    everything = decide(nodes, {}, evaluate, max_conditions=10)
    assert [d.key for d in everything] == ["c0", "c1", "c2", "c3", "c4", "plain", "after"]


def test_a_condition_sees_every_upstream_task_and_the_context():
    nodes = _dag(
        TaskNode("test", "t1", "completed", result={**OK, "stdout": "0 failures"}),
        TaskNode("lint", "t2", "skipped"),
        TaskNode("build", "t3", "completed", ("lint", "test"), result=OK),
        TaskNode("deploy", "t4", "pending", ("build",), "c"),
        TaskNode("other", "t5", "completed", result=OK),
    )
    assert upstream(nodes["deploy"], nodes) == ["build", "lint", "test"]
    states = {k: n.state for k, n in nodes.items()}
    data = condition_input(nodes["deploy"], nodes, states, {"version": "1.2"})
    assert set(data["parent"]) == {"build", "lint", "test"}
    # stdout/stderr once: the sandbox shows them as result.stdout/stderr too.
    assert data["parent"]["test"]["stdout"] == "0 failures"
    assert "stdout" not in data["parent"]["test"]["result"]
    assert data["parent"]["test"]["result"]["exitCode"] == 0
    assert data["parent"]["lint"] == {"exitCode": None, "stdout": "", "stderr": "", "state": "skipped",
                                      "result": None}  # fmt: skip
    assert data["workflow"] == {"context": {"version": "1.2"}}


def test_a_failed_condition_skips_dependents_without_one_in_the_same_call():
    nodes = _dag(
        TaskNode("a", "ta", "completed", result=OK),
        TaskNode("b", "tb", "pending", ("a",), "oops"),
        TaskNode("c", "tc", "pending", ("b",)),
        TaskNode("d", "td", "pending", ("b",), "parent.b.state === 'failed'"),
    )
    evaluate = Scripted(
        {
            "oops": ConditionOutcome(None, "type", "returned a string, not a boolean"),
            "parent.b.state === 'failed'": ConditionOutcome(True),
        }
    )
    decisions = decide(nodes, {}, evaluate)
    assert [(d.key, d.verdict) for d in decisions] == [("b", "fail"), ("c", "skip"), ("d", "run")]
    assert decisions[1].reason == "dependency did not complete: b failed"
    assert evaluate.asked[-1][1]["parent"]["b"]["state"] == "failed"


def test_a_condition_on_a_task_without_dependencies_is_decided_at_once():
    nodes = _dag(TaskNode("only-prod", "t1", "pending", (), "prod"))
    decisions = decide(nodes, {"env": "dev"}, Scripted({"prod": ConditionOutcome(False)}))
    assert [(d.key, d.run) for d in decisions] == [("only-prod", False)]


def test_entries_carry_run_or_skip():
    (decision,) = decide(_dag(TaskNode("a", "ta", "pending")), {}, None)
    assert decision.to_entry() == {"task_id": "ta", "key": "a", "decision": "run",
                                   "reason": "all dependencies completed"}  # fmt: skip


def test_rules_shared_with_apply():
    assert find_cycle({"a": ["b"], "b": ["c"], "c": []}) is None
    assert find_cycle({"a": ["b"], "b": ["a"]}) == ["a", "b", "a"]
    assert find_cycle({"x": [], "a": ["b"], "b": ["c"], "c": ["b"]}) == ["b", "c", "b"]
    assert default_verdict({}) == (True, "all dependencies completed")
    assert default_verdict({"a": "completed", "b": "cancelled"})[0] is False
    assert workflow_outcome([("a", "completed"), ("b", "running")]) is None
    assert workflow_outcome([("a", "completed"), ("b", "skipped")]) == ("completed", None)
    assert workflow_outcome([("a", "dead_letter"), ("b", "skipped")]) == (
        "failed", "tasks did not succeed: a dead_letter",
    )  # fmt: skip


def test_decide_with_real_v8_conditions():
    nodes = _dag(
        TaskNode("build", "t1", "failed", result=FAILED),
        TaskNode("deploy", "t2", "pending", ("build",), "parent.build.exitCode === 0"),
        TaskNode("notify", "t3", "pending", ("build",), "parent.build.exitCode !== 0"),
        TaskNode("ctx", "t4", "pending", ("build",), "workflow.context.version === '1.2'"),
        TaskNode("hang", "t5", "pending", ("build",), "while(true){}"),
    )
    box = ConditionSandbox()
    try:
        decisions = {d.key: d for d in decide(nodes, {"version": "1.2"}, sandbox_evaluator(box))}
    finally:
        box.close()
    assert not decisions["deploy"].run and decisions["notify"].run and decisions["ctx"].run
    assert decisions["hang"].verdict == "fail" and "timed out" in decisions["hang"].reason
