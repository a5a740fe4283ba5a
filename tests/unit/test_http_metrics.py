"""The metrics a node derives from its state, against a real StateMachine on
a SQLite file: transitions counted from the change listener, the task
histograms observed from the timestamps the changes carry, the queue, workflow and
dead-letter gauges read at scrape time, and apply times."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest

from cortex.http import NodeMetrics
from cortex.http.collectors import (
    PRIORITIES,
    AgentCollector,
    OutputStreamsCollector,
    QueueCollector,
)
from cortex.http.timing import TimedStateMachine
from cortex.state.entries import (
    Entry,
    NodeJoin,
    Payload,
    TaskAssign,
    TaskComplete,
    TaskDeadLetter,
    TaskFailed,
    TaskStarted,
    TaskSubmit,
    WorkflowSubmit,
    encode_batch,
)
from cortex.state.queries import StateReader
from tests.metrics_scrape import Scrape

NOW_MS = 60_000


class Node:
    """A state machine with the metrics a node wires to it, fed entries at
    increasing Raft indexes."""

    def __init__(self, path: Path) -> None:
        self.applied: list[float] = []
        self.metrics = NodeMetrics()
        self.machine = TimedStateMachine(str(path), on_applied=self.applied.append)
        self.machine.add_listener(self.metrics.on_change)
        self.metrics.add_collector(QueueCollector(StateReader(str(path)), lambda: NOW_MS / 1000))
        self.index = 0

    def apply(self, payload: Payload, ts: int) -> dict[str, Any]:
        self.index += 1
        data = encode_batch([Entry.create(payload, node="n1", ts=ts)])
        results = self.machine.apply_batch(self.index, data)
        assert results is not None and results[0]["ok"], results
        return results[0]

    def scrape(self) -> Scrape:
        return Scrape.parse(generate_latest(self.metrics.registry).decode())


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    made = Node(tmp_path / "state.db")
    yield made
    made.machine.close()


def _run(node: Node, task_id: str, assigned_at: int, started_at: int) -> None:
    node.apply(TaskAssign([{"task_id": task_id, "node": "n1", "attempt": 1}]), ts=assigned_at)
    node.apply(TaskStarted(task_id, 1, "n1"), ts=started_at)


def _noop(priority: int) -> dict[str, Any]:
    return {"type": "noop", "priority": priority}


def _observed(node: Node) -> Scrape:
    return node.scrape()


def test_transitions_timings_queue_and_dead_letters(node: Node) -> None:
    node.apply(NodeJoin("n1", "127.0.0.1:7100", "127.0.0.1:7200"), ts=500)
    node.apply(TaskSubmit("done", {"command": ["true"]}), ts=1_000)
    _run(node, "done", assigned_at=2_000, started_at=2_500)  # waited 1.5 s
    node.apply(TaskComplete("done", 1, "n1", {"exit_code": 0}), ts=6_500)  # ran 4 s
    node.apply(TaskSubmit("dead", _noop(5)), ts=3_000)
    _run(node, "dead", assigned_at=3_100, started_at=3_250)  # waited 0.25 s
    node.apply(TaskDeadLetter("dead", 1, "gave up"), ts=3_750)  # ran 0.5 s
    node.apply(TaskSubmit("urgent", _noop(9)), ts=40_000)
    node.apply(TaskSubmit("waiting", _noop(2)), ts=20_000)
    node.apply(TaskSubmit("also", _noop(2)), ts=50_000)
    scraped = _observed(node)

    assert scraped.labelled("cortex_tasks_total") == {
        (("state", "queued"),): 5,
        (("state", "assigned"),): 2,
        (("state", "running"),): 2,
        (("state", "completed"),): 1,
        (("state", "dead_letter"),): 1,
    }
    latency = scraped.families["cortex_schedule_latency_seconds"]
    sums = {s.name: s.value for s in latency.samples if not s.labels}
    assert sums["cortex_schedule_latency_seconds_count"] == 2
    assert sums["cortex_schedule_latency_seconds_sum"] == pytest.approx(1.75)
    assert scraped.value("cortex_task_duration_seconds", executor="shell", outcome="completed") == 1
    assert (
        scraped.value("cortex_task_duration_seconds", executor="noop", outcome="dead_letter") == 1
    )
    durations = {
        (s.labels["executor"], s.labels["outcome"]): s.value
        for s in scraped.families["cortex_task_duration_seconds"].samples
        if s.name.endswith("_sum")
    }
    assert durations == {("shell", "completed"): 4.0, ("noop", "dead_letter"): 0.5}

    depth = scraped.labelled("cortex_queue_depth")
    assert depth == {(("priority", str(p)),): {9: 1, 2: 2}.get(p, 0) for p in PRIORITIES}
    # "waiting" has waited longest: since 20 s, and it is 60 s now.
    assert scraped.value("cortex_queue_oldest_age_seconds") == 40.0
    assert scraped.value("cortex_dead_letter_tasks") == 1
    assert scraped.total("cortex_workflows_total") == 0
    # One apply time per entry applied.
    assert len(node.applied) == node.index == 12
    assert all(seconds >= 0 for seconds in node.applied)


def test_workflows_by_state_and_a_backing_off_task_is_not_waiting(node: Node) -> None:
    task = {"key": "a", "task_id": "wa", "spec": {"type": "noop"}, "depends_on": [],
            "condition": None, "pos": 0}  # fmt: skip
    node.apply(WorkflowSubmit("w1", "flow", [task]), ts=10_000)
    node.apply(WorkflowSubmit("w2", "parts", [{**task, "task_id": "wb"}], total_tasks=2), ts=11_000)
    scraped = _observed(node)
    workflows = scraped.labelled("cortex_workflows_total")
    assert workflows[(("state", "running"),)] == 1
    assert workflows[(("state", "submitting"),)] == 1
    assert workflows[(("state", "completed"),)] == 0  # every state is named
    assert scraped.value("cortex_queue_depth", priority="5") == 2
    assert scraped.value("cortex_queue_oldest_age_seconds") == 50.0


def test_an_empty_queue_is_zero_and_a_replayed_entry_is_not_timed(node: Node) -> None:
    node.apply(NodeJoin("n1", "127.0.0.1:7100", "127.0.0.1:7200"), ts=500)
    data = encode_batch([Entry.create(TaskSubmit("t", _noop(5)), node="n1", ts=600)])
    assert node.machine.apply_batch(1, data) is None  # index 1 is applied already
    scraped = _observed(node)
    assert scraped.value("cortex_queue_oldest_age_seconds") == 0.0
    assert scraped.total("cortex_queue_depth") == 0
    assert scraped.total("cortex_tasks_total") == 0
    assert len(node.applied) == 1


def test_a_folded_start_and_a_retried_attempt_are_timed_from_their_own_entries(
    node: Node,
) -> None:
    """A start carried by its outcome (`started_at`) times the schedule
    latency and the duration like a start of its own; a second attempt's
    start is not a schedule latency, and its duration starts at its own start."""
    node.apply(NodeJoin("n1", "127.0.0.1:7100", "127.0.0.1:7200"), ts=500)
    node.apply(TaskSubmit("t", _noop(5)), ts=1_000)
    node.apply(TaskAssign([{"task_id": "t", "node": "n1", "attempt": 1}]), ts=1_100)
    outcome = TaskComplete("t", 1, "n1", {"exit_code": 0}, started_at=1_400)
    node.apply(outcome, ts=2_400)
    node.apply(TaskSubmit("r", _noop(5)), ts=3_000)
    _run(node, "r", assigned_at=3_100, started_at=3_500)
    node.apply(TaskFailed("r", 1, "n1", "exit 1", {"exit_code": 1}), ts=4_000)
    node.apply(TaskAssign([{"task_id": "r", "node": "n1", "attempt": 2}]), ts=4_100)
    node.apply(TaskStarted("r", 2, "n1"), ts=4_200)
    node.apply(TaskComplete("r", 2, "n1", {"exit_code": 0}), ts=4_450)
    scraped = node.scrape()
    latency = {s.name: s.value for s in scraped.families["cortex_schedule_latency_seconds"].samples
               if not s.labels}  # fmt: skip
    assert latency["cortex_schedule_latency_seconds_count"] == 2
    assert latency["cortex_schedule_latency_seconds_sum"] == pytest.approx(0.4 + 0.5)
    durations = {
        s.labels["outcome"]: s.value
        for s in scraped.families["cortex_task_duration_seconds"].samples
        if s.name.endswith("_sum")
    }
    assert durations == {"completed": pytest.approx(1.0 + 0.25)}


def test_output_stream_clients_are_read_when_scraped(node: Node) -> None:
    open_streams = [0]
    node.metrics.add_collector(OutputStreamsCollector(lambda: open_streams[0]))
    assert node.scrape().value("cortex_output_stream_clients") == 0
    open_streams[0] = 2
    assert node.scrape().value("cortex_output_stream_clients") == 2


def test_the_agents_running_and_waiting_attempts_are_read_when_scraped(node: Node) -> None:
    counts = {"running": 0, "waiting": 0}
    node.metrics.add_collector(AgentCollector(lambda: counts["running"], lambda: counts["waiting"]))
    assert node.scrape().value("cortex_agent_attempts", state="waiting") == 0
    counts.update(running=64, waiting=7)
    scraped = node.scrape()
    assert scraped.value("cortex_agent_attempts", state="running") == 64
    assert scraped.value("cortex_agent_attempts", state="waiting") == 7
