"""A node's Prometheus metrics: its own registry (several nodes may share a
process, in tests), the counters and histograms fed by what the node does,
and the collectors that read the rest at scrape time.

Fed by events: `cortex_tasks_total{state}` from the state machine's change
listener (every node counts what it applied); the task histograms from the
same changes, which carry the tasks' timestamps as apply wrote them; the
commit and apply histograms from `cortex.http.timing`, the journal's sync
time from the journal itself. Read at scrape time: see
`cortex.http.collectors`."""

from __future__ import annotations

from collections import Counter as Tally

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics
from prometheus_client.registry import Collector

from cortex.state.task_states import TERMINAL_STATES
from cortex.state.transitions import TaskChange

# Seconds. Applying one batch and committing one entry take milliseconds;
# a task waits and runs for anything from milliseconds to a day.
APPLY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
# A sync of the journal takes well under a millisecond on a quiet SSD and
# tens of milliseconds when the disk is busy (etcd's WAL fsync buckets).
SYNC_BUCKETS = (0.0005, 0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256,
                0.512, 1.024, 2.048, 4.096)  # fmt: skip
# A leader sends appends at least every 0.1 s; a follower that hears none
# for its election timeout (0.4 to 1.4 s by default) stands for election.
APPEND_GAP_BUCKETS = (0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.6, 0.8, 1.0, 1.4, 2.5)
COMMIT_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
SCHEDULE_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
                    30.0, 60.0, 300.0, 900.0, 3600.0)  # fmt: skip
DURATION_BUCKETS = (0.01, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0,
                    300.0, 900.0, 3600.0, 14400.0, 86400.0)  # fmt: skip
RUNNING = "running"


class NodeMetrics:
    def __init__(self) -> None:
        # No `*_created` series: the text format shows each as a gauge of its
        # own, doubling what is scraped. prometheus_client switches them off
        # only for the whole process.
        disable_created_metrics()
        self.registry = CollectorRegistry()
        self.tasks = Counter(
            "cortex_tasks",
            "Task state transitions this node applied, by the state entered.",
            ["state"],
            registry=self.registry,
        )
        self.schedule_latency = Histogram(
            "cortex_schedule_latency_seconds",
            "From submission to the start of a task's first attempt (entry timestamps).",
            buckets=SCHEDULE_BUCKETS,
            registry=self.registry,
        )
        self.task_duration = Histogram(
            "cortex_task_duration_seconds",
            "From the start of a task's last attempt to its terminal state, by executor"
            " (the task type) and outcome (the terminal state).",
            ["executor", "outcome"],
            buckets=DURATION_BUCKETS,
            registry=self.registry,
        )
        self.commit_latency = Histogram(
            "cortex_raft_commit_latency_seconds",
            "From proposing an entry on this node to its being applied here.",
            buckets=COMMIT_BUCKETS,
            registry=self.registry,
        )
        self.apply_seconds = Histogram(
            "cortex_raft_apply_seconds",
            "Time applying one Raft entry (a batch of commands) to the state, listeners included.",
            buckets=APPLY_BUCKETS,
            registry=self.registry,
        )
        self.journal_sync_seconds = Histogram(
            "cortex_raft_journal_sync_seconds",
            "Time of one sync (fdatasync) of the Raft journal's appended entries; every"
            " entry this node acknowledges or commits waits for one.",
            buckets=SYNC_BUCKETS,
            registry=self.registry,
        )
        self.append_gap_seconds = Histogram(
            "cortex_raft_append_gap_seconds",
            "On the leader, the time between two rounds of its appends (entries or a"
            " heartbeat) to the followers; one near the shortest election timeout"
            " nearly cost it its leadership.",
            buckets=APPEND_GAP_BUCKETS,
            registry=self.registry,
        )
        # Children of the labelled metrics, by their labels (a few states,
        # types times end states: the executors' names and plugins' types).
        self._state_counters: dict[str, Counter] = {}
        self._durations: dict[tuple[str | None, str], Histogram] = {}

    def add_collector(self, collector: Collector) -> None:
        self.registry.register(collector)

    def on_change(self, index: int, changes: list[TaskChange]) -> None:
        """StateMachine listener (Raft thread): counts, and times starts and ends."""
        # One increment per state, not per change: a batch moves hundreds of
        # tasks through a few states. Each label set's child is looked up
        # once and kept (`labels` costs as much again as the increment).
        for state, count in Tally(change.state for change in changes).items():
            counter = self._state_counters.get(state)
            if counter is None:
                counter = self._state_counters[state] = self.tasks.labels(state)
            counter.inc(count)
        for change in changes:
            if change.state == RUNNING:
                self._observe_start(change)
            elif change.state in TERMINAL_STATES:
                self._observe_end(change)

    def _observe_start(self, change: TaskChange) -> None:
        if change.attempt == 1 and change.started_at is not None and change.created_at is not None:
            self.schedule_latency.observe(_seconds(change.started_at - change.created_at))

    def _observe_end(self, change: TaskChange) -> None:
        if change.started_at is None or change.completed_at is None:
            return
        labels = (change.type, change.state)
        histogram = self._durations.get(labels)
        if histogram is None:
            histogram = self._durations[labels] = self.task_duration.labels(*labels)
        histogram.observe(_seconds(change.completed_at - change.started_at))


def _seconds(ms: int) -> float:
    """Entry timestamps come from the clocks of the nodes proposing them,
    which may disagree a little: never a negative duration."""
    return max(ms, 0) / 1000.0
