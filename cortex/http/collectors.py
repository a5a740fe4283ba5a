"""Gauges read at scrape time, each collector one source: the task queue and
workflows from SQLite, the Raft member, the cluster's nodes as this node
sees them, and the output streams it serves. Nothing here is kept between
scrapes, so a gauge is never stale and costs nothing between them."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from cortex.bounds import spec_bounds
from cortex.http.node_load import node_loads
from cortex.membership.cluster_status import ClusterStatus
from cortex.raft.group import RaftGroup
from cortex.spec import TaskSpec
from cortex.state.queries import StateReader

_PRIORITY_BOUNDS = spec_bounds(TaskSpec, "priority")
PRIORITIES = range(int(_PRIORITY_BOUNDS["ge"]), int(_PRIORITY_BOUNDS["le"]) + 1)


class QueueCollector(Collector):
    """`cortex_queue_depth{priority}` (every priority, 0 when empty),
    `cortex_queue_oldest_age_seconds`, `cortex_workflows_total{state}` (the
    workflows in each state now) and `cortex_dead_letter_tasks`."""

    def __init__(self, reader: StateReader, clock: Callable[[], float] = time.time) -> None:
        self._reader = reader
        self._clock = clock

    def collect(self) -> Iterator[Metric]:
        now_ms = int(self._clock() * 1000)
        queue = self._reader.queue_view(now_ms)
        depth = GaugeMetricFamily(
            "cortex_queue_depth", "Queued tasks, by priority.", labels=["priority"]
        )
        for priority in PRIORITIES:
            depth.add_metric([str(priority)], queue.depth_by_priority.get(priority, 0))
        yield depth
        since = queue.oldest_runnable_since_ms
        yield GaugeMetricFamily(
            "cortex_queue_oldest_age_seconds",
            "How long the longest-waiting runnable queued task has waited since it entered"
            " the queue or its back-off ended (0 when none waits).",
            value=0.0 if since is None else max(now_ms - since, 0) / 1000.0,
        )
        workflows = GaugeMetricFamily(
            "cortex_workflows_total", "Workflows in each state.", labels=["state"]
        )
        for state, count in self._reader.workflow_counts().items():
            workflows.add_metric([state], count)
        yield workflows
        yield GaugeMetricFamily(
            "cortex_dead_letter_tasks",
            "Tasks in the dead-letter queue (retries exhausted).",
            value=self._reader.dead_letter_count(),
        )


class RaftCollector(Collector):
    """The Raft member's term, commit and applied indexes and role,
    `cortex_raft_elections_total`: the terms begun since this node started
    (each new term is an election, whoever held it), and
    `cortex_raft_merged_batches_total`: the batches this node, as leader,
    logged in one entry with others (`cortex.raft.merging`)."""

    def __init__(self, group: RaftGroup, applied_index: Callable[[], int]) -> None:
        self._group = group
        self._applied_index = applied_index
        self._first_term = int(group.raftCurrentTerm)

    def collect(self) -> Iterator[Metric]:
        term = int(self._group.raftCurrentTerm)
        yield GaugeMetricFamily("cortex_raft_term", "The current Raft term.", value=term)
        yield GaugeMetricFamily(
            "cortex_raft_commit_index",
            "The highest Raft index this node knows to be committed.",
            value=int(self._group.raftCommitIndex),
        )
        yield GaugeMetricFamily(
            "cortex_raft_applied_index",
            "The highest Raft index applied to this node's state.",
            value=self._applied_index(),
        )
        yield GaugeMetricFamily(
            "cortex_raft_is_leader",
            "1 while this node is the Raft leader, else 0.",
            value=1 if self._group.is_leader else 0,
        )
        yield CounterMetricFamily(
            "cortex_raft_elections",
            "Raft elections (new terms) seen since this node started.",
            value=max(term - self._first_term, 0),
        )
        yield CounterMetricFamily(
            "cortex_raft_merged_batches",
            "Batches this node, as leader, logged in one Raft entry with others.",
            value=self._group.commands.merged_batches,
        )
        yield CounterMetricFamily(
            "cortex_raft_merge_holds",
            "Times commands waited at this node, as leader, for its own next batch"
            " to share its entry.",
            value=self._group.commands.holds,
        )
        yield CounterMetricFamily(
            "cortex_raft_merge_holds_given_up",
            "Times those commands left without it, after waiting the longest they may.",
            value=self._group.commands.holds_given_up,
        )


class NodesCollector(Collector):
    """Every node of the cluster as this node sees it: whether it is up
    (reachable and not offline), and per resource what it has (capacity),
    what its last report says is in use (used) and what the replicated state
    has promised to its tasks (allocated); see `cortex.http.node_load`."""

    def __init__(self, cluster: ClusterStatus, reader: StateReader) -> None:
        self._cluster = cluster
        self._reader = reader

    def collect(self) -> Iterator[Metric]:
        labels = ["node", "resource"]
        up = GaugeMetricFamily(
            "cortex_node_up", "1 while the node is reachable and not offline.", labels=["node"]
        )
        capacity = GaugeMetricFamily(
            "cortex_node_capacity", "What the node has, per resource.", labels=labels
        )
        used = GaugeMetricFamily(
            "cortex_node_used", "What the node's last report says is in use.", labels=labels
        )
        allocated = GaugeMetricFamily(
            "cortex_node_allocated", "What its active tasks were promised.", labels=labels
        )
        for load in node_loads(self._cluster, self._reader):
            node = load.view.node.id
            up.add_metric([node], 1 if load.up else 0)
            measures = ((capacity, load.capacity), (used, load.used), (allocated, load.allocated))
            for family, values in measures:
                for resource, value in values.items():
                    family.add_metric([node, resource], value)
        yield from (up, capacity, used, allocated)


class OutputStreamsCollector(Collector):
    """`cortex_output_stream_clients`: task output streams this node serves
    now, to clients and to nodes relaying them."""

    def __init__(self, open_streams: Callable[[], int]) -> None:
        self._open_streams = open_streams

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "cortex_output_stream_clients",
            "Task output streams this node serves now (StreamTaskOutput, relays included).",
            value=self._open_streams(),
        )


class AgentCollector(Collector):
    """`cortex_agent_attempts{state}`: the attempts this node's agent runs
    now (`running`), and those assigned here that wait for one of its slots
    (`waiting`: the node's `prefetch_tasks`)."""

    def __init__(self, running: Callable[[], int], waiting: Callable[[], int]) -> None:
        self._running = running
        self._waiting = waiting

    def collect(self) -> Iterator[Metric]:
        attempts = GaugeMetricFamily(
            "cortex_agent_attempts",
            "Attempts this node runs now, and those assigned here waiting for a slot.",
            labels=["state"],
        )
        attempts.add_metric(["running"], self._running())
        attempts.add_metric(["waiting"], self._waiting())
        yield attempts
