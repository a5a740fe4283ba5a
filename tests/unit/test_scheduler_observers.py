"""Observers run no tasks: the `node_is_voter` filter keeps every task off
them, however well they would score, and an unplaced task says why."""

from __future__ import annotations

from cortex.scheduler import Candidate, NodeResources, PendingTask, explain, schedule_round
from cortex.scheduler import filters as f
from cortex.scheduler.model import NodeLoad
from cortex.spec import Constraints

ROOMY = NodeResources(
    cpu_cores=64, memory_total_mb=256_000, memory_available_mb=250_000,
    disk_total_gb=4000, disk_available_gb=3900, network_bandwidth_mbps=10_000,
)  # fmt: skip
CRAMPED = NodeResources(
    cpu_cores=1, cpu_usage_percent=95, memory_total_mb=1000, memory_available_mb=100,
    disk_total_gb=10, disk_available_gb=1, network_bandwidth_mbps=10,
)  # fmt: skip


def tasks(count: int, **constraints: object) -> list[PendingTask]:
    return [
        PendingTask(id=f"t{i:03d}", created_at=i, constraints=Constraints(**constraints))
        for i in range(count)
    ]


def test_the_filter_passes_voters_only() -> None:
    load = NodeLoad(tasks=0, memory_reserved_mb=0)
    voter = Candidate(id="v1", resources=ROOMY)
    observer = Candidate(id="o1", resources=ROOMY, role="observer")
    assert f.node_is_voter(PendingTask(id="t"), voter, load) is None
    assert f.node_is_voter(PendingTask(id="t"), observer, load) == (
        "o1: an observer, which runs no tasks"
    )


def test_no_task_lands_on_an_observer_that_would_score_best() -> None:
    nodes = [
        Candidate(id="o1", resources=ROOMY, role="observer"),
        Candidate(id="o2", resources=ROOMY, role="observer"),
        Candidate(id="v1", resources=CRAMPED),
    ]
    result = schedule_round(tasks(50), nodes)
    assert len(result.placements) == 50
    assert {p.node for p in result.placements} == {"v1"}


def test_constraints_naming_an_observer_leave_the_task_queued() -> None:
    nodes = [
        Candidate(id="o1", resources=ROOMY, role="observer"),
        Candidate(id="v1", resources=ROOMY),
    ]
    for constraints in ({"targetNode": "o1"}, {"allowedNodes": ["o1"]}):
        result = schedule_round(tasks(1, **constraints), nodes)
        assert result.placements == []
        assert any("o1: an observer" in why for why in result.unplaced["t000"])


def test_a_cluster_of_observers_only_places_nothing_and_says_why() -> None:
    nodes = [Candidate(id="o1", resources=ROOMY, role="observer")]
    result = schedule_round(tasks(3), nodes)
    assert result.placements == []
    assert explain(tasks(1)[0], nodes) == ["o1: an observer, which runs no tasks"]
