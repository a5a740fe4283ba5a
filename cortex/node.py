"""A Cortex node: the state machine, its Raft member, the scheduler, the agent,
the public gRPC server, the peer listener and the HTTP listener serving
metrics and the web UI, wired together and started in order."""

from __future__ import annotations

import logging
import os
import socket
import ssl
import threading
import time
from pathlib import Path

from cortex.agent import Agent
from cortex.api.admission import public_admission
from cortex.api.consistency import LeaderDirectory, LeaderReadIndex, ReadGate, leader_contact_age
from cortex.api.join_server import JoinServicer
from cortex.api.peer_client import PeerClient
from cortex.api.peer_server import PeerListener, PeerServicer
from cortex.api.servicer import CortexServicer
from cortex.api.tls import ServerTls, node_tls
from cortex.config import NodeConfig
from cortex.data_dir import (
    check_role,
    initial_peers,
    joining_since,
    make_data_dir,
    mark_joining,
    mark_removed,
    refuse_if_removed,
    refuse_if_state_ahead,
    resolve_secret,
)
from cortex.errors import ConfigError, CortexError
from cortex.executors import ExecutorSettings, TaskEnvironment, load_executors, secret_values
from cortex.http import HttpListener, NodeMetrics, WebApi, server_tls_context
from cortex.http.collectors import (
    AgentCollector,
    NodesCollector,
    OutputStreamsCollector,
    QueueCollector,
    RaftCollector,
)
from cortex.http.thread_cpu import ThreadCpuCollector
from cortex.http.timing import TimedProposer, TimedStateMachine
from cortex.limit_operations import LimitOperations
from cortex.membership import (
    HeartbeatSender,
    NodeRegistration,
    NodeSupervisor,
    ResourceBoard,
    ResourceSampler,
)
from cortex.membership.administration import NodeAdministration
from cortex.membership.cluster_status import ClusterStatus
from cortex.membership.heartbeat import HeartbeatReceiver
from cortex.membership.joining import JoinAdmission
from cortex.membership.reachability import Reachability
from cortex.membership.registry import SHUTDOWN_REASON
from cortex.membership.removal import CATCH_UP_S, NodeRemover
from cortex.output import OutputHub, OutputLimits, StreamingService
from cortex.raft import RaftGroup, RaftSettings
from cortex.raft.journal import migrate_legacy_journal
from cortex.raft.leader_loop import LeaderContext
from cortex.raft.read_barrier import ReadBarriers
from cortex.retention_loop import RetentionLoop
from cortex.scheduler.applied_view import AppliedView
from cortex.scheduler.loop import SchedulerLoop
from cortex.schedules.loop import ScheduleLoop
from cortex.schedules.operations import ScheduleOperations
from cortex.spec import TaskTypes
from cortex.state import entries as e
from cortex.state.purge import PURGED
from cortex.state.queries import StateReader
from cortex.state.transitions import TaskChange
from cortex.state.wal_checkpoints import BACKSTOP_PAGES, WalCheckpointer
from cortex.steps import SYSTEM_CLOCK, Sleep, Step, start_thread
from cortex.task_operations import TaskOperations
from cortex.tracing import build_tracer
from cortex.workflows.engine import WorkflowEngine
from cortex.workflows.operations import WorkflowOperations
from cortex.workflows.run_spans import WorkflowRunSpans
from cortex.workflows.sandbox import ConditionSandbox

log = logging.getLogger(__name__)

# How often a node looks again at executors whose fingerprint found nothing.
EXECUTOR_RETRY_S = 15.0


def _check_can_listen(address: str, key: str) -> None:
    """pysyncobj retries a failed bind forever in the background, so a port in
    use would leave the node silently cut off: fail at start instead."""
    host, _, port = address.rpartition(":")
    try:
        socket.create_server((host.strip("[]"), int(port))).close()
    except OSError as err:
        raise ConfigError(
            f"config key {key}: cannot listen on {address}: {os.strerror(err.errno or 0)}"
        ) from None


def _executor_settings(config: NodeConfig, secret: str, data_dir: Path) -> ExecutorSettings:
    """What the node's executors are told of its configuration."""
    return ExecutorSettings(
        data_dir=str(data_dir),
        environment=TaskEnvironment(
            tuple(config.env_passthrough), secret_values(os.environ, secret, config.api_token)
        ),
        container_runtime=config.container_runtime,
        container_mounts=tuple(config.container_mounts),
        subagent_command=tuple(config.subagent_command),
        k8s=dict(config.k8s),
        extra={name: dict(table) for name, table in config.executor_options.items()},
    )


def _http_tls(config: NodeConfig, tls: ServerTls | None) -> ssl.SSLContext | None:
    """The gRPC API's TLS, for the HTTP listener: the same certificate, and
    the same client certificates required."""
    if tls is None or not (config.tls_cert and config.tls_key):
        return None
    return server_tls_context(config.tls_cert, config.tls_key, tls.client_ca_pem)


class Node:
    def __init__(self, config: NodeConfig) -> None:
        self.config = config
        self.data_dir = make_data_dir(config.data_dir)
        refuse_if_removed(self.data_dir)
        check_role(self.data_dir, config.observer)
        # First: a node asked to trace without the SDK stops here, not later.
        self.tracer = build_tracer(config.otel_exporter, config.node_id)
        if not config.observer:  # an observer listens on no Raft port
            _check_can_listen(config.raft, "raft")
        self._server_tls, client_tls = node_tls(config)
        secret = resolve_secret(config, self.data_dir)
        db_path = str(self.data_dir / "state.db")
        # Opens its connections when first read, after the machine migrated.
        self.reader = StateReader(db_path)
        self.metrics = NodeMetrics()
        # Bound now, as the peer listener is: a port in use stops the start here.
        self.http = HttpListener(
            config.http,
            self.metrics.registry,
            config.api_token,
            _http_tls(config, self._server_tls),
        )
        # Bound now: its port (the OS's choice by default) goes into the join.
        self.peer_listener = PeerListener(
            config.node_id, config.peer_listen, secret, config.max_streams, self._server_tls
        )
        self.peer_address = config.peer_address(self.peer_listener.port)
        self.peer_client = PeerClient(config.node_id, secret, client_tls)
        peers = initial_peers(config, self.data_dir, secret, client_tls, self.peer_address)
        migrate_legacy_journal(str(self.data_dir), sync=config.raft_sync)
        self.machine = TimedStateMachine(
            db_path,
            on_applied=self.metrics.apply_seconds.observe,
            autocheckpoint_pages=BACKSTOP_PAGES,
        )
        refuse_if_state_ahead(self.data_dir, self.machine.applied_index)
        # Checkpoints off the Raft thread, from before the journal's replay.
        self.checkpoints = WalCheckpointer(db_path)
        self.machine.add_listener(self.checkpoints.on_change)
        self.checkpoints.start()
        self._ready = threading.Event()
        self.group = RaftGroup(
            RaftSettings(
                self_address=config.raft_address,
                bind_address=config.raft,
                peers=peers,
                data_dir=str(self.data_dir),
                secret=secret,
                compaction_min_entries=config.compaction_min_entries,
                compaction_min_time_s=config.compaction_min_time_s,
                compaction_log_ratio=config.compaction_log_ratio,
                sync=config.raft_sync,
                observer=config.observer,
                election_timeout_s=(config.election_timeout_min_s, config.election_timeout_max_s),
            ),
            self.machine,
            on_ready=self._ready.set,
        )
        self.group.journal.on_sync = self.metrics.journal_sync_seconds.observe
        self.group.on_append_gap = self.metrics.append_gap_seconds.observe
        # The real node's time: the same components take a simulated clock in
        # a simulated node (cortex.sim).
        clock = SYSTEM_CLOCK
        self.proposer = TimedProposer(
            self.group,
            on_committed=self.metrics.commit_latency.observe,
            commit_timeout_s=config.propose_timeout_s,
        )
        # The leader's own next batch takes along what followers forwarded
        # meanwhile (`cortex.raft.merging`).
        self.group.commands.batch_coming = self.proposer.has_next_batch
        self.board = ResourceBoard(clock)
        reachable = Reachability(
            config.node_id, self.group, self.board, config.heartbeat_interval_s
        ).reachable
        self.executors = load_executors(
            _executor_settings(config, secret, self.data_dir), config.executors
        )
        # A spec's type and options are checked where it enters: against the
        # executors installed here, or the types other nodes run.
        task_types = TaskTypes(self.executors.options, self._cluster_task_types)
        self.tasks = TaskOperations(
            config.node_id,
            self.proposer,
            self.machine,
            self.reader,
            self.board,
            reachable,
            config.max_spec_bytes,
            config.propose_timeout_s,
            tracer=self.tracer,
            task_types=task_types,
        )
        self.workflows = WorkflowOperations(
            config.node_id,
            self.proposer,
            self.machine,
            self.reader,
            config.propose_timeout_s,
            config.max_spec_bytes,
            sandbox=ConditionSandbox(max_workers=config.condition_workers_max),
            tracer=self.tracer,
            task_types=task_types,
        )
        self.cluster = ClusterStatus(
            config.node_id, self.group, self.machine, self.reader, self.board, reachable
        )
        self.removals = NodeRemover(
            config.node_id,
            self.group,
            self.proposer,
            self.reader,
            config.propose_timeout_s,
            self.peer_client,
        )
        self.administration = NodeAdministration(
            config.node_id,
            self.proposer,
            self.reader,
            self.cluster,
            self.removals,
            config.propose_timeout_s,
        )
        self.joins = JoinAdmission(secret, self.group, self.proposer)
        # Join calls on the public server carry the peer credential of the secret.
        self._join_secret = secret
        self.heartbeat_receiver = HeartbeatReceiver(
            secret, self.board, config.heartbeat_window_s, clock
        )
        leading = LeaderContext(
            config.node_id, lambda: self.group.is_leader, self.proposer, self.reader, clock
        )
        self.scheduler = SchedulerLoop(
            leading,
            self.board,
            reachable,
            config.scheduler_interval_s,
            AppliedView(self.machine, lambda: self.group.is_leader),
        )
        self.group.placer = self.scheduler.at_proposal
        self.limits = LimitOperations(
            config.node_id, self.proposer, self.reader, config.propose_timeout_s
        )
        self.schedules = ScheduleOperations(
            config.node_id,
            self.proposer,
            self.reader,
            config.propose_timeout_s,
            config.max_spec_bytes,
            self.workflows.sandbox,
            task_types,
        )
        self.schedule_loop = ScheduleLoop(leading, self.schedules.runs)
        self.output = OutputHub(
            self.data_dir / "attempts",
            OutputLimits(config.output_max_bytes_per_attempt, config.output_max_total_bytes),
        )
        self.agent = Agent(
            config.node_id,
            self.proposer,
            self.reader,
            self.executors.usable,
            str(self.data_dir),
            self._ready.is_set,
            config.kill_grace_s,
            output=self.output,
            clock=clock,
            tracer=self.tracer,
            max_running=config.max_tasks,
            read_applied=self.machine.tasks_as_applied,
        )
        self.registration = NodeRegistration(
            e.NodeJoin(
                node_id=config.node_id,
                # An observer has no Raft address and runs nothing.
                raft_address="" if config.observer else config.raft_address,
                grpc_address=config.grpc_address,
                peer_address=self.peer_address,
                labels=dict(config.labels),
                executors=[] if config.observer else sorted(self.executors.usable),
                resources={
                    "max_tasks": config.max_tasks,
                    "prefetch_tasks": config.waiting_tasks,
                },
                role="observer" if config.observer else "voter",
            ),
            self.proposer,
            self.reader,
            self._ready.is_set,
            on_removed=self._on_removed,
            clock=clock,
            joining_since=joining_since(self.data_dir),
            on_joining=lambda since: mark_joining(self.data_dir, since),
        )
        self.removed = False
        declared = config.resources.model_dump(exclude_none=True)
        self.heartbeats = HeartbeatSender(
            config.node_id,
            secret,
            ResourceSampler(
                str(self.data_dir),
                declared,
                declared.get("bandwidth_mbps"),
                tuple(config.gaming_processes),
            ),
            self.board,
            self.reader,
            lambda: self.agent.running_count,
            self._capabilities(),
            self.peer_client,
            config.heartbeat_interval_s,
            clock,
        )
        self.supervisor = NodeSupervisor(
            leading,
            self.board,
            config.failure_timeout_s,
        )
        self.retention = RetentionLoop(
            leading,
            config.task_retention_s,
            config.purge_batch_size,
            config.purge_interval_s,
        )
        self.machine.add_listener(self._on_change)
        self.workflow_engine = WorkflowEngine(
            leading,
            self.workflows.sandbox,
            config.scheduler_interval_s,
            input_max_bytes=config.condition_input_max_bytes,
            tracer=self.tracer,
        )
        self.machine.add_listener(self.workflow_engine.on_change)
        self.group.add_role_listener(self._role_changed)
        self.workflow_spans: WorkflowRunSpans | None = None
        if self.tracer.enabled:
            self.workflow_spans = WorkflowRunSpans(
                self.tracer, self.reader, lambda: self.group.is_leader
            )
            self.machine.add_listener(self.workflow_spans.on_change)
        self.streaming = StreamingService(
            config.node_id, db_path, self.reader, self.output, self.peer_client
        )
        self.machine.add_listener(self.streaming.on_change)
        self.machine.add_listener(self.metrics.on_change)
        for collector in (
            QueueCollector(self.reader),
            RaftCollector(self.group, lambda: self.machine.applied_index),
            NodesCollector(self.cluster, self.reader),
            OutputStreamsCollector(lambda: self.streaming.output_streams),
            AgentCollector(lambda: self.agent.running_count, lambda: self.agent.waiting_count),
            ThreadCpuCollector(),
        ):
            self.metrics.add_collector(collector)
        self._grpc_server = None
        self._stopped = threading.Event()

    def _capabilities(self) -> dict[str, str]:
        """What the executors found here, then what the operator declares."""
        return {
            **self.executors.capabilities,
            **self.executors.left_out_capabilities(),
            **self.config.capabilities,
        }

    def _late_executors(self) -> Step[None]:
        """Looks again, every `EXECUTOR_RETRY_S`, at the executors whose
        fingerprint found nothing at start (a container runtime that starts
        after the node, or was too busy to answer); one that answers now is
        run here, registered and advertised."""
        while self.executors.waiting:
            yield Sleep(EXECUTOR_RETRY_S)
            found = self.executors.retry()
            if found:
                self.heartbeats.set_capabilities(self._capabilities())
                self.registration.set_executors(sorted(self.executors.usable))

    def _cluster_task_types(self) -> set[str]:
        """The task types the cluster's nodes run, as they registered them."""
        return {name for node in self.reader.nodes() for name in node.executors}

    @property
    def http_address(self) -> str:
        """Where the HTTP listener (metrics, the web UI) listens."""
        return self.http.address

    def _on_removed(self, reason: str) -> None:
        """The cluster took this node out: keep its data dir from being started
        as a member again, and stop."""
        self.removed = True
        mark_removed(
            self.data_dir, f"node {self.config.node_id} was removed from its cluster: {reason}\n"
        )

        def stop() -> None:
            self.removals.wait_answered(self.config.propose_timeout_s + CATCH_UP_S)
            self.stop()

        threading.Thread(target=stop, name="removed-stop").start()

    def _role_changed(self, leading: bool) -> None:
        """Raft thread, as this node becomes or stops being the leader: its
        leader-only loops run a round now, or forget what they knew as the
        leader, instead of at their next interval."""
        for loop in (
            self.scheduler, self.schedule_loop, self.supervisor, self.retention,
            self.workflow_engine,
        ):  # fmt: skip
            loop.role_changed(leading)

    def _on_change(self, index: int, changes: list[TaskChange]) -> None:
        self.agent.on_change(index, changes)
        self.scheduler.on_change(changes)
        self.schedule_loop.on_change(changes)
        purged = [c.task_id for c in changes if c.state == PURGED]
        if purged:
            self.output.discard(purged)

    def start(self) -> None:
        from cortex.api.server import serve

        self.output.start()
        self.streaming.start()
        # A linearizable read waits for a barrier committed by the leader:
        # this node's own when it leads (or when another node asks it), else
        # the leader's, asked over the peer listener.
        barriers = ReadBarriers(
            self.config.node_id, self.proposer, lambda: self.machine.applied_index
        )
        self.peer_listener.start(
            PeerServicer(
                self.heartbeat_receiver,
                self.administration,
                self.cluster,
                self.streaming,
                barriers.read_index,
            )
        )
        leader = LeaderDirectory(self.group, self.reader)
        reads = ReadGate(
            self.config.node_id,
            self.machine,
            self.group,
            LeaderReadIndex(
                self.group, barriers.read_index, self.peer_client.read_index, self.reader
            ),
            self.config.propose_timeout_s,
            leader_contact_age(leader, self.board),
            leader,
        )
        servicer = CortexServicer(
            self.tasks,
            self.workflows,
            self.administration,
            self.cluster,
            reads,
            self.streaming,
            schedules=self.schedules,
            limits=self.limits,
        )
        self._grpc_server = serve(
            servicer,
            self.config.grpc,
            public_admission(
                self.config.node_id,
                self.config.max_inflight_requests,
                self.config.max_streams,
                self.config.max_waits,
            ),
            api_token=self.config.api_token,
            tls=self._server_tls,
            joins=JoinServicer(self.joins, self.cluster),
            secret=self._join_secret,
        )
        self.http.start(
            WebApi(
                self.config.node_id,
                self.tasks,
                self.workflows,
                self.cluster,
                self.reader,
                self.streaming,
                lambda: self.machine.applied_index,
                self.administration,
                self.peer_client.node_state,
            )
        )
        self.registration.start()
        self.heartbeats.start()
        if self.executors.waiting and not self.config.observer:
            start_thread("late-executors", self._late_executors(), self._stopped)
        self.supervisor.start()
        self.scheduler.start()
        self.schedule_loop.start()
        self.workflow_engine.start()
        if self.workflow_spans is not None:
            self.workflow_spans.start()
        if self.config.task_retention_s > 0:
            self.retention.start()
        if not self.config.observer:  # no task is ever assigned to an observer
            self.agent.start()
        advertised = (
            f" (others reach it at {self.config.raft_address}, {self.config.grpc_address}"
            f" and {self.peer_address})"
            if self.config.advertise
            else ""
        )
        log.info(
            "node %s started: %s, grpc %s, peer %s, http %s%s%s, data %s",
            self.config.node_id,
            "observer (no raft port)" if self.config.observer else f"raft {self.config.raft}",
            self.config.grpc,
            self.config.peer_listen.rpartition(":")[0] + f":{self.peer_listener.port}",
            self.http.address, " (TLS)" if self._server_tls else "", advertised, self.data_dir,
        )  # fmt: skip

    def wait(self) -> None:
        self._stopped.wait()

    def drain_self(self, timeout_s: float) -> None:
        """Graceful shutdown: stop taking work and let running tasks finish
        (or move) before the process exits."""
        if timeout_s <= 0 or self.agent.running_count == 0:
            return
        deadline = time.monotonic() + timeout_s
        until_ms = int(time.time() * 1000 + timeout_s * 1000)
        try:
            self.proposer.propose_one(
                e.Entry.create(
                    e.NodeStatus(self.config.node_id, "draining", SHUTDOWN_REASON, until_ms),
                    self.config.node_id,
                ),
                timeout=min(timeout_s, 5.0),
            )
        except CortexError as err:
            log.warning("could not announce the shutdown drain: %s", err)
            return
        log.info("draining before shutdown: %d running tasks", self.agent.running_count)
        while self.agent.running_count and time.monotonic() < deadline:
            time.sleep(0.1)

    def stop(self) -> None:
        if self._stopped.is_set():
            return
        if not self.removed:
            self.drain_self(self.config.shutdown_drain_s)
        self._stopped.set()
        self.registration.stop()
        self.supervisor.stop()
        self.heartbeats.stop()
        self.scheduler.stop()
        self.schedule_loop.stop()
        self.workflow_engine.stop()
        if self.workflow_spans is not None:
            self.workflow_spans.stop()
        self.retention.stop()
        self.workflows.close()
        self.agent.stop()
        self.proposer.stop()
        self.streaming.stop()
        self.output.stop()
        if self._grpc_server is not None:
            self._grpc_server.stop(grace=1.0)
        self.http.stop()
        self.peer_listener.stop(1.0)
        self.peer_client.close()
        try:
            self.group.destroy()
        except CortexError:
            pass
        self.checkpoints.stop()
        self.tracer.shutdown()
        log.info("node %s stopped", self.config.node_id)


__all__ = ["Node"]
