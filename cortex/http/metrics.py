"""A node's Prometheus metrics: its own registry (several nodes may share a
process, in tests), the counters and histograms fed by what the node does,
and the collectors that read the rest at scrape time.

Fed by events: `cortex_tasks_total{state}` from the state machine's change
listener (every node counts what it applied); the task histograms from the
same changes, their timestamps read from SQLite off the Raft thread; the two
Raft histograms from `cortex.http.timing`. Read at scrape time: see
`cortex.http.collectors`."""

from __future__ import annotations

import logging
import queue
import threading
from collections import Counter as Tally

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics
from prometheus_client.registry import Collector

from cortex.state.queries import StateReader, TaskTimes
from cortex.state.transitions import TERMINAL_STATES, TaskChange

log = logging.getLogger(__name__)

# Seconds. Applying one batch and committing one entry take milliseconds;
# a task waits and runs for anything from milliseconds to a day.
APPLY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
COMMIT_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
SCHEDULE_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
                    30.0, 60.0, 300.0, 900.0, 3600.0)  # fmt: skip
DURATION_BUCKETS = (0.01, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0,
                    300.0, 900.0, 3600.0, 14400.0, 86400.0)  # fmt: skip
RUNNING = "running"
# Changes the worker looks up, at most this many per query round.
_BATCH_CHANGES = 2000


class NodeMetrics:
    def __init__(self, reader: StateReader) -> None:
        # No `*_created` series: the text format shows each as a gauge of its
        # own, doubling what is scraped. prometheus_client switches them off
        # only for the whole process.
        disable_created_metrics()
        self.registry = CollectorRegistry()
        self.reader = reader
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
        self._timed: queue.SimpleQueue[list[TaskChange] | None] = queue.SimpleQueue()
        self._worker: threading.Thread | None = None

    def add_collector(self, collector: Collector) -> None:
        self.registry.register(collector)

    def on_change(self, index: int, changes: list[TaskChange]) -> None:
        """StateMachine listener (Raft thread): counts, and hands the changes
        the histograms need on to the worker."""
        # One increment per state, not per change: a batch moves hundreds of
        # tasks through a few states, and finding a label's child is the
        # costly part.
        for state, count in Tally(change.state for change in changes).items():
            self.tasks.labels(state).inc(count)
        timed = [c for c in changes if c.state == RUNNING or c.state in TERMINAL_STATES]
        if timed:
            self._timed.put(timed)

    def start(self) -> None:
        self._worker = threading.Thread(target=self._observe_loop, name="metrics", daemon=True)
        self._worker.start()

    def stop(self, timeout_s: float = 2.0) -> None:
        self._timed.put(None)
        if self._worker is not None:
            self._worker.join(timeout_s)

    def _observe_loop(self) -> None:
        while True:
            first = self._timed.get()
            if first is None:
                return
            changes, stopping = list(first), False
            while len(changes) < _BATCH_CHANGES:
                try:
                    more = self._timed.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stopping = True
                    break
                changes.extend(more)
            try:
                self.observe_task_times(changes)
            except Exception:
                log.exception("could not observe task timings")
            if stopping:
                return

    def observe_task_times(self, changes: list[TaskChange]) -> None:
        """Observes the task histograms for these changes, from the tasks'
        rows as they are now; a task that moved on since (a new attempt, a
        dead letter retried) or was purged is left out."""
        rows = {row.id: row for row in self.reader.task_times(c.task_id for c in changes)}
        for change in changes:
            row = rows.get(change.task_id)
            if row is None or row.attempt != change.attempt:
                continue
            if change.state == RUNNING:
                self._observe_start(row)
            elif row.state == change.state:
                self._observe_end(row)

    def _observe_start(self, row: TaskTimes) -> None:
        if row.attempt == 1 and row.started_at is not None:
            self.schedule_latency.observe(_seconds(row.started_at - row.created_at))

    def _observe_end(self, row: TaskTimes) -> None:
        if row.started_at is not None and row.completed_at is not None:
            self.task_duration.labels(row.type, row.state).observe(
                _seconds(row.completed_at - row.started_at)
            )


def _seconds(ms: int) -> float:
    """Entry timestamps come from the clocks of the nodes proposing them,
    which may disagree a little: never a negative duration."""
    return max(ms, 0) / 1000.0
