"""The engine's evaluations in flight, on a real sandbox: a round asks, a
later round gets the outcome for the same input, stale ones are dropped and
cancelled."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from cortex.workflows.decisions import TaskNode, decide
from cortex.workflows.evaluations import PendingEvaluations
from cortex.workflows.sandbox import ConditionSandbox
from tests.cluster import wait_until

OK = {"exit_code": 0, "stdout": "fine", "stderr": ""}


@pytest.fixture
def sandbox() -> Iterator[ConditionSandbox]:
    box = ConditionSandbox(workers=1, max_workers=1)
    yield box
    box.close()


def _nodes(condition: str, attempt: int = 1) -> dict[str, TaskNode]:
    return {
        "a": TaskNode("a", "ta", "completed", result=OK, attempt=attempt),
        "b": TaskNode("b", "tb", "pending", ("a",), condition),
        "c": TaskNode("c", "tc", "pending", ("a",)),
    }


def test_a_round_asks_and_a_later_round_decides(sandbox):
    arrived = threading.Event()
    pending = PendingEvaluations(sandbox, arrived.set)
    nodes = _nodes("parent.a.exitCode === 0")
    first = decide(nodes, {}, pending.evaluator("w1"))
    # The condition-free task is decided at once; the other waits.
    assert [(d.key, d.run) for d in first] == [("c", True)]
    pending.sweep()
    assert arrived.wait(30)
    second = decide(nodes, {}, pending.evaluator("w1"))
    assert [(d.key, d.run, d.reason) for d in second] == [
        ("b", True, "condition is true"), ("c", True, "all dependencies completed")
    ]  # fmt: skip


def test_an_outcome_is_used_only_for_the_input_it_was_computed_from(sandbox):
    arrived = threading.Event()
    pending = PendingEvaluations(sandbox, arrived.set)
    condition = "workflow.context.go === true"
    decide(_nodes(condition), {"go": True}, pending.evaluator("w1"))
    pending.sweep()
    assert arrived.wait(30)
    # The context changed meanwhile: the outcome does not apply; asked again.
    arrived.clear()
    assert [d.key for d in decide(_nodes(condition), {"go": False}, pending.evaluator("w1"))] == [
        "c"
    ]
    pending.sweep()
    assert arrived.wait(30)
    (b,) = [
        d for d in decide(_nodes(condition), {"go": False}, pending.evaluator("w1")) if d.key == "b"
    ]
    assert not b.run and b.reason == "condition is false"
    # An upstream task ran again: a new input too.
    assert [d.key for d in decide(_nodes(condition, attempt=2), {"go": False},
                                  pending.evaluator("w1"))] == ["c"]  # fmt: skip


def test_what_no_round_asks_for_is_dropped_and_cancelled(sandbox):
    pending = PendingEvaluations(sandbox, lambda: None)
    blocker = sandbox.submit("while(true){}", {"parent": {}, "workflow": {"context": {}}}, "x")
    for i in range(5):
        decide(_nodes(f"parent.a.exitCode === {i}"), {}, pending.evaluator(f"w{i}"))
    assert len(pending) == 5
    pending.sweep()  # asked for in this round: kept
    assert len(pending) == 5
    pending.sweep()  # nobody asked again (decided elsewhere, workflow gone)
    assert len(pending) == 0
    assert blocker.result().error == "timeout"
    wait_until(lambda: sandbox.queued == 0, 10, what="cancelled evaluations to leave the queue")


def test_clear_forgets_everything(sandbox):
    pending = PendingEvaluations(sandbox, lambda: None)
    decide(_nodes("true"), {}, pending.evaluator("w1"))
    pending.clear()
    assert len(pending) == 0
