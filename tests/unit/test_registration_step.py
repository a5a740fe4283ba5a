"""Node registration driven by hand: it proposes this node's row (stamped
with its clock) as a future it waits on, checks it less often once
registered, retries a join that did not commit, and notices a removal."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cortex.errors import Unavailable
from cortex.membership.registry import REGISTERED_CHECK_S, NodeRegistration
from cortex.state import entries as e
from cortex.steps import Sleep, wall_ms
from tests.steps_by_hand import FakeClock, HeldProposer, Stepper
from tests.workflow_sim import WorkflowLog

JOIN = e.NodeJoin("n4", "n4:1", "n4:2", executors=["noop"], resources={"max_tasks": 2})


@pytest.fixture
def log(tmp_path: Path) -> Iterator[WorkflowLog]:
    log = WorkflowLog(tmp_path / "state.db")
    yield log
    log.close()


def test_registers_then_checks_less_often_and_notices_removal(log: WorkflowLog) -> None:
    clock = FakeClock()
    proposer = HeldProposer(log)
    removed: list[str] = []
    registration = NodeRegistration(
        JOIN, proposer, log.reader, lambda: True, interval_s=0.5,
        on_removed=removed.append, clock=clock,
    )  # fmt: skip
    stepper = Stepper(registration.main())
    assert stepper.waiting == Sleep(0.5)

    stepper.resume()
    assert proposer.payloads() == [JOIN] and stepper.waiting is proposer.held[0][1]
    proposer.fail_next(Unavailable("no Raft leader is known"))
    stepper.settle()
    assert stepper.waiting == Sleep(0.5)  # tries again after the interval

    stepper.resume()
    assert proposer.held[0][0][0].ts == wall_ms(clock)
    proposer.apply_next()
    stepper.settle()
    stepper.resume()  # the row is current now
    assert stepper.waiting == Sleep(REGISTERED_CHECK_S) and proposer.held == []

    assert log.one(e.NodeLeave("n4", "removed by the operator"))["ok"]
    stepper.resume()
    assert stepper.done and removed == ["removed by the operator"]
