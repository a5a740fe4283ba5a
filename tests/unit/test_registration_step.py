"""Node registration driven by hand: it proposes this node's row (stamped
with its clock) as a future it waits on, checks it less often once
registered, retries a join that did not commit, and notices a removal."""

from __future__ import annotations

import dataclasses

from cortex.errors import Unavailable
from cortex.membership.registry import REGISTERED_CHECK_S, NodeRegistration
from cortex.state import entries as e
from cortex.steps import Sleep, wall_ms
from tests.steps_by_hand import FakeClock, HeldProposer, Stepper
from tests.workflow_sim import WorkflowLog

JOIN = e.NodeJoin("n4", "n4:1", "n4:2", executors=["noop"], resources={"max_tasks": 2})


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
    log: WorkflowLog, proposer: HeldProposer, removed: list[str], joining: list[int],
    *, since: int | None,
) -> Stepper:  # fmt: skip
    registration = NodeRegistration(
        JOIN, proposer, log.reader, lambda: True, interval_s=0.5, on_removed=removed.append,
        clock=FakeClock(), joining_since=since, on_joining=joining.append,
    )  # fmt: skip
    return Stepper(registration.main())


def test_a_data_dir_marks_its_first_join_before_proposing_it(log: WorkflowLog) -> None:
    proposer = HeldProposer(log)
    removed: list[str] = []
    joining: list[int] = []
    stepper = _registration(log, proposer, removed, joining, since=None)
    stepper.resume()
    assert joining == [log.reader.applied_index()] and proposer.payloads() == [JOIN]
    proposer.apply_next()
    stepper.settle()
    for _ in range(3):  # the row is current: nothing more is marked or proposed
        stepper.resume()
    assert len(joining) == 1 and proposer.held == [] and removed == []


def test_a_node_removed_while_it_was_down_stays_removed(log: WorkflowLog) -> None:
    """Its data dir asked to join before the removal, so the removal it finds
    in its log on restart is its own: it stops instead of joining again."""
    since = log.reader.applied_index()
    assert log.one(JOIN)["ok"]
    assert log.one(e.NodeLeave("n4", "removed by the operator"))["ok"]
    proposer = HeldProposer(log)
    removed: list[str] = []
    joining: list[int] = []
    stepper = _registration(log, proposer, removed, joining, since=since)
    stepper.resume()
    assert stepper.done and removed == ["removed by the operator"]
    assert proposer.held == [] and joining == []


def test_an_empty_data_dir_joins_again_after_an_old_removal(log: WorkflowLog) -> None:
    assert log.one(JOIN)["ok"]
    assert log.one(e.NodeLeave("n4", "removed by the operator"))["ok"]
    proposer = HeldProposer(log)
    removed: list[str] = []
    joining: list[int] = []
    removal = log.reader.removal_index("n4")
    assert removal is not None
    stepper = _registration(log, proposer, removed, joining, since=None)
    stepper.resume()
    # The join names the removal it undoes, so apply lets it.
    assert proposer.payloads() == [dataclasses.replace(JOIN, rejoin_after=removal)]
    assert joining == [log.reader.applied_index()]
    # Restarted before its join committed: the removal is still the old one.
    again = _registration(log, HeldProposer(log), removed, [], since=joining[0])
    again.resume()
    assert not again.done and removed == []
    proposer.apply_next()
    stepper.settle()
    assert removed == []
    assert next(n for n in log.reader.nodes() if n.id == "n4").status == "active"


def test_a_join_proposed_before_the_removal_and_committed_after_it_is_refused(
    log: WorkflowLog,
) -> None:
    """The node, offline, asked to be active again while the operator removed
    it; its join commits after the removal and must not bring it back."""
    assert log.one(JOIN)["ok"]
    assert log.one(e.NodeLeave("n4", "removed by the operator"))["ok"]
    late = log.one(JOIN)
    assert not late["ok"] and late["reason"].startswith("illegal_transition"), late
    assert next(n for n in log.reader.nodes(include_removed=True) if n.id == "n4").status == (
        "removed"
    )
    removal = log.reader.removal_index("n4")
    assert removal is not None
    naming_an_older_removal = dataclasses.replace(JOIN, rejoin_after=removal - 1)
    assert not log.one(naming_an_older_removal)["ok"]
    assert log.one(dataclasses.replace(JOIN, rejoin_after=removal))["ok"]
