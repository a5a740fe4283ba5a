"""The workflow engine driven by hand: a round proposes its decisions as one
future the step waits on (stamped with the engine's clock), a condition is
evaluated in the sandbox (real V8) while the engine goes on and wakes it
when its outcome arrives, and an abandoned submission is judged by the
engine's clock."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cortex.raft.leader_loop import LeaderContext
from cortex.state import entries as e
from cortex.steps import WaitSignal, wall_ms
from cortex.workflows.engine import ABANDONED_SUBMISSION_S, WorkflowEngine
from cortex.workflows.sandbox import ConditionSandbox
from tests.cluster import wait_until
from tests.steps_by_hand import FakeClock, HeldProposer, Stepper
from tests.workflow_sim import WorkflowLog

PIPELINE = """
name: pipeline
tasks:
  build: {spec: {command: "true"}}
  test: {spec: {command: "true"}, dependsOn: [build]}
  notify: {spec: {command: "true"}, dependsOn: [build], condition: "parent.build.exitCode !== 0"}
"""


@pytest.fixture
def sandbox() -> Iterator[ConditionSandbox]:
    box = ConditionSandbox(workers=1)
    yield box
    box.close()


def engine_for(
    log: WorkflowLog, sandbox: ConditionSandbox, clock: FakeClock
) -> tuple[WorkflowEngine, HeldProposer]:
    proposer = HeldProposer(log)
    context = LeaderContext("n1", lambda: True, proposer, log.reader, clock)
    return WorkflowEngine(context, sandbox, interval_s=1.0), proposer


def test_decisions_wait_as_one_future_and_conditions_do_not_hold_the_engine(
    log: WorkflowLog, sandbox: ConditionSandbox
) -> None:
    workflow_id, ids = log.submit(PIPELINE)
    log.complete(ids["build"])
    clock = FakeClock()
    engine, proposer = engine_for(log, sandbox, clock)
    stepper = Stepper(engine.main())

    stepper.resume(True)
    # `test` is decided at once; `notify` waits for its condition in V8.
    (advance,) = proposer.payloads()
    assert isinstance(advance, e.WorkflowAdvance) and advance.workflow_id == workflow_id
    assert [d["task_id"] for d in advance.decisions] == [ids["test"]]
    assert proposer.held[0][0][0].ts == wall_ms(clock)
    assert stepper.waiting is proposer.held[0][1]
    proposer.apply_next()
    stepper.settle()  # one decision committed: the engine looks again at once
    assert isinstance(stepper.waiting, WaitSignal)

    wait_until(stepper.waiting.signal.is_set, 30, what="the condition's outcome to wake the engine")
    stepper.resume(True)
    (skip,) = proposer.payloads()
    assert isinstance(skip, e.WorkflowAdvance)
    assert [(d["task_id"], d["decision"]) for d in skip.decisions] == [(ids["notify"], "skip")]
    proposer.apply_next()
    stepper.settle()
    assert log.state(ids["test"]) == "queued" and log.state(ids["notify"]) == "skipped"


def test_an_abandoned_submission_is_cancelled_by_the_engines_clock(
    log: WorkflowLog, sandbox: ConditionSandbox
) -> None:
    first_part = [
        {"key": "a", "task_id": "t-a", "spec": {"command": "true"}, "depends_on": [], "pos": 0}
    ]
    submitted = log.one(e.WorkflowSubmit("w-1", "parts", first_part, total_tasks=2))
    assert submitted["ok"], submitted
    clock = FakeClock(wall_s=log.ts / 1000 + ABANDONED_SUBMISSION_S - 1)
    engine, proposer = engine_for(log, sandbox, clock)
    stepper = Stepper(engine.main())
    stepper.resume(False)
    assert proposer.held == []

    clock.advance(2)
    stepper.resume(False)
    (cancel,) = proposer.payloads()
    assert cancel == e.WorkflowCancel(
        "w-1", f"its submission did not complete within {ABANDONED_SUBMISSION_S:g}s"
    )
    assert proposer.held[0][0][0].ts == wall_ms(clock)
    proposer.apply_next()
    stepper.settle()
    workflow = log.reader.get_workflow("w-1")
    assert workflow is not None and workflow.state == "cancelled"


def test_a_standalone_task_ending_does_not_wake_the_engine_and_a_workflow_task_does(
    log: WorkflowLog, sandbox: ConditionSandbox
) -> None:
    engine, _ = engine_for(log, sandbox, FakeClock())
    log.machine.add_listener(engine.on_change)
    workflow_id, ids = log.submit(PIPELINE)
    engine._wake.clear()
    assert log.one(e.TaskSubmit("t-alone", {"type": "noop"}))["ok"]
    assert log.complete("t-alone")["ok"]
    assert not engine._wake.is_set()
    assert log.complete(ids["build"])["ok"]
    assert engine._wake.is_set()


def test_a_follower_engine_is_not_woken(log: WorkflowLog, sandbox: ConditionSandbox) -> None:
    context = LeaderContext("n1", lambda: False, HeldProposer(log), log.reader, FakeClock())
    engine = WorkflowEngine(context, sandbox)
    log.machine.add_listener(engine.on_change)
    workflow_id, ids = log.submit(PIPELINE)
    assert log.complete(ids["build"])["ok"]
    assert not engine._wake.is_set()
