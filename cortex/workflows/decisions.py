"""The leader's pure decision logic: which pending tasks can be decided
(every dependency terminal), and whether each runs or is skipped. Condition
evaluation is injected, so this runs without V8 in tests."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from cortex.state.transitions import TERMINAL_STATES
from cortex.state.workflow_rules import default_verdict
from cortex.workflows.sandbox import ConditionOutcome

# Evaluates a batch of (condition, input) pairs, one outcome each, in order.
Evaluator = Callable[[list[tuple[str, dict[str, Any]]]], list[ConditionOutcome]]

_RESULT_NAMES = {
    "exit_code": "exitCode",
    "stdout_truncated": "stdoutTruncated",
    "stderr_truncated": "stderrTruncated",
    "timed_out": "timedOut",
    "context_update": "contextUpdate",
}


@dataclass(frozen=True)
class TaskNode:
    """A workflow task as the decision logic sees it."""

    key: str
    task_id: str
    state: str
    depends_on: tuple[str, ...] = ()
    condition: str | None = None
    result: dict[str, Any] | None = None


@dataclass(frozen=True)
class Decision:
    task_id: str
    key: str
    run: bool
    reason: str

    def to_entry(self) -> dict[str, Any]:
        """The form `WORKFLOW_ADVANCE` carries."""
        return {
            "task_id": self.task_id,
            "key": self.key,
            "decision": "run" if self.run else "skip",
            "reason": self.reason,
        }


def parent_view(node: TaskNode, state: str) -> dict[str, Any]:
    """What a condition sees of one dependency: `{exitCode, stdout, stderr,
    state, result}`, with the result's fields in camelCase."""
    result = node.result or {}
    return {
        "exitCode": result.get("exit_code"),
        "stdout": result.get("stdout", ""),
        "stderr": result.get("stderr", ""),
        "state": state,
        "result": {_RESULT_NAMES.get(k, k): v for k, v in result.items()} if node.result else None,
    }


def upstream(node: TaskNode, nodes: Mapping[str, TaskNode]) -> list[str]:
    """Every task `node` depends on, directly or through others: direct
    dependencies first (in their listed order), then theirs."""
    seen: dict[str, None] = {}
    frontier = deque(node.depends_on)
    while frontier:
        key = frontier.popleft()
        if key in seen or key not in nodes:
            continue
        seen[key] = None
        frontier.extend(nodes[key].depends_on)
    return list(seen)


def condition_input(
    node: TaskNode, nodes: Mapping[str, TaskNode], states: Mapping[str, str],
    context: dict[str, Any],
) -> dict[str, Any]:  # fmt: skip
    """`{parent: {key: ...}, workflow: {context}}` for `node`'s condition;
    `parent` holds every upstream task (all terminal by now), so a condition
    can look past its direct dependencies (`parent.test` from `deploy`)."""
    return {
        "parent": {key: parent_view(nodes[key], states[key]) for key in upstream(node, nodes)},
        "workflow": {"context": context},
    }


def ready(nodes: Mapping[str, TaskNode], states: Mapping[str, str]) -> list[str]:
    """Pending tasks whose dependencies are all terminal, in `nodes` order."""
    return [
        key for key, node in nodes.items()
        if states[key] == "pending" and all(states[d] in TERMINAL_STATES for d in node.depends_on)
    ]  # fmt: skip


def decide(
    nodes: Mapping[str, TaskNode],
    context: dict[str, Any],
    evaluate: Evaluator | None,
    max_conditions: int | None = None,
) -> list[Decision]:
    """Decides every task that can be decided now, in waves: a task skipped
    in one wave is terminal for the next, so a skip cascades through the
    DAG in one call. A task released to run is not terminal and stops the
    cascade until it finishes. Without `evaluate`, tasks with a condition
    are left undecided (so cheap decisions need not wait for slow ones);
    past `max_conditions` evaluations, the rest wait for the next call."""
    states = {key: node.state for key, node in nodes.items()}
    decisions: list[Decision] = []
    budget = max_conditions if max_conditions is not None else len(nodes)
    deferred: set[str] = set()
    while True:
        wave = [key for key in ready(nodes, states) if key not in deferred]
        conditional = [key for key in wave if nodes[key].condition]
        if evaluate is None:
            budget = 0
        deferred.update(conditional[budget:])
        conditional = conditional[:budget]
        budget -= len(conditional)
        wave = [key for key in wave if key not in deferred]
        if not wave:
            return decisions
        outcomes = dict(
            zip(
                conditional,
                evaluate([
                    (nodes[key].condition or "", condition_input(nodes[key], nodes, states, context))
                    for key in conditional
                ]) if conditional and evaluate is not None else [],
                strict=True,
            )
        )  # fmt: skip
        for key in wave:
            node = nodes[key]
            if key in outcomes:
                outcome = outcomes[key]
                run, reason = outcome.holds, outcome.describe()
            else:
                run, reason = default_verdict({d: states[d] for d in node.depends_on})
            decisions.append(Decision(node.task_id, key, run, reason))
            states[key] = "queued" if run else "skipped"
