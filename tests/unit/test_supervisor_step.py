"""The node supervisor driven by hand on a clock the test moves: a node is
marked offline (its attempts re-queued) once silent for the failure timeout
measured on that clock, a new leader first waits one full timeout, and
drains move tasks by the same clock."""

from __future__ import annotations

from cortex.membership.board import ResourceBoard
from cortex.membership.failure import NodeSupervisor
from cortex.raft.leader_loop import LeaderContext
from cortex.scheduler.model import NodeResources
from cortex.state import entries as e
from cortex.steps import WaitSignal, wall_ms
from tests.steps_by_hand import FakeClock, HeldProposer, Stepper
from tests.workflow_sim import WorkflowLog

TIMEOUT_S = 15.0


class Supervised:
    def __init__(self, log: WorkflowLog) -> None:
        self.clock = FakeClock()
        self.board = ResourceBoard(self.clock)
        self.proposer = HeldProposer(log)
        self.leading = True
        self.supervisor = NodeSupervisor(
            LeaderContext("n1", lambda: self.leading, self.proposer, log.reader, self.clock),
            self.board,
            failure_timeout_s=TIMEOUT_S,
        )
        self.stepper = Stepper(self.supervisor.main())

    def round_after(self, seconds: float, *heard_from: str) -> None:
        """Moves the clock, takes reports from `heard_from` just then, and
        lets the interval end."""
        self.clock.advance(seconds)
        for node_id in heard_from:
            self.board.record(node_id, NodeResources(), {}, 0)
        self.stepper.resume(False)


def running_on(log: WorkflowLog, task_id: str, node: str) -> None:
    assert log.one(e.TaskSubmit(task_id, {"type": "noop"}))["ok"]
    assert log.one(e.TaskAssign([{"task_id": task_id, "node": node, "attempt": 1}]))["placed"]
    assert log.one(e.TaskStarted(task_id, 1, node), node=node)["ok"]


def test_a_silent_node_goes_offline_after_the_timeout_on_the_loops_clock(
    log: WorkflowLog,
) -> None:
    running_on(log, "t-1", "n2")
    s = Supervised(log)
    s.round_after(0, "n2")  # leader from now on: nobody is judged for one timeout
    s.round_after(10, "n2")  # n2 reports; n3 never does
    s.round_after(TIMEOUT_S - 10 - 0.1)
    assert s.proposer.held == []

    s.round_after(0.2)  # n3: silent for the timeout since this node leads
    assert len(s.proposer.held) == 1
    assert s.stepper.waiting is s.proposer.held[0][1]  # waiting, not blocked
    (status,) = s.proposer.payloads()
    assert status == e.NodeStatus("n3", "offline", f"node n3 silent for over {TIMEOUT_S:g}s")
    assert s.proposer.held[0][0][0].ts == wall_ms(s.clock)
    s.proposer.apply_next()
    s.stepper.settle()
    assert isinstance(s.stepper.waiting, WaitSignal)

    s.round_after(TIMEOUT_S - 5)  # n2 last heard 15.1 s ago
    offline, retry = s.proposer.payloads()
    assert offline == e.NodeStatus("n2", "offline", f"node n2 silent for over {TIMEOUT_S:g}s")
    assert isinstance(retry, e.TaskRetry) and (retry.task_id, retry.attempt) == ("t-1", 1)
    s.proposer.apply_next()
    s.stepper.settle()
    task = log.reader.get_task("t-1")
    assert task is not None and task.state == "queued"
    assert {n.id: n.status for n in log.reader.nodes()} == {
        "n1": "active",
        "n2": "offline",
        "n3": "offline",
    }


def test_an_attempt_assigned_as_its_node_went_offline_is_requeued_after(
    log: WorkflowLog,
) -> None:
    """The supervisor read n2's attempts for the offline proposal before an
    assignment to n2 (decided while n2 was active) was applied: the attempt
    is left on an offline node, and the next pass re-queues it without
    spending an attempt."""
    assert log.one(e.TaskSubmit("t-late", {"type": "noop"}))["ok"]
    assert log.one(e.TaskAssign([{"task_id": "t-late", "node": "n2", "attempt": 1}]))["placed"]
    assert log.one(e.NodeStatus("n2", "offline", "node n2 silent for over 15s"))["ok"]
    s = Supervised(log)
    s.round_after(0, "n3")
    s.round_after(TIMEOUT_S, "n3")
    (move,) = s.proposer.payloads()
    assert move == e.TaskRetry("t-late", 1, "node n2 offline", spend_attempt=False)
    s.proposer.apply_next()
    s.stepper.settle()
    task = log.reader.get_task("t-late")
    assert task is not None and (task.state, task.node, task.retries) == ("queued", None, 0)
    s.round_after(1, "n3")
    assert s.proposer.held == []


def test_a_new_leader_waits_a_full_timeout_again(log: WorkflowLog) -> None:
    s = Supervised(log)
    s.round_after(0)
    s.leading = False
    s.round_after(TIMEOUT_S)  # a follower meanwhile: it forgets when it led
    s.leading = True
    s.round_after(1)  # leader again, from now
    s.round_after(TIMEOUT_S - 0.1)
    assert s.proposer.held == []
    s.round_after(0.2)
    assert s.proposer.payloads() == [
        e.NodeStatus("n2", "offline", f"node n2 silent for over {TIMEOUT_S:g}s")
    ]


def test_a_drain_moves_running_tasks_once_its_deadline_passes_on_the_clock(
    log: WorkflowLog,
) -> None:
    running_on(log, "t-run", "n2")
    assert log.one(e.TaskSubmit("t-wait", {"type": "noop"}))["ok"]
    assert log.one(e.TaskAssign([{"task_id": "t-wait", "node": "n2", "attempt": 1}]))["placed"]
    s = Supervised(log)
    deadline_ms = wall_ms(s.clock) + 60_000
    assert log.one(e.NodeStatus("n2", "draining", "maintenance", deadline_ms))["ok"]

    s.round_after(0, "n2", "n3")  # the assigned task moves at once, without spending an attempt
    (move,) = s.proposer.payloads()
    assert move == e.TaskRetry("t-wait", 1, "node n2 draining", spend_attempt=False)
    s.proposer.apply_next()
    s.stepper.settle()

    for _ in range(5):
        s.round_after(11.875, "n2", "n3")
    assert s.proposer.held == []
    s.round_after(0.625, "n2", "n3")
    (late,) = s.proposer.payloads()
    assert late == e.TaskRetry("t-run", 1, "node n2 draining", spend_attempt=False)
