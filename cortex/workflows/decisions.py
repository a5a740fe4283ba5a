"""The leader's pure decision logic: which pending tasks can be decided
(every dependency terminal), and whether each runs, is skipped or fails
(a condition that does not come to true or false fails its task, so the
workflow cannot end `completed` on a broken condition). Condition
evaluation is injected, so this runs without V8 in tests; an evaluator may
answer "not yet" (None) for a condition still being evaluated, and that task
waits for a later call."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from cortex.state.task_states import TERMINAL_STATES
from cortex.state.workflow_rules import default_verdict
from cortex.workflows.condition_input import DEFAULT_MAX_BYTES, condition_input, upstream
from cortex.workflows.sandbox import ConditionOutcome, ConditionSandbox


@dataclass(frozen=True)
class TaskNode:
    """A workflow task as the decision logic sees it."""

    key: str
    task_id: str
    state: str
    depends_on: tuple[str, ...] = ()
    condition: str | None = None
    result: dict[str, Any] | None = None
    attempt: int = 0


@dataclass(frozen=True)
class ConditionRequest:
    """One task's condition to evaluate. `basis` names everything its input
    is made of (the condition, the context, each upstream task's state and
    attempt): equal bases mean equal inputs, so an outcome can be kept and
    matched later without building the input again. `input()` builds it."""

    task_id: str
    key: str
    condition: str
    basis: tuple[Any, ...]
    build: Callable[[], dict[str, Any]] = field(repr=False, compare=False)

    def input(self) -> dict[str, Any]:
        return self.build()


# Outcomes for a batch of requests, in order; None: not known yet.
Evaluator = Callable[[list[ConditionRequest]], list[ConditionOutcome | None]]


def sandbox_evaluator(sandbox: ConditionSandbox, flow: str = "") -> Evaluator:
    """Evaluates every request in `sandbox` and waits for all of them."""

    def evaluate(requests: list[ConditionRequest]) -> list[ConditionOutcome | None]:
        return list(sandbox.evaluate_many([(r.condition, r.input()) for r in requests], flow))

    return evaluate


Verdict = Literal["run", "skip", "fail"]


@dataclass(frozen=True)
class Decision:
    """What becomes of a pending task: it runs, is skipped (a dependency did
    not complete, or its condition is false), or fails without running (its
    condition threw, timed out or did not come to a boolean)."""

    task_id: str
    key: str
    verdict: Verdict
    reason: str

    @property
    def run(self) -> bool:
        return self.verdict == "run"

    def to_entry(self) -> dict[str, Any]:
        """The form `WORKFLOW_ADVANCE` carries."""
        return {
            "task_id": self.task_id,
            "key": self.key,
            "decision": self.verdict,
            "reason": self.reason,
        }


# The state a decided task is in, for the next wave of decisions.
_DECIDED_STATE: dict[Verdict, str] = {"run": "queued", "skip": "skipped", "fail": "failed"}


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
    input_max_bytes: int = DEFAULT_MAX_BYTES,
) -> list[Decision]:
    """Decides every task that can be decided now, in waves: a task skipped
    in one wave is terminal for the next, so a skip cascades through the
    DAG in one call (a failed one too). A task released to run is not terminal and stops the
    cascade until it finishes. Without `evaluate`, tasks with a condition
    are left undecided (so cheap decisions need not wait for slow ones), and
    so are those `evaluate` has no outcome for yet; past `max_conditions`
    requests, the rest wait for the next call."""
    states = {key: node.state for key, node in nodes.items()}
    decisions: list[Decision] = []
    budget = max_conditions if max_conditions is not None else len(nodes)
    deferred: set[str] = set()
    context_digest: list[str] = []
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
        outcomes: dict[str, ConditionOutcome] = {}
        if conditional and evaluate is not None:
            if not context_digest:
                canonical = json.dumps(context, sort_keys=True, separators=(",", ":"))
                context_digest.append(hashlib.sha256(canonical.encode()).hexdigest())
            snapshot = dict(states)
            requests = [_request(nodes[key], nodes, snapshot, context, context_digest[0],
                                 input_max_bytes) for key in conditional]  # fmt: skip
            for key, outcome in zip(conditional, evaluate(requests), strict=True):
                if outcome is None:
                    deferred.add(key)
                else:
                    outcomes[key] = outcome
            wave = [key for key in wave if key not in deferred]
            if not wave:
                return decisions
        for key in wave:
            node = nodes[key]
            verdict: Verdict
            if key in outcomes:
                outcome = outcomes[key]
                verdict = "fail" if outcome.error else ("run" if outcome.holds else "skip")
                reason = outcome.describe()
            else:
                run, reason = default_verdict({d: states[d] for d in node.depends_on})
                verdict = "run" if run else "skip"
            decisions.append(Decision(node.task_id, key, verdict, reason))
            states[key] = _DECIDED_STATE[verdict]


def _request(
    node: TaskNode,
    nodes: Mapping[str, TaskNode],
    states: Mapping[str, str],
    context: dict[str, Any],
    context_digest: str,
    input_max_bytes: int,
) -> ConditionRequest:
    condition = node.condition or ""
    basis = (
        condition,
        context_digest,
        input_max_bytes,
        tuple((key, states[key], nodes[key].attempt) for key in upstream(node, nodes)),
    )
    return ConditionRequest(
        node.task_id, node.key, condition, basis,
        lambda: condition_input(node, nodes, states, context, input_max_bytes),
    )  # fmt: skip
