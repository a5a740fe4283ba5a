"""The Cortex components of a simulated node, the same classes a real node
runs (registration, heartbeats, failure detection, scheduler, workflow
engine, retention, agent), wired with the simulated clock, peer calls,
executor and sandbox, and driven as steps."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from cortex.agent import Agent
from cortex.data_dir import joining_since, mark_joining
from cortex.executors import BUILTIN_EXECUTORS
from cortex.membership.board import ResourceBoard
from cortex.membership.failure import NodeSupervisor
from cortex.membership.heartbeat import HeartbeatReceiver, HeartbeatSender
from cortex.membership.reachability import Reachability
from cortex.membership.registry import NodeRegistration
from cortex.raft.leader_loop import LeaderContext
from cortex.retention_loop import RetentionLoop
from cortex.scheduler.applied_view import AppliedView
from cortex.scheduler.loop import SchedulerLoop
from cortex.scheduler.model import NodeResources
from cortex.schedules.loop import ScheduleLoop
from cortex.schedules.runs import RunBuilder
from cortex.sim.executor import SimLauncher
from cortex.sim.peers import PeerEndpoint
from cortex.sim.sandbox import InlineSandbox
from cortex.sim.steps import StepRunner
from cortex.spec import DEFAULT_MAX_SPEC_BYTES
from cortex.state import entries as e
from cortex.state.queries import StateReader
from cortex.state.transitions import TaskChange
from cortex.workflows.engine import WorkflowEngine

if TYPE_CHECKING:
    from cortex.sim.node import SimNode

HEARTBEAT_INTERVAL_S = 0.5
FAILURE_TIMEOUT_S = 3.0
HEARTBEAT_WINDOW_S = 5.0
SCHEDULER_INTERVAL_S = 0.5
MAX_TASKS = 6
PREFETCH_TASKS = 2
RETENTION_S = 0.0  # keep everything: the checks read the whole history


class SimSampler:
    """Seeded resource reports in place of psutil's."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng

    def sample(self) -> NodeResources:
        rng = self._rng
        return NodeResources(
            cpu_cores=4.0,
            cpu_usage_percent=round(rng.uniform(5, 95), 1),
            memory_total_mb=8192.0,
            memory_available_mb=round(rng.uniform(1024, 7000), 1),
            disk_total_gb=100.0,
            disk_available_gb=round(rng.uniform(10, 90), 1),
            disk_io_util_percent=round(rng.uniform(0, 60), 1),
            network_bandwidth_mbps=1000.0,
            network_throughput_mbps=round(rng.uniform(0, 400), 1),
        )


class NodeComponents:
    def __init__(
        self,
        node: SimNode,
        rng: random.Random,
        sandbox: InlineSandbox,
        route: Callable[[str], str],
    ) -> None:
        assert node.machine is not None and node.group is not None and node.proposer is not None
        clock = node.clock
        group, machine, proposer = node.group, node.machine, node.proposer
        self.runner = StepRunner(clock)
        self.reader = StateReader(machine.path)
        self.launcher = SimLauncher(clock, rng.getrandbits(32))
        self.board = ResourceBoard(clock)
        self.receiver = HeartbeatReceiver(node.secret, self.board, HEARTBEAT_WINDOW_S, clock)
        self.endpoint = PeerEndpoint(
            node.id, node.address, clock, node.network, route,
            {"heartbeat": self.receiver.receive},
        )  # fmt: skip
        reachable = Reachability(node.id, group, self.board, HEARTBEAT_INTERVAL_S).reachable
        leading = LeaderContext(node.id, lambda: group.is_leader, proposer, self.reader, clock)
        self.scheduler = SchedulerLoop(
            leading, self.board, reachable, SCHEDULER_INTERVAL_S,
            AppliedView(machine, lambda: group.is_leader),
        )  # fmt: skip
        group.placer = self.scheduler.at_proposal
        self.supervisor = NodeSupervisor(leading, self.board, FAILURE_TIMEOUT_S)
        self.retention = RetentionLoop(leading, RETENTION_S, interval_s=5.0)
        self.engine = WorkflowEngine(leading, sandbox, SCHEDULER_INTERVAL_S)
        self.schedules = ScheduleLoop(leading, RunBuilder(None, DEFAULT_MAX_SPEC_BYTES))
        self.agent = Agent(
            node.id, proposer, self.reader, {"noop": BUILTIN_EXECUTORS["noop"]},
            node.data_dir, node.is_ready, 0.5, output=None, clock=clock,
            spawn=self.runner.spawn, launcher=self.launcher, max_running=MAX_TASKS,
            read_applied=machine.tasks_as_applied,
        )  # fmt: skip
        self.registration = NodeRegistration(
            e.NodeJoin(
                node_id=node.id,
                raft_address=node.address,
                grpc_address=node.address,
                peer_address=node.peer_address,
                labels=dict(node.labels),
                executors=["noop"],
                resources={"max_tasks": MAX_TASKS, "prefetch_tasks": PREFETCH_TASKS},
            ),
            proposer, self.reader, node.is_ready, on_removed=node.removed, clock=clock,
            joining_since=joining_since(Path(node.data_dir)),
            on_joining=lambda since: mark_joining(Path(node.data_dir), since),
        )  # fmt: skip
        self.heartbeats = HeartbeatSender(
            node.id, node.secret, SimSampler(random.Random(rng.getrandbits(64))), self.board,
            self.reader, lambda: self.agent.running_count, {}, self.endpoint,
            HEARTBEAT_INTERVAL_S, clock,
        )  # fmt: skip
        machine.add_listener(self._on_change)
        machine.add_listener(self.engine.on_change)
        group.add_role_listener(self._role_changed)
        for name, step in (
            ("registration", self.registration.main()),
            ("heartbeats", self.heartbeats.main()),
            ("supervisor", self.supervisor.main()),
            ("scheduler", self.scheduler.main()),
            ("workflows", self.engine.main()),
            ("schedules", self.schedules.main()),
            ("agent", self.agent.main()),
        ):
            self.runner.spawn(step, f"{node.id}/{name}")

    def _role_changed(self, leading: bool) -> None:
        """As this node becomes or stops being the leader (`cortex.node.Node`)."""
        for loop in (self.scheduler, self.schedules, self.supervisor, self.engine):
            loop.role_changed(leading)

    def _on_change(self, index: int, changes: list[TaskChange]) -> None:
        self.agent.on_change(index, changes)
        self.scheduler.on_change(changes)
        self.schedules.on_change(changes)

    def run_due(self) -> None:
        self.launcher.run_due()
        self.runner.run_due()
        self.endpoint.expire()

    def wants_step(self) -> bool:
        return self.runner.any_ready()

    def next_at(self) -> int | None:
        times = [t for t in (self.runner.next_at(), self.launcher.next_at()) if t is not None]
        return min(times) if times else None

    def close(self) -> None:
        self.runner.close()
        self.launcher.abandon()
        self.endpoint.close()
        self.reader.close()
