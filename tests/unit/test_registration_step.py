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


def _registration(
    log: WorkflowLog, proposer: HeldProposer, removed: list[str], registered: list[bool],
    *, before: bool,
) -> Stepper:  # fmt: skip
    registration = NodeRegistration(
        JOIN, proposer, log.reader, lambda: True, interval_s=0.5, on_removed=removed.append,
        clock=FakeClock(), registered_before=before, on_registered=lambda: registered.append(True),
    )  # fmt: skip
    return Stepper(registration.main())


def test_a_first_registration_is_marked_once(log: WorkflowLog) -> None:
    proposer = HeldProposer(log)
    removed: list[str] = []
    registered: list[bool] = []
    stepper = _registration(log, proposer, removed, registered, before=False)
    stepper.resume()
    proposer.apply_next()
    stepper.settle()
    assert registered == [True]
    for _ in range(3):  # checking the current row again marks nothing more
        stepper.resume()
    assert registered == [True] and removed == []


def test_a_node_removed_while_it_was_down_stays_removed(log: WorkflowLog) -> None:
    """Its data dir says it registered before, so the removal it finds in the
    log is its own: it stops instead of joining again."""
    assert log.one(JOIN)["ok"]
    assert log.one(e.NodeLeave("n4", "removed by the operator"))["ok"]
    proposer = HeldProposer(log)
    removed: list[str] = []
    registered: list[bool] = []
    stepper = _registration(log, proposer, removed, registered, before=True)
    stepper.resume()
    assert stepper.done and removed == ["removed by the operator"]
    assert proposer.held == [] and registered == []


def test_an_empty_data_dir_joins_again_after_an_old_removal(log: WorkflowLog) -> None:
    assert log.one(JOIN)["ok"]
    assert log.one(e.NodeLeave("n4", "removed by the operator"))["ok"]
    proposer = HeldProposer(log)
    removed: list[str] = []
    registered: list[bool] = []
    stepper = _registration(log, proposer, removed, registered, before=False)
    stepper.resume()
    assert proposer.payloads() == [JOIN]
    proposer.apply_next()
    stepper.settle()
    assert removed == [] and registered == [True]
    assert next(n for n in log.reader.nodes() if n.id == "n4").status == "active"
